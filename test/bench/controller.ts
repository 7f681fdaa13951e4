// `npm run bench:controller`: the controller at scale on a real control plane of its own. Applies N
// DeployedModels and N Endpoints (default 500 each), waits for the controller to create the
// Deployments, marks them all available (playing kube-controller-manager), and reports the time until
// every object is Ready / EndpointReady, reconciles per second, the controller's RSS, and API requests
// per reconcile and writes per object, counted by the apiserver itself (apiserver_request_total; the
// bench's own requests touch other resources, so the two never mix). Then it waits two resync periods
// and reports the writes they made (the goal is zero). The controller runs with the runtime settings
// the image ships (runtime.ts). A run with the defaults writes its table into docs/performance.md
// (between the controller-bench markers); BENCH_WRITE_DOCS=1 writes any run's, =0 none.
// Settings: BENCH_OBJECTS (500), BENCH_RESYNC_SECONDS (10), BENCH_CONCURRENCY (16).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GROUP, VERSION, type DeployedModel, type Endpoint } from '../../src/api/types.js';
import { startControlPlane, type ControlPlane } from '../cluster/controlPlane.js';
import { ROOT } from '../helpers/local.js';
import { measuredOn, writeBlock } from './docsBlock.js';
import { median } from './payloads.js';
import { describeRuntime, shippedRuntime } from './runtime.js';
import { applyCrds, clients, setAvailable, startClusterGateway, startController, waitFor, type Clients, type ClusterProcess } from '../helpers/cluster.js';

const DEFAULTS = { objects: 500, resync: 10, concurrency: 16 };
const N = Number(process.env.BENCH_OBJECTS ?? DEFAULTS.objects);
const RESYNC = Number(process.env.BENCH_RESYNC_SECONDS ?? DEFAULTS.resync);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? DEFAULTS.concurrency);
const RUNTIME = shippedRuntime(ROOT);
const NS = 'bench';
const log = (msg: string): void => void process.stderr.write(`${msg}\n`);

async function pool<T>(items: T[], fn: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < items.length) await fn(items[next++]);
  }));
}

/** apiserver_request_total summed by "VERB resource[/subresource]". */
function apiserverRequests(cp: ControlPlane): Promise<Map<string, number>> {
  return new Promise((resolve, reject) => {
    const req = request(`${cp.server}/metrics`, { headers: { authorization: `Bearer ${cp.adminToken}` }, ca: readFileSync(cp.caFile) }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        const counts = new Map<string, number>();
        for (const m of text.matchAll(/^apiserver_request_total\{([^}]*)\} (\S+)$/gm)) {
          const labels = Object.fromEntries([...m[1].matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
          const key = `${labels.verb} ${labels.resource}${labels.subresource ? `/${labels.subresource}` : ''}`;
          counts.set(key, (counts.get(key) ?? 0) + Number(m[2]));
        }
        resolve(counts);
      });
    });
    req.on('error', reject);
    req.end();
  });
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

function rssOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

async function reconcileCount(controller: ClusterProcess): Promise<number> {
  return [...(await controller.metrics()).matchAll(/^predictgate_reconcile_total\{[^}]*\} (\d+)/gm)].reduce((s, m) => s + Number(m[1]), 0);
}

/** Polls `check` until it holds; returns when (ms since the epoch). */
async function until(what: string, check: () => Promise<boolean>, timeoutMs = 300_000, pollMs = 100): Promise<number> {
  await waitFor(check, what, timeoutMs, pollMs);
  return Date.now();
}

async function countReady(c: Clients): Promise<{ models: number; endpoints: number }> {
  const dms = (await c.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: 'deployedmodels' })) as { items: DeployedModel[] };
  const eps = (await c.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: 'endpoints' })) as { items: Endpoint[] };
  const ready = (conds: { type: string; status: string }[] | undefined, type: string): boolean => conds?.some((x) => x.type === type && x.status === 'True') ?? false;
  return { models: dms.items.filter((d) => ready(d.status?.conditions, 'Ready')).length, endpoints: eps.items.filter((e) => ready(e.status?.conditions, 'EndpointReady')).length };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'predictgate-bench-cp-'));
  const cp = await startControlPlane({ dir, log });
  let controller: ClusterProcess | undefined;
  try {
    const c = clients(cp.kubeconfig);
    await applyCrds(cp.kubeconfig);
    await c.core.createNamespace({ body: { metadata: { name: NS } } });
    const started = new Date();
    controller = await startController([NS], { ...RUNTIME, KUBECONFIG: cp.kubeconfig, LOG_LEVEL: 'info', RESYNC_SECONDS: String(RESYNC) });
    const pid = controller.proc.child.pid!;
    const idle = rssOf(pid);
    const before = await apiserverRequests(cp);
    const reconcilesBefore = await reconcileCount(controller);

    const names = Array.from({ length: N }, (_, i) => `model-${String(i).padStart(4, '0')}`);
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
    const tDeployments = await until('every Deployment', async () => (await c.apps.listNamespacedDeployment({ namespace: NS })).items.length >= N);
    log(`controller created ${N} Deployments ${tDeployments - tApplied} ms after the last apply`);
    const tAvailStart = Date.now();
    await pool(names, (name) => setAvailable(c, NS, name, 1));
    const tAvailEnd = Date.now();
    let last = { models: 0, endpoints: 0 };
    const tReady = await until('all Ready and EndpointReady', async () => {
      last = await countReady(c);
      return last.models === N && last.endpoints === N;
    }, 120_000).catch(async (err: Error) => {
      const dms = (await c.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: 'deployedmodels' })) as { items: DeployedModel[] };
      const stuck = dms.items.filter((d) => !d.status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'True')).slice(0, 3);
      throw new Error(`${err.message}: ${JSON.stringify(last)} ready; e.g. ${JSON.stringify(stuck.map((d) => ({ name: d.metadata.name, status: d.status })))}`);
    });
    const converged = await apiserverRequests(cp);
    const reconcilesAtReady = await reconcileCount(controller);
    const peak = rssOf(pid);

    // Steady state: after one period to settle (Events are sent after the status that raised them),
    // two resync periods with nothing changing.
    await new Promise((r) => setTimeout(r, RESYNC * 1000));
    const steadyBefore = await apiserverRequests(cp);
    const reconcilesSteadyBefore = await reconcileCount(controller);
    await new Promise((r) => setTimeout(r, (2 * RESYNC + 1) * 1000)); // a fixed window by design: resyncs are timer-driven
    const steady = controllerRequests(delta(await apiserverRequests(cp), steadyBefore));
    const steadyReconciles = (await reconcileCount(controller)) - reconcilesSteadyBefore;
    const final = rssOf(pid);

    // How fast a change reaches a cluster gateway's routing table: a new Endpoint (404 until the
    // gateway knows it; then 503, since the model Service does not resolve here) and its deletion.
    const gateway = await startClusterGateway([NS], { KUBECONFIG: cp.kubeconfig });
    await until('the gateway to be ready', async () => (await fetch(`http://127.0.0.1:${gateway.port}/readyz`)).status === 200, 30_000, 20);
    const url = `http://127.0.0.1:${gateway.port}/v1/projects/${NS}/locations/x/endpoints/probe:predict`;
    const status = async (): Promise<number> => (await fetch(url, { method: 'POST', body: '{"instances":[1]}', headers: { 'content-type': 'application/json' } })).status;
    const routed: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t = Date.now();
      await c.custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: 'endpoints', body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'Endpoint', metadata: { name: 'probe' }, spec: { destinations: [{ serviceRef: { name: names[0] } }] } } });
      await until('the gateway to route the new Endpoint', async () => (await status()) !== 404, 30_000, 5);
      routed.push(Date.now() - t);
      await c.custom.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: 'endpoints', name: 'probe' });
      await until('the gateway to drop it', async () => (await status()) === 404, 30_000, 5);
    }
    await gateway.stop();
    const heap = (await controller.metrics()).split('\n').filter((l) => /^predictgate_controller_nodejs_(heap_size_(used|total)_bytes|external_memory_bytes) /.test(l));
    log(heap.join('\n'));

    const build = controllerRequests(delta(converged, before));
    const reconciles = reconcilesAtReady - reconcilesBefore;
    const leaseWrites = [...build.byKind].filter(([k]) => k.endsWith(' leases')).reduce((s, [, n]) => s + n, 0);
    const eventWrites = [...build.byKind].filter(([k]) => k.endsWith(' events')).reduce((s, [, n]) => s + n, 0);
    const objectWrites = build.writes - leaseWrites - eventWrites;
    const mb = (b: number): string => `${(b / 1048576).toFixed(0)} MB`;
    const rows: [string, string][] = [
      ['objects', `${N} DeployedModels + ${N} Endpoints`],
      ['Deployments created after the last apply', `${((tDeployments - tApplied) / 1000).toFixed(1)} s`],
      ['all Ready + EndpointReady after the last Deployment became available', `${((tReady - tAvailEnd) / 1000).toFixed(1)} s (goal < 30 s)`],
      ['... after the first Deployment became available', `${((tReady - tAvailStart) / 1000).toFixed(1)} s`],
      ['reconciles (both kinds) until converged', `${reconciles}`],
      ['reconciles per second (apply to converged)', `${(reconciles / ((tReady - t0) / 1000)).toFixed(0)}`],
      ['API requests per reconcile (reads + writes)', `${((build.reads + build.writes) / reconciles).toFixed(2)}`],
      ['API writes per object (Deployment, Service, status; excl. Events, Lease)', `${(objectWrites / (2 * N)).toFixed(2)} (goal <= 3)`],
      ['... per DeployedModel / per Endpoint', `${(([...build.byKind].filter(([k]) => /deployments|services|deployedmodels\/status|horizontal/.test(k)).reduce((s, [, n]) => s + n, 0)) / N).toFixed(2)} / ${(([...build.byKind].filter(([k]) => k.endsWith('endpoints/status')).reduce((s, [, n]) => s + n, 0)) / N).toFixed(2)}`],
      ['Events written', `${eventWrites}`],
      [`steady state: writes in ${2 * RESYNC + 1} s (${steadyReconciles} resync reconciles), excl. Lease renewals`, `${steady.writes - [...steady.byKind].filter(([k]) => k.endsWith(' leases')).reduce((s, [, n]) => s + n, 0)} (goal 0)`],
      ['new Endpoint applied to routed by the cluster gateway (median of 5, max)', `${median(routed)} ms, ${Math.max(...routed)} ms`],
      ['controller RSS: idle / peak / after', `${mb(idle.rss)} / ${mb(peak.peak)} / ${mb(final.rss)} (goal < 200 MB)`],
    ];
    const table = [
      `Measured ${measuredOn(ROOT, started)}; the controller with ${describeRuntime(RUNTIME)}.`,
      '',
      '| measure | value |',
      '| --- | --- |',
      ...rows.map(([k, v]) => `| ${k} | ${v} |`),
      '',
      `Writes by kind, as the apiserver counted them: ${[...build.byKind].map(([k, n]) => `${k}=${n}`).join(', ')}`,
    ].join('\n');
    process.stdout.write(`\nsteady-state writes: ${[...steady.byKind].map(([k, n]) => `${k}=${n}`).join(', ') || 'none'}\n\n${table}\n`);
    const write = process.env.BENCH_WRITE_DOCS;
    const isDefault = N === DEFAULTS.objects && RESYNC === DEFAULTS.resync && CONCURRENCY === DEFAULTS.concurrency;
    if (write === '1' || (write !== '0' && isDefault)) log(`table written to ${writeBlock(ROOT, 'controller-bench', table)}`);
    else log(`docs/performance.md left as it is: ${write === '0' ? 'BENCH_WRITE_DOCS=0' : 'not a default run (BENCH_WRITE_DOCS=1 writes it anyway)'}`);
  } finally {
    await controller?.stop();
    await cp.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
