// Benchmark settings: reads the BENCH_* environment variables, names the targets, the payloads and the
// model kind each payload goes to (echo, graphstorm, half-plus-two), pins the load generator and the
// servers to their CPUs, says whether a second gateway runs for an A/B comparison (BENCH_COMPARE_*),
// and estimates how long a run takes. No I/O besides env.

import os from 'node:os';

/** The targets BENCH_TARGETS chooses from. */
export const TARGET_NAMES = ['direct', 'predict', 'rawPredict', 'nginx', 'bare'] as const;
/**
 * The routes of the second gateway of an A/B run, which differs from the first by the runtime settings
 * BENCH_COMPARE_NODE_OPTIONS, BENCH_COMPARE_GLIBC_TUNABLES and BENCH_COMPARE_NODE_FLAGS give it, or by
 * the checkout it runs (BENCH_COMPARE_ROOT: another worktree, built), or by checking who calls
 * (BENCH_COMPARE_AUTH=kubernetes: --auth kubernetes against a control plane the run starts).
 */
export const COMPARE_TARGETS = { predict: 'predict-b', rawPredict: 'rawPredict-b' } as const;
export type TargetName = (typeof TARGET_NAMES)[number] | (typeof COMPARE_TARGETS)[keyof typeof COMPARE_TARGETS];
/** Every target in the order of the tables (each B route right after its A route). */
export const TARGET_ORDER: readonly TargetName[] = ['direct', 'predict', 'predict-b', 'rawPredict', 'rawPredict-b', 'nginx', 'bare'];
/** The environment variables that start the second gateway of an A/B run. */
const COMPARE_VARS = ['BENCH_COMPARE_NODE_OPTIONS', 'BENCH_COMPARE_GLIBC_TUNABLES', 'BENCH_COMPARE_NODE_FLAGS', 'BENCH_COMPARE_ROOT', 'BENCH_COMPARE_AUTH'] as const;

export const PAYLOAD_NAMES = ['small', 'tensor', 'base64', 'graphstorm', 'columnar'] as const;
export type PayloadName = (typeof PAYLOAD_NAMES)[number];

/** The bundled models the payloads go to (`predictgate model <kind>`); details in models.ts. */
export const MODEL_KINDS = ['echo', 'graphstorm', 'half-plus-two'] as const;
export type ModelKind = (typeof MODEL_KINDS)[number];

/** The model each payload is sent to (directly, through each proxy and through the gateway). */
export const PAYLOAD_MODEL: Record<PayloadName, ModelKind> = {
  small: 'echo',
  tensor: 'echo',
  base64: 'echo',
  graphstorm: 'graphstorm',
  columnar: 'half-plus-two',
};

/**
 * The large payloads whose predict CPU per call has a goal (bare + 1.5 × JSON.parse); for the others
 * the same comparison is information.
 */
export const CPU_GOAL_PAYLOADS: readonly PayloadName[] = ['tensor', 'base64'];

export interface BenchConfig {
  /** Connections of the measured cells (wrk -c). */
  connections: number;
  /** Connections of the extra memory round against the gateway. */
  rssConnections: number;
  /** Seconds per measured cell. */
  durationS: number;
  /** Seconds of warm-up before each measured cell. */
  warmupS: number;
  /**
   * Rounds of every (payload, target) cell; the table shows medians over them. Five by default: a
   * single cell moves by 10-30% on this kind of shared machine (the per-round ratios of one run
   * went from 0.81 to 1.00 on one goal), and with five targets, five rounds put every target once
   * in every place of the rotated order (run.ts).
   */
  rounds: number;
  targets: TargetName[];
  payloads: PayloadName[];
  /** CPU of wrk and of this harness. */
  loadCpu: number;
  /** CPU of every proxy and model process. */
  serverCpu: number;
  /** Skip the 64-connection memory round. */
  skipRssRound: boolean;
  /** Exit with status 1 when a goal fails. */
  strict: boolean;
  /** A second gateway runs with other runtime settings (targets predict-b, rawPredict-b). */
  compare: boolean;
}

/** The defaults of every measuring setting: a run with these (and the shipped runtime) updates docs/performance.md. */
export const DEFAULTS = { connections: 32, rssConnections: 64, durationS: 5, warmupS: 1, rounds: 5 } as const;

function intEnv(name: string, fallback: number, min: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min) throw new Error(`${name}=${raw}: expected a number >= ${min}`);
  return n;
}

function listEnv<T extends string>(name: string, all: readonly T[]): T[] {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return [...all];
  const wanted = raw.split(',').map((s) => s.trim()).filter((s) => s !== '');
  for (const w of wanted) {
    if (!(all as readonly string[]).includes(w)) {
      throw new Error(`${name}: unknown name "${w}", expected some of ${all.join(',')}`);
    }
  }
  // Keep the canonical order whatever order the user typed.
  return all.filter((a) => wanted.includes(a));
}

export function readConfig(): BenchConfig {
  const cpus = os.availableParallelism();
  const defaultServerCpu = cpus >= 2 ? 1 : 0;
  const cfg: BenchConfig = {
    connections: intEnv('BENCH_CONNECTIONS', DEFAULTS.connections, 1),
    rssConnections: intEnv('BENCH_RSS_CONNECTIONS', DEFAULTS.rssConnections, 1),
    durationS: intEnv('BENCH_DURATION', DEFAULTS.durationS, 1),
    warmupS: intEnv('BENCH_WARMUP', DEFAULTS.warmupS, 0),
    rounds: intEnv('BENCH_ROUNDS', DEFAULTS.rounds, 1),
    targets: listEnv('BENCH_TARGETS', TARGET_NAMES),
    payloads: listEnv('BENCH_PAYLOADS', PAYLOAD_NAMES),
    loadCpu: intEnv('BENCH_LOAD_CPU', 0, 0),
    serverCpu: intEnv('BENCH_SERVER_CPU', defaultServerCpu, 0),
    skipRssRound: process.env.BENCH_SKIP_RSS === '1',
    strict: process.env.BENCH_STRICT === '1',
    compare: COMPARE_VARS.some((v) => process.env[v] !== undefined),
  };
  if (cfg.targets.length === 0) throw new Error('BENCH_TARGETS selects no target');
  if (cfg.payloads.length === 0) throw new Error('BENCH_PAYLOADS selects no payload');
  if (cfg.compare) {
    if (!usesGateway(cfg)) throw new Error(`${COMPARE_VARS.join(', ')} compare two gateways: BENCH_TARGETS must select predict or rawPredict`);
    const b: TargetName[] = cfg.targets.flatMap((t) => (t === 'predict' || t === 'rawPredict' ? [COMPARE_TARGETS[t]] : []));
    cfg.targets = TARGET_ORDER.filter((t) => cfg.targets.includes(t) || b.includes(t));
  }
  return cfg;
}

/** True when the run measures what `npm run bench` measures with no BENCH_* setting (all targets and payloads). */
export function isDefaultRun(cfg: BenchConfig): boolean {
  return (
    (Object.keys(DEFAULTS) as (keyof typeof DEFAULTS)[]).every((k) => cfg[k] === DEFAULTS[k]) &&
    cfg.targets.length === TARGET_NAMES.length &&
    cfg.payloads.length === PAYLOAD_NAMES.length &&
    !cfg.skipRssRound &&
    !cfg.compare
  );
}

/** The model kinds the selected payloads need, in canonical order: only these model processes start. */
export function modelKinds(cfg: BenchConfig): ModelKind[] {
  return MODEL_KINDS.filter((k) => cfg.payloads.some((p) => PAYLOAD_MODEL[p] === k));
}

export function usesGateway(cfg: BenchConfig): boolean {
  return cfg.targets.includes('predict') || cfg.targets.includes('rawPredict');
}

/** True for the gateway's routes (both gateways' in an A/B run). */
const isGatewayTarget = (t: TargetName): boolean => t !== 'direct' && t !== 'nginx' && t !== 'bare';

/** Targets measured again at rssConnections: the gateway routes, plus the bare proxy as a reference. */
export function rssTargets(cfg: BenchConfig): TargetName[] {
  if (cfg.skipRssRound || !usesGateway(cfg)) return [];
  return cfg.targets.filter((t) => isGatewayTarget(t) || t === 'bare');
}

/** Seconds the whole run should take: every cell plus a generous allowance for start-up and pauses. */
export function estimateSeconds(cfg: BenchConfig): number {
  const cell = cfg.warmupS + cfg.durationS + 0.5;
  const measured = cfg.rounds * cfg.payloads.length * cfg.targets.length * cell;
  const rss = rssTargets(cfg).length * cfg.payloads.length * cell;
  const priming = cfg.payloads.length * cfg.targets.length * (Math.max(1, cfg.warmupS) + 0.2);
  const startup = 10 + 5 * modelKinds(cfg).length + priming;
  return Math.ceil(measured + rss + startup);
}

export const PAYLOAD_LABELS: Record<PayloadName, string> = {
  small: 'small JSON',
  tensor: '~400 KB nested lists',
  base64: '~1 MB base64',
  graphstorm: 'GraphStorm 200 nodes/400 edges',
  columnar: '~150 KB TF columnar',
};
