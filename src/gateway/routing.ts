// The routing table: from Endpoints and DeployedModels (as the store holds them, status included)
// to what a request needs: the Ready destinations of an Endpoint with their weights, framework,
// upstream addresses, limits and the response fields to add, or the rules its manifest breaks.
// Built whole by a pure function (buildRoutes); the live table (liveRoutes) brings only what changed
// up to date on the first lookup after a change. Looked up by project/name (Vertex path) or by Host (GDC path).
import { DEFAULT_METRICS_ROUTE, DEFAULT_OPENAI_BASE_PATH, OPENAI_ROUTES, healthRouteOf, predictRouteOf, type OpenAiSpec, type ServingSpec, type DeployedModel, type Endpoint, type Framework, type GmlTask, type ModelServingSpec } from '../api/types.js';
import { keyOf } from '../api/types.js';
import type { Config } from '../config.js';
import { ApiError } from '../errors.js';
import { deployedModelIdOf, isModelReady } from '../api/status.js';
import { requestAutoscalingOf } from '../api/autoscaling.js';
import { destinationKey, fqdnOf, referencedModelKeys, routableDestinations, trafficOf, unresolved } from '../api/references.js';
import { deployedModelProblems, endpointProblems } from '../api/validation.js';
import type { ReplicaAddresses } from '../store/endpointSlices.js';
import type { ConcurrencyLimit } from './admission.js';
import type { HealthTarget, LoadTarget } from './upstream/index.js';

export interface Limits {
  timeoutMs: number;
  maxRequestBytes: number;
  /** Deadline of a streamed call (streamRawPredict, OpenAI streams). */
  streamTimeoutMs: number;
  /** Longest pause in a streamed answer once it has started. */
  streamIdleTimeoutMs: number;
}

/** Where a model that speaks the OpenAI API takes its calls (modelSpec.openai), null for a route it does not serve. */
export interface OpenAiTarget {
  chatCompletions: string | null;
  completions: string | null;
  /** Where the container lists its models (GET). */
  models: string;
  /** Where its replicas report their load (load-aware picks). */
  metricsRoute: string;
  /** The `model` the container expects, when the manifest names one. */
  servedModelName: string | undefined;
}

export interface RouteDestination extends Limits {
  deployedModelId: string;
  /** namespace/name of the DeployedModel. */
  modelKey: string;
  weight: number;
  framework: Framework;
  /** The task of a graphstorm model (set whenever framework is graphstorm). */
  gmlTask?: GmlTask;
  predictRoute: string;
  /** Where explain calls go, or null when the model has no explain route. */
  explainRoute: string | null;
  /**
   * Base URLs of the replicas that take calls: the pods of the model's EndpointSlices when the
   * gateway watches them (cluster), else the status's replica addresses (local mode) or its Service
   * address. The pool's balancer picks one per call.
   */
  upstreams: readonly string[];
  /** The route the active health checks ask on each replica. */
  healthRoute: string;
  /** Set when the model speaks the OpenAI API. */
  openai: OpenAiTarget | undefined;
  /** Its replicas report their load (it speaks the OpenAI API): the balancer picks by it. */
  loadAware: boolean;
  /**
   * spec.serving.maxConcurrency and its queue, and the hold of a model that scales to zero; undefined
   * when the model has neither.
   */
  concurrency: ConcurrencyLimit | undefined;
  /** Its replicas follow the calls: the gateway counts its demand for the autoscaler. */
  autoscaled: boolean;
  /** `"deployedModelId":"…","model":"…",…` ready to splice into a predict answer. */
  responseFields: Buffer;
  /**
   * The headers of every successful answer through this destination: X-Vertex-AI-Endpoint-Id,
   * X-Vertex-AI-Deployed-Model-Id, X-Vertex-AI-Model and X-Vertex-AI-Model-Version-Id (made once).
   */
  answerHeaders: Record<string, string>;
}

export interface Route extends Limits {
  namespace: string;
  name: string;
  fqdn: string;
  /** Ready destinations with traffic; weights renormalised over them by pickDestination. */
  destinations: RouteDestination[];
  totalWeight: number;
  /** Every deployedModelId the Endpoint names, ready or not (for error messages). */
  allDeployedModelIds: string[];
  /** Why destinations with traffic do not resolve (a DeployedModel that does not exist, or refuses the Endpoint's namespace). */
  unresolved: string[];
  /** Ready destinations by deployedModelId, those without traffic included (for pinned calls). */
  readyById: Map<string, RouteDestination>;
  /** Why each deployed model that is not a destination takes no call ("is not Ready: ..."), by deployedModelId (for error messages). */
  notReady: Map<string, string>;
  /** The rules the Endpoint's manifest breaks (then it has no destinations); empty when it is valid. */
  problems: string[];
}

/** A DeployedModel addressed directly (the TF Serving surface): its destination when Ready. */
export interface ModelRoute {
  deployedModelId: string;
  framework: Framework;
  /** undefined while the model is not Ready. */
  destination: RouteDestination | undefined;
  /** Why it takes no call ("is not Ready: ..."), while it has no destination. */
  notReady?: string;
  /** The rules the DeployedModel's manifest breaks; empty when it is valid. */
  problems: string[];
}

/** What handlers look routes up in. */
export interface RoutingTable {
  byName(namespace: string, name: string): Route | undefined;
  byHost(host: string): Route | undefined;
  /** A DeployedModel by namespace and name, whatever Endpoints name it. */
  model(namespace: string, name: string): ModelRoute | undefined;
  /** Every replica of every Ready model, with its health route (what the active checks ask). */
  healthTargets(): readonly HealthTarget[];
  /** Every replica of every Ready model that reports its load, with its metrics route. */
  loadTargets(): readonly LoadTarget[];
}

export interface RoutingDefaults extends Limits {
  domain: string;
  /** Calls one gateway holds for a model waking from zero (COLD_START_QUEUE). */
  coldStartQueue: number;
  /** Rewrites a model's base URL (UPSTREAM_RESOLVE); identity when absent. */
  resolve?: (url: string) => string;
}

export function endpointFqdn(ep: Endpoint, domain: string): string {
  return ep.status?.endpointFQDN ?? fqdnOf(ep, domain);
}

function limitsOf(base: Limits, serving: ServingSpec | undefined): Limits {
  return {
    timeoutMs: serving?.timeoutSeconds !== undefined ? serving.timeoutSeconds * 1000 : base.timeoutMs,
    maxRequestBytes: serving?.maxRequestBytes ?? base.maxRequestBytes,
    streamTimeoutMs: serving?.streamTimeoutSeconds !== undefined ? serving.streamTimeoutSeconds * 1000 : base.streamTimeoutMs,
    streamIdleTimeoutMs: serving?.streamIdleTimeoutSeconds !== undefined ? serving.streamIdleTimeoutSeconds * 1000 : base.streamIdleTimeoutMs,
  };
}

/** The OpenAI routes of a model whose manifest declares them. */
export function openAiTargetOf(spec: OpenAiSpec | undefined): OpenAiTarget | undefined {
  if (!spec) return undefined;
  const base = spec.basePath ?? DEFAULT_OPENAI_BASE_PATH;
  const routes = spec.routes ?? OPENAI_ROUTES;
  return {
    chatCompletions: routes.includes('chatCompletions') ? `${base}/chat/completions` : null,
    completions: routes.includes('completions') ? `${base}/completions` : null,
    models: `${base}/models`,
    metricsRoute: spec.metricsRoute ?? DEFAULT_METRICS_ROUTE,
    servedModelName: spec.servedModelName,
  };
}

function responseFieldsOf(dm: DeployedModel): Buffer {
  const fields: Record<string, string> = { deployedModelId: deployedModelIdOf(dm) };
  const m = dm.spec.modelSpec;
  if (m.model) fields.model = m.model;
  if (m.modelDisplayName) fields.modelDisplayName = m.modelDisplayName;
  if (m.modelVersionID) fields.modelVersionId = m.modelVersionID;
  return Buffer.from(JSON.stringify(fields).slice(1, -1));
}

/** Knative's queue-proxy default: ten waiting calls per slot. */
export const QUEUED_PER_SLOT = 10;
export const DEFAULT_QUEUE_TIMEOUT_SECONDS = 10;

/**
 * A model's admission: its concurrency limit (spec.serving.maxConcurrency), and `coldStart` when it
 * scales to zero; undefined when it has neither.
 */
export function concurrencyOf(serving: ModelServingSpec | undefined, coldStart?: ConcurrencyLimit['coldStart']): ConcurrencyLimit | undefined {
  const max = serving?.maxConcurrency;
  if (max === undefined) return coldStart ? { maxConcurrency: Infinity, maxQueued: 0, queueTimeoutMs: 0, coldStart } : undefined;
  return {
    maxConcurrency: max,
    maxQueued: serving?.maxQueuedCalls ?? QUEUED_PER_SLOT * max,
    queueTimeoutMs: (serving?.queueTimeoutSeconds ?? DEFAULT_QUEUE_TIMEOUT_SECONDS) * 1000,
    ...(coldStart ? { coldStart } : {}),
  };
}

/** A value that can go in an HTTP header as it is (printable ASCII; the CRD does not restrict these fields). */
const HEADER_SAFE = /^[\x20-\x7e]+$/;

/**
 * The answer headers through Endpoint `endpointName` to `dm`: its ids, X-Vertex-AI-Model (the model's
 * resource name, else the DeployedModel's name) and X-Vertex-AI-Model-Version-Id, when header-safe.
 */
function answerHeadersOf(endpointName: string, dm: DeployedModel): Record<string, string> {
  const m = dm.spec.modelSpec;
  const model = m.model !== undefined && HEADER_SAFE.test(m.model) ? m.model : dm.metadata.name;
  const headers: Record<string, string> = { 'X-Vertex-AI-Endpoint-Id': endpointName, 'X-Vertex-AI-Deployed-Model-Id': deployedModelIdOf(dm), 'X-Vertex-AI-Model': model };
  if (m.modelVersionID !== undefined && HEADER_SAFE.test(m.modelVersionID)) headers['X-Vertex-AI-Model-Version-Id'] = m.modelVersionID;
  return headers;
}

/** A model's replica addresses: its pods from its Service's EndpointSlices when known, else what its status says. */
function addressesOf(dm: DeployedModel, replicas: ReplicaAddresses | undefined): readonly string[] {
  const fromSlices = replicas?.addressesOf(dm.metadata.namespace ?? 'default', dm.metadata.name);
  if (fromSlices) return fromSlices;
  return dm.status?.replicaAddresses?.length ? dm.status.replicaAddresses : dm.status?.address ? [dm.status.address] : [];
}

/**
 * Why a DeployedModel takes no call, as a predicate of it: its manifest breaks rules, its Ready
 * condition is not True (with the condition's message, else its reason), or it is Ready and none of
 * its replicas is (`addresses` empty, the model not one that holds calls at zero).
 */
function notReadyWhy(dm: DeployedModel, addresses: readonly string[]): string {
  if (deployedModelProblems(dm).length) return 'breaks rules of its manifest (its status names them)';
  if (!isModelReady(dm)) {
    const c = dm.status?.conditions?.find((x) => x.type === 'Ready');
    return `is not Ready${c?.message ? `: ${c.message}` : c?.reason ? ` (${c.reason})` : ''}`;
  }
  if (addresses.length === 0 && !requestAutoscalingOf(dm)?.scaleToZero) return 'is Ready, but none of its replicas is ready to take calls';
  return 'is not Ready';
}

/** What a Ready, valid DeployedModel offers as a destination under `limits`; undefined when it cannot take calls. */
function readyDestination(dm: DeployedModel, endpointName: string, limits: Limits, weight: number, defaults: RoutingDefaults, replicas: ReplicaAddresses | undefined): RouteDestination | undefined {
  const addresses = addressesOf(dm, replicas);
  const upstreams = defaults.resolve ? addresses.map(defaults.resolve) : addresses;
  if (!isModelReady(dm) || deployedModelProblems(dm).length) return undefined;
  const scaling = requestAutoscalingOf(dm);
  // A model that scales to zero takes calls with no replica: they wait for one.
  if (upstreams.length === 0 && !scaling?.scaleToZero) return undefined;
  const c = dm.spec.modelSpec.containerSpec;
  const predictRoute = predictRouteOf(dm.spec.modelSpec);
  const own = limitsOf(limits, dm.spec.serving);
  return {
    ...own,
    deployedModelId: deployedModelIdOf(dm),
    modelKey: keyOf(dm.metadata),
    weight,
    framework: dm.spec.modelSpec.framework,
    ...(dm.spec.modelSpec.gmlTask ? { gmlTask: dm.spec.modelSpec.gmlTask } : {}),
    predictRoute,
    explainRoute: explainRouteOf(c.explainRoute, predictRoute, dm.spec.modelSpec.framework),
    upstreams,
    healthRoute: healthRouteOf(dm.spec.modelSpec),
    openai: openAiTargetOf(dm.spec.modelSpec.openai),
    loadAware: dm.spec.modelSpec.openai !== undefined,
    concurrency: concurrencyOf(dm.spec.serving, scaling?.scaleToZero ? { maxHeld: defaults.coldStartQueue, timeoutMs: own.timeoutMs } : undefined),
    autoscaled: scaling !== undefined,
    responseFields: responseFieldsOf(dm),
    answerHeaders: answerHeadersOf(endpointName, dm),
  };
}

/** The route of one Endpoint, its models looked up by key. Pure. */
function endpointRoute(ep: Endpoint, lookup: (key: string) => DeployedModel | undefined, defaults: RoutingDefaults, replicas: ReplicaAddresses | undefined): Route {
  // An Endpoint that breaks a rule has a route with no destinations: calls to it are refused with
  // the rules it breaks (the same as its status's InvalidSpec message).
  const problems = endpointProblems(ep);
  const namespace = ep.metadata.namespace ?? 'default';
  const epLimits = limitsOf(defaults, problems.length ? undefined : ep.spec.serving);
  const destinations: RouteDestination[] = [];
  const readyById = new Map<string, RouteDestination>();
  const notReady = new Map<string, string>();
  const allIds: string[] = [];
  const unresolvedWhy: string[] = [];
  if (!problems.length) {
    for (const d of ep.spec.destinations) {
      const why = trafficOf(ep, d) > 0 ? unresolved(ep, d, lookup(destinationKey(ep, d))) : undefined;
      if (why) unresolvedWhy.push(why.message);
    }
  }
  for (const { model: dm, traffic } of problems.length ? [] : routableDestinations(ep, lookup)) {
    allIds.push(deployedModelIdOf(dm));
    const dest = readyDestination(dm, ep.metadata.name, epLimits, traffic, defaults, replicas);
    if (!dest) {
      notReady.set(deployedModelIdOf(dm), notReadyWhy(dm, addressesOf(dm, replicas)));
      continue;
    }
    readyById.set(dest.deployedModelId, dest);
    if (dest.weight > 0) destinations.push(dest);
  }
  return {
    ...epLimits,
    namespace,
    name: ep.metadata.name,
    fqdn: endpointFqdn(ep, defaults.domain),
    destinations,
    totalWeight: destinations.reduce((s, d) => s + d.weight, 0),
    allDeployedModelIds: allIds,
    unresolved: unresolvedWhy,
    readyById,
    notReady,
    problems,
  };
}

/** The route of a DeployedModel addressed directly. Pure. */
function modelRoute(dm: DeployedModel, defaults: RoutingDefaults, replicas: ReplicaAddresses | undefined): ModelRoute {
  const problems = deployedModelProblems(dm);
  // No Endpoint: the TF Serving surface sends no answer headers.
  const destination = readyDestination(dm, '', defaults, 100, defaults, replicas);
  return {
    deployedModelId: deployedModelIdOf(dm),
    framework: dm.spec.modelSpec?.framework,
    destination,
    ...(destination ? {} : { notReady: notReadyWhy(dm, addressesOf(dm, replicas)) }),
    problems,
  };
}

/** Whether a route for `host` replaces the one chosen so far: a valid Endpoint keeps its FQDN should an invalid one's status claim the same. */
function claimsHost(route: Route, chosen: Route | undefined): boolean {
  return !route.problems.length || !chosen;
}

/**
 * Builds the table. Pure: same objects (and the same replica addresses) in, same routes out. The
 * Service of a DeployedModel has its name; `replicas` gives its pods' addresses (cluster gateway).
 */
export function buildRoutes(endpoints: readonly Endpoint[], models: readonly DeployedModel[], defaults: RoutingDefaults, replicas?: ReplicaAddresses): RoutingTable {
  const modelsByKey = new Map(models.map((m) => [keyOf(m.metadata), m]));
  const byName = new Map<string, Route>();
  const byHost = new Map<string, Route>();
  for (const ep of endpoints) {
    const route = endpointRoute(ep, (key) => modelsByKey.get(key), defaults, replicas);
    byName.set(keyOf(ep.metadata), route);
    const host = route.fqdn.toLowerCase();
    if (claimsHost(route, byHost.get(host))) byHost.set(host, route);
  }
  const byModel = new Map<string, ModelRoute>();
  for (const [key, dm] of modelsByKey) byModel.set(key, modelRoute(dm, defaults, replicas));
  let health: HealthTarget[] | undefined;
  let load: LoadTarget[] | undefined;
  return {
    byName: (ns, name) => byName.get(`${ns}/${name}`),
    byHost: (host) => byHost.get(hostWithoutPort(host).toLowerCase()),
    model: (ns, name) => byModel.get(`${ns}/${name}`),
    healthTargets: () => (health ??= healthTargetsOf(byModel.values())),
    loadTargets: () => (load ??= loadTargetsOf(byModel.values())),
  };
}

/** One entry per replica of each Ready model that `entry` makes one for (the lists of the health checks and the load scraper). */
function replicaTargets<T>(models: Iterable<ModelRoute>, entry: (d: RouteDestination, address: string) => T | undefined): T[] {
  const out: T[] = [];
  for (const { destination } of models) {
    if (!destination) continue;
    for (const address of destination.upstreams) {
      const t = entry(destination, address);
      if (t !== undefined) out.push(t);
    }
  }
  return out;
}

/** The replicas of the Ready models that report their load (those that speak the OpenAI API). */
const loadTargetsOf = (models: Iterable<ModelRoute>): LoadTarget[] =>
  replicaTargets(models, (d, address) => (d.openai ? { address, path: d.openai.metricsRoute, model: d.modelKey } : undefined));

/** The replicas of the Ready models: an Endpoint's destinations are among them (same model, same replicas). */
const healthTargetsOf = (models: Iterable<ModelRoute>): HealthTarget[] => replicaTargets(models, (d, address) => ({ address, path: d.healthRoute, model: d.modelKey }));

/**
 * The error for a call to an Endpoint whose manifest breaks a rule, or to such a DeployedModel (the
 * TF Serving surface): 400 FAILED_PRECONDITION naming the object and the rules it breaks.
 */
export function invalidManifest(kind: 'Endpoint' | 'DeployedModel', namespace: string, name: string, problems: readonly string[]): ApiError {
  const what = kind === 'Endpoint' ? `endpoint ${name} in project ${namespace}` : `DeployedModel ${name} in namespace ${namespace}`;
  return new ApiError('invalid_manifest', `${what} breaks a rule of its manifest: ${problems.join('; ')}`);
}

/**
 * The explain route: the explicit one, else (KServe v1 and TorchServe's convention) a predict route
 * ending in `:predict` with `:explain` instead. TensorFlow Serving has no explain verb: none by default.
 */
export function explainRouteOf(explicit: string | undefined, predictRoute: string, framework: Framework): string | null {
  if (explicit) return explicit;
  if (framework === 'tensorflow') return null;
  return predictRoute.endsWith(':predict') ? `${predictRoute.slice(0, -':predict'.length)}:explain` : null;
}

/**
 * The Ready deployed model a call names (traffic 0 included), whatever the split says. `source`
 * says where the id came from, for the error: 400 for an id the Endpoint does not have, 503 for one
 * that is not Ready.
 */
export function destinationById(route: Route, id: string, source: string): RouteDestination {
  const dest = route.readyById.get(id);
  if (dest) return dest;
  if (route.allDeployedModelIds.includes(id)) throw new ApiError('no_ready_destination', `deployed model ${id} of endpoint ${route.name} ${route.notReady.get(id) ?? 'is not Ready'}`);
  const ids = route.allDeployedModelIds.length ? route.allDeployedModelIds.join(', ') : 'none';
  throw new ApiError('unknown_deployed_model', `${source}: endpoint ${route.name} has no deployed model ${JSON.stringify(id)}; its deployed models: ${ids}`);
}

export function hostWithoutPort(host: string): string {
  if (host.startsWith('[')) return host.slice(0, host.indexOf(']') + 1);
  const i = host.lastIndexOf(':');
  return i >= 0 ? host.slice(0, i) : host;
}

/**
 * Picks a destination by weight among the Ready ones; `random` returns [0, 1) (injected for tests).
 * Traffic of destinations that are not Ready is shared among the rest in proportion.
 */
export function pickDestination(route: Route, random: () => number): RouteDestination | undefined {
  const ds = route.destinations;
  if (ds.length <= 1) return ds[0];
  let r = random() * route.totalWeight;
  for (const d of ds) {
    r -= d.weight;
    if (r < 0) return d;
  }
  return ds[ds.length - 1];
}

/**
 * A resolver from `HOST:PORT=ADDRESS:PORT` pairs (like curl --resolve): a base URL whose host and port
 * match a pair is sent to the pair's address instead. Throws on a malformed pair.
 */
export function parseResolve(pairs: readonly string[]): ((url: string) => string) | undefined {
  if (!pairs.length) return undefined;
  const map = new Map<string, string>();
  for (const pair of pairs) {
    const m = /^([^=\s]+:\d+)=([^=\s]+:\d+)$/.exec(pair);
    if (!m) throw new Error(`UPSTREAM_RESOLVE: expected HOST:PORT=ADDRESS:PORT, got ${JSON.stringify(pair)}`);
    map.set(m[1].toLowerCase(), m[2]);
  }
  return (url) => {
    const m = /^(https?:\/\/)([^/]+)(.*)$/.exec(url);
    const to = m ? map.get(m[2].toLowerCase()) : undefined;
    return m && to ? `${m[1]}${to}${m[3]}` : url;
  };
}

/** What a live routing table is built from: a Store, or anything listing and getting the same objects. */
export interface RouteSource {
  listEndpoints(): Endpoint[];
  listDeployedModels(): DeployedModel[];
  getEndpoint(key: string): Endpoint | undefined;
  getDeployedModel(key: string): DeployedModel | undefined;
  /** Called after a change of the object `event` names (namespace/name), or of anything when there is no event. */
  onChange(listener: (event?: { kind: 'DeployedModel' | 'Endpoint'; key: string }) => void): void;
}

/** Routing defaults from the gateway's settings. */
export function routingDefaults(config: Config): RoutingDefaults {
  return {
    domain: config.endpointDomain,
    timeoutMs: config.timeoutSeconds * 1000,
    maxRequestBytes: config.maxRequestBytes,
    streamTimeoutMs: config.streamTimeoutSeconds * 1000,
    streamIdleTimeoutMs: config.streamIdleTimeoutSeconds * 1000,
    coldStartQueue: config.coldStartQueue,
    resolve: parseResolve(config.upstreamResolve),
  };
}

/** Replica addresses that say when they change (the EndpointSlice cache). */
export interface LiveReplicaAddresses extends ReplicaAddresses {
  /** Called after the addresses of Service `namespace/name` changed (of any Service when there is no key). */
  onChange(listener: (serviceKey?: string) => void): void;
}

/**
 * A routing table kept up to date with the source: the first lookup after a change rebuilds the
 * routes of what changed (an Endpoint; a DeployedModel or its Service's addresses, with the Endpoints
 * that name it) and keeps every other route as it was, so a change costs the same with 10 Endpoints
 * or 10,000. The lookups answer what buildRoutes over the source's objects would answer; a change
 * of unknown scope rebuilds everything.
 */
export function liveRoutes(source: RouteSource, defaults: RoutingDefaults, replicas?: LiveReplicaAddresses): () => RoutingTable {
  const byName = new Map<string, Route>();
  const byHost = new Map<string, Route>();
  const byModel = new Map<string, ModelRoute>();
  /** Host → the keys of the Endpoints whose route has that FQDN. */
  const claims = new Map<string, Set<string>>();
  /** Model key → the keys of the Endpoints that name it; Endpoint key → the model keys it names. */
  const naming = new Map<string, Set<string>>();
  const named = new Map<string, readonly string[]>();
  const dirtyEndpoints = new Set<string>();
  const dirtyModels = new Set<string>();
  let everything = true;
  source.onChange((e) => {
    if (!e) everything = true;
    else (e.kind === 'Endpoint' ? dirtyEndpoints : dirtyModels).add(e.key);
  });
  replicas?.onChange((key) => {
    if (key === undefined) everything = true;
    else dirtyModels.add(key); // a model's Service has the model's name
  });
  const lookup = (key: string): DeployedModel | undefined => source.getDeployedModel(key);
  const unlink = <K, V>(index: Map<K, Set<V>>, k: K, v: V): void => {
    const set = index.get(k);
    set?.delete(v);
    if (set?.size === 0) index.delete(k);
  };
  const link = <K, V>(index: Map<K, Set<V>>, k: K, v: V): void => {
    let set = index.get(k);
    if (!set) index.set(k, (set = new Set()));
    set.add(v);
  };
  const hosts = new Set<string>();
  const refreshEndpoint = (key: string, ep: Endpoint | undefined): void => {
    const old = byName.get(key);
    if (old) {
      unlink(claims, old.fqdn.toLowerCase(), key);
      hosts.add(old.fqdn.toLowerCase());
    }
    for (const m of named.get(key) ?? []) unlink(naming, m, key);
    named.delete(key);
    if (!ep) {
      byName.delete(key);
      return;
    }
    const route = endpointRoute(ep, lookup, defaults, replicas);
    byName.set(key, route);
    const host = route.fqdn.toLowerCase();
    link(claims, host, key);
    hosts.add(host);
    const refs = referencedModelKeys(ep);
    named.set(key, refs);
    for (const m of refs) link(naming, m, key);
  };
  const settleHost = (host: string): void => {
    const keys = claims.get(host);
    if (!keys) byHost.delete(host);
    else if (keys.size === 1) byHost.set(host, byName.get(keys.values().next().value!)!);
    else {
      // Several Endpoints claim it: buildRoutes' rule, in the source's order.
      let chosen: Route | undefined;
      for (const ep of source.listEndpoints()) {
        const route = keys.has(keyOf(ep.metadata)) ? byName.get(keyOf(ep.metadata)) : undefined;
        if (route && claimsHost(route, chosen)) chosen = route;
      }
      byHost.set(host, chosen!);
    }
  };
  /** The replicas to health-check, made again after any model's route changed. */
  let health: HealthTarget[] | undefined;
  let load: LoadTarget[] | undefined;
  const update = (): void => {
    if (everything || dirtyModels.size) {
      health = undefined;
      load = undefined;
    }
    if (everything) {
      everything = false;
      for (const m of [byName, byHost, byModel, claims, naming, named]) m.clear();
      for (const dm of source.listDeployedModels()) byModel.set(keyOf(dm.metadata), modelRoute(dm, defaults, replicas));
      for (const ep of source.listEndpoints()) refreshEndpoint(keyOf(ep.metadata), ep);
    } else {
      for (const key of dirtyModels) {
        const dm = source.getDeployedModel(key);
        if (dm) byModel.set(key, modelRoute(dm, defaults, replicas));
        else byModel.delete(key);
        for (const ep of naming.get(key) ?? []) dirtyEndpoints.add(ep);
      }
      for (const key of dirtyEndpoints) refreshEndpoint(key, source.getEndpoint(key));
    }
    dirtyModels.clear();
    dirtyEndpoints.clear();
    for (const host of hosts) settleHost(host);
    hosts.clear();
  };
  const table: RoutingTable = {
    byName: (ns, name) => byName.get(`${ns}/${name}`),
    byHost: (host) => byHost.get(hostWithoutPort(host).toLowerCase()),
    model: (ns, name) => byModel.get(`${ns}/${name}`),
    healthTargets: () => (health ??= healthTargetsOf(byModel.values())),
    loadTargets: () => (load ??= loadTargetsOf(byModel.values())),
  };
  return () => {
    if (everything || dirtyModels.size || dirtyEndpoints.size) update();
    return table;
  };
}
