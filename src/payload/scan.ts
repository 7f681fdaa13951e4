// A one-pass JSON scanner over bytes that reports where the top-level members of an object are,
// and where the elements of one of its arrays are, without building the tree. The gateway uses it to
// check a model's answer (one prediction per instance) and to splice fields into it or into a request
// while forwarding the original bytes (no re-serialisation, NaN tokens and number spellings kept).
// It checks the whole JSON grammar except raw control characters inside strings (strings are
// skipped with memchr-speed indexOf; termination and escapes are checked).
import {
  SP, TAB, LF, CR, LBRACE, RBRACE, LBRACK, RBRACK, COMMA, COLON, QUOTE, MINUS, ZERO, NINE,
  fail, numberEnd, skipWs, skipString, skipScalar,
} from './bytes.js';
import { JsonNestingError } from './json.js';

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

const EXPECT_VALUE = 0, EXPECT_KEY = 1, AFTER_VALUE = 2;

function tooDeep(p: number): never {
  throw new JsonNestingError(`invalid JSON at byte ${p}: nesting too deep`);
}

/**
 * p at `{` or `[`; returns the index after the matching close. A flat state machine (no recursion,
 * an explicit bracket stack) that checks the whole grammar: values, commas, colons, keys, strings,
 * numbers, literals and the depth limit. On large tensors it costs about half a JSON.parse.
 */
function skipContainer(b: Buffer, p: number, depthLeft: number, allowNonFinite: boolean): number {
  if (depthLeft <= 0) tooDeep(p);
  const stack = new Uint8Array(depthLeft);
  let d = 0;
  let mode = EXPECT_VALUE;
  for (;;) {
    let c = b[p];
    if (c === SP || c === LF || c === CR || c === TAB) {
      p = skipWs(b, p);
      c = b[p];
    }
    if (mode === EXPECT_VALUE && (c === MINUS || (c >= ZERO && c <= NINE))) {
      p = numberEnd(b, p, allowNonFinite);
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
      if (d >= depthLeft) tooDeep(p);
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
