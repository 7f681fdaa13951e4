// Child processes of the benchmark: starts them pinned to a CPU (taskset) in their own process group,
// logs their output to the run's temp dir, kills every group and descendant on exit, error or signal,
// and removes temp dirs. Also: free loopback ports, HTTP calls (axios), bounded readiness polling,
// pinning this process.

import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import axios from 'axios';
import os from 'node:os';
import path from 'node:path';
import { descendants } from './procfs.js';

export { freePort } from '../../src/workload/ports.js';

export interface Child {
  name: string;
  pid: number;
  proc: ChildProcess;
  logFile: string;
  /** Set when the process exits; a server exiting mid-run is an error. */
  exited: { code: number | null; signal: NodeJS.Signals | null } | null;
}

const children: Child[] = [];
const tempDirs: string[] = [];
let cleaned = false;
let stopping = false;

/** True once a signal asked the run to stop (errors after that are consequences, not news). */
export function isStopping(): boolean {
  return stopping;
}

export function makeTempDir(prefix: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  tempDirs.push(dir);
  return dir;
}

export interface SpawnOptions {
  cpu: number;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  logDir: string;
}

/** `taskset -c <cpu> cmd args...` as the leader of a new process group; taskset execs, so pid is cmd's. */
export function spawnPinned(name: string, cmd: string, args: string[], opts: SpawnOptions): Child {
  const logFile = path.join(opts.logDir, `${name}.log`);
  const fd = fs.openSync(logFile, 'a');
  const proc = spawn('taskset', ['-c', String(opts.cpu), cmd, ...args], {
    detached: true,
    stdio: ['ignore', fd, fd],
    env: opts.env ?? process.env,
    cwd: opts.cwd,
  });
  fs.closeSync(fd);
  if (proc.pid === undefined) throw new Error(`could not start ${name} (${cmd})`);
  return trackChild(name, proc, logFile);
}

/** Registers a process-group leader spawned elsewhere (detached) so that cleanup kills it. */
export function trackChild(name: string, proc: ChildProcess, logFile = ''): Child {
  if (proc.pid === undefined) throw new Error(`could not start ${name}`);
  const child: Child = { name, pid: proc.pid, proc, logFile, exited: null };
  proc.on('exit', (code, signal) => {
    child.exited = { code, signal };
  });
  proc.on('error', () => {
    child.exited = { code: -1, signal: null };
  });
  children.push(child);
  return child;
}

export function logTail(child: Child, lines = 20): string {
  try {
    return fs.readFileSync(child.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

function signalAll(signal: NodeJS.Signals): void {
  // Descendants first (a child may have put its own children in other groups), then the groups.
  const pids = new Set<number>();
  for (const c of children) {
    if (c.exited) continue;
    for (const d of descendants(c.pid)) pids.add(d);
  }
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      /* already gone */
    }
  }
  for (const c of children) {
    if (c.exited) continue;
    try {
      process.kill(-c.pid, signal);
    } catch {
      /* already gone */
    }
  }
}

/** Graceful: SIGTERM everything, wait up to graceMs, then SIGKILL what is left; remove temp dirs. */
export async function cleanup(graceMs = 3000): Promise<void> {
  if (cleaned) return;
  signalAll('SIGTERM');
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline && children.some((c) => !c.exited)) {
    await sleep(50);
  }
  cleanupSync();
}

/** Last resort, usable from process.on('exit'): SIGKILL every group and descendant, remove temp dirs. */
export function cleanupSync(): void {
  if (cleaned) return;
  cleaned = true;
  signalAll('SIGKILL');
  if (process.env.BENCH_KEEP_TMP === '1') {
    if (tempDirs.length > 0) process.stderr.write(`bench: kept temp dirs ${tempDirs.join(' ')}\n`);
    return;
  }
  for (const d of tempDirs) fs.rmSync(d, { recursive: true, force: true });
}

/** Kill children on every way out: normal exit, SIGINT/SIGTERM/SIGHUP, uncaught errors. */
export function installCleanupHandlers(): void {
  process.on('exit', cleanupSync);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(sig, () => {
      stopping = true;
      process.stderr.write(`\nbench: ${sig}, stopping children...\n`);
      void cleanup(1500).finally(() => process.exit(sig === 'SIGINT' ? 130 : 143));
    });
  }
  process.on('uncaughtException', (err) => {
    process.stderr.write(`bench: ${err.stack ?? String(err)}\n`);
    void cleanup(1500).finally(() => process.exit(1));
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export interface HttpAnswer {
  status: number;
  body: Buffer;
}

/** No keep-alive: every readiness probe and priming call of the benchmark opens its own connection. */
const freshConnections = new http.Agent({ keepAlive: false });

/** One HTTP call on a fresh connection (no pooling), with a timeout; any status resolves. */
export async function httpCall(url: string, method: 'GET' | 'POST', body?: Buffer, timeoutMs = 5000, headers: Record<string, string> = {}): Promise<HttpAnswer> {
  const res = await axios.request<Buffer>({
    url,
    method,
    data: body,
    headers: body ? { 'content-type': 'application/json', ...headers } : headers,
    timeout: timeoutMs,
    httpAgent: freshConnections,
    proxy: false,
    responseType: 'arraybuffer',
    maxBodyLength: Infinity,
    maxContentLength: Infinity,
    validateStatus: () => true,
  });
  return { status: res.status, body: Buffer.from(res.data) };
}

/**
 * Polls `probe` until it answers 200, with a bounded deadline. Fails early, with the log tail,
 * if one of the watched children exits meanwhile.
 */
export async function waitReady(
  what: string,
  probe: () => Promise<HttpAnswer>,
  watch: Child[],
  deadlineMs: number,
): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    for (const c of watch) {
      if (c.exited) {
        throw new Error(
          `${what}: process ${c.name} exited (${c.exited.code ?? c.exited.signal}) before it was ready; ` +
            `log ${c.logFile}:\n${logTail(c)}`,
        );
      }
    }
    try {
      const ans = await probe();
      if (ans.status === 200) return;
      last = `HTTP ${ans.status}: ${ans.body.toString('utf8', 0, 200)}`;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    await sleep(100);
  }
  const logs = watch.map((c) => `--- ${c.name} (${c.logFile})\n${logTail(c)}`).join('\n');
  throw new Error(`${what} not ready after ${deadlineMs} ms (last: ${last})\n${logs}`);
}

/** Pins this process (all its threads) to a CPU list, e.g. "0" or "1". */
export function pinSelf(cpus: string): void {
  const r = spawnSync('taskset', ['-a', '-p', '-c', cpus, String(process.pid)], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`taskset -a -p -c ${cpus} ${process.pid} failed: ${r.stderr}`);
}

/** Absolute path of an executable on PATH (or in /usr/sbin, /sbin), or null. */
export function whichBinary(name: string): string | null {
  const dirs = (process.env.PATH ?? '').split(':').concat(['/usr/sbin', '/sbin']);
  for (const d of dirs) {
    if (d === '') continue;
    const p = path.join(d, name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {
      /* next */
    }
  }
  return null;
}
