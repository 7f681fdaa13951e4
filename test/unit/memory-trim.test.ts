// Freed memory given back (memoryTrim.ts): the timer and the threshold logic with an injected
// collection, glibc and scheduler, and on this machine (Linux, glibc) the real calls, in child
// processes: ArrayBuffers promoted while in use stay resident after they die until a full
// collection; a heap fragmented on purpose keeps the freed half of its buffers resident until the
// trim; with the threshold fixed, freed whole bodies leave at once.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { MMAP_THRESHOLD_BYTES, fixMmapThreshold, fullCollection, loadGlibc, startMemoryTrim, type Glibc, type Scheduler } from '../../src/memoryTrim.js';

/** A scheduler whose ticks the test fires by hand. */
function manualScheduler(): Scheduler & { tick(): void; intervals: number[]; stopped: number } {
  let fns: Array<() => void> = [];
  const s = {
    intervals: [] as number[],
    stopped: 0,
    every(ms: number, fn: () => void) {
      s.intervals.push(ms);
      fns.push(fn);
      return {
        stop: () => {
          s.stopped++;
          fns = fns.filter((f) => f !== fn);
        },
      };
    },
    tick: () => fns.forEach((f) => f()),
  };
  return s;
}

/** A glibc that counts its trims (in `steps`, when given) and records the thresholds it is given. */
function fakeGlibc(accepts = true, steps: string[] = []): Glibc & { trims: number; thresholds: number[] } {
  const g = {
    trims: 0,
    thresholds: [] as number[],
    trim: () => (g.trims++, steps.push('trim'), true),
    setMmapThreshold: (b: number) => (g.thresholds.push(b), accepts),
  };
  return g;
}

/**
 * Runs `script` as an ES module in a child node with gc() exposed and array buffers swept at once
 * (so memory figures are settled when read); argv[1] is memoryTrim.js, then `args`. Parses its stdout.
 */
async function child<T>(script: string, args: string[] = [], env: NodeJS.ProcessEnv = process.env): Promise<T> {
  const module = fileURLToPath(new URL('../../src/memoryTrim.js', import.meta.url));
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--expose-gc', '--no-concurrent-array-buffer-sweeping', '--input-type=module', '-e', script, module, ...args],
    { timeout: 30_000, env },
  );
  return JSON.parse(stdout) as T;
}

test('collects, then trims, on the first quiet interval after calls, never while calls run, and stops', () => {
  const sched = manualScheduler();
  const calls = { started: 0, inFlight: 0 };
  const steps: string[] = [];
  const glibc = fakeGlibc(true, steps);
  const trim = startMemoryTrim(1000, { collect: () => steps.push('collect'), glibc }, () => calls, sched);
  expect(trim.off).toBeUndefined();
  expect(sched.intervals).toEqual([1000]);
  sched.tick(); // quiet after start-up, which counts as work: trims
  expect(glibc.trims).toBe(1);
  sched.tick(); // still quiet, nothing new to give back
  calls.started = 40;
  calls.inFlight = 3;
  sched.tick(); // calls started
  calls.started = 41;
  calls.inFlight = 0;
  sched.tick(); // one more started and finished in this interval
  expect(glibc.trims).toBe(1);
  sched.tick(); // quiet again: trims
  expect(glibc.trims).toBe(2);
  calls.inFlight = 1;
  sched.tick(); // none started, but one has been running all along (a slow model): not quiet
  sched.tick();
  expect(glibc.trims).toBe(2);
  calls.inFlight = 0;
  sched.tick();
  expect(glibc.trims).toBe(3);
  trim.stop();
  calls.started = 50;
  sched.tick();
  sched.tick();
  expect(glibc.trims).toBe(3);
  expect(sched.stopped).toBe(1);
  expect(steps).toEqual(['collect', 'trim', 'collect', 'trim', 'collect', 'trim']);
});

test('either step runs alone when the other is missing; with neither, nothing is scheduled', () => {
  const sched = manualScheduler();
  const steps: string[] = [];
  const collectOnly = startMemoryTrim(1000, { collect: () => steps.push('collect'), glibc: 'not Linux (darwin)' }, () => ({ started: 0, inFlight: 0 }), sched);
  const trimOnly = startMemoryTrim(1000, { collect: 'no full collection', glibc: fakeGlibc(true, steps) }, () => ({ started: 0, inFlight: 0 }), sched);
  expect([collectOnly.off, trimOnly.off]).toEqual([undefined, undefined]);
  sched.tick();
  expect(steps.sort()).toEqual(['collect', 'trim']);
  const neither = startMemoryTrim(1000, { collect: 'no full collection', glibc: 'not Linux (darwin)' }, () => ({ started: 0, inFlight: 0 }), sched);
  expect(neither.off).toBe('no full collection; not Linux (darwin)');
  expect(sched.intervals).toEqual([1000, 1000]);
});

test('the full collection is V8\'s gc() when node exposes it, else the reason', () => {
  const saved = globalThis.gc;
  try {
    let calls = 0;
    globalThis.gc = (() => void calls++) as typeof globalThis.gc;
    const collect = fullCollection();
    if (typeof collect === 'string') throw new Error(collect);
    collect();
    expect(calls).toBe(1);
    globalThis.gc = undefined;
    expect(fullCollection()).toMatch(/without --expose-gc/);
  } finally {
    globalThis.gc = saved;
  }
});

test('an interval of 0 schedules nothing and says so', () => {
  const sched = manualScheduler();
  const glibc = fakeGlibc();
  const trim = startMemoryTrim(0, { collect: () => undefined, glibc }, () => ({ started: 0, inFlight: 0 }), sched);
  expect(trim.off).toBe('MEMORY_TRIM_INTERVAL_MS is 0');
  expect(sched.intervals).toEqual([]);
  sched.tick();
  trim.stop();
  expect(glibc.trims).toBe(0);
});

test('the mmap threshold is fixed unless MALLOC_MMAP_THRESHOLD_ chose one or glibc is missing', () => {
  const glibc = fakeGlibc();
  expect(fixMmapThreshold(glibc, {})).toBe(MMAP_THRESHOLD_BYTES);
  expect(glibc.thresholds).toEqual([131072]);
  expect(fixMmapThreshold(glibc, { MALLOC_MMAP_THRESHOLD_: '65536' })).toBe('MALLOC_MMAP_THRESHOLD_=65536 is set');
  expect(glibc.thresholds).toEqual([131072]);
  expect(fixMmapThreshold(fakeGlibc(false), {})).toBe('glibc refused the threshold');
  expect(fixMmapThreshold('not Linux (darwin)', {})).toBe('not Linux (darwin)');
});

test('on Linux with glibc, both calls are reached through koffi', () => {
  expect(process.platform).toBe('linux');
  const glibc = loadGlibc();
  if (typeof glibc === 'string') throw new Error(glibc);
  expect(typeof glibc.trim()).toBe('boolean');
  expect(glibc.setMmapThreshold(MMAP_THRESHOLD_BYTES)).toBe(true);
});

// The child keeps 40 buffers of 1 MiB alive through two young collections (so V8 promotes them, as
// it does bodies in flight under load), then drops them. Young collections do not free them; the
// quiet release's full collection does, and the trim after it.
const PROMOTED_CHILD = `
const { fullCollection, loadGlibc, startMemoryTrim } = await import(process.argv[1]);
let bodies = Array.from({ length: 40 }, () => Buffer.alloc(1024 * 1024, 7));
globalThis.gc({ type: 'minor' });
globalThis.gc({ type: 'minor' });
bodies = null;
globalThis.gc({ type: 'minor' });
const before = process.memoryUsage().arrayBuffers;
let tick;
startMemoryTrim(1000, { collect: fullCollection(), glibc: loadGlibc() }, () => ({ started: 0, inFlight: 0 }), { every: (ms, fn) => ((tick = fn), { stop() {} }) });
tick();
process.stdout.write(JSON.stringify({ before, after: process.memoryUsage().arrayBuffers }));
`;

test('the quiet release frees ArrayBuffers that died after V8 promoted them', async () => {
  const r = await child<{ before: number; after: number }>(PROMOTED_CHILD);
  // 40 MiB dead but counted before; at least 35 MiB of it gone after.
  expect(r.before).toBeGreaterThan(40 * 1024 * 1024);
  expect(r.before - r.after).toBeGreaterThan(35 * 1024 * 1024);
});

// The child allocates 600 buffers of 100 KiB (below glibc's mmap threshold, so from the heap),
// touches them, frees every other one and collects. The freed ones lie between live ones, so
// free() cannot give them back; malloc_trim must.
const CHILD = `
import { readFileSync } from 'node:fs';
const { loadGlibc } = await import(process.argv[1]);
const glibc = loadGlibc();
const anon = () => Number(readFileSync('/proc/self/status', 'utf8').match(/RssAnon:\\s+(\\d+)/)[1]) * 1024;
let all = Array.from({ length: 600 }, () => Buffer.allocUnsafeSlow(100 * 1024).fill(7));
const kept = all.filter((_, i) => i % 2 === 0);
all = null;
globalThis.gc();
globalThis.gc();
const before = anon();
const released = glibc.trim();
const after = anon();
process.stdout.write(JSON.stringify({ before, after, released, kept: kept.length }));
`;

test('malloc_trim gives the freed half of a fragmented heap back', async () => {
  const r = await child<{ before: number; after: number; released: boolean; kept: number }>(CHILD);
  expect(r.kept).toBe(300);
  expect(r.released).toBe(true);
  // 300 freed buffers are 30 MB; at least 20 MB of it must leave the resident set.
  expect(r.before - r.after).toBeGreaterThan(20 * 1024 * 1024);
});

// With glibc's default, freeing a 1 MiB block raises the mmap threshold past 200 KiB, so 200 KiB
// bodies come from the heap and the freed half of them (between live ones) stays resident. With the
// threshold fixed, each is mapped on its own and leaves the resident set when freed.
const THRESHOLD_CHILD = `
import { readFileSync } from 'node:fs';
const { fixMmapThreshold, loadGlibc } = await import(process.argv[1]);
if (process.argv[2] === 'fixed') fixMmapThreshold(loadGlibc(), {});
const anon = () => Number(readFileSync('/proc/self/status', 'utf8').match(/RssAnon:\\s+(\\d+)/)[1]) * 1024;
let big = Buffer.allocUnsafeSlow(1024 * 1024).fill(1);
big = null;
globalThis.gc();
let all = Array.from({ length: 100 }, () => Buffer.allocUnsafeSlow(200 * 1024).fill(7));
const before = anon();
const kept = all.filter((_, i) => i % 2 === 0);
all = null;
globalThis.gc();
globalThis.gc();
process.stdout.write(JSON.stringify({ freed: before - anon(), kept: kept.length }));
`;

test('with the threshold fixed, freed 200 KiB bodies leave the resident set; with glibc\'s default they stay', async () => {
  const run = (mode: 'fixed' | 'default') => child<{ freed: number; kept: number }>(THRESHOLD_CHILD, [mode], { ...process.env, MALLOC_MMAP_THRESHOLD_: undefined });
  const fixed = await run('fixed');
  const dflt = await run('default');
  expect(fixed.kept).toBe(50);
  // 50 freed bodies are 10 MB.
  expect(fixed.freed).toBeGreaterThan(8 * 1024 * 1024);
  expect(dflt.freed).toBeLessThan(2 * 1024 * 1024);
});
