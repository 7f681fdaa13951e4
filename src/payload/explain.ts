// Reading an explain body (Vertex `:explain`): the predict envelope plus `deployedModelId` (which
// deployed model explains, overriding the traffic split) and `explanationSpecOverride` (Vertex's
// explanation settings; predictgate's models have none to override, so it is checked and not sent).
// splitExplain checks those two members and cuts them from the bytes; the caller then picks the
// deployed model and puts the rest through the predict rules of that model's framework.
import { ApiError } from '../errors.js';
import { JsonNestingError, JsonSyntaxError } from './json.js';
import { scanObject } from './scan.js';

const EXPLAIN_ONLY = new Set(['deployedModelId', 'explanationSpecOverride']);

export interface ExplainRequest {
  /** The predict part of the body: the bytes as sent when there was nothing to cut. */
  body: Buffer;
  deployedModelId?: string;
}

export function splitExplain(raw: Buffer, maxDepth: number): ExplainRequest {
  let scan;
  try {
    scan = scanObject(raw, { allowNonFinite: true, maxDepth: maxDepth + 2 });
  } catch (err) {
    if (err instanceof JsonNestingError) throw new ApiError('invalid_payload', `body: nesting deeper than ${maxDepth} levels`);
    if (err instanceof JsonSyntaxError) throw new ApiError(err.message.includes('expected a JSON object') ? 'invalid_payload' : 'invalid_json', err.message);
    throw err;
  }
  if (!scan.members.some((m) => EXPLAIN_ONLY.has(m.key))) return { body: raw };
  let deployedModelId: string | undefined;
  const kept: Buffer[] = [];
  for (const m of scan.members) {
    const value = raw.subarray(m.start, m.end);
    if (m.key === 'deployedModelId') {
      // Only a JSON string is parsed (the scanner also lets NaN and Infinity through, and raw
      // control characters inside strings, which JSON.parse refuses).
      const text = value.toString('utf8');
      const control = value.findIndex((c) => c < 0x20);
      if (control >= 0) throw new ApiError('invalid_json', `invalid JSON at byte ${m.start + control}: a raw control character in the string deployedModelId (write it as a \\u escape)`);
      const v: unknown = value[0] === 0x22 ? JSON.parse(text) : undefined;
      if (typeof v !== 'string' || v === '') throw new ApiError('invalid_payload', `deployedModelId: expected a non-empty string, got ${text}`);
      deployedModelId = v;
    } else if (m.key === 'explanationSpecOverride') {
      if (value[0] !== 0x7b) throw new ApiError('invalid_payload', 'explanationSpecOverride: expected an object');
    }
    if (EXPLAIN_ONLY.has(m.key)) continue;
    kept.push(Buffer.from(`${kept.length ? ',' : ''}${JSON.stringify(m.key)}:`), value);
  }
  return { body: Buffer.concat([Buffer.from('{'), ...kept, Buffer.from('}')]), deployedModelId };
}
