// Child processes of the benchmark: starts them pinned to a CPU (taskset) in their own process group,
// logs their output to the run's temp dir, kills every group and descendant on exit, error or signal,
// and removes temp dirs. Also: free loopback ports, bounded readiness polling, /proc CPU and memory.

import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

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

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      srv.close(() => (port > 0 ? resolve(port) : reject(new Error('no port'))));
    });
  });
}

export interface HttpAnswer {
  status: number;
  body: Buffer;
}

/** One HTTP call on a fresh connection (no pooling), with a timeout. */
export function httpCall(url: string, method: 'GET' | 'POST', body?: Buffer, timeoutMs = 5000): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method,
        agent: false,
        timeout: timeoutMs,
        headers: body ? { 'content-type': 'application/json', 'content-length': body.length } : {},
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`timeout after ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
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

// ---------- /proc ----------

const clkTck = ((): number => {
  const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
  const n = Number(r.stdout?.trim());
  return Number.isFinite(n) && n > 0 ? n : 100;
})();

export interface CpuTimes {
  /** µs the CPU spent busy (user, nice, system, irq, softirq, steal). */
  busyUs: number;
  /** µs of wall time the CPU accounted (busy + idle + iowait). */
  totalUs: number;
}

/** Per-CPU times from /proc/stat, to see how much of the server CPU other processes took. */
export function cpuTimes(cpu: number): CpuTimes {
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n').find((l) => l.startsWith(`cpu${cpu} `));
    if (!line) return { busyUs: NaN, totalUs: NaN };
    const [user, nice, system, idle, iowait, irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
    const busy = user + nice + system + irq + softirq + (steal || 0);
    return { busyUs: (busy * 1e6) / clkTck, totalUs: ((busy + idle + iowait) * 1e6) / clkTck };
  } catch {
    return { busyUs: NaN, totalUs: NaN };
  }
}

/** Fields of /proc/<pid>/stat after the `(comm)` field: index 0 is field 3 (state). */
function statFields(pid: number): string[] | null {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return s.slice(s.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/** utime+stime of a process in µs (own threads only, not its children). */
export function cpuUs(pid: number): number {
  const f = statFields(pid);
  if (!f) return NaN;
  const ticks = Number(f[11]) + Number(f[12]); // fields 14 (utime) and 15 (stime)
  return (ticks * 1e6) / clkTck;
}

/** Sum over live pids (a pid that is gone counts 0; callers check that their servers are alive). */
export function cpuUsSum(pids: number[]): number {
  return pids.reduce((sum, p) => {
    const us = cpuUs(p);
    return Number.isFinite(us) ? sum + us : sum;
  }, 0);
}

function statusKb(pid: number, key: 'VmRSS' | 'VmHWM'): number {
  try {
    const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(s);
    return m ? Number(m[1]) : NaN;
  } catch {
    return NaN;
  }
}

export const rssKb = (pid: number): number => statusKb(pid, 'VmRSS');
export const hwmKb = (pid: number): number => statusKb(pid, 'VmHWM');

export function cpusAllowed(pid: number): string {
  try {
    const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    return /^Cpus_allowed_list:\s+(\S+)/m.exec(s)?.[1] ?? '?';
  } catch {
    return '?';
  }
}

/** Resets VmHWM to the current RSS (Linux >= 4.0, needs to own the process). False if refused. */
export function resetHwm(pid: number): boolean {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

export function readCmdline(pid: number): string[] {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter((s) => s !== '');
  } catch {
    return [];
  }
}

/** Every live descendant of pid, by scanning the ppid field of /proc/<n>/stat. */
export function descendants(pid: number): number[] {
  const parent = new Map<number, number>();
  let entries: string[] = [];
  try {
    entries = fs.readdirSync('/proc');
  } catch {
    return [];
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    const f = statFields(Number(e));
    if (f) parent.set(Number(e), Number(f[1]));
  }
  const out: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const p = queue.shift() as number;
    for (const [c, pp] of parent) {
      if (pp === p) {
        out.push(c);
        queue.push(c);
      }
    }
  }
  return out;
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
