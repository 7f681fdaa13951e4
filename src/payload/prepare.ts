// Preparing a predict body for the model: validation and adaptation in one synchronous call. The
// byte-level fast check (fastCheck.ts) accepts the common valid body without building a tree;
// anything else is refused early if nested too deep, then goes through JSON.parse and the tree
// validator (validate.ts), which accepts it or throws the precise error. Synchronous on purpose: a
// parsed tree must not live on across the caller's upstream await (design.md, performance lessons).
import type { Framework } from '../api/types.js';
import { ApiError } from '../errors.js';
import { parseJson, JsonNestingError, JsonSyntaxError } from './json.js';
import { validatePredictBody, type PredictShape } from './validate.js';
import { adaptPredictBody } from './adapt.js';
import { fastCheckPredict } from './fastCheck.js';
import { scanObject } from './scan.js';

export function preparePredict(raw: Buffer, framework: Framework, maxDepth: number): { body: Buffer; shape: PredictShape } {
  const fast = fastCheckPredict(raw, framework, maxDepth);
  if (fast !== null) return { body: adaptPredictBody(raw, framework, fast, maxDepth, fast.spans), shape: fast };
  refuseDeepNesting(raw, maxDepth);
  const parsed = parseBody(raw, true);
  const shape = validatePredictBody(parsed, framework, { maxDepth });
  return { body: adaptPredictBody(raw, framework, shape, maxDepth), shape };
}

/** A request body as JSON; a syntax error is the caller's invalid_json (with where and what). */
export function parseBody(raw: Buffer, allowNonFinite: boolean): unknown {
  try {
    return parseJson(raw.toString('utf8'), allowNonFinite);
  } catch (err) {
    if (err instanceof JsonSyntaxError) throw new ApiError('invalid_json', err.message);
    throw err;
  }
}

/**
 * Refuses a body nested deeper than the limit before JSON.parse builds it (an iterative byte scan:
 * a megabyte of `[[[[` costs no tree and no stack). A top-level list is refused outright (the
 * scanner reads objects only). Other syntax problems are left to JSON.parse, whose message callers get.
 */
export function refuseDeepNesting(raw: Buffer, maxDepth: number): void {
  let i = 0;
  while (raw[i] === 0x20 || raw[i] === 0x0a || raw[i] === 0x0d || raw[i] === 0x09) i++;
  if (raw[i] === 0x5b) throw new ApiError('invalid_payload', 'body: expected a JSON object, got list');
  try {
    scanObject(raw, { allowNonFinite: true, maxDepth: maxDepth + 2 });
  } catch (err) {
    if (err instanceof JsonNestingError) {
      throw new ApiError('invalid_payload', `body: nesting deeper than ${maxDepth} levels`);
    }
  }
}
