// The gateway's one route table: every path it serves, the methods each takes, the dialect its
// errors speak and what serves it. Paths use path-to-regexp's syntax (Express's own, so the
// management routes mount on Express from the same strings); they are compiled once, and a request
// is tried only against the routes of its first path segment. A path that matches no route is a 404,
// a path that matches with another method a 405 naming the allowed ones.
import { pathToRegexp } from 'path-to-regexp';
import { GROUP, VERSION } from '../api/types.js';
import type { Dialect } from '../errors.js';

/** What a call on an Endpoint asks for: Vertex's verbs, and the OpenAI-compatible routes under the Endpoint's path. */
export type Verb = 'predict' | 'rawPredict' | 'explain' | 'streamRawPredict' | 'chatCompletions' | 'completions' | 'models';

/** What serves a route. */
export type Serve =
  /** A prediction call on an Endpoint: by project and endpoint in the path (Vertex), or by Host (GDC). */
  | { kind: 'endpointCall'; verb: Verb; byHost: boolean }
  /** The TF Serving surface of one DeployedModel. */
  | { kind: 'modelCall' }
  /** Served without Express: probes and scrapes. */
  | { kind: 'operation'; name: 'healthz' | 'readyz' | 'metrics' | 'demand' }
  /** Served by the Express side, loaded on first use. */
  | { kind: 'management'; name: 'endpointResource' | 'statusList' | 'statusObject' };

export interface RouteSpec {
  methods: readonly string[];
  paths: readonly string[];
  dialect: Dialect;
  serve: Serve;
  /** Any letter case and one trailing slash (the operations routes and the status API, as Express matched them). */
  loose?: boolean;
  /** Its parameters hold no ':' (a resource name, so `GET .../endpoints/e:predict` is a 405 of the predict route, not a lookup of `e:predict`). */
  names?: boolean;
}

export interface RouteOptions {
  /** Local mode's read-only status API (`/apis/prediction.predictgate.dev/v1/...`). */
  statusApi: boolean;
}

/** `/v1/.../endpoints/{endpoint}` and its v1beta1 twin, with a suffix. */
function vertex(suffix: string): string[] {
  return ['v1', 'v1beta1'].map((v) => `/${v}/projects/:project/locations/:location/endpoints/:endpoint${suffix}`);
}

const VERBS: readonly Verb[] = ['predict', 'rawPredict', 'explain', 'streamRawPredict'];
/** The OpenAI-compatible routes, under the Endpoint's path as Vertex has them (an openai client's baseURL is the Endpoint's path). */
const OPENAI_ROUTES: readonly { verb: Verb; suffix: string; method: string }[] = [
  { verb: 'chatCompletions', suffix: '/chat/completions', method: 'POST' },
  { verb: 'completions', suffix: '/completions', method: 'POST' },
  { verb: 'models', suffix: '/models', method: 'GET' },
];
const STATUS_BASE = `/apis/${GROUP}/${VERSION}`;
/** The demand this gateway sees per model (gateway/demand.ts), read by the controller's request autoscaler. */
export const DEMAND_PATH = '/stats/demand';

/** Every route, in the order they are tried. */
export function routeTable(opts: RouteOptions): RouteSpec[] {
  return [
    ...VERBS.map((verb): RouteSpec => ({ methods: ['POST'], paths: vertex(`\\:${verb}`), dialect: 'vertex', serve: { kind: 'endpointCall', verb, byHost: false } })),
    ...VERBS.map((verb): RouteSpec => ({ methods: ['POST'], paths: [`/v1/model\\:${verb}`], dialect: 'gdc', serve: { kind: 'endpointCall', verb, byHost: true } })),
    ...OPENAI_ROUTES.map(({ verb, suffix, method }): RouteSpec => ({ methods: [method], paths: vertex(suffix), dialect: 'openai', serve: { kind: 'endpointCall', verb, byHost: false } })),
    // The same at the server's root, the Endpoint chosen by Host as for the GDC form: for OpenAI tools
    // whose base URL is a server, not a path (they append /v1/chat/completions themselves).
    ...OPENAI_ROUTES.map(({ verb, suffix, method }): RouteSpec => ({ methods: [method], paths: [`/v1${suffix}`], dialect: 'openai', serve: { kind: 'endpointCall', verb, byHost: true } })),
    { methods: ['GET', 'POST'], paths: ['/tfserving/:namespace/:name/v1/models{/*rest}'], dialect: 'tfserving', serve: { kind: 'modelCall' } },
    { methods: ['GET', 'HEAD'], paths: vertex(''), dialect: 'vertex', serve: { kind: 'management', name: 'endpointResource' }, names: true },
    { methods: ['GET', 'HEAD'], paths: ['/healthz'], dialect: 'vertex', serve: { kind: 'operation', name: 'healthz' }, loose: true },
    { methods: ['GET', 'HEAD'], paths: ['/readyz'], dialect: 'vertex', serve: { kind: 'operation', name: 'readyz' }, loose: true },
    { methods: ['GET', 'HEAD'], paths: ['/metrics'], dialect: 'vertex', serve: { kind: 'operation', name: 'metrics' }, loose: true },
    { methods: ['GET', 'HEAD'], paths: [DEMAND_PATH], dialect: 'vertex', serve: { kind: 'operation', name: 'demand' }, loose: true },
    ...(opts.statusApi
      ? [
          { methods: ['GET', 'HEAD'], paths: [`${STATUS_BASE}/:plural`, `${STATUS_BASE}/namespaces/:namespace/:plural`], dialect: 'vertex', serve: { kind: 'management', name: 'statusList' }, loose: true },
          { methods: ['GET', 'HEAD'], paths: [`${STATUS_BASE}/namespaces/:namespace/:plural/:name`], dialect: 'vertex', serve: { kind: 'management', name: 'statusObject' }, loose: true },
        ] satisfies RouteSpec[]
      : []),
  ];
}

interface Compiled {
  spec: RouteSpec;
  regexp: RegExp;
  keys: string[];
}

export type Params = Record<string, string>;

/** What a request's method and path come to. */
export type Match =
  | { found: true; spec: RouteSpec; params: Params; path: string }
  | { found: false; path: string; dialect: Dialect; allowed: readonly string[]; malformed: boolean };

export interface Router {
  match(method: string, url: string): Match;
}

/** The first path segment, lower-cased: the key routes are grouped by. */
function firstSegment(path: string): string {
  const end = path.indexOf('/', 1);
  const seg = end < 0 ? path.slice(1) : path.slice(1, end);
  const colon = seg.indexOf(':');
  return (colon < 0 ? seg : seg.slice(0, colon)).toLowerCase();
}

/** A percent-decoded path parameter, or null when its escapes are malformed (then the path is refused). */
function decode(part: string): string | null {
  if (!part.includes('%')) return part;
  try {
    return decodeURIComponent(part);
  } catch {
    return null;
  }
}

/** The route's parameters; 'no' when they do not fit it, 'malformed' when one has bad escapes. */
function paramsOf(c: Compiled, m: RegExpExecArray): Params | 'no' | 'malformed' {
  const params: Params = {};
  for (let i = 0; i < c.keys.length; i++) {
    const raw = m[i + 1];
    if (raw === undefined) continue;
    if (c.spec.names && raw.includes(':')) return 'no';
    const v = decode(raw);
    if (v === null) return 'malformed';
    params[c.keys[i]] = v;
  }
  return params;
}

/** The dialect of a path no route takes (errors there speak the dialect of the nearest surface). */
export function dialectOf(path: string): Dialect {
  if (path.startsWith('/v1/model:') || path.startsWith('/v1/model/')) return 'gdc';
  if (path.startsWith('/tfserving/')) return 'tfserving';
  if (/(?:\/endpoints\/[^/]+|^\/v1)\/(chat\/completions|completions|models)\/?$/.test(path)) return 'openai';
  return 'vertex';
}

export function compileRoutes(specs: readonly RouteSpec[]): Router {
  const groups = new Map<string, Compiled[]>();
  for (const spec of specs) {
    for (const path of spec.paths) {
      const { regexp, keys } = pathToRegexp(path, { sensitive: !spec.loose, trailing: spec.loose === true });
      const key = firstSegment(path);
      const list = groups.get(key) ?? [];
      list.push({ spec, regexp, keys: keys.map((k) => k.name) });
      groups.set(key, list);
    }
  }
  return {
    match(method, url) {
      const q = url.indexOf('?');
      const path = q < 0 ? url : url.slice(0, q);
      let allowed: Set<string> | undefined;
      /** The dialect of the routes whose path it is (a 405 speaks theirs). */
      let dialect: Dialect | undefined;
      let malformed = false;
      for (const c of groups.get(firstSegment(path)) ?? []) {
        const m = c.regexp.exec(path);
        if (m === null) continue;
        const params = paramsOf(c, m);
        if (params === 'no') continue;
        if (params === 'malformed') {
          malformed = true;
          continue;
        }
        if (c.spec.methods.includes(method)) return { found: true, spec: c.spec, params, path };
        allowed ??= new Set();
        dialect ??= c.spec.dialect;
        for (const x of c.spec.methods) allowed.add(x);
      }
      return { found: false, path, dialect: dialect ?? dialectOf(path), allowed: allowed ? [...allowed] : [], malformed };
    },
  };
}
