// Framework adaptation of a validated predict body, on the original bytes: tensorflow and custom
// bodies go to the model unchanged; pytorch instances not yet `{"data": ...}`-wrapped are wrapped
// by splicing (TorchServe's default handler reads `data`). No re-serialisation: numbers keep their
// spelling and NaN tokens survive.
import type { Framework } from '../api/types.js';
import type { PredictShape } from './validate.js';
import { scanObject, type Span } from './scan.js';

const OPEN_DATA = Buffer.from('{"data":');
const CLOSE = Buffer.from('}');

/** `spans` are the instances' byte spans when the caller has them (the fast check does). */
export function adaptPredictBody(raw: Buffer, framework: Framework, shape: PredictShape, maxDepth: number, spans?: Span[] | null): Buffer {
  if (framework !== 'pytorch' || shape.unwrapped.length === 0) return raw;
  const elements = spans ?? scanObject(raw, { allowNonFinite: true, maxDepth: maxDepth + 2, elementsOf: 'instances' }).elements;
  if (elements === null) return raw; // unreachable for a validated body: instances is a list
  const parts: Buffer[] = [];
  let last = 0;
  for (const i of shape.unwrapped) {
    const el = elements[i];
    parts.push(raw.subarray(last, el.start), OPEN_DATA, raw.subarray(el.start, el.end), CLOSE);
    last = el.end;
  }
  parts.push(raw.subarray(last));
  return Buffer.concat(parts);
}
