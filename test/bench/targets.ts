// The servers under load and how to reach them: the predictgate gateway in local mode (which spawns
// one model process per kind the payloads need, each behind an Endpoint) with the runtime settings the
// image ships (runtime.ts), in an A/B run a second gateway with other settings, the bare node:http
// proxy and nginx (which route to the models by path prefix), all pinned to the server CPU and run by
// the Node running the bench. Every target but the second gateway calls the same model process of a
// kind: the first gateway's children when it runs (the "direct" target calls them itself), else
// processes started here. Two processes of one model differ by 10-30% in CPU per call within a run
// (their heaps and JIT state differ), which a shared one takes out of the ratios. The models and the
// bare proxy run with Node's and glibc's defaults. Knows each target's URL for a model kind, which pids
// its CPU and memory come from (proxy) and which model serves it (upstream), and checks one answer per
// target and payload (the smoke check).

import fs from 'node:fs';
import path from 'node:path';
import { COMPARE_TARGETS, ModelKind, TARGET_ORDER, TargetName } from './config.js';
import { MODELS, checkAnswer, endpointName, gatewayManifest, modelEnv } from './models.js';
import { startNginx } from './nginx.js';
import { Payload, probeBody } from './payloads.js';
import { cpusAllowed, descendants, readCmdline, readEnvVar } from './procfs.js';
import { Child, freePort, httpCall, spawnPinned, waitReady } from './procs.js';
import { RuntimeEnv, withRuntime } from './runtime.js';

const GATEWAY_BASE = '/v1/projects/default/locations/local/endpoints';

export interface Target {
  name: TargetName;
  /** Where calls for a model kind go. */
  url: (kind: ModelKind) => string;
  /** Processes doing this target's proxy work (for direct: the model itself). CPU and RSS come from these. */
  proxyPids: (kind: ModelKind) => number[];
  /** The model process behind the proxy for a model kind (for direct: none). */
  upstreamPids: (kind: ModelKind) => number[];
  /** Server processes that must stay alive for the whole run. */
  servers: Child[];
}

export interface StartOptions {
  root: string;
  cpu: number;
  tmp: string;
  logDir: string;
  nginxBinary: string | null;
  /** Model kinds the selected payloads need; only these start. */
  kinds: ModelKind[];
  readyTimeoutMs: number;
  /** The gateway's runtime settings, and its extra node flags (BENCH_GATEWAY_NODE_FLAGS). */
  gateway: GatewaySettings;
  /** The second gateway's, in an A/B run. */
  compare: GatewaySettings | null;
  /** Headers every call carries (the bearer token of an auth A/B run). */
  headers: Record<string, string>;
}

export interface GatewaySettings {
  runtime: RuntimeEnv;
  nodeFlags: string[];
  /** The checkout whose built command it runs (another one than the bench's to compare two versions). */
  root: string;
  /** More environment (PREDICT_AUTH and KUBECONFIG of an auth A/B run). */
  env?: Record<string, string>;
}

/** The environment of the models and the bare proxy: no runtime settings (Node's and glibc's defaults). */
const plainEnv = (extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv => withRuntime({ ...process.env, ...extra }, {});

const predictgateBin = (root: string) => path.join(root, 'bin', 'predictgate.js');

interface Model {
  readonly pid: number;
  port: number;
  /** The process whose exit ends this model: the model itself, or the gateway it is a child of. */
  owner: Child;
}

async function startModel(o: StartOptions, kind: ModelKind): Promise<Model> {
  const port = await freePort();
  const child = spawnPinned(`model-${kind}`, process.execPath, [predictgateBin(o.root), 'model', kind], {
    cpu: o.cpu,
    env: plainEnv(modelEnv(kind, port)),
    cwd: o.root,
    logDir: o.logDir,
  });
  await waitReady(
    `${kind} model on :${port}`,
    () => httpCall(`http://127.0.0.1:${port}${MODELS[kind].healthRoute}`, 'GET'),
    [child],
    o.readyTimeoutMs,
  );
  return { pid: child.pid, port, owner: child };
}

/** Polls each model kind's probe body through `url(kind)` until every one answers 200. */
async function waitRoutes(what: string, url: (kind: ModelKind) => string, watch: Child[], o: StartOptions): Promise<void> {
  for (const kind of o.kinds) {
    await waitReady(`${what} (${kind})`, () => httpCall(url(kind), 'POST', probeBody(kind), 5000, o.headers), watch, o.readyTimeoutMs);
  }
}

/** The gateway's model child of a kind: a descendant whose command line runs `model <kind>`. */
function findGatewayModel(gatewayPid: number, kind: ModelKind): number | null {
  for (const pid of descendants(gatewayPid)) {
    const cmd = readCmdline(pid);
    const i = cmd.indexOf('model');
    if (i >= 0 && cmd[i + 1] === kind) return pid;
  }
  return null;
}

export interface StartedTargets {
  targets: Target[];
  warnings: string[];
}

interface StartedGateway {
  models: Map<ModelKind, Model>;
  warnings: string[];
  /** The target of one of its routes, under a name. */
  target: (name: TargetName, route: 'predict' | 'rawPredict') => Target;
}

/**
 * One gateway in local mode, with its runtime settings as environment variables and its extra node
 * flags on the command line; its model children are told to run with Node's defaults (their
 * DeployedModels' env), like the models of the other targets.
 */
async function startGateway(name: string, settings: GatewaySettings, o: StartOptions): Promise<StartedGateway> {
  const port = await freePort();
  const manifests = path.join(o.tmp, `manifests-${name}`);
  fs.mkdirSync(manifests, { recursive: true });
  fs.writeFileSync(path.join(manifests, 'bench.yaml'), gatewayManifest(process.execPath, predictgateBin(settings.root), o.kinds));
  const gw = spawnPinned(name, process.execPath, [...settings.nodeFlags, predictgateBin(settings.root), 'local', manifests], {
    cpu: o.cpu,
    env: withRuntime({ ...process.env, PORT: String(port), LOG_LEVEL: 'warn', ...settings.env }, settings.runtime),
    cwd: settings.root,
    logDir: o.logDir,
  });
  const base = (kind: ModelKind) => `http://127.0.0.1:${port}${GATEWAY_BASE}/${endpointName(kind)}`;
  await waitRoutes(`${name} on :${port}`, (kind) => `${base(kind)}:predict`, [gw], o);
  const models = new Map<ModelKind, Model>();
  for (const kind of o.kinds) {
    const pid = findGatewayModel(gw.pid, kind);
    const modelPort = pid === null ? undefined : Number(readEnvVar(pid, 'AIP_HTTP_PORT'));
    if (pid === null || !modelPort) throw new Error(`${name}: could not find its \`model ${kind}\` child or its AIP_HTTP_PORT`);
    // Local mode restarts a model that died, on a fresh port: the gateway's targets follow it, and
    // their model CPU is read from the new process; direct, bare and nginx keep the old port and
    // report the failed calls as errors.
    let current = pid;
    models.set(kind, {
      get pid() {
        if (!fs.existsSync(`/proc/${current}`)) current = findGatewayModel(gw.pid, kind) ?? current;
        return current;
      },
      port: modelPort,
      owner: gw,
    });
  }
  const warnings: string[] = [];
  for (const pid of [gw.pid, ...descendants(gw.pid)]) {
    const allowed = cpusAllowed(pid);
    if (allowed !== String(o.cpu)) {
      warnings.push(`${name} process ${pid} (${readCmdline(pid).join(' ')}) may run on CPUs ${allowed}, not ${o.cpu}`);
    }
  }
  return {
    models,
    warnings,
    target: (targetName, route) => ({
      name: targetName,
      url: (kind) => `${base(kind)}:${route}`,
      proxyPids: () => [gw.pid],
      upstreamPids: (kind) => [models.get(kind)?.pid ?? -1],
      servers: [gw],
    }),
  };
}

export async function startTargets(names: TargetName[], o: StartOptions): Promise<StartedTargets> {
  const targets: Target[] = [];
  const warnings: string[] = [];
  const wants = (t: TargetName) => names.includes(t);
  const models = new Map<ModelKind, Model>();

  if (wants('predict') || wants('rawPredict')) {
    const a = await startGateway('gateway', o.gateway, o);
    for (const [kind, model] of a.models) models.set(kind, model);
    warnings.push(...a.warnings);
    for (const route of ['predict', 'rawPredict'] as const) {
      if (wants(route)) targets.push(a.target(route, route));
    }
    if (o.compare) {
      const b = await startGateway('gateway-b', o.compare, o);
      warnings.push(...b.warnings);
      for (const route of ['predict', 'rawPredict'] as const) {
        if (wants(COMPARE_TARGETS[route])) targets.push(b.target(COMPARE_TARGETS[route], route));
      }
    }
  }

  if (wants('direct') || wants('bare') || wants('nginx')) {
    // Without the gateway, the models are started here.
    for (const kind of o.kinds) if (!models.has(kind)) models.set(kind, await startModel(o, kind));
    const model = (kind: ModelKind): Model => {
      const m = models.get(kind);
      if (!m) throw new Error(`no ${kind} model was started (BENCH_PAYLOADS selects none of its payloads)`);
      return m;
    };
    const modelOwners = [...new Set([...models.values()].map((m) => m.owner))];
    if (wants('direct')) {
      targets.push({
        name: 'direct',
        url: (kind) => `http://127.0.0.1:${model(kind).port}${MODELS[kind].predictRoute}`,
        proxyPids: (kind) => [model(kind).pid],
        upstreamPids: () => [],
        servers: modelOwners,
      });
    }
    if (wants('bare')) {
      const port = await freePort();
      const routes = o.kinds.map((k) => `${MODELS[k].routePrefix}=127.0.0.1:${model(k).port}`).join(',');
      const bare = spawnPinned('bare-proxy', process.execPath, [path.join(o.root, 'dist', 'test', 'bench', 'bareProxy.js')], {
        cpu: o.cpu,
        env: plainEnv({ PORT: String(port), ROUTES: routes }),
        logDir: o.logDir,
      });
      const url = (kind: ModelKind) => `http://127.0.0.1:${port}${MODELS[kind].predictRoute}`;
      await waitRoutes(`bare proxy on :${port}`, url, [bare, ...modelOwners], o);
      targets.push({
        name: 'bare',
        url,
        proxyPids: () => [bare.pid],
        upstreamPids: (kind) => [model(kind).pid],
        servers: [bare, ...modelOwners],
      });
    }
    if (wants('nginx')) {
      if (!o.nginxBinary) throw new Error('nginx binary missing');
      const port = await freePort();
      const dir = path.join(o.tmp, 'nginx');
      fs.mkdirSync(dir, { recursive: true });
      const ng = startNginx({
        binary: o.nginxBinary,
        dir,
        port,
        routes: o.kinds.map((k) => ({ name: k, prefix: MODELS[k].routePrefix, upstreamPort: model(k).port })),
        cpu: o.cpu,
        logDir: o.logDir,
      });
      const url = (kind: ModelKind) => `http://127.0.0.1:${port}${MODELS[kind].predictRoute}`;
      await waitRoutes(`nginx on :${port} (error log ${path.join(dir, 'error.log')})`, url, [ng.master, ...modelOwners], o);
      targets.push({
        name: 'nginx',
        url,
        proxyPids: ng.pids,
        upstreamPids: (kind) => [model(kind).pid],
        servers: [ng.master, ...modelOwners],
      });
    }
  }

  // Report in the canonical order.
  targets.sort((a, b) => TARGET_ORDER.indexOf(a.name) - TARGET_ORDER.indexOf(b.name));
  return { targets, warnings };
}

/** Every server pid of the run, for every model kind (to wait until all are idle). */
export function allServerPids(targets: Target[], kinds: ModelKind[]): number[] {
  return [...new Set(targets.flatMap((t) => kinds.flatMap((k) => [...t.proxyPids(k), ...t.upstreamPids(k)])))];
}

/** One call per target and payload: must answer 200 with the answer its model kind gives (models.ts). */
export async function smokeCheck(t: Target, payload: Payload, headers: Record<string, string> = {}): Promise<string | null> {
  let ans;
  try {
    ans = await httpCall(t.url(payload.model), 'POST', payload.body, 15000, headers);
  } catch (err) {
    return `${t.name}: ${err instanceof Error ? err.message : String(err)}`;
  }
  if (ans.status !== 200) return `${t.name}: HTTP ${ans.status}: ${ans.body.toString('utf8', 0, 300)}`;
  const problem = checkAnswer(payload.model, payload.body, ans.body);
  return problem === null ? null : `${t.name}: ${problem}`;
}
