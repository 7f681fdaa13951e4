// The instance rules of Vertex predict and TF Serving, as one synchronous walk over a parsed body.
// Owns: binary values ({"b64": ...}), `_bytes` names, list homogeneity and rectangularity, named-input
// structure shared across instances, null and depth limits. Each failure names the path, the problem
// and what was expected: `instances[3].image: expected {"b64": string}, got number`.
import { ApiError } from '../errors.js';

export type JsonKind = 'number' | 'string' | 'boolean' | 'null' | 'list' | 'object';

export function kindOf(v: unknown): JsonKind {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'list';
  const t = typeof v;
  return t === 'object' ? 'object' : (t as JsonKind);
}

/** A value's kind as a message says it: `null`, `a list`, `an object`, or its type (`number`, `string`, `boolean`). */
export function kindPhrase(v: unknown): string {
  const kind = kindOf(v);
  return kind === 'list' ? 'a list' : kind === 'object' ? 'an object' : kind;
}

/** A JSON object (not null, not a list). */
export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Where the walk is: a stack of segments pushed and popped around each container, so that the walk
 * allocates nothing per element and the path text is built only when a rule fails.
 */
export class Path {
  private readonly segs: (string | number)[] = [];

  constructor(private readonly root: string) {}

  push(seg: string | number): void {
    this.segs.push(seg);
  }

  pop(): void {
    this.segs.pop();
  }

  /** The path as text, with an optional extra member appended. */
  text(extra?: string): string {
    let out = this.root;
    for (const s of this.segs) out = typeof s === 'number' ? `${out}[${s}]` : memberText(out, s);
    return extra === undefined ? out : memberText(out, extra);
  }
}

function memberText(path: string, key: string): string {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

function fail(path: Path | string, message: string, extra?: string): never {
  throw new ApiError('invalid_payload', `${typeof path === 'string' ? path : path.text(extra)}: ${message}`);
}

/**
 * Valid base64 (standard or URL-safe alphabet, padding optional). Node's decoder skips or stops at
 * any other character, so a decoded length short of the text's length gives it away. This costs a
 * third of a regular expression test on a 1 MB value (and a regex over a megabyte can overflow).
 */
export function isBase64(s: string): boolean {
  return decodeBase64(s) !== null;
}

/** The bytes of a base64 value (as isBase64 reads it), or null when it is not valid base64. */
export function decodeBase64(s: string): Buffer | null {
  let n = s.length;
  if (n > 0 && s.charCodeAt(n - 1) === 61) n--;
  if (n > 0 && s.charCodeAt(n - 1) === 61) n--;
  if (n % 4 === 1) return null;
  if (n !== s.length && s.length % 4 !== 0) return null;
  const bytes = Buffer.from(s, 'base64');
  return bytes.length === Math.floor((n * 3) / 4) ? bytes : null;
}

const B64_ALPHABET = new Uint8Array(256);
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_') B64_ALPHABET[c.charCodeAt(0)] = 1;

/**
 * isBase64 on the bytes [start, end) of a buffer, without making a string or decoding (no
 * allocation: on a 1 MB value this avoids a megabyte of garbage per call). Same verdict as isBase64.
 */
export function isBase64Bytes(b: Buffer, start: number, end: number): boolean {
  let n = end;
  if (n > start && b[n - 1] === 61) n--;
  if (n > start && b[n - 1] === 61) n--;
  if ((n - start) % 4 === 1) return false;
  if (n !== end && (end - start) % 4 !== 0) return false;
  const t = B64_ALPHABET;
  let i = start;
  for (; i + 4 <= n; i += 4) if ((t[b[i]] & t[b[i + 1]] & t[b[i + 2]] & t[b[i + 3]]) === 0) return false;
  for (; i < n; i++) if (t[b[i]] === 0) return false;
  return true;
}

/** True for an object whose only key is `b64` (whatever its value); the rule checks the rest. */
function isB64Object(o: Record<string, unknown>): boolean {
  for (const k in o) if (k !== 'b64') return false;
  return 'b64' in o;
}

/** Checks a `{"b64": ...}` object: exactly one key, a string value, valid base64. */
function checkB64(o: Record<string, unknown>, path: Path): void {
  const keys = Object.keys(o);
  if (keys.length !== 1) {
    fail(path, `a binary value must be {"b64": string} with no other keys, got keys ${keys.map((k) => JSON.stringify(k)).join(', ')}`);
  }
  const v = o.b64;
  if (typeof v !== 'string') fail(path, `expected a base64 string, got ${kindOf(v)}`, 'b64');
  if (!isBase64(v)) {
    fail(path, 'expected valid base64 (RFC 4648 standard or URL-safe alphabet, optional padding)', 'b64');
  }
}

/**
 * Any-value walk for frameworks that accept any JSON instance (pytorch, custom): checks every
 * `{"b64": ...}` object and the depth limit, nothing else.
 */
export function checkAnyValue(v: unknown, path: Path, depth: number, maxDepth: number): void {
  if (v === null || typeof v !== 'object') return;
  if (depth > maxDepth) fail(path, `nesting deeper than ${maxDepth} levels`);
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const item = v[i];
      if (item !== null && typeof item === 'object') {
        path.push(i);
        checkAnyValue(item, path, depth + 1, maxDepth);
        path.pop();
      }
    }
    return;
  }
  const o = v as Record<string, unknown>;
  if ('b64' in o) {
    checkB64(o, path);
    return;
  }
  for (const k in o) {
    const item = o[k];
    if (item !== null && typeof item === 'object') {
      path.push(k);
      checkAnyValue(item, path, depth + 1, maxDepth);
      path.pop();
    }
  }
}

// ---- TensorFlow tensors ---------------------------------------------------------------------------
// A tensor value's shape signature is interned to a small integer so siblings compare in O(1):
// leaves are NUM, STR (strings and {"b64"} objects), BOOL; a list of n items of signature s has the
// signature intern(n, s). Lists whose items disagree are refused with the first offending path.

/** Leaf signatures of tensor shapes (shared with the fast check). */
export const NUM = 1, STR = 2, BOOL = 3;
const LEAF_NAMES: Record<number, string> = { [NUM]: 'number', [STR]: 'string', [BOOL]: 'boolean' };

/** Interns shape signatures: a list of n items of signature s gets one small integer. */
export class ShapeInterner {
  private readonly ids = new Map<number, Map<number, number>>();
  private readonly described: { len: number; child: number }[] = [];

  private lastLen = -1;
  private lastChild = -1;
  private lastId = -1;

  listOf(len: number, child: number): number {
    // Tensors repeat one shape many times: remember the last answer.
    if (len === this.lastLen && child === this.lastChild) return this.lastId;
    this.lastLen = len;
    this.lastChild = child;
    this.lastId = this.intern(len, child);
    return this.lastId;
  }

  private intern(len: number, child: number): number {
    let byLen = this.ids.get(child);
    if (byLen === undefined) this.ids.set(child, (byLen = new Map()));
    let id = byLen.get(len);
    if (id === undefined) {
      id = 16 + this.described.length;
      this.described.push({ len, child });
      byLen.set(len, id);
    }
    return id;
  }

  /** Human form: `a number`, `a list of 3 numbers`, `a list of 2 lists of 3 numbers`. */
  describe(sig: number): string {
    if (sig < 16) return `a ${LEAF_NAMES[sig] ?? 'value'}`;
    return `a ${this.plural(sig, 1)}`.replace(/^a lists/, 'a list');
  }

  private plural(sig: number, n: number): string {
    if (sig === 0) return 'items';
    if (sig < 16) return `${LEAF_NAMES[sig] ?? 'value'}${n === 1 ? '' : 's'}`;
    const d = this.described[sig - 16];
    return `list${n === 1 ? '' : 's'} of ${d.len} ${this.plural(d.child, d.len)}`;
  }
}

export interface TensorRules {
  maxDepth: number;
}

/** Walks TF tensors (the values of instances, named inputs and columnar inputs). */
export class TensorChecker {
  private readonly shapes = new ShapeInterner();

  constructor(private readonly rules: TensorRules) {}

  /** Returns the tensor's shape signature; `binary` means the value must be {"b64": ...} leaves. */
  tensor(v: unknown, path: Path, depth: number, binary: boolean): number {
    switch (typeof v) {
      case 'number':
        if (binary) fail(path, `expected {"b64": string} (names ending in _bytes carry binary data), got number`);
        return NUM;
      case 'string':
        if (binary) fail(path, `expected {"b64": string} (names ending in _bytes carry binary data), got string`);
        return STR;
      case 'boolean':
        if (binary) fail(path, `expected {"b64": string} (names ending in _bytes carry binary data), got boolean`);
        return BOOL;
      case 'object':
        break;
      default:
        fail(path, `expected a tensor value, got ${typeof v}`);
    }
    if (v === null) fail(path, 'expected a number, string, boolean, list or {"b64": string}, got null');
    if (depth > this.rules.maxDepth) fail(path, `nesting deeper than ${this.rules.maxDepth} levels`);
    if (!Array.isArray(v)) {
      const o = v as Record<string, unknown>;
      if ('b64' in o) {
        checkB64(o, path);
        return STR;
      }
      fail(path, `expected a number, string, boolean, list or {"b64": string}, got an object (JSON objects cannot be embedded in a tensor)`);
    }
    const n = v.length;
    if (n === 0) return this.shapes.listOf(0, 0);
    path.push(0);
    const first = this.tensor(v[0], path, depth + 1, binary);
    path.pop();
    for (let i = 1; i < n; i++) {
      const item = v[i];
      // Fast path for the common case of a list of plain numbers.
      if (first === NUM && typeof item === 'number') continue;
      path.push(i);
      const sig = this.tensor(item, path, depth + 1, binary);
      if (sig !== first) this.mismatch(path, first, sig);
      path.pop();
    }
    return this.shapes.listOf(n, first);
  }

  mismatch(path: Path, expected: number, got: number): never {
    const mix = (expected === NUM && got === STR) || (expected === STR && got === NUM);
    fail(path, `expected ${this.shapes.describe(expected)} like the items before it, got ${this.shapes.describe(got)}` +
      (mix ? ' (a list must not mix strings and numbers)' : ' (lists must be homogeneous and rectangular)'));
  }

  /** A named-input object (row instance or columnar `inputs`): every value a tensor, `_bytes` binary. */
  namedInputs(o: Record<string, unknown>, path: Path, depth: number): Map<string, number> {
    const sigs = new Map<string, number>();
    for (const k in o) {
      path.push(k);
      sigs.set(k, this.tensor(o[k], path, depth + 1, k.endsWith('_bytes')));
      path.pop();
    }
    return sigs;
  }

  /**
   * TF row form: every instance has one structure. Plain tensors stack (same signature); named
   * inputs share their names and each input's signature across instances.
   */
  instances(list: unknown[], path: Path): void {
    let firstSig = 0;
    let firstNamed: Map<string, number> | null = null;
    for (let i = 0; i < list.length; i++) {
      const inst = list[i];
      if (i > 0 && firstSig === NUM && typeof inst === 'number') continue;
      path.push(i);
      const named = isNamedInputs(inst);
      if (i === 0) {
        if (named) firstNamed = this.namedInputs(inst as Record<string, unknown>, path, 1);
        else firstSig = this.tensor(inst, path, 1, false);
        if (firstNamed !== null && firstNamed.size === 0) fail(path, 'expected named inputs, got an empty object');
      } else if (firstNamed === null) {
        if (named) fail(path, `expected ${this.shapes.describe(firstSig)} like instances[0], got an object of named inputs`);
        const sig = this.tensor(inst, path, 1, false);
        if (sig !== firstSig) fail(path, `expected ${this.shapes.describe(firstSig)} like instances[0], got ${this.shapes.describe(sig)} (instances are stacked into one batch)`);
      } else {
        if (!named) fail(path, `expected an object of named inputs like instances[0], got ${kindOf(inst)}`);
        this.sameNamedInputs(firstNamed, this.namedInputs(inst as Record<string, unknown>, path, 1), path);
      }
      path.pop();
    }
  }

  private sameNamedInputs(first: Map<string, number>, sigs: Map<string, number>, path: Path): void {
    for (const [name, sig] of first) {
      const got = sigs.get(name);
      if (got === undefined) fail(path, `missing named input ${JSON.stringify(name)} that instances[0] has (named inputs must be the same in every instance)`);
      if (got !== sig) {
        fail(path, `expected ${this.shapes.describe(sig)} like ${memberText('instances[0]', name)}, got ${this.shapes.describe(got)} (named inputs share their 0th dimension and shape across instances)`, name);
      }
    }
    if (sigs.size !== first.size) {
      const extra = [...sigs.keys()].find((k) => !first.has(k));
      fail(path, `unexpected named input ${JSON.stringify(extra)} that instances[0] does not have`);
    }
  }
}

/** An object that is not a binary value: TF named inputs (TF Serving's rule: `{"b64"}` alone is binary). */
export function isNamedInputs(v: unknown): boolean {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !isB64Object(v as Record<string, unknown>);
}
