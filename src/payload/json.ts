// JSON reading and writing with TensorFlow Serving's non-finite tokens (NaN, Infinity, -Infinity).
// Owns: the tolerant parse (native JSON.parse first; a byte pre-pass only when that fails) and the
// matching serialiser. Nothing here knows about requests or frameworks.
import { randomBytes } from 'node:crypto';

/** Thrown when a body is not JSON; `message` is ready to show to a caller. */
export class JsonSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'JsonSyntaxError';
  }
}

/** Thrown by the byte scanner when nesting goes past its limit (the JSON may be fine otherwise). */
export class JsonNestingError extends JsonSyntaxError {}

// Sentinel strings stand in for non-finite numbers during the fallback parse and during stringify.
// A per-process nonce makes a collision with caller data practically impossible.
const NONCE = randomBytes(6).toString('hex');
const SENTINEL_PREFIX = `\u0000pg${NONCE}:`;
const SENTINELS: Record<string, number> = {
  [`${SENTINEL_PREFIX}NaN`]: NaN,
  [`${SENTINEL_PREFIX}Infinity`]: Infinity,
  [`${SENTINEL_PREFIX}-Infinity`]: -Infinity,
};

/**
 * Parses JSON text. With `allowNonFinite`, the bare tokens NaN, Infinity and -Infinity are accepted
 * where a number may stand (TF Serving's JSON mapping) and become the matching JS numbers. Valid
 * JSON never pays for that: the pre-pass runs only after JSON.parse has refused the text.
 */
export function parseJson(text: string, allowNonFinite: boolean): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    if (allowNonFinite) {
      const replaced = replaceNonFiniteTokens(text);
      if (replaced !== null) {
        try {
          return JSON.parse(replaced, reviveSentinel);
        } catch {
          // fall through: report the error of the original text
        }
      }
    }
    throw new JsonSyntaxError(describeSyntaxError(err, text));
  }
}

function reviveSentinel(_key: string, value: unknown): unknown {
  if (typeof value === 'string' && value.charCodeAt(0) === 0 && value in SENTINELS) return SENTINELS[value];
  return value;
}

function describeSyntaxError(err: unknown, text: string): string {
  const raw = err instanceof Error ? err.message : String(err);
  if (text.trim() === '') return 'request body is empty; expected a JSON object';
  // Node's message quotes the whole text for short inputs; keep it but bound its length.
  return `invalid JSON: ${raw.length > 300 ? raw.slice(0, 300) + '…' : raw}`;
}

const N = 0x4e, I = 0x49, MINUS = 0x2d, QUOTE = 0x22, BACKSLASH = 0x5c;

/**
 * Replaces NaN/Infinity/-Infinity tokens that stand outside strings by sentinel strings. Returns
 * null when the text has no such token (so the caller reports the original syntax error).
 */
export function replaceNonFiniteTokens(text: string): string | null {
  let out = '';
  let last = 0;
  let found = false;
  const len = text.length;
  for (let i = 0; i < len; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i++;
      while (i < len) {
        const d = text.charCodeAt(i);
        if (d === BACKSLASH) i += 2;
        else if (d === QUOTE) break;
        else i++;
      }
      continue;
    }
    let token: string | null = null;
    if (c === N && text.startsWith('NaN', i)) token = 'NaN';
    else if (c === I && text.startsWith('Infinity', i)) token = 'Infinity';
    else if (c === MINUS && text.startsWith('-Infinity', i)) token = '-Infinity';
    if (token !== null && !followedByColon(text, i + token.length)) {
      out += text.slice(last, i) + JSON.stringify(SENTINEL_PREFIX + token);
      i += token.length - 1;
      last = i + 1;
      found = true;
    }
  }
  return found ? out + text.slice(last) : null;
}

/** A token followed by `:` would be an (invalid) property name: leave it for JSON.parse to refuse. */
function followedByColon(text: string, i: number): boolean {
  let c = text.charCodeAt(i);
  while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = text.charCodeAt(++i);
  return c === 0x3a;
}

function sentinelReplacer(_key: string, value: unknown): unknown {
  if (typeof value === 'number' && !Number.isFinite(value)) {
    return SENTINEL_PREFIX + (Number.isNaN(value) ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity');
  }
  return value;
}

const SENTINEL_TOKEN = new RegExp(`"\\\\u0000pg${NONCE}:(NaN|-?Infinity)"`, 'g');

/** Serialises like JSON.stringify, but writes non-finite numbers as NaN/Infinity/-Infinity tokens. */
export function stringifyJson(value: unknown): string {
  const plain = JSON.stringify(value);
  if (plain === undefined || !plain.includes('null')) return plain;
  const tolerant = JSON.stringify(value, sentinelReplacer);
  return tolerant.includes(SENTINEL_PREFIX.slice(1)) ? tolerant.replace(SENTINEL_TOKEN, '$1') : tolerant;
}
