// The C heap kept from holding freed memory (memoryTrim.ts): the timer and the threshold logic with
// an injected glibc and scheduler, and on this machine (Linux, glibc) the real calls through koffi,
// in child processes: a heap fragmented on purpose keeps the freed half of its buffers resident
// until the trim; with the threshold fixed, freed whole bodies leave at once.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { MMAP_THRESHOLD_BYTES, fixMmapThreshold, loadGlibc, startMemoryTrim, type Glibc, type Scheduler } from '../../src/memoryTrim.js';

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

/** A glibc that counts its trims and records the thresholds it is given. */
function fakeGlibc(accepts = true): Glibc & { trims: number; thresholds: number[] } {
  const g = {
    trims: 0,
    thresholds: [] as number[],
    trim: () => (g.trims++, true),
    setMmapThreshold: (b: number) => (g.thresholds.push(b), accepts),
  };
  return g;
}

test('trims on the first quiet interval after calls, never while calls run, and stops', () => {
  const sched = manualScheduler();
  const calls = { started: 0, inFlight: 0 };
  const glibc = fakeGlibc();
  const trim = startMemoryTrim(1000, glibc, () => calls, sched);
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
});

test('an interval of 0 schedules nothing and says so', () => {
  const sched = manualScheduler();
  const glibc = fakeGlibc();
  const trim = startMemoryTrim(0, glibc, () => ({ started: 0, inFlight: 0 }), sched);
  expect(trim.off).toBe('MEMORY_TRIM_INTERVAL_MS is 0');
  expect(sched.intervals).toEqual([]);
  sched.tick();
  trim.stop();
  expect(glibc.trims).toBe(0);
});

test('without malloc_trim it schedules nothing and keeps the reason', () => {
  const sched = manualScheduler();
  const trim = startMemoryTrim(1000, 'the C library is not glibc', () => ({ started: 0, inFlight: 0 }), sched);
  expect(trim.off).toBe('the C library is not glibc');
  expect(sched.intervals).toEqual([]);
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
  const module = fileURLToPath(new URL('../../src/memoryTrim.js', import.meta.url));
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--expose-gc', '--no-concurrent-array-buffer-sweeping', '--input-type=module', '-e', CHILD, module],
    { timeout: 30_000 },
  );
  const r = JSON.parse(stdout) as { before: number; after: number; released: boolean; kept: number };
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
  const module = fileURLToPath(new URL('../../src/memoryTrim.js', import.meta.url));
  const run = async (mode: 'fixed' | 'default'): Promise<{ freed: number; kept: number }> => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--expose-gc', '--no-concurrent-array-buffer-sweeping', '--input-type=module', '-e', THRESHOLD_CHILD, module, mode],
      { timeout: 30_000, env: { ...process.env, MALLOC_MMAP_THRESHOLD_: undefined } },
    );
    return JSON.parse(stdout) as { freed: number; kept: number };
  };
  const fixed = await run('fixed');
  const dflt = await run('default');
  expect(fixed.kept).toBe(50);
  // 50 freed bodies are 10 MB.
  expect(fixed.freed).toBeGreaterThan(8 * 1024 * 1024);
  expect(dflt.freed).toBeLessThan(2 * 1024 * 1024);
});
