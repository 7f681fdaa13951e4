// The fast acceptance path of predict validation: one pass over the body's bytes that accepts a
// body only when it is certainly valid (same rules as validate.ts + instances.ts, without building
// the tree), and returns what the adapter needs, element spans included. Anything unusual (an
// error, an escaped property name, a duplicate key, deep nesting) returns null, and the caller runs
// the tree-based validator, which gives the precise message. So the fast path can be conservative,
// never lenient: test/unit/payload-fast.test.ts checks that it accepts nothing the slow path refuses.
// Why it exists: it costs less than one JSON.parse, where JSON.parse plus a tree walk cost more
// (figures in docs/performance.md, "Design measurements").
import type { Framework } from '../api/types.js';
import {
  LBRACE, RBRACE, LBRACK, RBRACK, COMMA, COLON, QUOTE, BSLASH, MINUS, ZERO, NINE,
  numberEnd, skipLiteral, skipScalar, skipString, skipWs,
} from './bytes.js';
import { BOOL, NUM, STR, ShapeInterner, isBase64Bytes } from './instances.js';
import type { Span } from './scan.js';
import { checkEnvelopeQuietly, type PredictShape } from './validate.js';

export interface FastShape extends PredictShape {
  /** Spans of the instances (row form), for splicing. */
  spans: Span[] | null;
}

/** Thrown inside the pass to mean "not certainly valid"; caught at the top. */
class Unsure {}
const UNSURE = new Unsure();
function unsure(): never {
  throw UNSURE;
}

/** p at a string's quote; returns the end, refusing raw control characters (JSON.parse does). */
function plainString(b: Buffer, p: number): number {
  const end = skipString(b, p);
  for (let i = p + 1; i < end - 1; i++) if (b[i] < 0x20) unsure();
  return end;
}

/** True when the bytes between the quotes at [p, end) are exactly `text` (no escapes). */
function keyIs(b: Buffer, p: number, end: number, text: string): boolean {
  if (end - p - 2 !== text.length) return false;
  for (let i = 0; i < text.length; i++) if (b[p + 1 + i] !== text.charCodeAt(i)) return false;
  return true;
}

/** A property name without escapes or control characters (others go to the slow path); returns its end. */
function simpleKey(b: Buffer, p: number): number {
  if (b[p] !== QUOTE) unsure();
  const end = b.indexOf(QUOTE, p + 1);
  if (end < 0) unsure();
  for (let i = p + 1; i < end; i++) if (b[i] < 0x20 || b[i] === BSLASH) unsure();
  return end + 1;
}

function colon(b: Buffer, p: number): number {
  p = skipWs(b, p);
  if (b[p] !== COLON) unsure();
  return skipWs(b, p + 1);
}

/**
 * The pass. Methods take the position and return the position after what they read; the shape
 * signature of the last tensor read (and whether the last object had a `data`/`body` key) are left
 * in fields, so nothing is allocated per element.
 */
class Pass {
  /** Signature of the last tensor read. */
  sig = 0;
  /** Whether the last value read by any() was an object with a `data` or `body` key. */
  wrapped = false;
  private readonly shapes = new ShapeInterner();
  constructor(private readonly b: Buffer, private readonly maxDepth: number) {}

  /** p at `{` whose first key ("b64", at [ks, ke)) was read: exactly {"b64": "<base64>"}. */
  private b64Object(ks: number, ke: number): number {
    const b = this.b;
    if (!keyIs(b, ks, ke, 'b64')) unsure();
    let p = colon(b, ke);
    if (b[p] !== QUOTE) unsure();
    const end = skipString(b, p);
    // Checked in place: base64 text has no escapes or control characters, the alphabet refuses any.
    if (!isBase64Bytes(b, p + 1, end - 1)) unsure();
    p = skipWs(b, end);
    if (b[p] !== RBRACE) unsure();
    return p + 1;
  }

  /** Any JSON value (pytorch, custom, parameters): checks b64 objects and depth. */
  any(p: number, depth: number): number {
    const b = this.b;
    const c = b[p];
    this.wrapped = false;
    if (c === LBRACK) {
      if (depth >= this.maxDepth) unsure();
      p = skipWs(b, p + 1);
      if (b[p] === RBRACK) return p + 1;
      for (;;) {
        const d = b[p];
        p = d === MINUS || (d >= ZERO && d <= NINE) ? numberEnd(b, p, true) : this.any(p, depth + 1);
        p = skipWs(b, p);
        const e = b[p];
        if (e === COMMA) p = skipWs(b, p + 1);
        else if (e === RBRACK) {
          this.wrapped = false;
          return p + 1;
        } else unsure();
      }
    }
    if (c === LBRACE) {
      if (depth >= this.maxDepth) unsure();
      p = skipWs(b, p + 1);
      if (b[p] === RBRACE) return p + 1;
      let wrapped = false;
      for (let first = true; ; first = false) {
        const ks = p;
        const ke = simpleKey(b, p);
        if (keyIs(b, ks, ke, 'b64')) {
          if (!first) unsure();
          return this.b64Object(ks, ke);
        }
        if (keyIs(b, ks, ke, 'data') || keyIs(b, ks, ke, 'body')) wrapped = true;
        p = skipWs(b, this.any(colon(b, ke), depth + 1));
        const e = b[p];
        if (e === COMMA) p = skipWs(b, p + 1);
        else if (e === RBRACE) {
          this.wrapped = wrapped;
          return p + 1;
        } else unsure();
      }
    }
    return this.scalar(p);
  }

  /** A scalar; strings also refuse raw control characters (JSON.parse does). */
  private scalar(p: number): number {
    return this.b[p] === QUOTE ? plainString(this.b, p) : skipScalar(this.b, p, true);
  }

  /** A TF tensor value at p (after white space); leaves its shape signature in `sig`. */
  tensor(p: number, depth: number, binary: boolean): number {
    const b = this.b;
    const c = b[p];
    if (c === LBRACK) return this.list(p, depth, binary);
    if (c === LBRACE) {
      if (depth >= this.maxDepth) unsure();
      const ks = skipWs(b, p + 1);
      this.sig = STR;
      return this.b64Object(ks, simpleKey(b, ks));
    }
    if (binary) unsure();
    if (c === QUOTE) {
      this.sig = STR;
      return plainString(b, p);
    }
    if (c === 0x74 || c === 0x66) {
      this.sig = BOOL;
      return skipLiteral(b, p, c === 0x74 ? 'true' : 'false');
    }
    if (c === MINUS || (c >= ZERO && c <= NINE) || c === 0x4e || c === 0x49) {
      this.sig = NUM;
      return this.scalar(p);
    }
    return unsure(); // null, or not a value
  }

  private list(p: number, depth: number, binary: boolean): number {
    const b = this.b;
    if (depth >= this.maxDepth) unsure();
    p = skipWs(b, p + 1);
    if (b[p] === RBRACK) {
      this.sig = this.shapes.listOf(0, 0);
      return p + 1;
    }
    p = this.tensor(p, depth + 1, binary);
    const first = this.sig;
    let n = 1;
    for (;;) {
      p = skipWs(b, p);
      const e = b[p];
      if (e === RBRACK) break;
      if (e !== COMMA) unsure();
      p = skipWs(b, p + 1);
      n++;
      const d = b[p];
      if (first === NUM && (d === MINUS || (d >= ZERO && d <= NINE))) {
        p = numberEnd(b, p, true);
        continue;
      }
      p = this.tensor(p, depth + 1, binary);
      if (this.sig !== first) unsure();
    }
    this.sig = this.shapes.listOf(n, first);
    return p + 1;
  }

  /** A TF named-input object at p; fills `into` (name → signature), or returns -1 if p is not one. */
  named(p: number, depth: number, into: Map<string, number>): number {
    const b = this.b;
    if (b[p] !== LBRACE) return -1;
    p = skipWs(b, p + 1);
    if (b[p] === RBRACE) unsure();
    const ks = p;
    const ke = simpleKey(b, p);
    if (keyIs(b, ks, ke, 'b64')) return -1; // a binary value: the caller reads it as a tensor
    for (let first = true; ; first = false) {
      const s = first ? ks : p;
      const e = first ? ke : simpleKey(b, p);
      const name = b.toString('utf8', s + 1, e - 1);
      if (into.has(name)) unsure();
      p = skipWs(b, this.tensor(colon(b, e), depth + 1, name.endsWith('_bytes')));
      into.set(name, this.sig);
      const c = b[p];
      if (c === RBRACE) return p + 1;
      if (c !== COMMA) unsure();
      p = skipWs(b, p + 1);
    }
  }

  /** Row-form TF instances: one structure for all. */
  tfInstance(p: number, index: number, first: { sig: number; named: Map<string, number> | null }): number {
    const named = new Map<string, number>();
    const end = this.named(p, 1, named);
    if (end < 0) {
      p = this.tensor(p, 1, false);
      if (index === 0) first.sig = this.sig;
      else if (first.named !== null || this.sig !== first.sig) unsure();
      return p;
    }
    if (index === 0) {
      first.named = named;
      return end;
    }
    if (first.named === null || named.size !== first.named.size) unsure();
    for (const [k, sig] of first.named) if (named.get(k) !== sig) unsure();
    return end;
  }
}

const ROW_FIELDS = new Set(['instances', 'parameters', 'labels']);
const TF_FIELDS = new Set(['instances', 'inputs', 'signature_name', 'parameters', 'labels']);

/** Accepts a certainly valid predict body and describes it; null means "ask the slow path". */
export function fastCheckPredict(b: Buffer, framework: Framework, maxDepth: number): FastShape | null {
  try {
    return check(b, framework, maxDepth);
  } catch {
    // Unsure, a syntax error, or a small member JSON.parse refused (NaN in parameters): the slow
    // path decides and words the error.
    return null;
  }
}

function check(b: Buffer, framework: Framework, maxDepth: number): FastShape | null {
  const tf = framework === 'tensorflow';
  const allowed = tf ? TF_FIELDS : ROW_FIELDS;
  const pass = new Pass(b, maxDepth);
  const small: Record<string, unknown> = {};
  let spans: Span[] | null = null;
  const unwrapped: number[] = [];
  let hasInputs = false;
  let p = skipWs(b, 0);
  if (b[p] !== LBRACE) return null;
  p = skipWs(b, p + 1);
  if (b[p] === RBRACE) return null;
  for (;;) {
    const ks = p;
    const ke = simpleKey(b, p);
    const key = b.toString('latin1', ks + 1, ke - 1);
    if (!allowed.has(key) || key in small || (key === 'instances' && spans !== null) || (key === 'inputs' && hasInputs)) return null;
    p = colon(b, ke);
    if (key === 'instances') {
      if (b[p] !== LBRACK) return null;
      spans = [];
      p = skipWs(b, p + 1);
      if (b[p] === RBRACK) return null;
      const first = { sig: 0, named: null as Map<string, number> | null };
      for (let i = 0; ; i++) {
        const start = p;
        if (tf) p = pass.tfInstance(p, i, first);
        else {
          p = pass.any(p, 1);
          if (!pass.wrapped && framework === 'pytorch') unwrapped.push(i);
        }
        spans.push({ start, end: p });
        p = skipWs(b, p);
        if (b[p] === RBRACK) break;
        if (b[p] !== COMMA) return null;
        p = skipWs(b, p + 1);
      }
      p++;
    } else if (key === 'inputs') {
      hasInputs = true;
      const end = pass.named(p, 0, new Map());
      p = end >= 0 ? end : pass.tensor(p, 1, false);
    } else {
      // parameters, labels, signature_name: small; parse them and let the envelope schema judge.
      const start = p;
      p = pass.any(p, 1);
      small[key] = JSON.parse(b.toString('utf8', start, p));
    }
    p = skipWs(b, p);
    if (b[p] === RBRACE) break;
    if (b[p] !== COMMA) return null;
    p = skipWs(b, p + 1);
  }
  if (skipWs(b, p + 1) !== b.length) return null;
  if (tf && (spans !== null) === hasInputs) return null;
  if (!tf && spans === null) return null;
  if (!checkEnvelopeQuietly(framework, { ...small, ...(spans ? { instances: spans } : {}), ...(hasInputs ? { inputs: 0 } : {}) })) return null;
  return { instanceCount: spans ? spans.length : null, unwrapped, spans };
}
