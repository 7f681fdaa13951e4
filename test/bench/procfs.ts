// Reading /proc for the benchmark: CPU time of a process (utime+stime), per-CPU busy time, RSS and its
// peak (VmHWM, with reset through clear_refs), CPU affinity, command lines, environment variables and
// process descendants.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';

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

/** One variable of a process's environment (undefined when unset or unreadable). */
export function readEnvVar(pid: number, name: string): string | undefined {
  try {
    const entry = fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').find((e) => e.startsWith(`${name}=`));
    return entry?.slice(name.length + 1);
  } catch {
    return undefined;
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
