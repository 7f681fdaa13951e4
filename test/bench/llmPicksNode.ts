// `npm run bench:llm-node`: load-aware picks against least-request on the real test node, the
// picks part of bench:llm (llmPicks.ts: the same plan, cells, figures and goal) with pods for
// processes. Starts a node cluster of its own (the image built and imported), installs the chart
// with one gateway replica (autoscaling off, PREDICT_AUTH none: the calls carry no token) and a
// DeployedModel of N tiny-llm pods, then runs each mode's cells against the gateway pod's own
// address, switching modes by `helm upgrade --set gateway.loadScrapeIntervalMs=...` (a rolled
// gateway pod; the model pods stay the same throughout). The modes' cells go A B B A A B, so each
// round has one cell per mode and a switch costs one roll. The busy replica is the model pod listed
// first in its EndpointSlice; the load generator calls it at its pod address, behind the gateway's
// back. Prints the table and, on a run with the defaults, writes it into docs/performance.md
// (generative-picks-node markers; BENCH_WRITE_DOCS=1 writes any run's, =0 none). The cluster is torn
// down at the end, on failure too. Settings: llmPicks.ts's BENCH_LLM_PICK_* and BENCH_LOAD_CPU.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { ensureBinaries } from '../cluster/binaries.js';
import { startNodeCluster, stopLeftoverNode, type NodeCluster } from '../cluster/node.js';
import { NodeShell, pods, settled } from '../helpers/rollout.js';
import { waitFor } from '../helpers/cluster.js';
import { percentile } from '../helpers/load.js';
import { measuredOn, writeBlock } from './docsBlock.js';
import { PICK_SETTINGS, describeCell, figureNotes, picksGoal, pool, readPlan, render, runCell, untilEveryReplicaCalled, type Cell, type Mode, type PickTarget, type Plan } from './llmPicks.js';
import { allDefault, copyLoadGenerator, f, loadAverage, log, readSetting, ROOT, sampleDocs, settingsSkipReason, type SettingsTable } from './llmShared.js';

const RELEASE_NS = 'predictgate-system';
const NS = 'default';
const MODEL = 'tiny-llm-picks';
const GATEWAY_SELECTOR = 'app.kubernetes.io/component=gateway';
const MODEL_SELECTOR = `prediction.predictgate.dev/deployed-model=${MODEL}`;
/** The settings of this bench besides llmPicks.ts's. */
const NODE_SETTINGS = {
  BENCH_LOAD_CPU: { def: 0, help: 'The CPU of the load generator.' },
} satisfies SettingsTable;
/** How long a new gateway pod gets to send a call to every replica. */
const ROTATION_MS = 120_000;

/** The DeployedModel of `replicas` tiny-llm pods (the sample's, renamed, with the plan's pacing) and its Endpoint. */
function manifest(p: Plan): string {
  const docs = sampleDocs(MODEL, { TINY_LLM_MAX_RUNNING: String(p.maxRunning), TINY_LLM_TOKEN_INTERVAL_MS: String(p.intervalMs) });
  for (const d of docs) if (d.kind === 'DeployedModel') d.spec.dedicatedResources = { minReplicaCount: p.replicas, maxReplicaCount: p.replicas };
  return docs.map((d) => stringify(d)).join('---\n');
}

const install = (scrapeMs: number): string =>
  `helm install predictgate charts/predictgate -n ${RELEASE_NS} --create-namespace --set gateway.autoscaling.enabled=false --set gateway.replicas=1 --set gateway.auth.mode=none --set gateway.loadScrapeIntervalMs=${scrapeMs} --wait --timeout 5m`;
const upgrade = (scrapeMs: number): string =>
  `helm upgrade predictgate charts/predictgate -n ${RELEASE_NS} --reuse-values --set gateway.loadScrapeIntervalMs=${scrapeMs} --wait --timeout 5m`;

/** The model pods' addresses in the order of their EndpointSlice (the first is the busy one). */
async function modelAddresses(shell: NodeShell, want: number): Promise<string[]> {
  return waitFor(async () => {
    const text = await shell.ok(`kubectl get endpointslices -n ${NS} -l kubernetes.io/service-name=${MODEL} -o json`);
    const slices = (JSON.parse(text) as { items: { endpoints?: { addresses: string[]; conditions?: { ready?: boolean } }[]; ports?: { port: number }[] }[] }).items;
    const port = slices[0]?.ports?.[0]?.port;
    const addresses = slices.flatMap((s) => (s.endpoints ?? []).filter((e) => e.conditions?.ready === true).flatMap((e) => e.addresses));
    return addresses.length === want && port ? addresses.map((a) => `http://${a}:${port}`) : undefined;
  }, `${want} ready endpoints of ${MODEL}`, 240_000, 500);
}

/** The one ready gateway pod that is not terminating, as a target of `mode`; it is gone (a roll or a crash mid-cell fails the run) once it is terminating or deleted. */
async function gatewayTarget(shell: NodeShell, mode: Mode, replicas: string[]): Promise<PickTarget> {
  const [pod] = await settled(shell, RELEASE_NS, GATEWAY_SELECTOR, 1, 'one ready gateway pod');
  const name = pod.metadata!.name!;
  const base = `http://${pod.status!.podIP!}:8080`;
  return {
    mode,
    chatUrl: `${base}/v1/projects/${NS}/locations/us-central1/endpoints/${MODEL}/chat/completions`,
    metricsUrl: `${base}/metrics`,
    replicas: replicas.map((r) => ({ chatUrl: `${r}/v1/chat/completions`, metricsUrl: `${r}/metrics` })),
    check: async () => {
      const live = (await pods(shell, RELEASE_NS, GATEWAY_SELECTOR)).some((x) => x.metadata!.name === name && x.metadata!.deletionTimestamp === undefined);
      if (!live) throw new Error(`the ${mode} gateway pod ${name} is gone`);
    },
  };
}

async function main(): Promise<void> {
  const started = new Date();
  const t0 = Date.now();
  const p = readPlan();
  const loadCpu = readSetting(NODE_SETTINGS, 'BENCH_LOAD_CPU');
  const helm = ensureBinaries(log).helm;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'predictgate-bench-llm-node-'));
  const logDir = path.join(dir, 'logs');
  fs.mkdirSync(logDir);
  copyLoadGenerator(dir);
  let node: NodeCluster | undefined;
  let shell: NodeShell | undefined;
  const interrupted = (sig: NodeJS.Signals): void => {
    log(`${sig}: stopping the node cluster`);
    void (node ? node.stop() : stopLeftoverNode(log)).catch((err: Error) => log(err.message)).finally(() => {
      fs.rmSync(dir, { recursive: true, force: true });
      process.exit(130);
    });
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  try {
    node = await startNodeCluster({ dir: path.join(dir, 'node'), log });
    shell = new NodeShell(node.kubeconfig, helm);
    const scrape: Record<Mode, number> = { 'load-aware': p.scrapeMs, 'least-request': 0 };
    log(`node picks: installing the chart (load-aware first) and ${p.replicas} tiny-llm pods`);
    await shell.ok(install(scrape['load-aware']));
    await shell.ok('kubectl apply -f -', manifest(p));
    await shell.ok(`kubectl wait -n ${NS} --for=condition=EndpointReady endpoints.prediction.predictgate.dev/${MODEL} --timeout=5m`);
    await settled(shell, NS, MODEL_SELECTOR, p.replicas, `${p.replicas} ready pods of ${MODEL}`);
    const replicas = await modelAddresses(shell, p.replicas);
    log(`node picks: model pods ${replicas.join(', ')}; the busy one ${replicas[0]}; ready in ${f((Date.now() - t0) / 1000, 0)} s`);
    const loads = { start: loadAverage(), end: '' };
    const order: Mode[] = [];
    for (let round = 1; round <= p.rounds; round++) order.push(...((round % 2 === 1 ? ['load-aware', 'least-request'] : ['least-request', 'load-aware']) as Mode[]));
    const cells: Cell[] = [];
    let current: Mode = 'load-aware';
    let target = await gatewayTarget(shell, current, replicas);
    await untilEveryReplicaCalled(target, ROTATION_MS);
    const switches: number[] = [];
    for (const [i, mode] of order.entries()) {
      if (mode !== current) {
        const s0 = Date.now();
        await shell.ok(upgrade(scrape[mode]));
        await settled(shell, RELEASE_NS, GATEWAY_SELECTOR, 1, `the ${mode} gateway pod alone`);
        current = mode;
        target = await gatewayTarget(shell, mode, replicas);
        await untilEveryReplicaCalled(target, ROTATION_MS);
        switches.push((Date.now() - s0) / 1000);
        log(`node picks: switched to ${mode} in ${f(switches[switches.length - 1], 1)} s`);
      }
      const cell = await runCell(target, Math.floor(i / 2) + 1, p, { tmp: dir, logDir, loadCpu });
      cells.push(cell);
      log(describeCell(cell));
    }
    loads.end = loadAverage();
    const la = pool(cells, 'load-aware');
    const lr = pool(cells, 'least-request');
    const goal = picksGoal(la, lr);
    const runS = (Date.now() - t0) / 1000;
    const header = `Measured ${measuredOn(ROOT, started)}, on the test node (a real kubelet, containerd and kube-proxy on this machine); load average ${loads.start} at the start, ${loads.end} at the end. ` +
      `The chart with one gateway pod (PREDICT_AUTH none), the modes switched by \`helm upgrade\` (${switches.length} switch${switches.length === 1 ? '' : 'es'}, ${switches.map((x) => f(x, 0)).join(', ')} s ${switches.length === 1 ? '' : 'each, '}not measured); the calls to the gateway pod's address; load generator on CPU ${loadCpu}. Run time ${f(runS / 60, 1)} min.`;
    const text = render(header, 'as pods, shared by both modes', p, la, lr, goal, figureNotes(la, lr));
    process.stdout.write(`## predictgate bench:llm-node: load-aware picks against least-request on the test node\n\n${text}\n`);
    // The gateway runs the image's Node here, whatever Node runs the bench: only the settings decide.
    const why = settingsSkipReason(allDefault(PICK_SETTINGS) && allDefault(NODE_SETTINGS));
    if (why === null) log(`table written to ${writeBlock(ROOT, 'generative-picks-node', text)}`);
    else log(`docs/performance.md left as it is: ${why}`);
    log(`node picks: TTFT p99 load-aware ${f(percentile(la.ttft, 0.99), 1)} ms, least-request ${f(percentile(lr.ttft, 0.99), 1)} ms; goal ${goal.met ? 'met' : 'missed'}`);
    if (process.env.BENCH_STRICT === '1' && !goal.met) process.exitCode = 1;
  } finally {
    shell?.close();
    try {
      await node?.stop();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
}

main().catch((err: Error) => {
  process.stderr.write(`${err.stack ?? err.message}\n`);
  process.exit(1);
});
