// A one-pass JSON scanner over bytes that reports where the top-level members of an object are,
// and where the elements of one of its arrays are, without building the tree. The gateway uses it to
// check a model's answer (one prediction per instance) and to splice fields into it or into a request
// while forwarding the original bytes (no re-serialisation, NaN tokens and number spellings kept).
// It checks the whole JSON grammar except raw control characters inside strings (strings are
// skipped with memchr-speed indexOf; termination and escapes are checked).
import { JsonSyntaxError } from './json.js';

export interface Span {
  start: number;
  end: number;
}

export interface Member extends Span {
  key: string;
}

export interface ScanResult {
  members: Member[];
  /** Index of the closing `}` of the top-level object. */
  close: number;
  /** Element spans of the array member asked for, or null if absent or not an array. */
  elements: Span[] | null;
}

export interface ScanOptions {
  allowNonFinite: boolean;
  maxDepth: number;
  /** Name of the top-level member whose array elements to report. */
  elementsOf?: string;
}

const SP = 0x20, TAB = 0x09, LF = 0x0a, CR = 0x0d;
const LBRACE = 0x7b, RBRACE = 0x7d, LBRACK = 0x5b, RBRACK = 0x5d, COMMA = 0x2c, COLON = 0x3a;
const QUOTE = 0x22, BSLASH = 0x5c, MINUS = 0x2d, PLUS = 0x2b, DOT = 0x2e, ZERO = 0x30, NINE = 0x39;

function fail(p: number, what: string): never {
  throw new JsonSyntaxError(`invalid JSON at byte ${p}: ${what}`);
}

function skipWs(b: Buffer, p: number): number {
  for (let c = b[p]; c === SP || c === LF || c === CR || c === TAB; c = b[++p]);
  return p;
}

function skipLiteral(b: Buffer, p: number, text: string): number {
  for (let i = 0; i < text.length; i++) if (b[p + i] !== text.charCodeAt(i)) fail(p, 'unexpected token');
  return p + text.length;
}

/** p at the opening quote; returns the index after the closing quote. */
function skipString(b: Buffer, p: number): number {
  const start = p + 1;
  const close = b.indexOf(QUOTE, start);
  if (close < 0) fail(p, 'unterminated string');
  const esc = b.indexOf(BSLASH, start);
  if (esc < 0 || esc > close) return close + 1;
  // Slow path: the string holds escapes.
  let q = start;
  for (;;) {
    const c = b[q];
    if (c === undefined) fail(p, 'unterminated string');
    if (c === QUOTE) return q + 1;
    if (c !== BSLASH) {
      q++;
      continue;
    }
    const e = b[q + 1];
    if (e === 0x75) {
      for (let k = 2; k < 6; k++) {
        const h = b[q + k];
        if (!((h >= ZERO && h <= NINE) || (h >= 0x41 && h <= 0x46) || (h >= 0x61 && h <= 0x66))) fail(q, 'bad \\u escape');
      }
      q += 6;
    } else if (e === QUOTE || e === BSLASH || e === 0x2f || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) {
      q += 2;
    } else {
      fail(q, 'bad escape');
    }
  }
}

function skipDigits(b: Buffer, p: number): number {
  for (let c = b[p]; c >= ZERO && c <= NINE; c = b[++p]);
  return p;
}

/** p at a number's first byte ('-' or a digit); returns the index after it. */
function skipNumber(b: Buffer, p: number, allowNonFinite: boolean): number {
  const s = p;
  if (b[p] === MINUS) {
    p++;
    if (b[p] === 0x49 && allowNonFinite) return skipLiteral(b, p, 'Infinity');
  }
  if (b[p] === ZERO) p++;
  else {
    const d = skipDigits(b, p);
    if (d === p) fail(s, 'bad number');
    p = d;
  }
  if (b[p] === DOT) {
    const d = skipDigits(b, p + 1);
    if (d === p + 1) fail(s, 'bad number');
    p = d;
  }
  const e = b[p];
  if (e === 0x65 || e === 0x45) {
    p++;
    if (b[p] === PLUS || b[p] === MINUS) p++;
    const d = skipDigits(b, p);
    if (d === p) fail(s, 'bad number');
    p = d;
  }
  return p;
}

/** p at a scalar's first byte; returns the index after it, or fails. */
function skipScalar(b: Buffer, p: number, allowNonFinite: boolean): number {
  const c = b[p];
  if (c === QUOTE) return skipString(b, p);
  if ((c >= ZERO && c <= NINE) || c === MINUS) return skipNumber(b, p, allowNonFinite);
  if (c === 0x74) return skipLiteral(b, p, 'true');
  if (c === 0x66) return skipLiteral(b, p, 'false');
  if (c === 0x6e) return skipLiteral(b, p, 'null');
  if (allowNonFinite && c === 0x4e) return skipLiteral(b, p, 'NaN');
  if (allowNonFinite && c === 0x49) return skipLiteral(b, p, 'Infinity');
  return fail(p, c === undefined ? 'unexpected end of input' : 'unexpected token');
}

const EXPECT_VALUE = 0, EXPECT_KEY = 1, AFTER_VALUE = 2;

// JSON's number grammar as a table-driven automaton, inlined in the container loop (numbers are
// most of the bytes of a tensor). Byte classes: 1 '0', 2 '1'-'9', 3 '.', 4 'e'/'E', 5 '+', 6 '-'.
const NUM_CLASS = new Uint8Array(256);
NUM_CLASS[0x30] = 1;
for (let c = 0x31; c <= 0x39; c++) NUM_CLASS[c] = 2;
NUM_CLASS[DOT] = 3;
NUM_CLASS[0x65] = 4;
NUM_CLASS[0x45] = 4;
NUM_CLASS[PLUS] = 5;
NUM_CLASS[MINUS] = 6;
const STOP = 255;
// States: 0 start, 1 after '-', 2 leading zero, 3 integer digits, 4 after '.', 5 fraction digits,
// 6 after 'e', 7 after exponent sign, 8 exponent digits. Rows of 8 (class 0 = any other byte).
const NUM_NEXT = new Uint8Array(9 * 8).fill(STOP);
// Entries hold the next state's row offset (state × 8) so the hot loop does one add per byte.
const edge = (from: number, cls: number, to: number): void => void (NUM_NEXT[from * 8 + cls] = to * 8);
edge(0, 6, 1); edge(0, 1, 2); edge(0, 2, 3);
edge(1, 1, 2); edge(1, 2, 3);
edge(2, 3, 4); edge(2, 4, 6);
edge(3, 1, 3); edge(3, 2, 3); edge(3, 3, 4); edge(3, 4, 6);
edge(4, 1, 5); edge(4, 2, 5);
edge(5, 1, 5); edge(5, 2, 5); edge(5, 4, 6);
edge(6, 5, 7); edge(6, 6, 7); edge(6, 1, 8); edge(6, 2, 8);
edge(7, 1, 8); edge(7, 2, 8);
edge(8, 1, 8); edge(8, 2, 8);
const NUM_ACCEPT = new Uint8Array(9 * 8);
for (const st of [2, 3, 5, 8]) NUM_ACCEPT[st * 8] = 1;

/**
 * p at `{` or `[`; returns the index after the matching close. A flat state machine (no recursion,
 * an explicit bracket stack) that checks the whole grammar: values, commas, colons, keys, strings,
 * numbers, literals and the depth limit. On large tensors it costs about a third of JSON.parse.
 */
function skipContainer(b: Buffer, p: number, depthLeft: number, allowNonFinite: boolean): number {
  if (depthLeft <= 0) fail(p, 'nesting too deep');
  const stack = new Uint8Array(depthLeft);
  let d = 0;
  let mode = EXPECT_VALUE;
  for (;;) {
    let c = b[p];
    if (c === SP || c === LF || c === CR || c === TAB) {
      p = skipWs(b, p);
      c = b[p];
    }
    if (mode === EXPECT_VALUE && (NUM_CLASS[c | 0] === 6 || (c >= ZERO && c <= NINE))) {
      const start = p;
      let st = 0;
      for (;;) {
        const next = NUM_NEXT[st + NUM_CLASS[b[p] | 0]];
        if (next === STOP) break;
        st = next;
        p++;
      }
      if (NUM_ACCEPT[st] === 0) {
        if (st === 8 && allowNonFinite && b[p] === 0x49) p = skipLiteral(b, p, 'Infinity');
        else fail(start, 'bad number');
      }
      // The common case in a tensor: a comma and the next element right away.
      if (b[p] === COMMA && stack[d - 1] === LBRACK) {
        p++;
        continue;
      }
      mode = AFTER_VALUE;
      continue;
    }
    if (mode === AFTER_VALUE) {
      if (c === COMMA) {
        p++;
        mode = stack[d - 1] === LBRACE ? EXPECT_KEY : EXPECT_VALUE;
      } else if ((c === RBRACK && stack[d - 1] === LBRACK) || (c === RBRACE && stack[d - 1] === LBRACE)) {
        p++;
        if (--d === 0) return p;
      } else {
        fail(p, c === undefined ? 'unexpected end of input' : c === RBRACK || c === RBRACE ? 'mismatched bracket' : stack[d - 1] === LBRACE ? 'expected , or }' : 'expected , or ]');
      }
    } else if (mode === EXPECT_KEY) {
      if (c !== QUOTE) fail(p, 'expected a property name');
      p = skipColon(b, skipString(b, p));
      mode = EXPECT_VALUE;
    } else if (c === LBRACE || c === LBRACK) {
      if (d >= depthLeft) fail(p, 'nesting too deep');
      stack[d++] = c;
      p = skipWs(b, p + 1);
      const e = b[p];
      if ((c === LBRACK && e === RBRACK) || (c === LBRACE && e === RBRACE)) {
        p++;
        if (--d === 0) return p;
        mode = AFTER_VALUE;
      } else {
        mode = c === LBRACE ? EXPECT_KEY : EXPECT_VALUE;
      }
    } else {
      p = skipScalar(b, p, allowNonFinite);
      mode = AFTER_VALUE;
    }
  }
}

function skipValue(b: Buffer, p: number, allowNonFinite: boolean, depthLeft: number): number {
  const c = b[p];
  return c === LBRACE || c === LBRACK ? skipContainer(b, p, depthLeft, allowNonFinite) : skipScalar(b, p, allowNonFinite);
}

/** p at `[`; records each element's span; returns the index after `]`. */
function scanElements(b: Buffer, p: number, out: Span[], allowNonFinite: boolean, depthLeft: number): number {
  p = skipWs(b, p + 1);
  if (b[p] === RBRACK) return p + 1;
  for (;;) {
    const start = p;
    p = skipValue(b, p, allowNonFinite, depthLeft);
    out.push({ start, end: p });
    p = skipWs(b, p);
    const c = b[p];
    if (c === COMMA) p = skipWs(b, p + 1);
    else if (c === RBRACK) return p + 1;
    else fail(p, 'expected , or ]');
  }
}

/**
 * Scans a JSON object's bytes: its members' spans, and the element spans of one array member.
 * Throws JsonSyntaxError (with the byte offset) on malformed input or nesting beyond maxDepth.
 */
export function scanObject(b: Buffer, opts: ScanOptions): ScanResult {
  const { allowNonFinite, maxDepth, elementsOf } = opts;
  const members: Member[] = [];
  let elements: Span[] | null = null;
  let p = skipWs(b, 0);
  if (b[p] !== LBRACE) fail(p, 'expected a JSON object');
  p = skipWs(b, p + 1);
  if (b[p] === RBRACE) {
    p++;
  } else {
    for (;;) {
      const keyStart = p;
      p = skipKey(b, p);
      const key = decodeKey(b, keyStart, p);
      p = skipColon(b, p);
      const start = p;
      if (key === elementsOf && b[p] === LBRACK) {
        elements = [];
        p = scanElements(b, p, elements, allowNonFinite, maxDepth - 2);
      } else {
        p = skipValue(b, p, allowNonFinite, maxDepth - 1);
      }
      members.push({ key, start, end: p });
      p = skipWs(b, p);
      const c = b[p];
      if (c === COMMA) p = skipWs(b, p + 1);
      else if (c === RBRACE) {
        p++;
        break;
      } else fail(p, 'expected , or }');
    }
  }
  const close = p - 1;
  if (skipWs(b, p) !== b.length) fail(p, 'unexpected data after the JSON value');
  return { members, close, elements };
}

/** p at a property name's opening quote; returns the index after its closing quote. */
function skipKey(b: Buffer, p: number): number {
  if (b[p] !== QUOTE) fail(p, 'expected a property name');
  return skipString(b, p);
}

/** p after a property name; returns the index of the value after `:` and white space. */
function skipColon(b: Buffer, p: number): number {
  p = skipWs(b, p);
  if (b[p] !== COLON) fail(p, 'expected :');
  return skipWs(b, p + 1);
}

/** Decodes the property name between the quotes at `quoteStart` and `afterQuote - 1`. */
function decodeKey(b: Buffer, quoteStart: number, afterQuote: number): string {
  const raw = b.toString('utf8', quoteStart + 1, afterQuote - 1);
  if (!raw.includes('\\')) return raw;
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return fail(quoteStart, 'bad property name');
  }
}
