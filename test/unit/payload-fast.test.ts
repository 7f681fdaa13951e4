// The byte-level fast check (fastCheck.ts) against the reference: JSON.parse + the tree validator.
// Soundness: on thousands of generated bodies, valid and broken, whatever the fast check accepts the
// reference accepts too, with the same shape. Completeness: common valid bodies take the fast path.
import { fastCheckPredict } from '../../src/payload/fastCheck.js';
import { parseJson } from '../../src/payload/json.js';
import { validatePredictBody, type PredictShape } from '../../src/payload/validate.js';
import type { Framework } from '../../src/api/types.js';
import { prng } from '../helpers/expect.js';

const FRAMEWORKS: Framework[] = ['tensorflow', 'pytorch', 'custom'];

function reference(text: string, framework: Framework, maxDepth: number): PredictShape | null {
  try {
    return validatePredictBody(parseJson(text, true), framework, { maxDepth });
  } catch {
    return null;
  }
}

function fast(text: string, framework: Framework, maxDepth: number): PredictShape | null {
  const r = fastCheckPredict(Buffer.from(text), framework, maxDepth);
  return r === null ? null : { instanceCount: r.instanceCount, unwrapped: r.unwrapped };
}

// ---- a generator of bodies, mostly valid, often subtly broken ------------------------------------

class Gen {
  constructor(private readonly r: () => number) {}
  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.r() * xs.length)];
  }
  chance(p: number): boolean {
    return this.r() < p;
  }
  ws(): string {
    return this.chance(0.2) ? this.pick([' ', '\n', '\t ', '  ']) : '';
  }
  number(): string {
    return this.pick(['0', '1', '-2', '3.25', '1e3', '-0.5E-2', '42', '7.0', 'NaN', 'Infinity', '-Infinity', '01', '1.', '.5', '1e', '--1', '0x10']);
  }
  string(): string {
    return this.pick(['"a"', '"the quick"', '"\\u00e9t\\u00e9"', '"tab\\there"', '"q\\"uote"', '"raw\u0001ctl"', '"bad\\escape"', '"unterminated', '""']);
  }
  b64(): string {
    return this.pick(['{"b64": "QUJD"}', '{"b64":"aGk="}', '{"b64": "X5ad6u"}', '{"b64": "!!!"}', '{"b64": 5}', '{"b64": "QUJD", "x": 1}', '{"x": 1, "b64": "QUJD"}', '{"\\u0062\\u0036\\u0034": "!!!"}', '{"b64": "QU JD"}', '{"b64": "ab-_"}']);
  }
  scalar(): string {
    const k = this.r();
    if (k < 0.45) return this.number();
    if (k < 0.75) return this.string();
    if (k < 0.85) return this.pick(['true', 'false']);
    if (k < 0.9) return 'null';
    return this.b64();
  }
  list(depth: number, homogeneous: boolean): string {
    const n = Math.floor(this.r() * 4);
    const kind = this.r();
    const items: string[] = [];
    const width = 1 + Math.floor(this.r() * 3);
    for (let i = 0; i < n; i++) {
      if (depth > 0 && kind < 0.4) {
        items.push(homogeneous ? this.list(depth - 1, true).replace(/^\[.*\]$/s, () => `[${Array.from({ length: width }, () => '1.5').join(',')}]`) : this.list(depth - 1, false));
      } else if (homogeneous) {
        items.push(kind < 0.7 ? String(i + 0.5) : `"s${i}"`);
      } else {
        items.push(this.value(depth - 1));
      }
    }
    return `[${this.ws()}${items.join(`,${this.ws()}`)}${this.ws()}]`;
  }
  object(depth: number): string {
    const n = 1 + Math.floor(this.r() * 3);
    const members: string[] = [];
    for (let i = 0; i < n; i++) {
      const key = this.pick(['"x"', '"image_bytes"', '"data"', '"body"', '"tag"', '"signal"', '"b64"', '"a\\u0062"', '"x"', '"__proto__"']);
      members.push(`${key}:${this.ws()}${this.value(depth - 1)}`);
    }
    return `{${members.join(',')}}`;
  }
  value(depth: number): string {
    const k = this.r();
    if (depth <= 0 || k < 0.4) return this.scalar();
    if (k < 0.75) return this.list(depth, this.chance(0.6));
    return this.object(depth);
  }
  /** Instances that are uniform (TF-valid) more often than not. */
  instances(): string {
    const n = 1 + Math.floor(this.r() * 3);
    const template = this.value(3);
    const uniform = this.chance(0.6);
    const items = Array.from({ length: n }, () => (uniform ? template : this.value(3)));
    return `[${items.join(`,${this.ws()}`)}]`;
  }
  body(): string {
    const members: string[] = [];
    const k = this.r();
    if (k < 0.8) members.push(`"instances":${this.ws()}${this.chance(0.05) ? '[]' : this.instances()}`);
    if (k > 0.7) members.push(`"inputs": ${this.chance(0.5) ? this.object(3) : this.value(3)}`);
    if (this.chance(0.2)) members.push(`"parameters": ${this.pick(['{}', '{"k": 1}', 'null', '[1]', '{"m": {"b64": "QUJD"}}', '{"m": {"b64": "%%"}}', '{"v": NaN}'])}`);
    if (this.chance(0.15)) members.push(`"labels": ${this.pick(['{}', '{"a": "b"}', '{"a": 1}'])}`);
    if (this.chance(0.1)) members.push(`"signature_name": ${this.pick(['"serving_default"', '5'])}`);
    if (this.chance(0.05)) members.push('"extra": 1');
    if (this.chance(0.05) && members.length) members.push(members[0]);
    const text = `${this.ws()}{${this.ws()}${members.join(`,${this.ws()}`)}${this.ws()}}${this.ws()}`;
    return this.chance(0.05) ? text.slice(0, Math.floor(this.r() * text.length)) : text;
  }
}

test('soundness: the fast check never accepts what the reference refuses (4000 generated bodies x 3 frameworks)', () => {
  const g = new Gen(prng(20261130));
  let accepted = 0;
  let refused = 0;
  let fastAccepted = 0;
  for (let i = 0; i < 4000; i++) {
    const text = g.body();
    const maxDepth = g.pick([3, 4, 6, 64]);
    for (const fw of FRAMEWORKS) {
      const ref = reference(text, fw, maxDepth);
      const got = fast(text, fw, maxDepth);
      if (got !== null) {
        fastAccepted++;
        if (ref === null) throw new Error(`fast check accepted a body the reference refuses (${fw}, maxDepth ${maxDepth}): ${text}`);
        expect(got).toEqual(ref);
      }
      if (ref === null) refused++;
      else accepted++;
    }
  }
  // The generator exercises both sides, and the fast path carries most valid bodies.
  expect(refused).toBeGreaterThan(2000);
  expect(accepted).toBeGreaterThan(2000);
  expect(fastAccepted / accepted).toBeGreaterThan(0.7);
});

describe('completeness: common valid bodies take the fast path with the reference shape', () => {
  const bodies: [string, Framework, string][] = [
    ['TF scalars', 'tensorflow', '{"instances": [1.0, 2.0, 5.0]}'],
    ['TF images', 'tensorflow', '{"instances": [[[[138, 30, 66], [130, 20, 56]], [[126, 38, 61], [122, 24, 57]]]]}'],
    ['TF named inputs with b64', 'tensorflow', '{"instances": [{"tag": "beach", "image_bytes": {"b64": "QUJD"}}, {"tag": "car", "image_bytes": {"b64": "REVG"}}]}'],
    ['TF columnar', 'tensorflow', '{"inputs": {"tag": ["foo", "bar"], "signal": [[1, 2, 3, 4, 5], [3, 4, 1, 2, 5]]}}'],
    ['TF NaN tokens', 'tensorflow', '{"instances": [[1.0, NaN, Infinity, -Infinity]], "signature_name": "serving_default"}'],
    ['pytorch wrapped and not', 'pytorch', '{"instances": [{"data": [1, 2]}, 3, {"body": "x"}, {"b64": "QUJD"}], "parameters": {"k": 1}}'],
    ['pytorch base64 image', 'pytorch', `{"instances": [{"data": {"b64": "${Buffer.alloc(3000, 7).toString('base64')}"}}]}`],
    ['custom anything, Python json.dumps spacing', 'custom', '{"instances": [{"a": [1, "x", null, true]}, "s", 1.5e3], "parameters": {"t": 0.2}, "labels": {}}'],
  ];
  test.each(bodies)('%s', (_name, fw, text) => {
    const got = fastCheckPredict(Buffer.from(text), fw, 64);
    expect(got).not.toBeNull();
    expect({ instanceCount: got!.instanceCount, unwrapped: got!.unwrapped }).toEqual(reference(text, fw, 64));
    if (got!.spans) for (const s of got!.spans) expect(() => parseJson(text.slice(s.start, s.end), true)).not.toThrow();
  });
});
