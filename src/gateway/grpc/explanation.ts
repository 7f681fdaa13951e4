// Explain's answer over gRPC: the REST explain answer (`explanations`, `deployedModelId`,
// `predictions`) as an ExplainResponse. An explanation is Vertex's Explanation in its JSON form
// (attributions and neighbors, camelCase names); a member the message has no field for is dropped,
// and a value that does not fit its field is the model's error, named by its path.
import { ApiError } from '../../errors.js';
import type { AttributionMessage, ExplainResponseMessage, ExplanationMessage } from './proto.js';
import { jsonToValue } from './value.js';

type Doc = Record<string, unknown>;

function bad(path: string, what: string, got: unknown): ApiError {
  return new ApiError('bad_upstream_response', `the model's explain answer: ${path}: expected ${what}, got ${JSON.stringify(got) ?? String(got)}`);
}

const isObject = (x: unknown): x is Doc => typeof x === 'object' && x !== null && !Array.isArray(x);

function list(x: unknown, path: string): unknown[] {
  if (x === undefined || x === null) return [];
  if (!Array.isArray(x)) throw bad(path, 'a list', x);
  return x;
}

function number(x: unknown, path: string): number | undefined {
  if (x === undefined || x === null) return undefined;
  if (typeof x !== 'number') throw bad(path, 'a number', x);
  return x;
}

function text(x: unknown, path: string): string | undefined {
  if (x === undefined || x === null) return undefined;
  if (typeof x !== 'string') throw bad(path, 'a string', x);
  return x;
}

function attribution(a: unknown, path: string): AttributionMessage {
  if (!isObject(a)) throw bad(path, 'an object', a);
  const out: AttributionMessage = {};
  const set = <K extends keyof AttributionMessage>(k: K, v: AttributionMessage[K] | undefined): void => {
    if (v !== undefined) out[k] = v;
  };
  set('baseline_output_value', number(a.baselineOutputValue, `${path}.baselineOutputValue`));
  set('instance_output_value', number(a.instanceOutputValue, `${path}.instanceOutputValue`));
  if (a.featureAttributions !== undefined) out.feature_attributions = jsonToValue(a.featureAttributions);
  const index = list(a.outputIndex, `${path}.outputIndex`).map((i, n) => {
    if (!Number.isInteger(i) || (i as number) < -(2 ** 31) || (i as number) >= 2 ** 31) throw bad(`${path}.outputIndex[${n}]`, 'a 32-bit integer', i);
    return i as number;
  });
  if (index.length > 0) out.output_index = index;
  set('output_display_name', text(a.outputDisplayName, `${path}.outputDisplayName`));
  set('approximation_error', number(a.approximationError, `${path}.approximationError`));
  set('output_name', text(a.outputName, `${path}.outputName`));
  return out;
}

function explanation(e: unknown, path: string): ExplanationMessage {
  if (!isObject(e)) throw bad(path, 'an object (an Explanation)', e);
  return {
    attributions: list(e.attributions, `${path}.attributions`).map((a, i) => attribution(a, `${path}.attributions[${i}]`)),
    neighbors: list(e.neighbors, `${path}.neighbors`).map((n, i) => {
      const at = `${path}.neighbors[${i}]`;
      if (!isObject(n)) throw bad(at, 'an object', n);
      const id = text(n.neighborId, `${at}.neighborId`);
      const distance = number(n.neighborDistance, `${at}.neighborDistance`);
      return { ...(id === undefined ? {} : { neighbor_id: id }), ...(distance === undefined ? {} : { neighbor_distance: distance }) };
    }),
  };
}

/** ExplainResponse from the REST explain answer's body. */
export function explainAnswer(body: Buffer): ExplainResponseMessage {
  const doc = JSON.parse(body.toString('utf8')) as Doc;
  return {
    explanations: list(doc.explanations, 'explanations').map((e, i) => explanation(e, `explanations[${i}]`)),
    deployed_model_id: typeof doc.deployedModelId === 'string' ? doc.deployedModelId : '',
    predictions: Array.isArray(doc.predictions) ? doc.predictions.map(jsonToValue) : [],
  };
}
