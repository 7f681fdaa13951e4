// Test helpers for processes: which pid listens on a loopback port (read from /proc, Linux), making
// a faulty model refuse connections while it lives, and
// running `predictgate` (local, controller, gateway) or the faulty model as a child process whose stdout log lines can be awaited.
import { appendFileSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { connect } from 'node:net';
import { BIN, FAULTY } from './local.js';

/** The IPv4 socket listening on `port` (a row of /proc/net/tcp): its local address and inode. */
function listeningSocket(port: number): { address: string; inode: string } | undefined {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  let found: { address: string; inode: string } | undefined;
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length > 9 && f[1].endsWith(`:${hex}`) && f[3] === '0A') {
      const a = f[1].split(':')[0];
      found = { address: [6, 4, 2, 0].map((i) => parseInt(a.slice(i, i + 2), 16)).join('.'), inode: f[9] };
    }
  }
  return found;
}

/** The local address of the socket listening on `port`, e.g. 127.0.0.1, or undefined. */
export function listenAddress(port: number): string | undefined {
  return listeningSocket(port)?.address;
}

/** The pid of the process listening on 127.0.0.1:port, from /proc/net/tcp and /proc/PID/fd. */
export function pidListeningOn(port: number): number | undefined {
  const inode = listeningSocket(port)?.inode;
  if (!inode) return undefined;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        if (readlinkSync(`/proc/${pid}/fd/${fd}`) === `socket:[${inode}]`) return Number(pid);
      } catch {
        // fd closed meanwhile
      }
    }
  }
  return undefined;
}

/** Resolves once a connection to 127.0.0.1:port is refused (polled, at most 10 s). */
export async function connectionsRefused(port: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const code = await new Promise<string>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve('connected');
      });
      s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
    });
    if (code === 'ECONNREFUSED') return;
    if (Date.now() > deadline) throw new Error(`port ${port} still ${code} after 10 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Makes the faulty model (test/helpers/faultyModel.ts) on `port` stop listening (SIGUSR2); its
 * process lives on, so local mode sees no exit. Resolves once the port refuses connections.
 */
export async function refuseConnections(port: number): Promise<void> {
  const pid = pidListeningOn(port);
  if (pid === undefined) throw new Error(`nothing listens on ${port}`);
  process.kill(pid, 'SIGUSR2');
  await connectionsRefused(port);
}

export interface PredictgateProcess {
  child: ChildProcess;
  /** Resolves with the first JSON log line for which `pred` is true. */
  waitForLog(pred: (line: Record<string, unknown>) => boolean, what: string, timeoutMs?: number): Promise<Record<string, unknown>>;
  exited: Promise<number | null>;
  /** Every JSON log line so far. */
  logs(): Record<string, unknown>[];
}

export type LocalProcess = PredictgateProcess;

export function spawnLocal(dir: string, env: Record<string, string> = {}): LocalProcess {
  return spawnPredictgate(['local', dir], { HEALTH_INTERVAL_MS: '200', ...env });
}

/**
 * A bundled model server (`predictgate model KIND`) on a free port, pushed onto `into` (for
 * stopAll); resolves with its port once it listens.
 */
export async function startBundledModel(kind: string, env: Record<string, string>, into: PredictgateProcess[]): Promise<number> {
  const p = spawnPredictgate(['model', kind], { AIP_HTTP_PORT: '0', ...env });
  into.push(p);
  return (await p.waitForLog((l) => l.msg === 'listening', `model ${kind} listening`)).port as number;
}

/** SIGTERM to each process, and waits for each to exit. */
export async function stopAll(procs: readonly PredictgateProcess[]): Promise<void> {
  for (const p of procs) {
    p.child.kill('SIGTERM');
    await p.exited;
  }
}

/** Where a process starts: `cgroupProcs`, a cgroup's cgroup.procs file, starts it in that cgroup (before Node reads its limits). */
export interface SpawnOptions {
  cgroupProcs?: string;
}

/** Runs `predictgate ARGS` (PORT=0, info logs) with its JSON log lines awaitable. */
export function spawnPredictgate(args: string[], env: Record<string, string> = {}, options: SpawnOptions = {}): PredictgateProcess {
  return spawnNode([BIN, ...args], args[0], { PORT: '0', LOG_LEVEL: 'info', ...env }, options);
}

/**
 * The faulty model (test/helpers/faultyModel.ts) with FAULT=`fault` on a free port, pushed onto
 * `into` (for stopAll); resolves with its port once it listens.
 */
export async function startFaultyModel(fault: string, env: Record<string, string>, into: PredictgateProcess[]): Promise<number> {
  const p = spawnNode([FAULTY], 'faulty', { FAULT: fault, AIP_HTTP_PORT: '0', ...env });
  into.push(p);
  return (await p.waitForLog((l) => l.msg === 'listening', `faulty model (${fault}) listening`)).port as number;
}

/** Runs Node on `args` with its JSON log lines awaitable; `name` names its kept log. */
function spawnNode(args: string[], name: string, env: Record<string, string>, options: SpawnOptions = {}): PredictgateProcess {
  // In a cgroup: a shell moves itself in, then becomes Node (the same pid).
  const [command, argv] = options.cgroupProcs
    ? ['/bin/sh', ['-c', 'echo $$ > "$0" && exec "$@"', options.cgroupProcs, process.execPath, ...args]]
    : [process.execPath, args];
  const child = spawn(command, argv, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  const lines: Record<string, unknown>[] = [];
  const waiters: { pred: (l: Record<string, unknown>) => boolean; resolve: (l: Record<string, unknown>) => void }[] = [];
  // PREDICTGATE_TEST_LOGS=DIR keeps each process's log lines in DIR/COMMAND-PID.log, for debugging.
  const keep = process.env.PREDICTGATE_TEST_LOGS ? join(process.env.PREDICTGATE_TEST_LOGS, `${name}-${child.pid}.log`) : undefined;
  createInterface({ input: child.stdout! }).on('line', (text) => {
    if (keep) appendFileSync(keep, `${text}\n`);
    let line: Record<string, unknown>;
    try {
      line = JSON.parse(text) as Record<string, unknown>;
    } catch {
      return;
    }
    lines.push(line);
    for (const w of [...waiters]) {
      if (w.pred(line)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(line);
      }
    }
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    exited,
    logs: () => lines,
    waitForLog(pred, what, timeoutMs = 20_000) {
      const seen = lines.find(pred);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`timed out waiting for log: ${what}`)), timeoutMs);
        waiters.push({ pred, resolve: (l) => { clearTimeout(timer); resolve(l); } });
      });
    },
  };
}
