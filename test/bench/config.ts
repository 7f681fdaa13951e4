// Benchmark settings: reads the BENCH_* environment variables, names the targets, the payloads and the
// model kind each payload goes to (echo, graphstorm, half-plus-two), pins the load generator and the
// servers to their CPUs, and estimates how long a run takes. No I/O besides env.

import os from 'node:os';

export const TARGET_NAMES = ['direct', 'predict', 'rawPredict', 'nginx', 'bare'] as const;
export type TargetName = (typeof TARGET_NAMES)[number];

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

/** Payloads the goals are about; the others get the same columns and information lines. */
export const GOAL_PAYLOADS: readonly PayloadName[] = ['small', 'tensor', 'base64'];

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
}

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
    connections: intEnv('BENCH_CONNECTIONS', 32, 1),
    rssConnections: intEnv('BENCH_RSS_CONNECTIONS', 64, 1),
    durationS: intEnv('BENCH_DURATION', 5, 1),
    warmupS: intEnv('BENCH_WARMUP', 1, 0),
    rounds: intEnv('BENCH_ROUNDS', 5, 1),
    targets: listEnv('BENCH_TARGETS', TARGET_NAMES),
    payloads: listEnv('BENCH_PAYLOADS', PAYLOAD_NAMES),
    loadCpu: intEnv('BENCH_LOAD_CPU', 0, 0),
    serverCpu: intEnv('BENCH_SERVER_CPU', defaultServerCpu, 0),
    skipRssRound: process.env.BENCH_SKIP_RSS === '1',
    strict: process.env.BENCH_STRICT === '1',
  };
  if (cfg.targets.length === 0) throw new Error('BENCH_TARGETS selects no target');
  if (cfg.payloads.length === 0) throw new Error('BENCH_PAYLOADS selects no payload');
  return cfg;
}

/** The model kinds the selected payloads need, in canonical order: only these model processes start. */
export function modelKinds(cfg: BenchConfig): ModelKind[] {
  return MODEL_KINDS.filter((k) => cfg.payloads.some((p) => PAYLOAD_MODEL[p] === k));
}

export function usesGateway(cfg: BenchConfig): boolean {
  return cfg.targets.includes('predict') || cfg.targets.includes('rawPredict');
}

/** Targets measured again at rssConnections: the gateway routes, plus the bare proxy as a reference. */
export function rssTargets(cfg: BenchConfig): TargetName[] {
  if (cfg.skipRssRound || !usesGateway(cfg)) return [];
  return cfg.targets.filter((t) => t === 'predict' || t === 'rawPredict' || t === 'bare');
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
