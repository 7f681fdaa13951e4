// Benchmark request bodies, built deterministically from a seeded PRNG (same bytes on every run), and
// the in-process cost of one JSON.parse of each: the floor of any gateway that validates the body.

import { PayloadName } from './config.js';
import { prng } from '../helpers/expect.js';

export interface Payload {
  name: PayloadName;
  body: Buffer;
  /** Median µs of `JSON.parse(body.toString())`, filled by measureParseCost. */
  parseUs: number;
}

export { prng };

/** ~100 bytes: two instances of four floats, KServe v1 / TorchServe `{"data": ...}` envelope. */
export function smallBody(): Buffer {
  const rnd = prng(1);
  const inst = () => ({ data: [0, 1, 2, 3].map(() => Number((rnd() * 10).toFixed(3))) });
  return Buffer.from(JSON.stringify({ instances: [inst(), inst()] }));
}

/** ~400 KB: one image-like tensor, rows of 224 [r,g,b] pixels with four decimals. */
export function tensorBody(targetBytes = 400 * 1024): Buffer {
  const rnd = prng(2);
  const px = () => `[${rnd().toFixed(4)},${rnd().toFixed(4)},${rnd().toFixed(4)}]`;
  const rows: string[] = [];
  let size = '{"instances":[{"data":[]}]}'.length;
  while (size < targetBytes) {
    const cols: string[] = [];
    for (let i = 0; i < 224; i++) cols.push(px());
    const row = `[${cols.join(',')}]`;
    rows.push(row);
    size += row.length + 1;
  }
  return Buffer.from(`{"instances":[{"data":[${rows.join(',')}]}]}`);
}

/** ~1 MB: 768 KiB of random bytes as one base64 string (1 MiB of text) in a `{"b64": ...}` object. */
export function base64Body(rawBytes = 768 * 1024): Buffer {
  const rnd = prng(3);
  const raw = Buffer.alloc(rawBytes);
  for (let i = 0; i < rawBytes; i++) raw[i] = Math.floor(rnd() * 256);
  return Buffer.from(JSON.stringify({ instances: [{ data: { b64: raw.toString('base64') } }] }));
}

export function buildPayload(name: PayloadName): Payload {
  const body = name === 'small' ? smallBody() : name === 'tensor' ? tensorBody() : base64Body();
  return { name, body, parseUs: 0 };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/**
 * Median µs of `JSON.parse(buf.toString())` after a warm-up. Keeps each result alive only until the
 * next iteration (like a gateway that lets the tree die), and touches it so it cannot be optimised away.
 */
export function measureParseCost(buf: Buffer, iterations = 50, warmup = 10): number {
  let sink = 0;
  const times: number[] = [];
  for (let i = 0; i < warmup + iterations; i++) {
    const t0 = process.hrtime.bigint();
    const v: unknown = JSON.parse(buf.toString());
    const t1 = process.hrtime.bigint();
    if (typeof v === 'object' && v !== null) sink++;
    if (i >= warmup) times.push(Number(t1 - t0) / 1000);
  }
  if (sink === 0) throw new Error('JSON.parse produced no object');
  return median(times);
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(0)} KB`;
  return `${(n / 1024 / 1024).toFixed(2)} MB`;
}
