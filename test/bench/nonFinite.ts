// `npm run bench:nonfinite`: what accepting TF Serving's NaN / Infinity / -Infinity tokens costs a
// valid JSON body. Times, in this process, the gateway's tensorflow predict check (payload/prepare.ts:
// the byte-level fast check, falling back to the tolerant parse) and the tolerant parse
// (payload/json.ts) against plain JSON.parse, on row and columnar bodies without non-finite tokens,
// and the same bodies with a few NaN / Infinity tokens for contrast. Medians of many runs after warm-up.
import { preparePredict } from '../../src/payload/prepare.js';
import { parseJson } from '../../src/payload/json.js';
import { prng } from '../helpers/expect.js';
import { medianUs } from './payloads.js';

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 200);
const WARMUP = 50;

const timeUs = (fn: () => unknown): number => medianUs(fn, ITERATIONS, WARMUP);

/** `n` pseudo-random floats with four decimals, as JSON number texts. */
function floats(n: number, seed: number): string[] {
  const rnd = prng(seed);
  return Array.from({ length: n }, () => (rnd() * 100 - 50).toFixed(4));
}

/** Replaces every `every`-th number with NaN, Infinity, -Infinity in turn. */
function withNonFinite(xs: string[], every: number): string[] {
  const tokens = ['NaN', 'Infinity', '-Infinity'];
  return xs.map((x, i) => (i % every === every - 1 ? tokens[(i / every | 0) % 3] : x));
}

const N = 20_000;
const xs = floats(N, 7);
const rows = (v: string[]): string => `{"instances": [${Array.from({ length: v.length / 4 }, (_, i) => `[${v.slice(i * 4, i * 4 + 4).join(',')}]`).join(',')}]}`;
const columnar = (v: string[]): string => `{"inputs": {"x": [${v.join(',')}]}}`;

const bodies: [string, string][] = [
  ['row form (5000 × 4 floats)', rows(xs)],
  ['columnar form (20000 floats)', columnar(xs)],
];

const lines = [
  '| body | bytes | JSON.parse µs | tolerant parse µs (valid) | gateway TF check µs (valid) | same body with 1 in 1000 non-finite: tolerant parse µs | gateway TF check µs |',
  '| --- | --- | --- | --- | --- | --- | --- |',
];
for (const [label, text] of bodies) {
  const nonFinite = label.startsWith('row') ? rows(withNonFinite(xs, 1000)) : columnar(withNonFinite(xs, 1000));
  const buf = Buffer.from(text);
  const bufNf = Buffer.from(nonFinite);
  const plain = timeUs(() => JSON.parse(text));
  const tolerant = timeUs(() => parseJson(text, true));
  const check = timeUs(() => preparePredict(buf, 'tensorflow', 32));
  const tolerantNf = timeUs(() => parseJson(nonFinite, true));
  const checkNf = timeUs(() => preparePredict(bufNf, 'tensorflow', 32));
  lines.push(`| ${label} | ${buf.length} | ${plain.toFixed(0)} | ${tolerant.toFixed(0)} (${(tolerant / plain).toFixed(2)}x) | ${check.toFixed(0)} (${(check / plain).toFixed(2)}x) | ${tolerantNf.toFixed(0)} (${(tolerantNf / plain).toFixed(2)}x) | ${checkNf.toFixed(0)} (${(checkNf / plain).toFixed(2)}x) |`);
}
process.stdout.write(`## NaN / Infinity support on valid JSON (median of ${ITERATIONS}, node ${process.version})\n\n${lines.join('\n')}\n`);
