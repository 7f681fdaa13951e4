// Small test utilities shared by the table tests: catching a thrown error of an expected class,
// and a seeded pseudo-random generator (tests and benchmarks never use Math.random).

/** Runs fn, expects it to throw an instance of `type`, and returns what it threw. */
export function thrownBy<T extends Error>(fn: () => unknown, type: abstract new (...args: never[]) => T): T {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  if (!(caught instanceof type)) throw new Error(`expected ${type.name} to be thrown, got ${caught === undefined ? 'no error' : String(caught)}`);
  return caught;
}

/** mulberry32: a small seeded PRNG returning [0, 1), deterministic across runs. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
