// Replicas that follow the calls, on the test node: the chart installed with a short autoscaler
// stable window (10 s, so its panic window is 1 s), two DeployedModels that scale on calls in a
// namespace of their own (the half-plus-two scale-to-zero sample, and the bundled tiny-llm made slow
// enough that each call is in flight for ~0.75 s, targetConcurrency 2, 0 to 8 replicas), the
// watches that record what happened (the Deployment's spec.replicas and ready replicas, each pod's
// scheduling, start and readiness, the EndpointSlices' word on each address, all on the driver's
// clock), and the scenarios run on them with every call counted: a cold start split into its phases,
// a burst at zero, calls arriving while a model wakes, a closed-loop load held at the maximum, a step of calls in flight, the scale-down
// with calls trickling in, the controller leader's loss while the load holds the replicas, and the
// bench's cycles of zero -> N -> zero under a ramp with the replica-seconds they used.
// test/node/autoscale.test.ts asserts on them; `npm run bench:autoscale` (test/bench/autoscale.ts)
// measures with them.
import { Watch, type V1Deployment, type V1EndpointSlice, type V1Pod } from '@kubernetes/client-node';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { inNamespace, waitFor } from './cluster.js';
import { ROOT } from './local.js';
import { LoadDriver, reportOf, type CallRecord, type LoadReport } from './load.js';
import { ReplicaSeries, type ReplicaPoint } from './replicaSeries.js';
import { INSTALL, RELEASE_NS, imageTag, isReady, killLeader, origin, pods, predictorToken, settled, type NodeShell } from './rollout.js';
import { SliceReadiness } from './sliceReadiness.js';

export const NS = 'predictgate-autoscale';
/** The half-plus-two sample, 0 to 3 replicas, targetConcurrency 1: cold starts and bursts at zero. */
export const ZERO_MODEL = 'scale-to-zero';
/** tiny-llm, 0 to MAX_REPLICAS, targetConcurrency TARGET: the loads that hold calls in flight. */
export const LLM_MODEL = 'llm-scaled';
export const CALLER = 'autoscale-caller';
export const STABLE_WINDOW_SECONDS = 10;
/** A tenth of the stable window (decide.ts). */
export const PANIC_WINDOW_SECONDS = STABLE_WINDOW_SECONDS / 10;
export const INTERVAL_MS = 1000;
export const TARGET = 2;
export const MAX_REPLICAS = 8;
/** tiny-llm's pause per token and the tokens each call asks for: ~0.75 s per call. */
export const TOKEN_INTERVAL_MS = 50;
export const MAX_TOKENS = 15;
const MODEL_LABEL = 'prediction.predictgate.dev/deployed-model';
const GATEWAY_SELECTOR = 'app.kubernetes.io/component=gateway';

export const INSTALL_AUTOSCALE = `${INSTALL} --set controller.autoscaleStableWindowSeconds=${STABLE_WINDOW_SECONDS} --set controller.autoscaleIntervalMs=${INTERVAL_MS}`;

export interface Periods {
  /** scaleToZeroSpec.idleScaledownPeriod of each model, in seconds (minScaleupPeriod is 1 s). */
  zeroIdleSeconds: number;
  llmIdleSeconds: number;
  /** Generations a tiny-llm replica makes at once (TINY_LLM_MAX_RUNNING; more wait in its queue); default 64. */
  maxRunning?: number;
  /** Also CPU_MODEL: the same tiny-llm scaled by an HPA on CPU, for a bench to compare. */
  cpuModel?: boolean;
}

/** tiny-llm like LLM_MODEL, 1 to MAX_REPLICAS on CPU (an HPA at Vertex AI's default 60 % of 50m): a bench's comparison. */
export const CPU_MODEL = 'llm-cpu';
/** The CPU the CPU_MODEL's container requests, and the utilisation its HPA aims at. */
export const CPU_MODEL_REQUEST = '50m';
export const CPU_MODEL_TARGET_PERCENT = 60;

/** A tiny-llm DeployedModel with `dedicatedResources`, and its Endpoint. */
function llmModel(name: string, maxRunning: number, dedicatedResources: string): string {
  return `apiVersion: prediction.predictgate.dev/v1
kind: DeployedModel
metadata: {name: ${name}, namespace: ${NS}}
spec:
  modelSpec:
    framework: custom
    modelDisplayName: tiny-llm
    containerSpec:
      image: predictgate:${imageTag()}
      command: ["predictgate", "model", "tiny-llm"]
      predictRoute: /v1/chat/completions
      healthRoute: /health
      env:
        - {name: TINY_LLM_TOKEN_INTERVAL_MS, value: "${TOKEN_INTERVAL_MS}"}
        - {name: TINY_LLM_MAX_RUNNING, value: "${maxRunning}"}
    openai: {basePath: /v1}
  dedicatedResources:
${dedicatedResources}
  serving: {timeoutSeconds: 60}
---
apiVersion: prediction.predictgate.dev/v1
kind: Endpoint
metadata: {name: ${name}, namespace: ${NS}}
spec:
  destinations:
    - serviceRef: {kind: DeployedModel, name: ${name}, namespace: ${NS}}
      trafficPercentage: 100
`;
}

/** The namespace, the scale-to-zero sample moved into it with its periods shortened, and the tiny-llm model that scales on calls. */
export function manifests(p: Periods): string {
  const sample = inNamespace(readFileSync(join(ROOT, 'crds/samples/scale-to-zero.yaml'), 'utf8'), NS)
    .replace(/idleScaledownPeriod: 30s/, `idleScaledownPeriod: ${p.zeroIdleSeconds}s`).replace(/minScaleupPeriod: 30s/, 'minScaleupPeriod: 1s');
  const maxRunning = p.maxRunning ?? 64;
  const llm = llmModel(LLM_MODEL, maxRunning, `    minReplicaCount: 0
    maxReplicaCount: ${MAX_REPLICAS}
    autoscaling: {targetConcurrency: ${TARGET}}
    scaleToZeroSpec: {idleScaledownPeriod: ${p.llmIdleSeconds}s, minScaleupPeriod: 1s}`);
  const cpu = p.cpuModel ? [llmModel(CPU_MODEL, maxRunning, `    resources:
      requests: {cpu: ${CPU_MODEL_REQUEST}}
    minReplicaCount: 1
    maxReplicaCount: ${MAX_REPLICAS}
    autoscaling: {targetCPUUtilizationPercentage: ${CPU_MODEL_TARGET_PERCENT}}`)] : [];
  return [`apiVersion: v1\nkind: Namespace\nmetadata: {name: ${NS}}\n`, sample, llm, ...cpu].join('---\n');
}

export const PREDICT_PATH = `/v1/projects/${NS}/locations/us-central1/endpoints/${ZERO_MODEL}:predict`;
export const PREDICT_BODY = '{"instances":[1.0,2.0,5.0]}';
export const chatPath = (model: string): string => `/v1/projects/${NS}/locations/us-central1/endpoints/${model}/chat/completions`;
export const CHAT_PATH = chatPath(LLM_MODEL);
export const CHAT_BODY = JSON.stringify({ model: 'tiny-llm', messages: [{ role: 'user', content: 'count the replicas' }], max_tokens: MAX_TOKENS });

/** A watch that is opened again when the apiserver ends it, until stopped; `onEvent` gets every event. */
class LastingWatch {
  private abort: AbortController | undefined;
  private stopped = false;

  constructor(private readonly shell: NodeShell, private readonly path: string, private readonly query: Record<string, string>, private readonly onEvent: (phase: string, obj: unknown) => void) {}

  async start(): Promise<void> {
    if (this.stopped) return;
    this.abort = await new Watch(this.shell.kube.kc).watch(this.path, this.query, (phase: string, obj: unknown) => this.onEvent(phase, obj), () => {
      if (!this.stopped) void this.start().catch((err: Error) => process.stderr.write(`[autoscale] watch ${this.path} not reopened: ${err.message}\n`));
    });
  }

  stop(): void {
    this.stopped = true;
    this.abort?.abort();
  }
}

/** Every change of a model Deployment's spec.replicas (a scale write) and ready replicas, as a watch sees it. */
export class ReplicaLog extends ReplicaSeries {
  private readonly watch: LastingWatch;

  constructor(shell: NodeShell, readonly model: string) {
    super(model);
    this.watch = new LastingWatch(shell, `/apis/apps/v1/namespaces/${NS}/deployments`, { fieldSelector: `metadata.name=${model}` }, (phase, obj) => {
      if (phase === 'DELETED') return;
      const d = obj as V1Deployment;
      const spec = d.spec?.replicas ?? 1;
      const ready = d.status?.readyReplicas ?? 0;
      const last = this.points.at(-1);
      if (!last || last.spec !== spec || last.ready !== ready) this.points.push({ at: performance.now(), spec, ready });
    });
  }

  start(): Promise<void> {
    return this.watch.start();
  }

  stop(): void {
    this.watch.stop();
  }

  /** The first point after `t0` whose spec.replicas satisfies `pred`. */
  firstSpec(t0: number, pred: (spec: number) => boolean): ReplicaPoint | undefined {
    return this.points.find((p) => p.at >= t0 && pred(p.spec));
  }
}

/** One model pod's life as the watch saw it (performance.now()). */
export interface PodTimes {
  name: string;
  created: number;
  scheduled?: number;
  running?: number;
  ready?: number;
  ip?: string;
}

/** The pods of the namespace: when each was first seen, scheduled (spec.nodeName), its container running and the pod Ready. */
export class PodLog {
  readonly pods = new Map<string, PodTimes>();
  private readonly watch: LastingWatch;

  constructor(shell: NodeShell) {
    this.watch = new LastingWatch(shell, `/api/v1/namespaces/${NS}/pods`, {}, (phase, obj) => {
      if (phase === 'DELETED') return;
      const p = obj as V1Pod;
      const name = p.metadata?.name ?? '';
      const now = performance.now();
      let t = this.pods.get(name);
      if (!t) this.pods.set(name, (t = { name, created: now }));
      if (t.scheduled === undefined && p.spec?.nodeName) t.scheduled = now;
      if (t.running === undefined && p.status?.containerStatuses?.[0]?.state?.running) t.running = now;
      if (t.ready === undefined && isReady(p)) t.ready = now;
      if (p.status?.podIP) t.ip = p.status.podIP;
    });
  }

  start(): Promise<void> {
    return this.watch.start();
  }

  stop(): void {
    this.watch.stop();
  }

  /** The first pod of `model` first seen after `t0` (pod names begin with the Deployment's). */
  firstAfter(model: string, t0: number): PodTimes | undefined {
    return [...this.pods.values()].filter((p) => p.name.startsWith(`${model}-`) && p.created >= t0).sort((a, b) => a.created - b.created)[0];
  }
}

/** When each address of the namespace's EndpointSlices turned ready. */
export class SliceLog {
  private readonly readiness = new SliceReadiness();
  private readonly watch: LastingWatch;

  constructor(shell: NodeShell) {
    this.watch = new LastingWatch(shell, `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`, {}, (phase, obj) => this.readiness.apply(phase, obj as V1EndpointSlice));
  }

  start(): Promise<void> {
    return this.watch.start();
  }

  stop(): void {
    this.watch.stop();
  }

  /** The first time after `t0` the address turned ready. */
  turnedReady(address: string, t0: number): number | undefined {
    return this.readiness.turned(address, true, t0);
  }
}

/** The installed release and models, the caller's headers, and the watches (started by installAutoscale). */
export interface Rig {
  shell: NodeShell;
  headers: Record<string, string>;
  replicas: Record<string, ReplicaLog>;
  pods: PodLog;
  slices: SliceLog;
}

/** Installs the chart with the short windows and the two models, and starts the watches. */
export async function installAutoscale(shell: NodeShell, periods: Periods): Promise<Rig> {
  await shell.ok(INSTALL_AUTOSCALE);
  await shell.ok('kubectl apply -f -', manifests(periods));
  const token = await predictorToken(shell, NS, CALLER, '3h');
  await shell.ok(`kubectl wait -n ${NS} --for=condition=Ready deployedmodels.prediction.predictgate.dev --all --timeout=3m`);
  // The gateway's HPA (minimum 2) takes over its replica count just after the install.
  await settled(shell, RELEASE_NS, GATEWAY_SELECTOR, 2, 'two ready gateway pods');
  const models = [ZERO_MODEL, LLM_MODEL, ...(periods.cpuModel ? [CPU_MODEL] : [])];
  await waitFor(async () => ((await shell.kube.apps.listNamespacedDeployment({ namespace: NS })).items.length === models.length ? true : undefined), 'the Deployments of the models', 60_000, 250);
  const rig: Rig = {
    shell,
    headers: { authorization: `Bearer ${token}` },
    replicas: Object.fromEntries(models.map((m) => [m, new ReplicaLog(shell, m)])),
    pods: new PodLog(shell),
    slices: new SliceLog(shell),
  };
  await Promise.all([...Object.values(rig.replicas).map((r) => r.start()), rig.pods.start(), rig.slices.start()]);
  await waitFor(async () => (Object.values(rig.replicas).every((r) => r.last) ? true : undefined), 'the first event of each Deployment watch', 30_000, 50);
  return rig;
}

export function stopWatches(rig: Rig): void {
  for (const r of Object.values(rig.replicas)) r.stop();
  rig.pods.stop();
  rig.slices.stop();
}

const modelPods = (rig: Rig, model: string): Promise<V1Pod[]> => pods(rig.shell, NS, `${MODEL_LABEL}=${model}`);

/** Waits until the model's Deployment asks for zero replicas and its pods are gone. */
export async function atZero(rig: Rig, model: string, timeoutMs = 180_000): Promise<void> {
  await rig.replicas[model].until('spec.replicas 0', (p) => p.spec === 0, timeoutMs);
  await waitFor(async () => ((await modelPods(rig, model)).length === 0 ? true : undefined), `the pods of ${model} to go`, 120_000, 250);
}

/** Waits until the model's Deployment asks for `n` replicas and exactly `n` pods are ready, none terminating. */
export async function atReplicas(rig: Rig, model: string, n: number, timeoutMs = 180_000): Promise<void> {
  await rig.replicas[model].until(`spec.replicas ${n}`, (p) => p.spec === n, timeoutMs);
  await settled(rig.shell, NS, `${MODEL_LABEL}=${model}`, n, `${n} ready pods of ${model}`, [], timeoutMs);
}

/** A closed-loop load of `concurrency` chat calls to a tiny-llm model (or predict calls to the half-plus-two one). */
export function driver(rig: Rig, concurrency: number, model = LLM_MODEL, maxCalls?: number): LoadDriver {
  const [path, body] = model === ZERO_MODEL ? [PREDICT_PATH, PREDICT_BODY] : [chatPath(model), CHAT_BODY];
  return new LoadDriver({ origin: origin(), path, body, concurrency, headers: rig.headers, maxCalls, timeoutMs: 90_000 });
}

/** A cold start, phase by phase (ms), and the first call's answer. */
export interface ColdStart {
  status: number;
  /** First call sent -> the Deployment's spec.replicas written 0 -> 1. */
  detection: number;
  /** -> the pod has a node. */
  scheduling: number;
  /** -> its container running. */
  containerStart: number;
  /** -> its address ready in the EndpointSlice. */
  readiness: number;
  /** Endpoint ready -> the first answer. */
  gateway: number;
  total: number;
  /** Pod Ready (its condition) -> endpoint ready, for reference. */
  podReadyToEndpoint: number;
}

/** The model at zero, one call sent: its answer and the phases of the cold start it waited for. */
export async function coldStart(rig: Rig, model = ZERO_MODEL): Promise<ColdStart> {
  await atZero(rig, model);
  const d = driver(rig, 1, model, 1);
  const t0 = d.now();
  d.start();
  const report = await d.finished();
  const call = report.calls[0];
  const log = rig.replicas[model];
  const woke = await waitFor(async () => log.firstSpec(t0, (n) => n >= 1), `${model}: the scale write from zero`, 30_000, 50);
  const pod = await waitFor(async () => {
    const p = rig.pods.firstAfter(model, t0);
    return p?.scheduled !== undefined && p.running !== undefined && p.ready !== undefined && p.ip ? p : undefined;
  }, `${model}: the woken pod scheduled, running and Ready`, 60_000, 50);
  const endpoint = await waitFor(async () => rig.slices.turnedReady(pod.ip!, t0), `${model}: the woken pod's address ready in its EndpointSlice`, 60_000, 50);
  return {
    status: call.status,
    detection: woke.at - t0,
    scheduling: pod.scheduled! - woke.at,
    containerStart: pod.running! - pod.scheduled!,
    readiness: endpoint - pod.running!,
    gateway: call.end - endpoint,
    total: call.end - t0,
    podReadyToEndpoint: endpoint - pod.ready!,
  };
}

/** `n` calls at once to the model at zero, each on its own connection: every one counted. */
export async function burstAtZero(rig: Rig, n: number, model = ZERO_MODEL): Promise<LoadReport> {
  await atZero(rig, model);
  const d = driver(rig, n, model, n);
  d.start();
  return d.finished();
}

export interface HoldResult {
  report: LoadReport;
  /** When the Deployment first asked for, and had ready, MAX_REPLICAS, in s after the load began. */
  maxWrittenAfter: number;
  maxReadyAfter: number;
  /** The spec.replicas written from the load's start to its end, in order. */
  specs: number[];
  /** Seconds the load ran at MAX_REPLICAS ready. */
  heldSeconds: number;
}

/** From zero, `inFlight` calls in flight (closed loop) until MAX_REPLICAS are ready, then for `holdSeconds` more. */
export async function holdAtMax(rig: Rig, inFlight: number, holdSeconds: number): Promise<HoldResult> {
  const log = rig.replicas[LLM_MODEL];
  // From zero: no scale-down decided before the load can cross its start.
  await atZero(rig, LLM_MODEL, 240_000);
  const d = driver(rig, inFlight);
  const t0 = d.now();
  d.start();
  let report: LoadReport;
  let written!: ReplicaPoint;
  let ready!: ReplicaPoint;
  let held = 0;
  try {
    written = await log.until(`spec.replicas ${MAX_REPLICAS}`, (p) => p.spec === MAX_REPLICAS, 120_000);
    ready = await log.until(`${MAX_REPLICAS} ready replicas`, (p) => p.ready === MAX_REPLICAS, 180_000);
    const from = d.now();
    // The hold's length is what is observed, not a wait for anything.
    await d.until(`${holdSeconds} s at ${MAX_REPLICAS} replicas`, () => d.now() - from >= holdSeconds * 1000, (holdSeconds + 60) * 1000);
    held = (d.now() - from) / 1000;
  } finally {
    report = await d.stop();
  }
  const t1 = d.now();
  return { report, maxWrittenAfter: (written.at - t0) / 1000, maxReadyAfter: (ready.at - t0) / 1000, specs: log.specsBetween(t0, t1), heldSeconds: held };
}

export interface StepResult {
  report: LoadReport;
  /** The scale writes after the step: seconds after it, and the replicas asked for. */
  writes: [number, number][];
  /** Seconds from the step to the write of MAX_REPLICAS. */
  toMax: number;
}

/** One call in flight until the model runs one replica, then a step to `to` in flight: when the writes follow. */
export async function step(rig: Rig, to: number): Promise<StepResult> {
  const log = rig.replicas[LLM_MODEL];
  const one = driver(rig, 1);
  const rest = driver(rig, to - 1);
  one.start();
  let t0 = 0;
  let max: ReplicaPoint | undefined;
  try {
    await atReplicas(rig, LLM_MODEL, 1, 240_000);
    await one.succeeded(3, 30_000, 'calls answered at one replica');
    t0 = rest.now();
    rest.start();
    max = await log.until(`spec.replicas ${MAX_REPLICAS} after the step`, (p) => p.spec === MAX_REPLICAS, 60_000);
    await log.until(`${MAX_REPLICAS} ready replicas after the step`, (p) => p.ready === MAX_REPLICAS, 180_000);
    await rest.succeeded(to * 2, 60_000, 'calls answered at the maximum');
  } finally {
    await Promise.all([one.stop(), rest.stop()]);
  }
  const report = reportOf([...one.calls, ...rest.calls], to);
  const writes = log.points.filter((p) => p.at >= t0).reduce<[number, number][]>((a, p) => (a.length && a.at(-1)![1] === p.spec ? a : [...a, [(p.at - t0) / 1000, p.spec]]), []);
  return { report, writes, toMax: (max!.at - t0) / 1000 };
}

/** A call sent every `everyMs` (open loop: each its own LoadDriver of one call, not waiting for the last), until stopped: every call counted. */
export class Trickle {
  private readonly pending: Promise<LoadReport>[] = [];
  private readonly done: CallRecord[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly rig: Rig, private readonly everyMs: number, private readonly model = LLM_MODEL) {}

  start(): void {
    const send = (): void => {
      const d = driver(this.rig, 1, this.model, 1);
      d.start();
      this.pending.push(d.finished().then((r) => {
        this.done.push(...r.calls);
        return r;
      }));
    };
    send();
    this.timer = setInterval(send, this.everyMs);
  }

  /** Calls sent so far, and those answered (or failed). */
  get sent(): number {
    return this.pending.length;
  }

  get calls(): readonly CallRecord[] {
    return this.done;
  }

  async stop(): Promise<LoadReport> {
    clearInterval(this.timer);
    await Promise.all(this.pending);
    return reportOf(this.done, 1);
  }
}

export interface WakeResult {
  /** Every call sent from the first call at zero until the woken replica had answered. */
  report: LoadReport;
  /** Calls sent after the scale write from zero and before the replica was ready in its EndpointSlice. */
  sentWhileWaking: number;
}

/**
 * The model at zero, then a call every `everyMs` (open loop) from before the wake until its replica
 * is ready and has answered: the calls that arrive while it wakes must wait for it, as the first one does.
 */
export async function wakeUnderArrivals(rig: Rig, everyMs: number, model = ZERO_MODEL): Promise<WakeResult> {
  await atZero(rig, model);
  const t0 = performance.now();
  const trickle = new Trickle(rig, everyMs, model);
  trickle.start();
  let report: LoadReport;
  let woke: ReplicaPoint | undefined;
  let endpoint: number | undefined;
  try {
    woke = await waitFor(async () => rig.replicas[model].firstSpec(t0, (n) => n >= 1), `${model}: the scale write from zero`, 60_000, 50);
    const pod = await waitFor(async () => {
      const p = rig.pods.firstAfter(model, t0);
      return p?.ip && p.ready !== undefined ? p : undefined;
    }, `${model}: the woken pod Ready`, 120_000, 50);
    endpoint = await waitFor(async () => rig.slices.turnedReady(pod.ip!, t0), `${model}: the woken pod's address ready`, 60_000, 50);
    const n = trickle.sent + 5;
    await waitFor(async () => (trickle.calls.length >= n ? true : undefined), 'five more calls answered after the wake', 60_000, 50);
  } finally {
    report = await trickle.stop();
  }
  const sentWhileWaking = report.calls.filter((c) => c.start >= woke!.at && c.start < endpoint!).length;
  return { report, sentWhileWaking };
}

export interface DownResult {
  /** The trickle's calls (and nothing else: the load had stopped). */
  report: LoadReport;
  /** The spec.replicas written from the load's end to zero. */
  specs: number[];
  /** Seconds from the load's end to the write of one replica. */
  toOne: number;
  /** Seconds from the last call's end to the write of zero, and the idle period it must not undercut. */
  lastCallToZero: number;
}

/**
 * From MAX_REPLICAS under `inFlight` calls: the load stops, a call every `trickleMs` comes in while
 * the model scales down to one replica, then the calls stop and it goes to zero.
 */
export async function scaleDown(rig: Rig, inFlight: number, trickleMs: number): Promise<DownResult> {
  const log = rig.replicas[LLM_MODEL];
  const load = driver(rig, inFlight);
  load.start();
  let loadReport: LoadReport;
  try {
    await atReplicas(rig, LLM_MODEL, MAX_REPLICAS, 240_000);
    await load.succeeded(inFlight * 2, 60_000, 'calls answered at the maximum');
  } finally {
    loadReport = await load.stop();
  }
  if (loadReport.failed) throw new Error(`the load before the scale-down lost calls: ${JSON.stringify(loadReport.failures)}`);
  const t0 = load.now();
  const trickle = new Trickle(rig, trickleMs);
  trickle.start();
  let report: LoadReport;
  let one!: ReplicaPoint;
  try {
    one = await log.until('spec.replicas 1 with calls trickling in', (p) => p.spec === 1, 180_000);
    await settled(rig.shell, NS, `${MODEL_LABEL}=${LLM_MODEL}`, 1, `one pod of ${LLM_MODEL} left`, [], 180_000);
    // A few more calls on the one replica left.
    const n = trickle.sent + 3;
    await waitFor(async () => (trickle.calls.length >= n ? true : undefined), 'three more trickled calls answered on one replica', 60_000, 100);
  } finally {
    report = await trickle.stop();
  }
  const lastEnd = report.calls.reduce((m, c) => Math.max(m, c.end), 0);
  const zero = await log.until('spec.replicas 0 after the calls stopped', (p) => p.spec === 0, 180_000);
  return { report, specs: log.specsBetween(t0, zero.at), toOne: (one.at - t0) / 1000, lastCallToZero: (zero.at - lastEnd) / 1000 };
}

export interface LeaderResult {
  report: LoadReport;
  /** The replicas the load held when the leader was killed. */
  replicas: number;
  /** spec.replicas written from before the kill to the load's end (one value: no write). */
  specs: number[];
  takeoverSeconds: number;
  byStandby: boolean;
  /** Seconds the load ran under the new leader. */
  afterTakeover: number;
}

/**
 * `inFlight` calls in flight until the model's replicas hold at `replicas`, the controller leader
 * SIGKILLed, and the load on for `afterSeconds` under the new leader (more than its stable window).
 */
export async function leaderLost(rig: Rig, inFlight: number, replicas: number, afterSeconds: number): Promise<LeaderResult> {
  const log = rig.replicas[LLM_MODEL];
  const d = driver(rig, inFlight);
  d.start();
  let report: LoadReport;
  let t0 = 0;
  let kill: Awaited<ReturnType<typeof killLeader>> | undefined;
  let after = 0;
  try {
    await atReplicas(rig, LLM_MODEL, replicas, 240_000);
    await d.succeeded(inFlight * 3, 60_000, `calls answered at ${replicas} replicas`);
    t0 = d.now();
    kill = await killLeader(rig.shell);
    // The load runs on under the new leader for longer than the stable window it must watch before any scale-down.
    await d.until(`${afterSeconds} s under the new leader`, () => d.now() - kill!.tookOverAt >= afterSeconds * 1000, (afterSeconds + 60) * 1000);
    after = (d.now() - kill.tookOverAt) / 1000;
  } finally {
    report = await d.stop();
  }
  return { report, replicas, specs: log.specsBetween(t0, d.now()), takeoverSeconds: (kill!.tookOverAt - kill!.killedAt) / 1000, byStandby: kill!.byStandby, afterTakeover: after };
}

/** The calls in flight at each step of a cycle's ramp (each held `stepSeconds`). */
export const RAMP = [2, 4, 8, 12, 16, 16, 12, 8, 4, 2];

export interface CycleResult {
  report: LoadReport;
  /** The largest spec.replicas written during the cycle. */
  peak: number;
  /** From the first call to the model back where it began (zero written; for a model with a floor, that many replicas again), s. */
  seconds: number;
  /** ∫ spec.replicas and ∫ ready replicas over that span, replica-seconds. */
  used: { spec: number; ready: number };
  /** ∫ load / target: the calls in flight the ramp held, over its steps as they ran, / TARGET; replica-seconds. */
  ideal: number;
  /** ∫ ceil(the ramp's calls in flight / target): the whole replicas the ramp asks for, replica-seconds. */
  idealWhole: number;
  /** From the first failed call's start to the last one's end, s (0: none failed). */
  failingSeconds: number;
}

/**
 * One cycle of `model`: from its resting count (zero; `floor` replicas for a model that cannot go
 * lower, such as one an HPA scales), the ramp of calls in flight (closed loop, each step held
 * `stepSeconds`), then no call until the model is back at its resting count. For a model with a
 * floor the end is the later of the ramp's end and its last return to the floor within `settleMs`
 * after the ramp (an HPA acts on metrics some seconds old, so it may still move after the load).
 */
export async function cycle(rig: Rig, stepSeconds: number, model = LLM_MODEL, floor = 0, settleMs = 0): Promise<CycleResult> {
  if (floor === 0) await atZero(rig, model, 240_000);
  else await atReplicas(rig, model, floor, 240_000);
  const log = rig.replicas[model];
  const drivers: LoadDriver[] = [];
  const stopping: Promise<LoadReport>[] = [];
  /** When each step of the ramp began, as it ran. */
  const steps: { at: number; n: number }[] = [];
  const t0 = performance.now();
  try {
    for (const n of RAMP) {
      steps.push({ at: performance.now(), n });
      while (drivers.length < n) {
        const d = driver(rig, 1, model);
        d.start();
        drivers.push(d);
      }
      // A worker that leaves sends no more calls; the call it has in flight ends on its own.
      for (const d of drivers.splice(n)) stopping.push(d.stop());
      // The ramp's shape in time: each step is held for its length, the load running meanwhile.
      await new Promise((r) => setTimeout(r, stepSeconds * 1000));
    }
  } finally {
    for (const d of drivers.splice(0)) stopping.push(d.stop());
  }
  const rampEnd = performance.now();
  const calls = (await Promise.all(stopping)).flatMap((r) => r.calls);
  let end: number;
  if (floor === 0) end = (await log.until('spec.replicas 0 after the cycle', (p) => p.spec === 0 && p.at > t0, 180_000)).at;
  else {
    // Waiting here is not counted: the span ends at the last return to the floor.
    await new Promise((r) => setTimeout(r, Math.max(0, rampEnd + settleMs - performance.now())));
    await log.until(`spec.replicas ${floor} after the cycle`, (p) => p.spec === floor, 180_000);
    const back = log.since(t0).filter((p, i, a) => p.spec === floor && (i === 0 || a[i - 1].spec !== floor)).at(-1);
    end = Math.max(rampEnd, back?.at ?? rampEnd);
  }
  const peak = Math.max(...log.since(t0).filter((p) => p.at <= end).map((p) => p.spec));
  const failed = calls.filter((c) => c.kind !== undefined);
  const held = (i: number): number => ((steps[i + 1]?.at ?? rampEnd) - steps[i].at) / 1000;
  return {
    failingSeconds: failed.length ? (Math.max(...failed.map((c) => c.end)) - Math.min(...failed.map((c) => c.start))) / 1000 : 0,
    report: reportOf(calls, Math.max(...RAMP)),
    peak,
    seconds: (end - t0) / 1000,
    used: log.integral(t0, end),
    ideal: steps.reduce((s, st, i) => s + (st.n / TARGET) * held(i), 0),
    idealWhole: steps.reduce((s, st, i) => s + Math.ceil(st.n / TARGET) * held(i), 0),
  };
}
