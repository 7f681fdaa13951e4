// A memory cgroup of the bench's own with a limit, as a pod's container has (cgroup v2 where the
// memory controller is on it, else v1's memory hierarchy): a process started in it sees the limit
// (Node sizes its heap from it) and the kernel counts its memory and stops it as a kubelet's pod would
// be, with an OOM kill past the limit. Needs root; the bench removes it when it ends.
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const V2_ROOT = '/sys/fs/cgroup';
const V1_ROOT = '/sys/fs/cgroup/memory';

export interface MemoryCgroup {
  /** Its folder. */
  readonly dir: string;
  /** The file a process's pid is written to, to move it in (cgroup.procs). */
  readonly procsFile: string;
  readonly limitBytes: number;
  /** The kernel's high-water mark of the memory charged to it (memory.peak, v1 memory.max_usage_in_bytes): RSS and page cache. */
  peakBytes(): number;
  /** Processes in it the kernel's OOM killer stopped. */
  oomKills(): number;
  /** Removes it (its processes must have exited). */
  remove(): void;
}

/** The memory controller's root folder and version, or null when this machine has neither. */
function memoryRoot(): { root: string; version: 1 | 2 } | null {
  const controllers = join(V2_ROOT, 'cgroup.controllers');
  if (existsSync(controllers) && readFileSync(controllers, 'utf8').split(/\s+/).includes('memory')) return { root: V2_ROOT, version: 2 };
  if (existsSync(join(V1_ROOT, 'memory.limit_in_bytes'))) return { root: V1_ROOT, version: 1 };
  return null;
}

/** A field of a flat keyed file (memory.events, memory.oom_control). */
function field(file: string, key: string): number {
  const m = new RegExp(`^${key} (\\d+)$`, 'm').exec(readFileSync(file, 'utf8'));
  return m ? Number(m[1]) : 0;
}

/**
 * Creates the cgroup `name` with a memory limit of `limitBytes` and no swap. Throws, saying why, when
 * the machine has no memory controller or the bench may not write it (run as root).
 */
export function createMemoryCgroup(name: string, limitBytes: number): MemoryCgroup {
  const found = memoryRoot();
  if (!found) throw new Error('no memory cgroup controller on this machine (neither cgroup v2 with memory nor v1 /sys/fs/cgroup/memory)');
  const dir = join(found.root, name);
  try {
    mkdirSync(dir);
  } catch (err) {
    throw new Error(`cannot create the memory cgroup ${dir} (run as root): ${(err as Error).message}`);
  }
  const read = (file: string): number => Number(readFileSync(join(dir, file), 'utf8').trim());
  if (found.version === 2) {
    writeFileSync(join(dir, 'memory.max'), String(limitBytes));
    if (existsSync(join(dir, 'memory.swap.max'))) writeFileSync(join(dir, 'memory.swap.max'), '0');
  } else {
    writeFileSync(join(dir, 'memory.limit_in_bytes'), String(limitBytes));
    if (existsSync(join(dir, 'memory.memsw.limit_in_bytes'))) writeFileSync(join(dir, 'memory.memsw.limit_in_bytes'), String(limitBytes));
  }
  return {
    dir,
    procsFile: join(dir, 'cgroup.procs'),
    limitBytes,
    peakBytes: () => read(found.version === 2 ? 'memory.peak' : 'memory.max_usage_in_bytes'),
    oomKills: () => field(join(dir, found.version === 2 ? 'memory.events' : 'memory.oom_control'), 'oom_kill'),
    remove: () => rmdirSync(dir),
  };
}
