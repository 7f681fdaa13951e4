// The gateway hostile bodies are sent to: `predictgate local` as a process of its own (so a crash is
// its exit, not the test's) on a folder with the bundled models (half-plus-two, echo, graphstorm),
// MAX_REQUEST_BYTES small and warn-level logs; and its own view of its memory, read from its /metrics
// (the heap V8 uses, its old generation, the resident set, the full collections it ran), waited on
// until it stops falling.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnLocal, pidListeningOn, type LocalProcess } from '../procs.js';
import { waitFor } from '../cluster.js';
import { ENDPOINTS, MAX_JSON_DEPTH, MAX_REQUEST_BYTES, hostileManifests } from './targets.js';

export interface HostileGateway {
  proc: LocalProcess;
  port: number;
  base: string;
  /** Whether the gateway process still runs, as the one that started, and still listens on its port. */
  alive(): boolean;
  /** Model processes that exited and were started again (local mode's warn lines). */
  modelRestarts(): string[];
  stop(): Promise<void>;
}

/** A free loopback port (the gateway is told it: with warn-level logs it does not print the one it took). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

export async function startHostileGateway(env: Record<string, string> = {}): Promise<HostileGateway> {
  const dir = await mkdtemp(join(tmpdir(), 'predictgate-hostile-'));
  for (const [file, text] of Object.entries(hostileManifests())) await writeFile(join(dir, file), text);
  const port = await freePort();
  const proc = spawnLocal(dir, { PORT: String(port), LOG_LEVEL: 'warn', HEALTH_INTERVAL_MS: '1000', MAX_REQUEST_BYTES: String(MAX_REQUEST_BYTES), MAX_JSON_DEPTH: String(MAX_JSON_DEPTH), ...env });
  const base = `http://127.0.0.1:${port}`;
  const stop = async (): Promise<void> => {
    if (proc.child.exitCode === null && proc.child.signalCode === null) {
      proc.child.kill('SIGTERM');
      const timer = setTimeout(() => proc.child.kill('SIGKILL'), 20_000);
      await proc.exited;
      clearTimeout(timer);
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    for (const name of ENDPOINTS) {
      await waitFor(async () => {
        const ep = (await (await fetch(`${base}/apis/prediction.predictgate.dev/v1/namespaces/default/endpoints/${name}`)).json()) as { status?: { conditions?: { type: string; status: string }[] } };
        return ep.status?.conditions?.some((c) => c.type === 'EndpointReady' && c.status === 'True');
      }, `endpoint ${name} Ready`, 30_000, 100);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  const pid = proc.child.pid;
  return {
    proc,
    port,
    base,
    alive: () => proc.child.exitCode === null && proc.child.signalCode === null && pidListeningOn(port) === pid,
    modelRestarts: () => proc.logs().filter((l) => typeof l.msg === 'string' && / exited /.test(l.msg)).map((l) => `${String(l.model)}: ${String(l.msg)}`),
    stop,
  };
}

export interface MemoryReading {
  heapUsedBytes: number;
  /**
   * The heap in use outside the young generation (its new and new large-object spaces): what lives
   * past a call. Right after a full collection it is what survived it, even with calls in flight,
   * whose garbage stays young.
   */
  oldBytes: number;
  rssBytes: number;
  /** Full (mark-compact) collections so far (prom-client's nodejs_gc_duration_seconds_count{kind="major"}). */
  majorGcs: number;
}

/** The gateway's heap in use, resident set and count of full collections, from its own /metrics. */
export async function readMemory(base: string): Promise<MemoryReading> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const value = (series: string, absent?: number): number => {
    const line = text.split('\n').find((l) => l.startsWith(`${series} `));
    if (line) return Number(line.slice(series.length + 1));
    if (absent === undefined) throw new Error(`no ${series} in the gateway's /metrics`);
    return absent;
  };
  // The collections' series appear with the first one of their kind.
  const heapUsedBytes = value('nodejs_heap_size_used_bytes');
  const young = value('nodejs_heap_space_size_used_bytes{space="new"}') + value('nodejs_heap_space_size_used_bytes{space="new_large_object"}', 0);
  return { heapUsedBytes, oldBytes: heapUsedBytes - young, rssBytes: value('process_resident_memory_bytes'), majorGcs: value('nodejs_gc_duration_seconds_count{kind="major"}', 0) };
}

export interface Settled extends MemoryReading {
  /** How long the wait after the load took. */
  waitedMs: number;
  /** Full collections the gateway ran in the window (the load and the wait after it). */
  gcsWaited: number;
}

/**
 * The gateway's heap once it settles after a stretch of load. Heap in use counts garbage until V8
 * collects it, and nothing here forces a collection: the figure is the lowest old-generation reading
 * (MemoryReading.oldBytes) taken after a full collection in the window (`prior`, read during the
 * load, and the readings of the wait after it, every `pollMs`). The wait is over once that figure
 * has not fallen by 1 % for `quietMs`; or, when no full collection has come, after `noGcMs`
 * (undefined: the caller loads the gateway more).
 */
export async function settledMemory(base: string, opts: { since: number; prior: readonly MemoryReading[]; pollMs?: number; quietMs?: number; noGcMs?: number; maxMs?: number }): Promise<Settled | undefined> {
  const { since, pollMs = 1000, quietMs = 5000, noGcMs = 60_000, maxMs = 90_000 } = opts;
  const start = Date.now();
  let low: MemoryReading | undefined;
  let lowAt = start;
  let last: MemoryReading | undefined;
  const take = (m: MemoryReading): void => {
    last = m;
    if (m.majorGcs <= since) return;
    if (low === undefined || m.oldBytes < low.oldBytes * 0.99) lowAt = Date.now();
    if (low === undefined || m.oldBytes < low.oldBytes) low = m;
  };
  for (const m of opts.prior) take(m);
  for (;;) {
    take(await readMemory(base));
    const waited = Date.now() - start;
    if (low === undefined ? waited >= noGcMs : Date.now() - lowAt >= quietMs) break;
    if (waited >= maxMs) break;
    await new Promise((r) => setTimeout(r, pollMs));
  }
  if (low === undefined) return undefined;
  return { ...low, waitedMs: Date.now() - start, gcsWaited: last!.majorGcs - since };
}
