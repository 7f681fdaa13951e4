// Benchmark request bodies, built deterministically from a seeded PRNG (same bytes on every run): the
// echo model's small JSON, nested-list tensor and base64 bodies, a GraphStorm gs-realtime-v0.1 graph
// and a TF Serving columnar tensor; a small probe body per model kind (readiness checks); and the
// in-process cost of one JSON.parse of each body: the floor of any gateway that validates the body.

import { ModelKind, PAYLOAD_MODEL, PayloadName } from './config.js';
import { prng } from '../helpers/expect.js';

export interface Payload {
  name: PayloadName;
  /** The model it is sent to. */
  model: ModelKind;
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

/** Shape of the GraphStorm payload: 200 nodes, 400 edges, 10 targets. */
const GRAPH_SHAPE = {
  authors: 120,
  papers: 80,
  /** author-writing-paper edges, each with a `weight` feature. */
  writing: 250,
  /** paper-citing-paper edges, without features. */
  citing: 150,
  targets: 10,
  authorFeatures: 16,
  paperFeatures: 32,
} as const;

/**
 * A GraphStorm real-time inference payload (gs-realtime-v0.1, node_classification) that the gateway's
 * spec checks accept: node types author (`feat`: 16 floats) and paper (`feat`: 32 floats, `year`: [n]);
 * edges ["author","writing","paper"] (`weight`: [float]) and ["paper","citing","paper"] (no features),
 * each between existing nodes and no pair twice; 10 distinct author targets.
 */
export function graphstormBody(): Buffer {
  const g = GRAPH_SHAPE;
  const rnd = prng(4);
  const floats = (n: number) => Array.from({ length: n }, () => Number((rnd() * 2 - 1).toFixed(4)));
  const pick = (n: number) => Math.floor(rnd() * n);
  const nodes: unknown[] = [];
  for (let i = 0; i < g.authors; i++) {
    nodes.push({ node_type: 'author', node_id: `a${i}`, features: { feat: floats(g.authorFeatures) } });
  }
  for (let i = 0; i < g.papers; i++) {
    nodes.push({
      node_type: 'paper',
      node_id: `p${i}`,
      features: { feat: floats(g.paperFeatures), year: [2000 + pick(25)] },
    });
  }
  const edges: unknown[] = [];
  const seen = new Set<string>();
  const addEdges = (count: number, type: [string, string, string], src: () => string, dest: () => string, features: () => object) => {
    for (let added = 0; added < count; ) {
      const s = src();
      const d = dest();
      const key = `${type[1]}:${s}>${d}`;
      if (s === d || seen.has(key)) continue;
      seen.add(key);
      edges.push({ edge_type: type, src_node_id: s, dest_node_id: d, features: features() });
      added++;
    }
  };
  addEdges(g.writing, ['author', 'writing', 'paper'], () => `a${pick(g.authors)}`, () => `p${pick(g.papers)}`, () => ({ weight: floats(1) }));
  addEdges(g.citing, ['paper', 'citing', 'paper'], () => `p${pick(g.papers)}`, () => `p${pick(g.papers)}`, () => ({}));
  const targets = new Set<string>();
  while (targets.size < g.targets) targets.add(`a${pick(g.authors)}`);
  return Buffer.from(
    JSON.stringify({
      version: 'gs-realtime-v0.1',
      gml_task: 'node_classification',
      graph: { nodes, edges },
      targets: [...targets].map((id) => ({ node_type: 'author', node_id: id })),
    }),
  );
}

/** ~150 KB: TF Serving columnar form, the named input `x` (the half-plus-two model's) as one list of floats. */
export function columnarBody(targetBytes = 150 * 1024): Buffer {
  const rnd = prng(5);
  const values: string[] = [];
  let size = '{"inputs":{"x":[]}}'.length;
  while (size < targetBytes) {
    const v = (rnd() * 200 - 100).toFixed(4);
    values.push(v);
    size += v.length + 1;
  }
  return Buffer.from(`{"inputs":{"x":[${values.join(',')}]}}`);
}

export function buildPayload(name: PayloadName): Payload {
  const build: Record<PayloadName, () => Buffer> = {
    small: smallBody,
    tensor: () => tensorBody(),
    base64: () => base64Body(),
    graphstorm: graphstormBody,
    columnar: () => columnarBody(),
  };
  return { name, model: PAYLOAD_MODEL[name], body: build[name](), parseUs: 0 };
}

/** A small valid body for each model kind: polled through every target until it answers 200. */
export function probeBody(kind: ModelKind): Buffer {
  switch (kind) {
    case 'echo':
      return smallBody();
    case 'half-plus-two':
      return Buffer.from('{"inputs":{"x":[1.0,2.0,5.0]}}');
    case 'graphstorm':
      return Buffer.from(
        JSON.stringify({
          version: 'gs-realtime-v0.1',
          gml_task: 'node_classification',
          graph: {
            nodes: [
              { node_type: 'author', node_id: 'a0', features: { feat: [1, 3] } },
              { node_type: 'paper', node_id: 'p0', features: { feat: [0.5] } },
            ],
            edges: [{ edge_type: ['author', 'writing', 'paper'], src_node_id: 'a0', dest_node_id: 'p0', features: {} }],
          },
          targets: [{ node_type: 'author', node_id: 'a0' }],
        }),
      );
  }
}

/** The median of the finite values (NaN when there are none). */
export function median(xs: number[]): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/**
 * Median µs of one `fn()` after a warm-up. Each result lives only until the next call (like a gateway
 * that lets a parsed tree die) and is checked, so the work cannot be optimised away.
 */
export function medianUs(fn: () => unknown, iterations: number, warmup: number): number {
  let sink = 0;
  const times: number[] = [];
  for (let i = 0; i < warmup + iterations; i++) {
    const t0 = process.hrtime.bigint();
    const v = fn();
    const t1 = process.hrtime.bigint();
    if (v !== undefined) sink++;
    if (i >= warmup) times.push(Number(t1 - t0) / 1000);
  }
  if (sink === 0) throw new Error('nothing was measured: every call returned undefined');
  return median(times);
}

/** Median µs of `JSON.parse(buf.toString())` after a warm-up. */
export function measureParseCost(buf: Buffer, iterations = 50, warmup = 10): number {
  return medianUs(() => JSON.parse(buf.toString()) as unknown, iterations, warmup);
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(0)} KB`;
  return `${(n / 1024 / 1024).toFixed(2)} MB`;
}
