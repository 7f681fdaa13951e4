// The local process backend on its own, with real model processes: a replica that leaves (rollout,
// deletion) drops out of the addresses at once but keeps running through its retire delay, so that
// the gateway can route away before the model closes its sockets; stopping the backend skips the
// delay. The delay here is far longer than the test, so nothing depends on timing. A replica that dies
// comes back on a fresh port, so a port taken meanwhile cannot keep it down, after a backoff read from
// the backend's injected timers (0.5 s doubling to 30 s) rather than waited out. A replica that leaves
// while the gateway has calls in flight to it (busy) runs on, asked again every retire delay, until it
// is idle or busyGraceMs is used up: the test follows the backend's calls of busy and the model's own
// log line at SIGTERM, never a clock.
import { createServer } from 'node:net';
import { LocalProcessBackend, type BackendTimers, type TimerHandle } from '../../src/workload/local.js';
import type { WorkloadSpec } from '../../src/workload/workload.js';
import { silentLogger, type Logger } from '../../src/log.js';
import { pidListeningOn } from '../helpers/procs.js';
import { isAlive } from '../cluster/controlPlane.js';

function spec(version: string): WorkloadSpec {
  return {
    key: 'default/m',
    command: ['predictgate', 'model', 'echo'],
    args: [],
    env: { AIP_PREDICT_ROUTE: '/predict', AIP_HEALTH_ROUTE: '/health', VERSION: version },
    replicas: 1,
    predictRoute: '/predict',
    healthRoute: '/health',
    port: 8080,
  };
}

describe('local process backend', () => {
  let backend: LocalProcessBackend;
  let changes: (() => void)[] = [];

  /** Resolves once `ok` holds, re-checked on every change the backend reports; fails after 20 s. */
  function until(ok: () => boolean, what: string): Promise<void> {
    if (ok()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        changes = changes.filter((c) => c !== check);
        reject(new Error(`timed out waiting for ${what}; addresses: ${JSON.stringify(addresses())}`));
      }, 20_000);
      const check = (): void => {
        if (!ok()) return;
        clearTimeout(timer);
        changes = changes.filter((c) => c !== check);
        resolve();
      };
      changes.push(check);
    });
  }

  beforeEach(() => {
    changes = [];
    backend = new LocalProcessBackend({ logger: silentLogger(), healthIntervalMs: 200, retireDelayMs: 600_000 });
    backend.onChange(() => changes.forEach((c) => c()));
  });
  afterEach(() => backend.stop());

  const addresses = (): string[] => backend.observe('default/m')?.addresses ?? [];

  test('a rolled-out replica leaves the addresses at once and keeps running through its retire delay', async () => {
    await backend.apply(spec('v1'));
    await until(() => addresses().length === 1, 'v1 ready');
    const [old] = addresses();
    const oldPid = pidListeningOn(Number(new URL(old).port))!;
    expect(isAlive(oldPid)).toBe(true);

    await backend.apply(spec('v2'));
    await until(() => addresses().length === 1 && addresses()[0] !== old, 'v2 ready in place of v1');
    // Out of the addresses, still serving what was already sent to it.
    expect(addresses()).not.toContain(old);
    expect(isAlive(oldPid)).toBe(true);
    expect((await fetch(`${old}/health`)).status).toBe(200);
    // Like a terminating pod, it no longer counts as a replica of the workload.
    expect(backend.observe('default/m')?.runningReplicas).toBe(1);

    // Stopping the backend does not wait for the delay.
    await backend.stop();
    expect(isAlive(oldPid)).toBe(false);
  });

  test('a deleted workload has no addresses at once; its process is stopped with the backend', async () => {
    await backend.apply(spec('v1'));
    await until(() => addresses().length === 1, 'v1 ready');
    const pid = pidListeningOn(Number(new URL(addresses()[0]).port))!;
    await backend.delete('default/m');
    expect(backend.observe('default/m')).toBeUndefined();
    expect(isAlive(pid)).toBe(true);
    await backend.stop();
    expect(isAlive(pid)).toBe(false);
  });

  test('a replica that dies restarts on a fresh port, so one taken meanwhile does not keep it down', async () => {
    await backend.apply(spec('v1'));
    await until(() => addresses().length === 1, 'v1 ready');
    const first = addresses()[0];
    const port = Number(new URL(first).port);
    process.kill(pidListeningOn(port)!, 'SIGKILL');
    await until(() => addresses().length === 0, 'the killed replica out of the addresses');
    // Something else takes the port while the replica waits for its restart (an outgoing
    // connection given that number as its local port does the same).
    const squatter = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve, reject) => squatter.once('error', reject).listen(port, '127.0.0.1', resolve));
    try {
      await until(() => addresses().length === 1, 'the replica back on another port');
      expect(addresses()[0]).not.toBe(first);
      expect((await fetch(`${addresses()[0]}/health`)).status).toBe(200);
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
  });
});

/** Timers that fire only when the test says so, on a clock the test sets (the backend's BackendTimers). */
class ManualTimers implements BackendTimers {
  clock = 0;
  private next = 1;
  private readonly pending = new Map<number, { fn: () => void; ms: number }>();

  now = (): number => this.clock;

  setTimeout = (fn: () => void, ms: number): TimerHandle => {
    const id = this.next++;
    this.pending.set(id, { fn, ms });
    return id;
  };

  clearTimeout = (handle: TimerHandle): void => {
    this.pending.delete(handle as number);
  };

  /** Delays of the timers set and neither fired nor cleared, in the order they were set. */
  delays(): number[] {
    return [...this.pending.values()].map((t) => t.ms);
  }

  /** Fires the one pending timer. */
  fireOnly(): void {
    expect(this.pending.size).toBe(1);
    const [[id, t]] = [...this.pending];
    this.pending.delete(id);
    t.fn();
  }
}

describe('restart backoff', () => {
  test('a replica that keeps dying is restarted after 0.5 s, then 1, 2, 4, 8, 16 and 30 s (the most), each time on its timer only', async () => {
    const timers = new ManualTimers();
    const backend = new LocalProcessBackend({ logger: silentLogger(), healthIntervalMs: 200, timers });
    const key = 'default/crash';
    const failure = (): string | undefined => backend.observe(key)?.failure;
    let onChange = (): void => undefined;
    backend.onChange(() => onChange());
    /** Resolves once the backend reports the replica's `restart`-th failure (checked on every change it reports). */
    const failed = (restart: number): Promise<void> => new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for restart ${restart}; last failure: ${failure()}`)), 20_000);
      onChange = () => {
        if (!failure()?.endsWith(`(restart ${restart})`)) return;
        clearTimeout(timer);
        resolve();
      };
      onChange();
    });
    try {
      await backend.apply({ key, command: ['node', '-e', 'process.exit(3)'], args: [], env: {}, replicas: 1, predictRoute: '/predict', healthRoute: '/health', port: 8080 });
      const schedule = [500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000];
      for (const [i, delay] of schedule.entries()) {
        await failed(i + 1);
        expect(failure()).toBe(`replica 0 exited with code 3; restarting in ${(delay / 1000).toFixed(1)} s (restart ${i + 1})`);
        // The dead process's health check is gone: the restart is the one timer left, and until it
        // fires nothing runs.
        expect(timers.delays()).toEqual([delay]);
        expect(backend.observe(key)).toMatchObject({ replicas: 1, runningReplicas: 0, readyReplicas: 0, addresses: [] });
        timers.fireOnly();
      }
    } finally {
      await backend.stop();
    }
  });
});

/** A logger that hands each line a model process wrote (the backend logs them with the replica's port) to `line`. */
function modelLines(line: (port: number, msg: string) => void, bindings: Record<string, unknown> = {}): Logger {
  const write = (obj: object, msg: string): void => {
    if ('child' in obj && typeof bindings.port === 'number') line(bindings.port, msg);
  };
  return { debug: write, info: write, warn: write, error: write, isLevelEnabled: () => true, child: (more) => modelLines(line, { ...bindings, ...more }) };
}

describe('a leaving replica with calls in flight (busy)', () => {
  /**
   * Scales a one-replica model that follows the calls to zero, with busy answering `answers` in turn
   * (true once they run out) and a retire delay of 50 ms: what happened to the leaving replica, in
   * order, until its model logs its SIGTERM, and whether its process is gone once the backend stopped.
   */
  async function scaleDown(answers: boolean[], busyGraceMs: number): Promise<{ events: string[]; goneAfterStop: boolean }> {
    const events: string[] = [];
    let leaving = { port: 0, pid: 0 };
    let sigterm = (): void => undefined;
    const terminated = new Promise<void>((resolve) => (sigterm = resolve));
    const backend = new LocalProcessBackend({
      logger: modelLines((port, msg) => {
        if (port !== leaving.port || msg !== 'SIGTERM: draining') return;
        events.push('SIGTERM');
        sigterm();
      }),
      healthIntervalMs: 200,
      retireDelayMs: 50,
      busyGraceMs,
      busy: (address) => {
        const busy = answers.shift() ?? true;
        events.push(`busy(${address === `http://127.0.0.1:${leaving.port}` ? 'its address' : address}) → ${busy}, ${isAlive(leaving.pid) ? 'running' : 'gone'}`);
        return busy;
      },
    });
    const key = 'default/m';
    const addresses = (): string[] => backend.observe(key)?.addresses ?? [];
    const timeout = <T>(p: Promise<T>, what: string): Promise<T> => {
      let timer: NodeJS.Timeout | undefined;
      return Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}; so far: ${events.join('; ')}`)), 20_000)))]).finally(() => clearTimeout(timer));
    };
    try {
      const ready = new Promise<void>((resolve) => backend.onChange(() => addresses().length === 1 && resolve()));
      await backend.apply({ ...spec('v1'), scaledByRequests: true });
      await timeout(ready, 'the replica ready');
      const port = Number(new URL(addresses()[0]).port);
      leaving = { port, pid: pidListeningOn(port)! };
      await backend.scale(key, 0, new Map());
      expect([backend.observe(key)?.replicas, addresses()]).toEqual([0, []]);
      await timeout(terminated, 'the model\'s SIGTERM');
    } finally {
      await backend.stop();
    }
    return { events, goneAfterStop: !isAlive(leaving.pid) };
  }

  test('keeps running while busy, asked every retire delay, and is stopped once it is not', async () => {
    expect(await scaleDown([true, true, false], 60_000)).toEqual({
      events: ['busy(its address) → true, running', 'busy(its address) → true, running', 'busy(its address) → false, running', 'SIGTERM'],
      goneAfterStop: true,
    });
  });

  test('is stopped anyway once busyGraceMs is used up (150 ms: three retire delays)', async () => {
    expect(await scaleDown([], 150)).toEqual({
      events: ['busy(its address) → true, running', 'busy(its address) → true, running', 'busy(its address) → true, running', 'SIGTERM'],
      goneAfterStop: true,
    });
  });
});
