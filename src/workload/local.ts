// The local workload backend: each replica of a DeployedModel is a child process on a free
// loopback port, given the Vertex container environment, health-checked on its health route,
// restarted with exponential backoff when it dies. A changed spec rolls out by starting the new
// replicas and stopping the old ones only once the new ones are ready. A replica leaves in two steps,
// as a Kubernetes pod does: its address goes out of the status at once, and SIGTERM follows only after
// a delay that lets the gateway route away from it (the job of a preStop sleep in a cluster). Each
// replica runs in its own process group, stopped as a whole.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { get as httpGet } from 'node:http';
import type { Logger } from '../log.js';
import { backoffMs } from '../backoff.js';
import type { WorkloadBackend, WorkloadObservation, WorkloadSpec } from './workload.js';
import { freePort } from './ports.js';

/** A busy model answers its health route late; Kubernetes' default 1 s would flap under load. */
const HEALTH_TIMEOUT_MS = 5000;

/**
 * GETs a replica's health route (pooled by Node's keep-alive global agent) and resolves with the
 * HTTP status; a failure rejects with its code (ECONNREFUSED, ETIMEDOUT...). node:http rather than
 * axios: this runs inside the gateway's process, which axios would make larger (docs/performance.md)
 * for one GET per replica per second.
 */
function probe(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpGet({ host: '127.0.0.1', port, path, timeout: HEALTH_TIMEOUT_MS }, (res) => {
      res.on('error', reject);
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.resume();
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error(`no answer within ${HEALTH_TIMEOUT_MS} ms`), { code: 'ETIMEDOUT' })));
    req.on('error', reject);
  });
}

const BIN = fileURLToPath(new URL('../../../bin/predictgate.js', import.meta.url));

/** A timer made by BackendTimers.setTimeout. */
export type TimerHandle = unknown;

/**
 * The backend's clock and timers (health checks, restart backoff, retire delays): the process's own
 * by default; a test injects its own to read the delays the backend chooses without waiting them out.
 */
export interface BackendTimers {
  now(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

const SYSTEM_TIMERS: BackendTimers = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export interface LocalBackendOptions {
  logger: Logger;
  timers?: BackendTimers;
  healthIntervalMs: number;
  /** Consecutive failed checks before a ready replica is marked not ready. */
  failureThreshold?: number;
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  stopGraceMs?: number;
  /**
   * How long a replica that leaves (rollout, scale-down, deletion) keeps running after its address
   * left the status, so that no call is sent to a model that is closing its sockets. Default 2000.
   */
  retireDelayMs?: number;
  /**
   * Whether calls are in flight to a replica's address (the gateway's count). A replica that leaves
   * keeps running while it has some, checked every retire delay, for at most `busyGraceMs`: a
   * scale-down never cuts a stream that runs for minutes, up to that bound.
   */
  busy?: (address: string) => boolean;
  busyGraceMs?: number;
}

type ReplicaState = 'starting' | 'ready' | 'unhealthy' | 'exited' | 'stopped';

interface Replica {
  index: number;
  /** The spec this replica was started from (a retiring replica keeps its own health route). */
  spec: WorkloadSpec;
  port: number;
  child: ChildProcess | null;
  state: ReplicaState;
  failures: number;
  restarts: number;
  readySince: number;
  lastFailure?: string;
  timer: TimerHandle | null;
  /** Set once the replica is being stopped: resolves when its process has exited. */
  exited?: Promise<void>;
  terminating?: boolean;
}

interface Workload {
  spec: WorkloadSpec;
  specJson: string;
  /** The count scale() set (a scaledByRequests spec); the spec's own count before. */
  scaled?: number;
  replicas: Replica[];
  /** Replicas of the previous spec, serving until the new ones are ready. */
  retiring: Replica[];
}

/** Resolves `predictgate ...` to this installation so that sample manifests run without a global install. */
export function resolveCommand(command: string[], args: string[]): { file: string; argv: string[] } {
  const [first, ...rest] = [...command, ...args];
  if (first === 'predictgate') return { file: process.execPath, argv: [BIN, ...rest] };
  if (first === 'node') return { file: process.execPath, argv: rest };
  return { file: first, argv: rest };
}

/** A model's JSON log line keeps its fields (under `child`); plain lines become the message. */
function logChildLine(log: Logger, level: 'info' | 'warn', line: string): void {
  if (line.startsWith('{')) {
    try {
      const fields = JSON.parse(line) as Record<string, unknown>;
      log[level]({ child: fields }, typeof fields.msg === 'string' ? fields.msg : 'model log');
      return;
    } catch {
      // not JSON after all
    }
  }
  log[level]({ stream: level === 'info' ? 'stdout' : 'stderr' }, line);
}

/** Model processes alive now; killed with their groups if this process exits without stopping them. */
const LIVE_GROUPS = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of LIVE_GROUPS) signalGroup(child, 'SIGKILL');
});

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // the group is gone already
  }
}

function isGone(r: Replica): boolean {
  return r.state === 'exited' || r.state === 'stopped';
}

export class LocalProcessBackend implements WorkloadBackend {
  private readonly workloads = new Map<string, Workload>();
  private readonly listeners: ((key: string) => void)[] = [];
  private stopping = false;
  /** Replicas out of every workload whose process has not exited yet (stop() must still reach them). */
  private readonly leaving = new Set<Replica>();
  private readonly timers: BackendTimers;

  constructor(private readonly opts: LocalBackendOptions) {
    this.timers = opts.timers ?? SYSTEM_TIMERS;
  }

  onChange(listener: (key: string) => void): void {
    this.listeners.push(listener);
  }

  private changed(key: string): void {
    for (const l of this.listeners) l(key);
  }

  async apply(spec: WorkloadSpec): Promise<void> {
    if (this.stopping) return;
    const specJson = JSON.stringify(spec);
    const w = this.workloads.get(spec.key);
    if (!w) {
      const nw: Workload = { spec, specJson, replicas: [], retiring: [] };
      this.workloads.set(spec.key, nw);
      await this.fit(nw);
      return;
    }
    if (w.specJson === specJson) return;
    if (!spec.scaledByRequests) w.scaled = undefined;
    const sameTemplate = JSON.stringify({ ...w.spec, replicas: 0 }) === JSON.stringify({ ...spec, replicas: 0 });
    w.spec = spec;
    w.specJson = specJson;
    if (!sameTemplate) {
      // Roll out: the current replicas retire once the new set is ready.
      w.retiring.push(...w.replicas);
      w.replicas = [];
    }
    await this.fit(w);
    this.changed(spec.key);
  }

  /** Leaving replicas go idle ones first; one with calls runs on until they end (busyGraceMs at most). */
  async scale(key: string, replicas: number, inFlight: ReadonlyMap<string, number>): Promise<number> {
    const w = this.workloads.get(key);
    if (!w || this.stopping || !w.spec.scaledByRequests || this.countOf(w) === replicas) return w ? this.countOf(w) : replicas;
    w.scaled = replicas;
    await this.fit(w, inFlight);
    this.changed(key);
    return replicas;
  }

  private countOf(w: Workload): number {
    return w.scaled ?? w.spec.replicas;
  }

  private async fit(w: Workload, inFlight: ReadonlyMap<string, number> = new Map()): Promise<void> {
    while (w.replicas.length < this.countOf(w)) {
      const port = await freePort();
      // Stopped, deleted or re-specified while waiting for the port: let the next apply decide.
      if (this.stopping || this.workloads.get(w.spec.key) !== w) return;
      const r: Replica = { index: w.replicas.length, spec: w.spec, port, child: null, state: 'starting', failures: 0, restarts: 0, readySince: 0, timer: null };
      w.replicas.push(r);
      this.startReplica(w, r);
    }
    const busy = (r: Replica): boolean => (inFlight.get(addressOf(r)) ?? 0) > 0 || (this.opts.busy?.(addressOf(r)) ?? false);
    while (w.replicas.length > this.countOf(w)) {
      // The newest idle replica, else the newest (the only one: nothing to choose).
      let i = w.replicas.length - 1;
      if (i > 0) for (let j = i; j >= 0; j--) if (!busy(w.replicas[j])) { i = j; break; }
      this.retire(w.replicas.splice(i, 1)[0]);
    }
    this.retireIfReady(w);
  }

  private startReplica(w: Workload, r: Replica): void {
    const { spec } = r;
    const { file, argv } = resolveCommand(spec.command, spec.args);
    const log = this.opts.logger.child({ model: spec.key, replica: r.index, port: r.port });
    const env = { ...process.env, AIP_HTTP_HOST: '127.0.0.1', ...spec.env, AIP_HTTP_PORT: String(r.port) };
    let child: ChildProcess;
    try {
      // Its own process group, so that stopping it also stops whatever it started.
      child = spawn(file, argv, { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
      LIVE_GROUPS.add(child);
      child.once('exit', () => LIVE_GROUPS.delete(child));
    } catch (err) {
      this.onExit(w, r, `cannot start ${file}: ${err instanceof Error ? err.message : String(err)}`);
      return;
    }
    r.child = child;
    r.state = 'starting';
    r.failures = 0;
    for (const [stream, level] of [[child.stdout, 'info'], [child.stderr, 'warn']] as const) {
      if (stream) createInterface({ input: stream }).on('line', (line) => logChildLine(log, level, line));
    }
    child.once('error', (err) => this.onExit(w, r, `cannot start ${spec.command[0]}: ${err.message}`));
    child.once('exit', (code, signal) => this.onExit(w, r, signal ? `exited on signal ${signal}` : `exited with code ${code}`));
    this.scheduleCheck(w, r, 50);
  }

  private scheduleCheck(w: Workload, r: Replica, delay: number): void {
    if (r.timer) this.timers.clearTimeout(r.timer);
    r.timer = this.timers.setTimeout(() => void this.check(w, r), delay);
  }

  private async check(w: Workload, r: Replica): Promise<void> {
    r.timer = null;
    if (isGone(r)) return;
    let ok = false;
    let why = '';
    try {
      const status = await probe(r.port, r.spec.healthRoute);
      ok = status >= 200 && status < 300;
      why = `health check ${r.spec.healthRoute} answered HTTP ${status}`;
    } catch (err) {
      why = `health check ${r.spec.healthRoute} failed: ${(err as { code?: string }).code ?? String(err)}`;
    }
    if (isGone(r)) return;
    const before = r.state;
    if (ok) {
      r.failures = 0;
      if (r.state !== 'ready') {
        r.state = 'ready';
        r.readySince = this.timers.now();
        r.lastFailure = undefined;
      }
    } else {
      r.failures++;
      if (r.state === 'ready' && r.failures >= (this.opts.failureThreshold ?? 3)) {
        r.state = 'unhealthy';
        r.lastFailure = why;
      } else if (r.state !== 'ready') {
        r.lastFailure = r.state === 'unhealthy' ? why : r.lastFailure;
      }
    }
    // Starting replicas are polled quickly; settled ones at the configured interval.
    this.scheduleCheck(w, r, r.state === 'starting' ? Math.min(100, this.opts.healthIntervalMs) : this.opts.healthIntervalMs);
    if (before !== r.state) {
      this.retireIfReady(w);
      this.changed(w.spec.key);
    }
  }

  private onExit(w: Workload, r: Replica, why: string): void {
    if (r.timer) this.timers.clearTimeout(r.timer);
    r.timer = null;
    r.child = null;
    if (r.state === 'stopped' || r.state === 'exited') return;
    r.state = 'exited';
    if (this.stopping) return;
    if (!w.replicas.includes(r)) {
      // A retiring replica died: drop its address now rather than at the next resync.
      this.changed(w.spec.key);
      return;
    }
    if (r.readySince && this.timers.now() - r.readySince > 60_000) r.restarts = 0;
    const delay = backoffMs(r.restarts + 1, this.opts.backoffBaseMs ?? 500, this.opts.backoffMaxMs ?? 30_000);
    r.restarts++;
    r.readySince = 0;
    r.lastFailure = `replica ${r.index} ${why}; restarting in ${(delay / 1000).toFixed(1)} s (restart ${r.restarts})`;
    this.opts.logger.warn({ model: w.spec.key, replica: r.index }, r.lastFailure);
    r.timer = this.timers.setTimeout(() => {
      r.timer = null;
      if (this.stopping || !w.replicas.includes(r)) return;
      // A fresh port: whatever held the old one (it may be why the model died) may still hold it.
      void freePort().catch((err: unknown) => {
        this.opts.logger.warn({ model: w.spec.key, replica: r.index }, `no fresh port (${err instanceof Error ? err.message : String(err)}); restarting on ${r.port}`);
        return r.port;
      }).then((port) => {
        if (this.stopping || !w.replicas.includes(r) || r.state !== 'exited') return;
        r.port = port;
        this.startReplica(w, r);
        this.changed(w.spec.key);
      });
    }, delay);
    this.changed(w.spec.key);
  }

  private retireIfReady(w: Workload): void {
    if (w.retiring.length === 0) return;
    if (w.replicas.length > 0 && !w.replicas.every((r) => r.state === 'ready')) return;
    for (const r of w.retiring) this.retire(r);
    w.retiring = [];
  }

  /** Takes a replica out of the addresses now and stops its process after the retire delay. */
  private retire(r: Replica): void {
    void this.stopReplica(r, this.opts.retireDelayMs ?? 2000);
  }

  /**
   * Takes a replica out of the addresses and stops its process group: SIGTERM after `delayMs`, SIGKILL
   * once the stop grace has passed. Calling it again (the backend stopping) skips what is left of the delay.
   */
  private stopReplica(r: Replica, delayMs = 0): Promise<void> {
    if (r.timer) this.timers.clearTimeout(r.timer);
    r.timer = null;
    r.state = 'stopped';
    const child = r.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
    this.leaving.add(r);
    r.exited ??= new Promise((resolve) => child.once('exit', () => {
      // Whatever the model started goes with it.
      signalGroup(child, 'SIGKILL');
      this.leaving.delete(r);
      resolve();
    }));
    let waited = 0;
    const terminate = (): void => {
      r.timer = null;
      if (r.terminating) return;
      if (delayMs > 0 && waited + delayMs <= (this.opts.busyGraceMs ?? 0) && this.opts.busy?.(addressOf(r))) {
        waited += delayMs;
        r.timer = this.timers.setTimeout(terminate, delayMs);
        return;
      }
      r.terminating = true;
      const kill = this.timers.setTimeout(() => signalGroup(child, 'SIGKILL'), this.opts.stopGraceMs ?? 5000);
      child.once('exit', () => this.timers.clearTimeout(kill));
      signalGroup(child, 'SIGTERM');
    };
    if (delayMs > 0 && !r.terminating) r.timer = this.timers.setTimeout(terminate, delayMs);
    else terminate();
    return r.exited;
  }

  observe(key: string): WorkloadObservation | undefined {
    const w = this.workloads.get(key);
    if (!w) return undefined;
    const all = [...w.replicas, ...w.retiring];
    const ready = all.filter((r) => r.state === 'ready');
    const failing = w.replicas.find((r) => r.lastFailure && r.state !== 'ready');
    return {
      replicas: this.countOf(w),
      runningReplicas: all.filter((r) => r.child !== null).length,
      readyReplicas: ready.length,
      addresses: ready.map(addressOf),
      progressing: w.retiring.length > 0 || w.replicas.some((r) => r.state === 'starting'),
      failure: failing?.lastFailure,
    };
  }

  async delete(key: string): Promise<void> {
    const w = this.workloads.get(key);
    if (!w) return;
    this.workloads.delete(key);
    for (const r of [...w.replicas, ...w.retiring]) this.retire(r);
    this.changed(key);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    const all = [...this.workloads.values()].flatMap((w) => [...w.replicas, ...w.retiring]).concat([...this.leaving]);
    this.workloads.clear();
    await Promise.all(all.map((r) => this.stopReplica(r)));
  }
}

function addressOf(r: Replica): string {
  return `http://127.0.0.1:${r.port}`;
}
