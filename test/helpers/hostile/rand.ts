// The seeded randomness of the hostile corpus: one generator per body, seeded from the corpus seed
// and the body's index (so any body can be made again alone from the two), over mulberry32
// (test/helpers/expect.ts), with the few draws the generators need.
import { prng } from '../expect.js';

/** A 32-bit mix of a seed and an index (splitmix32's finaliser): neighbouring indexes get unrelated streams. */
export function mix(seed: number, index: number): number {
  let h = (seed ^ Math.imul(index + 0x9e3779b9, 0x85ebca6b)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x7feb352d);
  h = Math.imul(h ^ (h >>> 15), 0x846ca68b);
  return (h ^ (h >>> 16)) >>> 0;
}

export class Rand {
  private readonly next: () => number;
  constructor(seed: number) {
    this.next = prng(seed);
  }

  /** [0, 1). */
  float(): number {
    return this.next();
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** An integer in [lo, hi]. */
  between(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)];
  }

  /** An item drawn by weight. */
  weighted<T>(xs: readonly (readonly [T, number])[]): T {
    let total = 0;
    for (const [, w] of xs) total += w;
    let r = this.next() * total;
    for (const [x, w] of xs) if ((r -= w) < 0) return x;
    return xs[xs.length - 1][0];
  }

  /** `n` random bytes. */
  bytes(n: number): Buffer {
    const b = Buffer.allocUnsafe(n);
    for (let i = 0; i < n; i++) b[i] = this.int(256);
    return b;
  }

  /** A short identifier-like word. */
  word(min = 1, max = 8): string {
    const n = this.between(min, max);
    let s = '';
    for (let i = 0; i < n; i++) s += 'abcdefghijklmnopqrstuvwxyz_0123456789'[this.int(i === 0 ? 26 : 37)];
    return s;
  }
}
