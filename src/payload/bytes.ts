// Byte-level JSON lexing shared by the scanner (scan.ts) and the fast predict check (fastCheck.ts):
// byte constants, white space, strings, literals and numbers. Every function takes the buffer and a
// position and returns the position after the token, or throws JsonSyntaxError naming the byte.
import { JsonSyntaxError } from './json.js';

export const SP = 0x20, TAB = 0x09, LF = 0x0a, CR = 0x0d;
export const LBRACE = 0x7b, RBRACE = 0x7d, LBRACK = 0x5b, RBRACK = 0x5d, COMMA = 0x2c, COLON = 0x3a;
export const QUOTE = 0x22, BSLASH = 0x5c, MINUS = 0x2d, PLUS = 0x2b, DOT = 0x2e, ZERO = 0x30, NINE = 0x39;

export function fail(p: number, what: string): never {
  throw new JsonSyntaxError(`invalid JSON at byte ${p}: ${what}`);
}

export function skipWs(b: Buffer, p: number): number {
  for (let c = b[p]; c === SP || c === LF || c === CR || c === TAB; c = b[++p]);
  return p;
}

export function skipLiteral(b: Buffer, p: number, text: string): number {
  for (let i = 0; i < text.length; i++) if (b[p + i] !== text.charCodeAt(i)) fail(p, 'unexpected token');
  return p + text.length;
}

/** p at the opening quote; returns the index after the closing quote. */
export function skipString(b: Buffer, p: number): number {
  const start = p + 1;
  const close = b.indexOf(QUOTE, start);
  if (close < 0) fail(p, 'unterminated string');
  // Look for an escape only inside this string (an unbounded search would make many strings quadratic).
  if (b.subarray(start, close).indexOf(BSLASH) < 0) return close + 1;
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

/** p at a scalar's first byte; returns the index after it, or fails. */
export function skipScalar(b: Buffer, p: number, allowNonFinite: boolean): number {
  const c = b[p];
  if (c === QUOTE) return skipString(b, p);
  if ((c >= ZERO && c <= NINE) || c === MINUS) return numberEnd(b, p, allowNonFinite);
  if (c === 0x74) return skipLiteral(b, p, 'true');
  if (c === 0x66) return skipLiteral(b, p, 'false');
  if (c === 0x6e) return skipLiteral(b, p, 'null');
  if (allowNonFinite && c === 0x4e) return skipLiteral(b, p, 'NaN');
  if (allowNonFinite && c === 0x49) return skipLiteral(b, p, 'Infinity');
  return fail(p, c === undefined ? 'unexpected end of input' : 'unexpected token');
}

/**
 * p at a number's first byte ('-' or a digit); returns the index after it. JSON's number grammar,
 * written out by hand: one load and two compares per digit (the hot loop of tensor payloads).
 */
export function numberEnd(b: Buffer, p: number, allowNonFinite: boolean): number {
  const start = p;
  let c = b[p];
  if (c === MINUS) {
    c = b[++p];
    if (c === 0x49 && allowNonFinite) return skipLiteral(b, p, 'Infinity');
  }
  if (c === ZERO) c = b[++p];
  else if (c > ZERO && c <= NINE) {
    do c = b[++p];
    while (c >= ZERO && c <= NINE);
  } else fail(start, 'bad number');
  if (c === DOT) {
    c = b[++p];
    if (!(c >= ZERO && c <= NINE)) fail(start, 'bad number');
    do c = b[++p];
    while (c >= ZERO && c <= NINE);
  }
  if (c === 0x65 || c === 0x45) {
    c = b[++p];
    if (c === PLUS || c === MINUS) c = b[++p];
    if (!(c >= ZERO && c <= NINE)) fail(start, 'bad number');
    do c = b[++p];
    while (c >= ZERO && c <= NINE);
  }
  return p;
}
