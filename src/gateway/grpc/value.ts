// google.protobuf.Value and JSON, both ways: predict's instances and parameters arrive over gRPC as
// Values and go to the REST surface as the JSON they stand for; its predictions come back as Values.
// The mapping is protobuf's own JSON mapping of Value (null, number, string, bool, Struct, list).
import { ApiError } from '../../errors.js';
import type { ValueMessage } from './proto.js';

/**
 * The JSON a decoded Value stands for. `path` names it in errors: a number JSON cannot carry, and
 * nesting past `maxDepth` levels (MAX_JSON_DEPTH, refused here before it could exhaust the stack).
 */
export function valueToJson(v: ValueMessage | null | undefined, path: string, maxDepth: number, depth = 1): unknown {
  if (depth > maxDepth) throw new ApiError('invalid_payload', `${path}: nesting deeper than ${maxDepth} levels`);
  switch (v?.kind) {
    case undefined:
    case 'nullValue':
      return null;
    case 'numberValue': {
      const n = v.numberValue as number;
      // Value's JSON mapping has no NaN or Infinity: refused, as REST's JSON parser would.
      if (!Number.isFinite(n)) throw new ApiError('invalid_payload', `${path}: ${n} is not a number JSON can carry`);
      return n;
    }
    case 'stringValue':
      return v.stringValue;
    case 'boolValue':
      return v.boolValue;
    case 'structValue': {
      // No prototype: a field named __proto__ is a field like any other.
      const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
      const fields = v.structValue?.fields ?? {};
      for (const k of Object.keys(fields)) out[k] = valueToJson(fields[k], `${path}.${k}`, maxDepth, depth + 1);
      return out;
    }
    case 'listValue':
      return (v.listValue?.values ?? []).map((x, i) => valueToJson(x, `${path}[${i}]`, maxDepth, depth + 1));
  }
}

/** The Value of a JSON value (as JSON.parse made it). */
export function jsonToValue(x: unknown): ValueMessage {
  switch (typeof x) {
    case 'number':
      return { numberValue: x };
    case 'string':
      return { stringValue: x };
    case 'boolean':
      return { boolValue: x };
    case 'object': {
      if (x === null) return { nullValue: 0 };
      if (Array.isArray(x)) return { listValue: { values: x.map(jsonToValue) } };
      const fields: Record<string, ValueMessage> = Object.create(null) as Record<string, ValueMessage>;
      for (const k of Object.keys(x)) fields[k] = jsonToValue((x as Record<string, unknown>)[k]);
      return { structValue: { fields } };
    }
    default:
      return { nullValue: 0 };
  }
}
