// Preparing an explain body (Vertex `:explain`): the predict envelope plus `deployedModelId` (which
// deployed model explains, overriding the traffic split) and `explanationSpecOverride` (Vertex's
// explanation settings; predictgate's models have none to override, so it is checked and not sent).
// Those two members are cut from the bytes; the rest goes through exactly the predict rules.
import type { Framework } from '../api/types.js';
import { ApiError } from '../errors.js';
import { JsonNestingError, JsonSyntaxError } from './json.js';
import { scanObject } from './scan.js';
import { preparePredict } from './prepare.js';
import type { PredictShape } from './validate.js';

const EXPLAIN_ONLY = new Set(['deployedModelId', 'explanationSpecOverride']);

export interface PreparedExplain {
  body: Buffer;
  shape: PredictShape;
  deployedModelId?: string;
}

export function prepareExplain(raw: Buffer, framework: Framework, maxDepth: number): PreparedExplain {
  let scan;
  try {
    scan = scanObject(raw, { allowNonFinite: true, maxDepth: maxDepth + 2 });
  } catch (err) {
    if (err instanceof JsonNestingError) throw new ApiError('invalid_payload', `body: nesting deeper than ${maxDepth} levels`);
    if (err instanceof JsonSyntaxError) throw new ApiError(err.message.includes('expected a JSON object') ? 'invalid_payload' : 'invalid_json', err.message);
    throw err;
  }
  let deployedModelId: string | undefined;
  const kept: Buffer[] = [];
  for (const m of scan.members) {
    const value = raw.subarray(m.start, m.end);
    if (m.key === 'deployedModelId') {
      const v: unknown = JSON.parse(value.toString('utf8'));
      if (typeof v !== 'string' || v === '') throw new ApiError('invalid_payload', `deployedModelId: expected a non-empty string, got ${JSON.stringify(v)}`);
      deployedModelId = v;
    } else if (m.key === 'explanationSpecOverride') {
      if (value[0] !== 0x7b) throw new ApiError('invalid_payload', 'explanationSpecOverride: expected an object');
    }
    if (EXPLAIN_ONLY.has(m.key)) continue;
    kept.push(Buffer.from(`${kept.length ? ',' : ''}${JSON.stringify(m.key)}:`), value);
  }
  const body = Buffer.concat([Buffer.from('{'), ...kept, Buffer.from('}')]);
  return { ...preparePredict(body, framework, maxDepth), deployedModelId };
}
