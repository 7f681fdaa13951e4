// adaptPredictBody (framework adaptation on bytes) and the model-answer side: shapePredictAnswer
// (one prediction per instance, gateway fields spliced in) and upstreamErrorMessage.
import { ApiError, type ErrorCode } from '../../src/errors.js';
import type { Framework } from '../../src/api/types.js';
import { adaptPredictBody } from '../../src/payload/adapt.js';
import { parseJson } from '../../src/payload/json.js';
import { shapePredictAnswer, upstreamErrorMessage } from '../../src/payload/response.js';
import { validatePredictBody, type PredictShape } from '../../src/payload/validate.js';
import { thrownBy } from '../helpers/expect.js';

const MAX_DEPTH = 32;

/** What the gateway does before forwarding: parse, validate, adapt. */
function prepare(text: string, framework: Framework, maxDepth = MAX_DEPTH): { raw: Buffer; shape: PredictShape; out: Buffer } {
  const raw = Buffer.from(text, 'utf8');
  const shape = validatePredictBody(parseJson(text, true), framework, { maxDepth });
  return { raw, shape, out: adaptPredictBody(raw, framework, shape, maxDepth) };
}

function apiErrorOf(fn: () => unknown, code: ErrorCode): ApiError {
  const err = thrownBy(fn, ApiError);
  expect(err.code).toBe(code);
  return err;
}

describe('adaptPredictBody: tensorflow and custom bodies go out as the same Buffer', () => {
  const rows: [string, Framework, string][] = [
    ['tensorflow row form', 'tensorflow', '{"instances": [1.0, 2.0, 5.0]}'],
    ['tensorflow columnar', 'tensorflow', '{"inputs": {"x": [1.0, NaN]}, "signature_name": "serving_default"}'],
    ['tensorflow named inputs', 'tensorflow', '{"instances": [{"tag": "beach", "image": {"b64": "ASa8asdf"}}]}'],
    ['custom unwrapped values', 'custom', '{"instances": [1.0, "x", [1, "a"]]}'],
    ['custom with parameters', 'custom', '{"instances": [{"a": 1}], "parameters": {"k": 1.50}}'],
    ['pytorch, every instance already wrapped', 'pytorch', '{"instances": [{"data": 1.0}, {"data": [NaN]}]}'],
  ];
  test.each(rows)('%s', (_name, framework, text) => {
    const { raw, out } = prepare(text, framework);
    expect(out).toBe(raw);
  });
});

describe('adaptPredictBody: pytorch wraps only the unwrapped instances, byte for byte', () => {
  // [name, request text, exact adapted text]
  const rows: [string, string, string][] = [
    ['scalars, spelling kept', '{"instances": [1.0, 2, -0.50e+01]}', '{"instances": [{"data":1.0}, {"data":2}, {"data":-0.50e+01}]}'],
    ['mixed wrapped and unwrapped', '{"instances": [{"data": 1}, 1.0, "x"]}', '{"instances": [{"data": 1}, {"data":1.0}, {"data":"x"}]}'],
    ['NaN tokens kept', '{"instances": [NaN, -Infinity, [1e0, NaN, Infinity]]}',
      '{"instances": [{"data":NaN}, {"data":-Infinity}, {"data":[1e0, NaN, Infinity]}]}'],
    ['white space and newlines kept', '{\n  "instances" : [\n    1.0 ,\n    {"data":2}\n  ]\n}\n',
      '{\n  "instances" : [\n    {"data":1.0} ,\n    {"data":2}\n  ]\n}\n'],
    ['parameters before and after kept', '{"parameters": {"k": 1.50}, "instances": [[1, 2]], "labels": {}}',
      '{"parameters": {"k": 1.50}, "instances": [{"data":[1, 2]}], "labels": {}}'],
    ['strings with escaped quotes and brackets', '{"instances": ["a]\\"}", {"data": "[{"}, "\\u005d"]}',
      '{"instances": [{"data":"a]\\"}"}, {"data": "[{"}, {"data":"\\u005d"}]}'],
    ['an object without data (or body, TorchServe\'s other key) is wrapped whole', '{"instances": [{"x": {"data": 1}}, {"body": "b"}]}',
      '{"instances": [{"data":{"x": {"data": 1}}}, {"body": "b"}]}'],
    ['a b64 object is wrapped', '{"instances": [{"b64": "QUJD"}]}', '{"instances": [{"data":{"b64": "QUJD"}}]}'],
    ['null is wrapped', '{"instances": [null, {"data": null}]}', '{"instances": [{"data":null}, {"data": null}]}'],
    ['unicode text kept', '{"instances": ["日本語 🚀", {"data": "é"}, "é"]}', '{"instances": [{"data":"日本語 🚀"}, {"data": "é"}, {"data":"é"}]}'],
    ['the last duplicate "instances" is the one wrapped (as JSON.parse reads it)', '{"instances": [{"data": 0}], "instances": [{"data": 1}, 2]}',
      '{"instances": [{"data": 0}], "instances": [{"data": 1}, {"data":2}]}'],
  ];

  test.each(rows)('%s', (_name, text, expected) => {
    const { raw, out } = prepare(text, 'pytorch');
    expect(out).not.toBe(raw);
    expect(out.toString('utf8')).toBe(expected);
    // The adapted body is valid and fully wrapped now.
    const again = validatePredictBody(parseJson(out.toString('utf8'), true), 'pytorch', { maxDepth: MAX_DEPTH + 1 });
    expect(again.unwrapped).toEqual([]);
    expect(again.instanceCount).toBe((parseJson(text, true) as { instances: unknown[] }).instances.length);
  });

  test('an instance exactly at maxDepth is validated and adapted', () => {
    const { out } = prepare('{"instances": [[[[1]]], {"data": [[2]]}]}', 'pytorch', 3);
    expect(out.toString()).toBe('{"instances": [{"data":[[[1]]]}, {"data": [[2]]}]}');
  });
});

// ---- shapePredictAnswer -------------------------------------------------------------------------

const FIELDS = Buffer.from('"deployedModelId":"m"');
const ALL_FIELDS = Buffer.from('"deployedModelId":"m","model":"projects/p/locations/l/models/half","modelDisplayName":"Half","modelVersionId":"2"');
const OPTS = { maxDepth: MAX_DEPTH + 2, modelId: 'm' };
const rowShape = (n: number): PredictShape => ({ instanceCount: n, unwrapped: [] });
const COLUMNAR: PredictShape = { instanceCount: null, unwrapped: [] };

describe('shapePredictAnswer: valid answers get the gateway fields, exact bytes', () => {
  // [name, model answer, shape, fields, exact output]
  const rows: [string, string, PredictShape, Buffer, string][] = [
    ['TF half_plus_three answer', '{"predictions": [3.5, 4.0, 5.5]}', rowShape(3), FIELDS, '{"predictions": [3.5, 4.0, 5.5],"deployedModelId":"m"}'],
    ['all four fields', '{"predictions":[1]}', rowShape(1), ALL_FIELDS,
      '{"predictions":[1],"deployedModelId":"m","model":"projects/p/locations/l/models/half","modelDisplayName":"Half","modelVersionId":"2"}'],
    ['GDC label/scores answer, other spelling kept', '{\n  "predictions": [\n    {"label": "beach", "scores": [0.1, 0.9]},\n    {"label": "car", "scores": [0.75, 0.25]}\n  ]\n}',
      rowShape(2), FIELDS, '{\n  "predictions": [\n    {"label": "beach", "scores": [0.1, 0.9]},\n    {"label": "car", "scores": [0.75, 0.25]}\n  ]\n,"deployedModelId":"m"}'],
    ['white space after the closing brace is dropped', '{"predictions":[1]}\n\n', rowShape(1), FIELDS, '{"predictions":[1],"deployedModelId":"m"}'],
    ['NaN tokens and number spellings kept', '{"predictions": [NaN, 1.50, -Infinity]}', rowShape(3), FIELDS, '{"predictions": [NaN, 1.50, -Infinity],"deployedModelId":"m"}'],
    ['other members kept', '{"modelInfo": {"v": 1}, "predictions": [[1, 2]], "error": null}', rowShape(1), FIELDS,
      '{"modelInfo": {"v": 1}, "predictions": [[1, 2]], "error": null,"deployedModelId":"m"}'],
    ['GDC example with a numeric deployedModelId: replaced', '{"predictions":\n  [5, 4, 3],\n  "deployedModelId": 123456789012345678\n}', rowShape(3), FIELDS,
      '{"predictions":[5, 4, 3],"deployedModelId":"m"}'],
    ['model-provided model and modelVersionId: replaced, the rest kept in order', '{"model": "x", "predictions": [1], "modelVersionId": "9", "extra": true}',
      rowShape(1), ALL_FIELDS,
      '{"predictions":[1],"extra":true,"deployedModelId":"m","model":"projects/p/locations/l/models/half","modelDisplayName":"Half","modelVersionId":"2"}'],
    ['rebuilt keys are re-encoded from their decoded form', '{"predictions": [1], "a\\u0062\\"": 2, "deployedModelId": "z"}', rowShape(1), FIELDS,
      '{"predictions":[1],"ab\\"":2,"deployedModelId":"m"}'],
    ['columnar: outputs accepted', '{"outputs": [[0.5, 0.5]]}', COLUMNAR, FIELDS, '{"outputs": [[0.5, 0.5]],"deployedModelId":"m"}'],
    ['columnar: outputs as an object', '{"outputs": {"scores": [1, 2, 3], "label": "x"}}', COLUMNAR, FIELDS,
      '{"outputs": {"scores": [1, 2, 3], "label": "x"},"deployedModelId":"m"}'],
    ['columnar: predictions of any length accepted', '{"predictions": [1, 2, 3, 4]}', COLUMNAR, FIELDS, '{"predictions": [1, 2, 3, 4],"deployedModelId":"m"}'],
    ['columnar: outputs next to an error member', '{"outputs": 1, "error": "partial"}', COLUMNAR, FIELDS, '{"outputs": 1, "error": "partial","deployedModelId":"m"}'],
    ['predictions next to an error member', '{"error": "ignored", "predictions": ["a"]}', rowShape(1), FIELDS, '{"error": "ignored", "predictions": ["a"],"deployedModelId":"m"}'],
  ];

  test.each(rows)('%s', (_name, answer, shape, fields, expected) => {
    const out = Buffer.concat(shapePredictAnswer(Buffer.from(answer), shape, fields, OPTS));
    expect(out.toString('utf8')).toBe(expected);
    const parsed = parseJson(out.toString('utf8'), true) as Record<string, unknown>;
    expect(parsed.deployedModelId).toBe('m');
  });
});

describe('shapePredictAnswer: answers that are not a prediction response', () => {
  // [name, model answer, shape, code, exact message]
  const rows: [string, string, PredictShape, ErrorCode, string][] = [
    ['"predictions" twice (the second would slip past the count)', '{"predictions": [1, 2], "predictions": "oops"}', rowShape(2), 'bad_upstream_response',
      'deployed model m answered with "predictions" twice'],
    ['empty object, row form', '{}', rowShape(1), 'bad_upstream_response', 'deployed model m answered without a "predictions" list'],
    ['empty object with white space, columnar', ' { } ', COLUMNAR, 'bad_upstream_response', 'deployed model m answered without "outputs" or "predictions"'],
    ['no predictions member', '{"result": [1]}', rowShape(1), 'bad_upstream_response', 'deployed model m answered without a "predictions" list'],
    ['predictions not a list', '{"predictions": {"0": 1}}', rowShape(1), 'bad_upstream_response', 'deployed model m answered without a "predictions" list'],
    ['only outputs for a row-form call', '{"outputs": [1]}', rowShape(1), 'bad_upstream_response', 'deployed model m answered without a "predictions" list'],
    ['2 predictions for 3 instances', '{"predictions": [1, 2]}', rowShape(3), 'bad_upstream_response',
      'deployed model m returned 2 predictions for 3 instances; expected exactly one per instance'],
    ['1 prediction for 2 instances', '{"predictions": [[1, 2]]}', rowShape(2), 'bad_upstream_response',
      'deployed model m returned 1 prediction for 2 instances; expected exactly one per instance'],
    ['3 predictions for 1 instance', '{"predictions": [1, 2, 3]}', rowShape(1), 'bad_upstream_response',
      'deployed model m returned 3 predictions for 1 instance; expected exactly one per instance'],
    ['0 predictions for 1 instance', '{"predictions": []}', rowShape(1), 'bad_upstream_response',
      'deployed model m returned 0 predictions for 1 instance; expected exactly one per instance'],
    ['not JSON: plain text', 'Internal Server Error', rowShape(1), 'bad_upstream_response',
      'deployed model m answered with a body that is not a JSON object (invalid JSON at byte 0: expected a JSON object)'],
    ['not JSON: empty body', '', rowShape(1), 'bad_upstream_response',
      'deployed model m answered with a body that is not a JSON object (invalid JSON at byte 0: expected a JSON object)'],
    ['not JSON: a bare list', '[1, 2]', rowShape(2), 'bad_upstream_response',
      'deployed model m answered with a body that is not a JSON object (invalid JSON at byte 0: expected a JSON object)'],
    ['not JSON: truncated', '{"predictions": [1, 2', rowShape(2), 'bad_upstream_response',
      'deployed model m answered with a body that is not a JSON object (invalid JSON at byte 21: expected , or ])'],
    ['not JSON: trailing garbage', '{"predictions": [1]} {}', rowShape(1), 'bad_upstream_response',
      'deployed model m answered with a body that is not a JSON object (invalid JSON at byte 20: unexpected data after the JSON value)'],
    ['GDC error answer with 200', '{"error": "Divide by zero"}', rowShape(1), 'upstream_error', 'Divide by zero'],
    ['GDC error answer, columnar call', '{"error": "Divide by zero"}', COLUMNAR, 'upstream_error', 'Divide by zero'],
    ['error with escapes is decoded', '{"error": "bad \\"x\\"\\n"}', rowShape(1), 'upstream_error', 'bad "x"\n'],
    ['google.rpc style error object', '{"error": {"code": 3, "message": "Invalid instance", "status": "INVALID_ARGUMENT"}}', rowShape(1),
      'upstream_error', 'Invalid instance'],
    ['error of another type is shown as JSON', '{"error": 42}', rowShape(1), 'upstream_error', '42'],
  ];

  test.each(rows)('%s', (_name, answer, shape, code, message) => {
    const err = apiErrorOf(() => shapePredictAnswer(Buffer.from(answer), shape, FIELDS, OPTS), code);
    expect(err.message).toBe(message);
    expect(err.httpStatus).toBe(code === 'upstream_error' ? 500 : 502);
    expect(err.rpcStatus).toBe('INTERNAL');
  });

  test('nesting deeper than maxDepth is a bad_upstream_response, not a crash', () => {
    const err = apiErrorOf(() => shapePredictAnswer(Buffer.from('{"predictions": [[[[1]]]]}'), rowShape(1), FIELDS, { maxDepth: 3, modelId: 'm' }),
      'bad_upstream_response');
    expect(err.message).toMatch(/^deployed model m answered with a body that is not a JSON object \(invalid JSON at byte \d+: nesting too deep\)$/);
  });
});

describe('upstreamErrorMessage', () => {
  const long = 'x'.repeat(5000);
  // [name, status, content type, body, exact message]
  const rows: [string, number, string | undefined, string, string][] = [
    ['TF Serving {"error": string}', 404, 'application/json', '{ "error": "Servable not found for request: Latest(half)" }',
      'Servable not found for request: Latest(half)'],
    ['google.rpc {"error": {"message"}}', 400, 'application/json',
      '{"error": {"code": 400, "message": "Invalid JSON payload received.", "status": "INVALID_ARGUMENT"}}', 'Invalid JSON payload received.'],
    ['KServe / FastAPI {"detail": string}', 404, 'application/json', '{"detail": "Not Found"}', 'Not Found'],
    ['{"message": string}', 500, 'application/json', '{"message": "model not loaded", "code": 500}', 'model not loaded'],
    ['error wins over message', 500, 'application/json', '{"message": "second", "error": "first"}', 'first'],
    ['JSON without a known key: the JSON text', 500, 'application/json', '{"status": "failed", "code": 7}', '{"status": "failed", "code": 7}'],
    ['FastAPI validation detail list: the JSON text', 422, 'application/json', '{"detail": [{"loc": ["body"], "msg": "field required"}]}',
      '{"detail": [{"loc": ["body"], "msg": "field required"}]}'],
    ['HTML by content type', 502, 'text/html; charset=utf-8', 'Bad gateway page', 'deployed model m answered HTTP 502 with an HTML page'],
    ['HTML by its first character', 503, undefined, '\n  <!DOCTYPE html><html><body><h1>503 Service Unavailable</h1></body></html>',
      'deployed model m answered HTTP 503 with an HTML page'],
    ['HTML sent as application/json', 500, 'application/json', '<html><title>Error</title></html>', 'deployed model m answered HTTP 500 with an HTML page'],
    ['empty body', 503, 'text/plain', '', 'deployed model m answered HTTP 503 with an empty body'],
    ['white space only', 500, undefined, ' \r\n\t ', 'deployed model m answered HTTP 500 with an empty body'],
    ['plain text, trimmed', 500, 'text/plain', '  upstream connect error or disconnect/reset before headers\n',
      'upstream connect error or disconnect/reset before headers'],
    ['long text clipped to 1000 characters', 500, 'text/plain', long, `${'x'.repeat(1000)}…`],
    ['long JSON error clipped to 1000 characters', 500, 'application/json', JSON.stringify({ error: long }), `${'x'.repeat(1000)}…`],
    ['exactly 1000 characters not clipped', 500, 'text/plain', 'y'.repeat(1000), 'y'.repeat(1000)],
  ];

  test.each(rows)('%s', (_name, status, contentType, body, expected) => {
    const msg = upstreamErrorMessage(status, contentType, Buffer.from(body), 'm');
    expect(msg).toBe(expected);
    expect(msg).not.toMatch(/<[a-z!/]/i); // never markup
  });
});
