// The TF Serving surface's checks before anything reaches a model: the path after
// /tfserving/{namespace}/{name} must be a plain path under /v1/models/ (no dot segments, encoded or
// plain; no encoded slashes or backslashes; no empty segments), and classify and regress bodies
// must have TF Serving's request shape, each refusal naming what was wrong and where.
import { tfServingPath } from '../../src/gateway/tfServing.js';
import { checkExamplesBody } from '../../src/payload/tfExamples.js';
import { ApiError } from '../../src/errors.js';

const BASE = '/tfserving/default/half-plus-two';

/** The error a check throws, as [code, status, message]. */
function refusal(f: () => unknown): [string, number, string] | 'accepted' {
  try {
    f();
    return 'accepted';
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    return [err.code, err.httpStatus, err.message];
  }
}

describe('tfServingPath', () => {
  test.each([
    ['/v1/models/half_plus_two', '/v1/models/half_plus_two'],
    ['/v1/models/half_plus_two/versions/1:predict', '/v1/models/half_plus_two/versions/1:predict'],
    ['/v1/models/half_plus_two/labels/stable/metadata?x=%2e%2e', '/v1/models/half_plus_two/labels/stable/metadata?x=%2e%2e'],
    ['/v1/models/my%20model:classify', '/v1/models/my%20model:classify'],
  ])('%s goes to the model as it is', (path, sent) => {
    expect(tfServingPath(`${BASE}${path}`)).toBe(sent);
  });

  test.each([
    ['/v1/models/../../admin', 'has a ".." segment'],
    ['/v1/models/x/./metadata', 'has a "." segment'],
    ['/v1/models/%2e%2e/secret', 'has a ".." segment (written "%2e%2e")'],
    ['/v1/models/%2E./secret', 'has a ".." segment (written "%2E.")'],
    ['/v1/models/x%2f..%2fy', 'has an encoded slash or backslash (%2F, %5C)'],
    ['/v1/models/x%5Cy', 'has an encoded slash or backslash (%2F, %5C)'],
    ['/v1/models/x\\..\\y', 'has a backslash'],
    ['/v1/models//x', 'has an empty segment (a doubled or trailing slash)'],
    ['/v1/models/x/', 'has an empty segment (a doubled or trailing slash)'],
    ['/v1/models/x%zz', 'has a malformed percent-escape'],
    ['/v1/models', 'names no model'],
  ])('%s is a 400: it %s', (path, why) => {
    expect(refusal(() => tfServingPath(`${BASE}${path}?q=1`))).toEqual(['invalid_request', 400, `the TF Serving path ${JSON.stringify(path)} ${why}; it must be a plain path under /v1/models/`]);
  });
});

describe('classify and regress bodies', () => {
  const check = (body: string, verb: 'classify' | 'regress' = 'classify') => refusal(() => checkExamplesBody(Buffer.from(body), verb, 64));

  test.each([
    '{"examples": [{"x": 1.0}]}',
    '{"signature_name": "classify_objects", "examples": [{"image": {"b64": "aW1hZ2UgYnl0ZXM="}, "caption": "seaside"}, {"image": {"b64": "YXdlc29tZSBpbWFnZSBieXRlcw=="}, "caption": "mountains"}]}',
    '{"context": {"country": "fr"}, "examples": [{"x": [1, 2.5, NaN, Infinity]}, {"x": [], "flag": true}]}',
  ])('TF Serving\'s request shape is accepted: %s', (body) => {
    expect(check(body)).toBe('accepted');
  });

  test.each([
    ['[{"x": 1}]', 'body: expected a JSON object, got list'],
    ['{"example": [{"x": 1}]}', 'body: "examples" is required (a list of objects of features; TF Serving\'s classify request)'],
    ['{"examples": {"x": 1}}', 'examples: expected a list of objects, got object'],
    ['{"examples": []}', 'examples: expected at least one example, got an empty list'],
    ['{"examples": [{"x": 1}, {"x": 2}, 3]}', 'examples[2]: expected an object, got number'],
    ['{"examples": [{"x": null}]}', 'examples[0].x: expected a number, a string, {"b64": "..."} or a list of them, got null'],
    ['{"examples": [{"x": [[1]]}]}', 'examples[0].x[0]: expected a number, a string, {"b64": "..."} or a list of them, got a nested list'],
    ['{"examples": [{"x": {"a": 1}}]}', 'examples[0].x: expected a number, a string, {"b64": "..."} or a list of them, got object'],
    ['{"examples": [{"x": [1, "a"]}]}', 'examples[0].x[1]: expected a number like examples[0].x[0], got string (a feature\'s values are all strings or all numbers)'],
    ['{"examples": [{"img": {"b64": "not base64!"}}]}', 'examples[0].img.b64: expected valid base64 (RFC 4648 standard or URL-safe alphabet, optional padding)'],
    ['{"signature_name": 7, "examples": [{"x": 1}]}', 'signature_name: expected a string, got number'],
    ['{"context": [1], "examples": [{"x": 1}]}', 'context: expected an object of features, got list'],
    ['{"context": {"x": 1}, "examples": [{"y": 1}, {"x": 2}]}', 'examples[1].x: this feature is also in context; a feature in context must not appear in an example'],
  ])('%s is a 400: %s', (body, message) => {
    expect(check(body)).toEqual(['invalid_payload', 400, message]);
  });

  test('not JSON is invalid_json; the verb is named when examples are missing', () => {
    expect(check('{"examples": [', 'regress')[0]).toBe('invalid_json');
    expect(check('{}', 'regress')).toEqual(['invalid_payload', 400, 'body: "examples" is required (a list of objects of features; TF Serving\'s regress request)']);
  });
});
