// `npm run bench:controller`: the controller and the cluster gateway at scale on a real control plane
// of its own (kube-apiserver and etcd, no node). Applies N DeployedModels and N Endpoints (default
// 5,000 each), waits for the controller to create the Deployments, then plays kube-controller-manager
// and the endpointslice controller: marks each Deployment available and writes its Service's
// EndpointSlice (one ready pod, a plausible pod IP, the `http` port). It reports when each object
// turned Ready / EndpointReady after its Deployment became available (p50/p99/max, as the bench's own
// watches saw it), reconciles per second, API requests per reconcile and writes per object, counted by
// the apiserver itself (apiserver_request_total), and the controller's RSS (sampled, and the kernel's
// peak). The real cluster gateway runs against the same apiserver the whole time: its RSS and heap
// once it holds every model, Endpoint and slice, and how fast new Endpoints and traffic changes of
// existing ones are routed (routingProbe.ts). Before those changes, once the Events are sent, two
// resync periods with nothing changing count the writes they made (the goal is zero). The controller
// and the gateway run as the chart runs them by default (runtime.ts): its runtime settings, each in a
// memory cgroup with its container's memory limit (memoryCgroup.ts; root), so Node sizes its heap from
// the limit as in a pod and the kernel counts, and OOM-kills, as a kubelet's would.
// BENCH_CONTROLLER_NODE_OPTIONS / BENCH_GATEWAY_NODE_OPTIONS replace the settings for an experiment
// (e.g. --heapsnapshot-signal), BENCH_CONTROLLER_MEMORY_LIMIT / BENCH_GATEWAY_MEMORY_LIMIT the limits
// (a quantity, e.g. 1Gi, or "none": no cgroup). A run with the defaults writes its table into
// docs/performance.md (between the controller-bench markers); BENCH_WRITE_DOCS=1 writes any run's
// (between controller-bench-N markers when BENCH_OBJECTS is N, not 5000), =0 none.
// Settings: BENCH_OBJECTS (5000), BENCH_RESYNC_SECONDS (60), BENCH_CONCURRENCY (16),
// BENCH_CHANGES (300), BENCH_CHANGE_PACE_MS (100).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GROUP, VERSION } from '../../src/api/types.js';
import { startControlPlane, type ControlPlane } from '../cluster/controlPlane.js';
import { ROOT } from '../helpers/local.js';
import { startBundledModel, stopAll, type PredictgateProcess } from '../helpers/procs.js';
import { measuredOn, writeBlock } from './docsBlock.js';
import { chartRuntime, describeRuntime, overrideRuntime, quantityBytes, withRuntime, type RuntimeEnv } from './runtime.js';
import { createMemoryCgroup, type MemoryCgroup } from './memoryCgroup.js';
import { applyCrds, clients, setAvailable, startClusterGateway, startController, waitFor, type ClusterProcess } from '../helpers/cluster.js';
import { POD_PORT, Watcher, gauge, podIp, rssOf, sampleRss, spread, writeSlice } from './controllerScale.js';
import { percentile } from '../helpers/load.js';
import { answeredBy, probeRouting } from './routingProbe.js';

const DEFAULTS = { objects: 5000, resync: 60, concurrency: 16, changes: 300, paceMs: 100 };
const N = Number(process.env.BENCH_OBJECTS ?? DEFAULTS.objects);
const RESYNC = Number(process.env.BENCH_RESYNC_SECONDS ?? DEFAULTS.resync);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? DEFAULTS.concurrency);
const CHANGES = Number(process.env.BENCH_CHANGES ?? DEFAULTS.changes);
const PACE_MS = Number(process.env.BENCH_CHANGE_PACE_MS ?? DEFAULTS.paceMs);
const CHART = { controller: chartRuntime(ROOT, 'controller'), gateway: chartRuntime(ROOT, 'gateway') };
const CONTROLLER_RUNTIME = overrideRuntime(CHART.controller.env, process.env, 'BENCH_CONTROLLER_');
const GATEWAY_RUNTIME = overrideRuntime(CHART.gateway.env, process.env, 'BENCH_GATEWAY_');
/** Each component's container memory limit: the chart's, or BENCH_*_MEMORY_LIMIT; null: none. */
const LIMITS = {
  controller: memoryLimit(process.env.BENCH_CONTROLLER_MEMORY_LIMIT, CHART.controller.memoryLimitBytes),
  gateway: memoryLimit(process.env.BENCH_GATEWAY_MEMORY_LIMIT, CHART.gateway.memoryLimitBytes),
};
/** How many models answer calls (their pod IPs resolve to the bundled model): the routing probes' models. */
const PROBED = Math.min(N, 200);
/** Bounds on the phases that wait for the controller and the gateway: a bench that ends (15 min per 5,000 objects). */
const READY_TIMEOUT_MS = 900_000 * Math.max(1, Math.ceil(N / 5000));
const NS = 'bench';
const log = (msg: string): void => void process.stderr.write(`${msg}\n`);

function memoryLimit(setting: string | undefined, chart: number | null): { bytes: number | null; replaced: boolean } {
  if (setting === undefined) return { bytes: chart, replaced: false };
  return { bytes: setting === 'none' ? null : quantityBytes(setting), replaced: true };
}

/** Fails at once, with Node's own words, when this Node refuses a component's NODE_OPTIONS (an older Node than the image's). */
function checkNodeAccepts(what: string, env: RuntimeEnv): void {
  const r = spawnSync(process.execPath, ['-e', ''], { env: withRuntime(process.env, env), encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`Node ${process.version} refuses the ${what}'s ${describeRuntime(env)}: ${r.stderr.trim()} (run the bench on the image's Node, 24)`);
}

/** A component's memory cgroup (or none), named after this run. */
function cgroupFor(component: string, limit: number | null): MemoryCgroup | undefined {
  return limit === null ? undefined : createMemoryCgroup(`predictgate-bench-${process.pid}-${component}`, limit);
}

/** `nodejs_gc_duration_seconds` of one kind: how many, and their seconds in all. */
function collections(metrics: string, kind: string): { count: number; seconds: number } {
  const value = (suffix: string): number => Number(new RegExp(`^nodejs_gc_duration_seconds_${suffix}\\{kind="${kind}"\\} (\\S+)$`, 'm').exec(metrics)?.[1] ?? 0);
  return { count: value('count'), seconds: value('sum') };
}

async function pool<T>(items: T[], fn: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < items.length) await fn(items[next++]);
  }));
}

/** The apiserver's /metrics page. */
function metricsText(cp: ControlPlane): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(`${cp.server}/metrics`, { headers: { authorization: `Bearer ${cp.adminToken}` }, ca: readFileSync(cp.caFile) }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve(text));
    });
    req.on('error', reject);
    req.end();
  });
}

/** apiserver_request_total summed by "VERB resource[/subresource]". */
async function apiserverRequests(cp: ControlPlane): Promise<Map<string, number>> {
  const text = await metricsText(cp);
  const counts = new Map<string, number>();
  for (const m of text.matchAll(/^apiserver_request_total\{([^}]*)\} (\S+)$/gm)) {
    const labels = Object.fromEntries([...m[1].matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    const key = `${labels.verb} ${labels.resource}${labels.subresource ? `/${labels.subresource}` : ''}`;
    counts.set(key, (counts.get(key) ?? 0) + Number(m[2]));
  }
  return counts;
}

/** apiserver_longrunning_requests (watches open now) summed by "VERB resource". */
async function openWatches(cp: ControlPlane): Promise<Map<string, number>> {
  const text = await metricsText(cp);
  const counts = new Map<string, number>();
  for (const m of text.matchAll(/^apiserver_longrunning_requests\{([^}]*)\} (\S+)$/gm)) {
    const labels = Object.fromEntries([...m[1].matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (labels.verb !== 'WATCH' || Number(m[2]) === 0) continue;
    counts.set(labels.resource, (counts.get(labels.resource) ?? 0) + Number(m[2]));
  }
  return counts;
}

function delta(after: Map<string, number>, before: Map<string, number>): Map<string, number> {
  const d = new Map<string, number>();
  for (const [k, v] of after) if (v - (before.get(k) ?? 0) > 0) d.set(k, v - (before.get(k) ?? 0));
  return d;
}

const WRITE_VERBS = new Set(['POST', 'PUT', 'PATCH', 'APPLY', 'DELETE', 'CREATE', 'UPDATE']);
/** What the controller touches; the bench only creates CRs and patches deployments/status. */
const CONTROLLER_RESOURCES = new Set(['deployments', 'services', 'horizontalpodautoscalers', 'deployedmodels/status', 'endpoints/status', 'events', 'leases']);

function controllerRequests(d: Map<string, number>): { reads: number; writes: number; byKind: Map<string, number> } {
  let reads = 0;
  let writes = 0;
  const byKind = new Map<string, number>();
  for (const [key, n] of d) {
    const [verb, resource] = key.split(' ');
    const mine = CONTROLLER_RESOURCES.has(resource) || ((verb === 'LIST' || verb === 'WATCH') && (resource === 'deployedmodels' || resource === 'endpoints'));
    if (!mine) continue;
    if (WRITE_VERBS.has(verb)) {
      writes += n;
      byKind.set(key, n);
    } else reads += n;
  }
  return { reads, writes, byKind };
}

async function reconcileCount(controller: ClusterProcess): Promise<number> {
  return [...(await controller.metrics()).matchAll(/^predictgate_reconcile_total\{[^}]*\} (\d+)/gm)].reduce((s, m) => s + Number(m[1]), 0);
}

async function main(): Promise<void> {
  const runStart = Date.now();
  checkNodeAccepts('controller', CONTROLLER_RUNTIME.env);
  checkNodeAccepts('gateway', GATEWAY_RUNTIME.env);
  const cgroups = { controller: cgroupFor('controller', LIMITS.controller.bytes), gateway: undefined as MemoryCgroup | undefined };
  let cp: ControlPlane | undefined;
  let dir: string | undefined;
  try {
    cgroups.gateway = cgroupFor('gateway', LIMITS.gateway.bytes);
    dir = mkdtempSync(join(tmpdir(), 'predictgate-bench-cp-'));
    cp = await startControlPlane({ dir, log });
    await measure(cp, runStart, cgroups);
  } finally {
    await cp?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
    for (const g of [cgroups.controller, cgroups.gateway]) g?.remove();
  }
}

async function measure(cp: ControlPlane, runStart: number, cgroups: { controller?: MemoryCgroup; gateway?: MemoryCgroup }): Promise<void> {
  let controller: ClusterProcess | undefined;
  let gateway: ClusterProcess | undefined;
  const models: PredictgateProcess[] = [];
  const c = clients(cp.kubeconfig);
  const watcher = new Watcher(c, NS);
  let stopping = false;
  try {
    await applyCrds(cp.kubeconfig);
    await c.core.createNamespace({ body: { metadata: { name: NS } } });
    const started = new Date();
    const names = Array.from({ length: N }, (_, i) => `model-${String(i).padStart(4, '0')}`);
    // The one process that answers for every probed model's pod (tensorflow's predict route of the bench's models).
    const modelPort = await startBundledModel('half-plus-two', { AIP_PREDICT_ROUTE: '/v1/models/m:predict', AIP_DEPLOYED_MODEL_ID: 'bench' }, models);
    await watcher.start();
    controller = await startController([NS], { ...CONTROLLER_RUNTIME.env, KUBECONFIG: cp.kubeconfig, LOG_LEVEL: 'info', RESYNC_SECONDS: String(RESYNC) }, { cgroupProcs: cgroups.controller?.procsFile });
    gateway = await startClusterGateway([NS], {
      ...GATEWAY_RUNTIME.env,
      KUBECONFIG: cp.kubeconfig,
      UPSTREAM_RESOLVE: names.slice(0, PROBED).map((_, i) => `${podIp(i)}:${POD_PORT}=127.0.0.1:${modelPort}`).join(','),
    }, { cgroupProcs: cgroups.gateway?.procsFile });
    const gw = gateway;
    // A controller or gateway that exits before the end fails the run at once, with its last log lines.
    for (const [what, proc] of [['controller', controller.proc], ['gateway', gateway.proc]] as const) {
      void proc.exited.then((code) => {
        if (stopping) return;
        const last = proc.logs().slice(-15).map((l) => JSON.stringify(l)).join('\n');
        log(`the ${what} exited (${code}) during the run; its last log lines:\n${last}`);
        watcher.abort(new Error(`the ${what} exited (${code})`));
      });
    }
    await waitFor(async () => (await fetch(`http://127.0.0.1:${gw.port}/readyz`)).status === 200, 'the gateway to be ready', 30_000, 20);
    const pid = controller.proc.child.pid!;
    const gatewayPid = gateway.proc.child.pid!;
    const controllerRss = sampleRss(pid);
    const gatewayRss = sampleRss(gatewayPid);
    const idle = rssOf(pid);
    const gatewayIdle = rssOf(gatewayPid);
    const before = await apiserverRequests(cp);
    const reconcilesBefore = await reconcileCount(controller);

    const t0 = Date.now();
    // Each model with its Endpoint, as `kubectl apply -f` of a file holding both would.
    await pool(names, async (name) => {
      await c.custom.createNamespacedCustomObject({
        group: GROUP, version: VERSION, namespace: NS, plural: 'deployedmodels',
        body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'DeployedModel', metadata: { name }, spec: { modelSpec: { framework: 'tensorflow', containerSpec: { image: 'example/model:1', predictRoute: '/v1/models/m:predict', healthRoute: '/v1/models/m' } } } },
      });
      await c.custom.createNamespacedCustomObject({
        group: GROUP, version: VERSION, namespace: NS, plural: 'endpoints',
        body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'Endpoint', metadata: { name }, spec: { destinations: [{ serviceRef: { name } }] } },
      });
    });
    const tApplied = Date.now();
    log(`applied ${N} DeployedModels and ${N} Endpoints in ${tApplied - t0} ms`);
    const tDeployments = await watcher.until(() => watcher.deployments.size >= N, READY_TIMEOUT_MS, () => `${watcher.deployments.size} of ${N} Deployments`);
    log(`controller created ${N} Deployments ${tDeployments - tApplied} ms after the last apply`);

    // kube-controller-manager and the endpointslice controller: each Deployment available, then its
    // Service's slice. The first model's slice comes last, after every other (see below).
    const availableAt = new Map<string, number>();
    const tAvailStart = Date.now();
    await pool(names, async (name) => {
      await setAvailable(c, NS, name, 1, watcher.deployments.get(name));
      availableAt.set(name, Date.now());
      const i = names.indexOf(name);
      if (i > 0) await writeSlice(c, NS, name, podIp(i));
    });
    const tAvailEnd = Date.now();
    log(`marked ${N} Deployments available and wrote ${N - 1} EndpointSlices in ${tAvailEnd - tAvailStart} ms`);
    const tReady = await watcher.until(() => watcher.modelReadyAt.size >= N && watcher.endpointReadyAt.size >= N, READY_TIMEOUT_MS,
      () => `${watcher.modelReadyAt.size} of ${N} DeployedModels Ready, ${watcher.endpointReadyAt.size} of ${N} Endpoints EndpointReady`);
    log(`all Ready ${tReady - tAvailEnd} ms after the last Deployment became available`);
    const converged = await apiserverRequests(cp);
    const reconcilesAtReady = await reconcileCount(controller);
    const peakAtReady = controllerRss.max();
    const modelDelays = names.map((n) => watcher.modelReadyAt.get(n)! - availableAt.get(n)!);
    const endpointDelays = names.map((n) => watcher.endpointReadyAt.get(n)! - availableAt.get(n)!);

    // The gateway holds every slice once it routes the first model through its slice: the watch
    // delivers a resource's events in order, and that slice was written after all the others.
    const tLastSlice = Date.now();
    await writeSlice(c, NS, names[0], podIp(0));
    const tHolds = await waitFor(async () => (await answeredBy(gw.port, NS, names[0])) === names[0] && Date.now(), 'the gateway to route through the last slice', 120_000, 20);
    log(`the gateway routes through the last slice ${tHolds - tLastSlice} ms after it was written`);
    await new Promise((r) => setTimeout(r, 2000));
    const gatewayHolding = rssOf(gatewayPid);
    const gatewayMetrics = await gw.metrics();
    const gatewayHeap = gauge(gatewayMetrics, 'nodejs_heap_size_used_bytes');
    const gatewayHeapTotal = gauge(gatewayMetrics, 'nodejs_heap_size_total_bytes');

    // Steady state: once the Events have all been sent (they go a few at a time, after the status
    // that raised them: the count stops growing), two resync periods with nothing changing.
    const eventsPosted = async (): Promise<number> => (await apiserverRequests(cp)).get('POST events') ?? 0;
    let posted = await eventsPosted();
    let still = 0;
    const settleDeadline = Date.now() + 300_000;
    while (still < 3 && Date.now() < settleDeadline) {
      await new Promise((r) => setTimeout(r, 2000));
      const now = await eventsPosted();
      still = now === posted ? still + 1 : 0;
      posted = now;
    }
    const steadyBefore = await apiserverRequests(cp);
    const reconcilesSteadyBefore = await reconcileCount(controller);
    await new Promise((r) => setTimeout(r, (2 * RESYNC + 1) * 1000)); // a fixed window by design: resyncs are timer-driven
    const steady = controllerRequests(delta(await apiserverRequests(cp), steadyBefore));
    const steadyReconciles = (await reconcileCount(controller)) - reconcilesSteadyBefore;
    const final = rssOf(pid);

    // Changes routed by the gateway, with all of the above in place.
    const tProbe = Date.now();
    const probe = await probeRouting({ c, namespace: NS, gatewayPort: gw.port, models: names.slice(0, PROBED), changes: CHANGES, paceMs: PACE_MS, pollMs: 10, timeoutMs: 30_000 });
    log(`${CHANGES} changes probed in ${Date.now() - tProbe} ms`);
    const gatewayFinal = rssOf(gatewayPid);
    const end = await apiserverRequests(cp);
    controllerRss.stop();
    gatewayRss.stop();
    const controllerHeap = await controller.metrics();
    const gatewayEnd = await gw.metrics();
    /** A component's memory as its cgroup and V8 saw it, and its full collections over the run. */
    const memoryRow = (metrics: string, cgroup: MemoryCgroup | undefined): string => {
      const major = collections(metrics, 'major');
      const box = cgroup ? `limit ${mb(cgroup.limitBytes)}, the kernel's peak count ${mb(cgroup.peakBytes())} (RSS and page cache), OOM kills ${cgroup.oomKills()}` : 'no memory limit';
      return `${box}; heap limit ${mb(gauge(metrics, 'predictgate_heap_limit_bytes'))}; ${major.count} full collections, ${major.seconds.toFixed(1)} s in all`;
    };
    log(`controller heap used ${mb(gauge(controllerHeap, 'nodejs_heap_size_used_bytes'))} of ${mb(gauge(controllerHeap, 'nodejs_heap_size_total_bytes'))}, external ${mb(gauge(controllerHeap, 'nodejs_external_memory_bytes'))}`);

    const build = controllerRequests(delta(converged, before));
    const reconciles = reconcilesAtReady - reconcilesBefore;
    const leaseWrites = [...build.byKind].filter(([k]) => k.endsWith(' leases')).reduce((s, [, n]) => s + n, 0);
    const eventWrites = [...build.byKind].filter(([k]) => k.endsWith(' events')).reduce((s, [, n]) => s + n, 0);
    const objectWrites = build.writes - leaseWrites - eventWrites;
    const lastDelay = Math.max(...modelDelays, ...endpointDelays);
    const controllerPeak = Math.max(controllerRss.peak(), peakAtReady);
    const p99Routed = percentile([...probe.created, ...probe.changed], 0.99);
    const verdict = (pass: boolean): string => (pass ? '**PASS**' : '**MISSED**');
    const rows: [string, string][] = [
      ['objects', `${N} DeployedModels + ${N} Endpoints (+ ${N} EndpointSlices written by the bench)`],
      ['applied (both kinds, as fast as the apiserver takes them)', `${((tApplied - t0) / 1000).toFixed(1)} s`],
      ['Deployments created after the last apply', `${((tDeployments - tApplied) / 1000).toFixed(1)} s`],
      ['Deployments marked available and slices written', `${((tAvailEnd - tAvailStart) / 1000).toFixed(1)} s`],
      ['DeployedModel Ready after its Deployment became available', `${spread(modelDelays, 's')} (goal < 60 s each)`],
      ['Endpoint EndpointReady after its model\'s Deployment became available', `${spread(endpointDelays, 's')} (goal < 60 s each) ${verdict(lastDelay < 60_000)}`],
      ['all Ready + EndpointReady after the last Deployment became available', `${((tReady - tAvailEnd) / 1000).toFixed(1)} s`],
      ['reconciles (both kinds) until converged', `${reconciles}`],
      ['reconciles per second (apply to converged)', `${(reconciles / ((tReady - t0) / 1000)).toFixed(0)}`],
      ['API requests per reconcile (reads + writes)', `${((build.reads + build.writes) / reconciles).toFixed(2)}`],
      ['API writes per object (Deployment, Service, status; excl. Events, Lease)', `${(objectWrites / (2 * N)).toFixed(2)} (goal <= 3)`],
      ['... per DeployedModel / per Endpoint', `${(([...build.byKind].filter(([k]) => /deployments|services|deployedmodels\/status|horizontal/.test(k)).reduce((s, [, n]) => s + n, 0)) / N).toFixed(2)} / ${(([...build.byKind].filter(([k]) => k.endsWith('endpoints/status')).reduce((s, [, n]) => s + n, 0)) / N).toFixed(2)}`],
      ['Events written: until converged / in all (sent 8 at a time after the status that raised them)', `${eventWrites} / ${(end.get('POST events') ?? 0) - (before.get('POST events') ?? 0)}`],
      [`steady state: writes in ${2 * RESYNC + 1} s (${steadyReconciles} resync reconciles), excl. Lease renewals`, `${steady.writes - [...steady.byKind].filter(([k]) => k.endsWith(' leases')).reduce((s, [, n]) => s + n, 0)} (goal 0)`],
      ['controller RSS: idle / peak / after', `${mb(idle.rss)} / ${mb(controllerPeak)} / ${mb(final.rss)} (goal peak < 300 MB) ${verdict(controllerPeak < 300 * 1048576)}`],
      ['controller memory', memoryRow(controllerHeap, cgroups.controller)],
      ['cluster gateway: routes through the last slice after it was written', `${tHolds - tLastSlice} ms`],
      ['cluster gateway holding every model, Endpoint and slice: RSS (heap used / total)', `${mb(gatewayHolding.rss)} (${mb(gatewayHeap)} / ${mb(gatewayHeapTotal)}), idle before the apply ${mb(gatewayIdle.rss)} (goal < 250 MB) ${verdict(gatewayHolding.rss < 250 * 1048576)}`],
      ['cluster gateway RSS: peak over the run / after the changes', `${mb(Math.max(gatewayRss.peak(), gatewayFinal.peak))} / ${mb(gatewayFinal.rss)}`],
      ['cluster gateway memory', memoryRow(gatewayEnd, cgroups.gateway)],
      [`new Endpoint: write accepted to routed by the gateway (${probe.created.length})`, `${spread(probe.created, 'ms')}`],
      [`traffic change of an Endpoint: write accepted to routed per the change (${probe.changed.length})`, `${spread(probe.changed, 'ms')}`],
      ['... both (goal p99 < 1 s)', `p99 ${Math.round(p99Routed)} ms, ${probe.missed} not routed within 30 s ${verdict(p99Routed < 1000 && probe.missed === 0)}`],
      ['bench run time (control plane start to stop)', `${((Date.now() - runStart) / 60_000).toFixed(1)} min`],
    ];
    const ours = new Set(['deployedmodels', 'endpoints', 'deployments', 'services', 'horizontalpodautoscalers', 'endpointslices', 'events', 'leases']);
    const lists = [...end].filter(([k]) => k.startsWith('LIST ') && ours.has(k.slice(5))).sort(([a], [b]) => a.localeCompare(b));
    const watches = [...(await openWatches(cp))].filter(([k]) => ours.has(k)).sort(([a], [b]) => a.localeCompare(b));
    const table = [
      `Measured ${measuredOn(ROOT, started)}; the controller with ${describeRuntime(CONTROLLER_RUNTIME.env)} in a memory cgroup limited to ${limitText(LIMITS.controller.bytes)}, the gateway with ${describeRuntime(GATEWAY_RUNTIME.env)} in one limited to ${limitText(LIMITS.gateway.bytes)}.`,
      '',
      '| measure | value |',
      '| --- | --- |',
      ...rows.map(([k, v]) => `| ${k} | ${v} |`),
      '',
      `Writes by kind until converged, as the apiserver counted them: ${[...build.byKind].map(([k, n]) => `${k}=${n}`).join(', ')}`,
      '',
      `Lists over the run and watches open at its end, of the resources above (the controller's, the gateway's and the bench's own; nothing relisted), as the apiserver counted them: ${lists.map(([k, n]) => `${k}=${n}`).join(', ')}; WATCH ${watches.map(([k, n]) => `${k}=${n}`).join(', ')}`,
    ].join('\n');
    process.stdout.write(`\nsteady-state writes: ${[...steady.byKind].map(([k, n]) => `${k}=${n}`).join(', ') || 'none'}\n\n${table}\n`);
    const write = process.env.BENCH_WRITE_DOCS;
    const replaced = CONTROLLER_RUNTIME.replaced.length + GATEWAY_RUNTIME.replaced.length > 0 || LIMITS.controller.replaced || LIMITS.gateway.replaced;
    const isDefault = N === DEFAULTS.objects && RESYNC === DEFAULTS.resync && CONCURRENCY === DEFAULTS.concurrency && CHANGES === DEFAULTS.changes && PACE_MS === DEFAULTS.paceMs && !replaced;
    const block = N === DEFAULTS.objects ? 'controller-bench' : `controller-bench-${N}`;
    if (write === '1' || (write !== '0' && isDefault)) log(`table written to ${writeBlock(ROOT, block, table)}`);
    else log(`docs/performance.md left as it is: ${write === '0' ? 'BENCH_WRITE_DOCS=0' : 'not a default run (BENCH_WRITE_DOCS=1 writes it anyway)'}`);
  } finally {
    stopping = true;
    await watcher.stop();
    await gateway?.stop();
    await controller?.stop();
    await stopAll(models);
  }
}

const mb = (b: number): string => `${(b / 1048576).toFixed(0)} MB`;
const limitText = (b: number | null): string => (b === null ? 'nothing (no cgroup)' : `${(b / 1048576).toFixed(0)} MiB`);

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
