// Memory the long-running commands hold after it was freed, given back:
// - glibc maps allocations of 128 KiB or more (whole bodies) on their own and unmaps them when
//   freed. glibc's default threshold moves up to the largest block freed so far (up to 32 MiB),
//   after which 1 MB bodies come from the heap and leave holes in it. 128 KiB keeps the 64 KiB
//   socket reads in the heap, where they are cheap;
// - once the gateway goes quiet after calls: first a full V8 collection, which frees the socket
//   reads and bodies V8 still counted as live (ArrayBuffers promoted during the load wait for a
//   full collection, and V8 starts one for them only some 64 MB past the last) and the heap pages left
//   empty; then `malloc_trim(0)`, which gives the free pages between C heap blocks still in use
//   back to the kernel (free() only gives back the top of the heap). Measured after 1 MB predict
//   at 64 connections and 2.5 s of quiet: 149-152 MB resident with the trim alone, 85-104 with the
//   collection first; a collection costs the local-mode gateway 20-27 ms. Never while calls run:
//   pages given back are faulted in again as soon as they are reused, which cost a 400 KB
//   rawPredict ~10% more CPU when trimmed every second under load (and a proxy whose model is the
//   bottleneck can be busy at a fifth of a core, so CPU use does not tell).
//   The same refaults make the release a cost for bursty traffic: with a 1 s quiet interval, 400 KB
//   rawPredict in 4 s bursts 4 s apart took 15-20% more CPU than with none, hence a 30 s default
//   (MEMORY_TRIM_INTERVAL_MS): memory goes back once a gateway is idle, not between bursts.
// README, Performance, has the measurements. glibc is reached through koffi, the FFI library, so no
// native addon is compiled; the collection is V8's gc() (--expose-gc, on bin/predictgate.js's
// shebang). Either step is left out when it is not there (not Linux with glibc, koffi cannot load,
// node started without the flag), and the start-up log says why.
import { createRequire } from 'node:module';

/** The two glibc calls this module makes. */
export interface Glibc {
  /** malloc_trim(0): whether any memory went back to the kernel. */
  trim(): boolean;
  /** mallopt(M_MMAP_THRESHOLD, bytes): whether glibc took it. */
  setMmapThreshold(bytes: number): boolean;
}

export interface Scheduler {
  every(ms: number, fn: () => void): { stop(): void };
}

/** What the gateway reports of its calls. */
export interface CallActivity {
  /** Calls started since the process began. */
  started: number;
  inFlight: number;
}

/** What a quiet gateway gives back, in this order; a string says why that step is left out. */
export interface QuietRelease {
  /** A full V8 collection. */
  collect: (() => void) | string;
  glibc: Glibc | string;
}

export interface MemoryTrim {
  /** Why nothing runs, or undefined when it does. */
  readonly off: string | undefined;
  stop(): void;
}

export const MMAP_THRESHOLD_BYTES = 128 * 1024;
const M_MMAP_THRESHOLD = -3; // <malloc.h>

const realScheduler: Scheduler = {
  every(ms, fn) {
    const timer = setInterval(fn, ms);
    timer.unref();
    return { stop: () => clearInterval(timer) };
  },
};

/** glibc's calls, or why they are not there. */
export function loadGlibc(): Glibc | string {
  if (process.platform !== 'linux') return `not Linux (${process.platform})`;
  try {
    const require = createRequire(import.meta.url);
    const koffi = require('koffi') as typeof import('koffi');
    const libc = koffi.load('libc.so.6'); // glibc's soname: musl has neither it nor these calls
    const trim = libc.func('int malloc_trim(size_t pad)') as (pad: number) => number;
    const mallopt = libc.func('int mallopt(int param, int value)') as (param: number, value: number) => number;
    return { trim: () => trim(0) === 1, setMmapThreshold: (bytes) => mallopt(M_MMAP_THRESHOLD, bytes) === 1 };
  } catch (err) {
    return `koffi could not reach glibc: ${err instanceof Error ? err.message : String(err)}`;
  }
}

/**
 * Every `intervalMs` (0: never) looks at the calls: an interval in which none started and none is in
 * flight at its end is quiet, and the first quiet one after calls collects and trims. Start-up counts
 * as work (module loading leaves free heap behind).
 */
export function startMemoryTrim(intervalMs: number, release: QuietRelease, activity: () => CallActivity, scheduler: Scheduler = realScheduler): MemoryTrim {
  const { collect, glibc } = release;
  const off =
    intervalMs <= 0 ? 'MEMORY_TRIM_INTERVAL_MS is 0' : typeof collect === 'string' && typeof glibc === 'string' ? `${collect}; ${glibc}` : undefined;
  let workSinceTrim = true;
  let lastStarted = activity().started;
  const tick = (): void => {
    const { started, inFlight } = activity();
    const quiet = started === lastStarted && inFlight === 0;
    lastStarted = started;
    if (!quiet) {
      workSinceTrim = true;
    } else if (workSinceTrim) {
      workSinceTrim = false;
      if (typeof collect !== 'string') collect();
      if (typeof glibc !== 'string') glibc.trim();
    }
  };
  const timer = off === undefined ? scheduler.every(intervalMs, tick) : undefined;
  return { off, stop: () => timer?.stop() };
}

/** V8's full collection when node runs with --expose-gc, or why there is none. */
export function fullCollection(): (() => void) | string {
  const gc = globalThis.gc;
  return typeof gc === 'function' ? () => gc() : 'no full collection: node runs without --expose-gc (bin/predictgate.js sets it)';
}

/**
 * Fixes glibc's mmap threshold at MMAP_THRESHOLD_BYTES unless MALLOC_MMAP_THRESHOLD_ (glibc's own
 * variable, read at start) chose one. Returns the threshold in force, or why it was left alone.
 */
export function fixMmapThreshold(glibc: Glibc | string, env: NodeJS.ProcessEnv): number | string {
  if (typeof glibc === 'string') return glibc;
  if (env.MALLOC_MMAP_THRESHOLD_ !== undefined) return `MALLOC_MMAP_THRESHOLD_=${env.MALLOC_MMAP_THRESHOLD_} is set`;
  return glibc.setMmapThreshold(MMAP_THRESHOLD_BYTES) ? MMAP_THRESHOLD_BYTES : 'glibc refused the threshold';
}
