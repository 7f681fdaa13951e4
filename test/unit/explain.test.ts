// Table tests of explain's pure parts: the body (deployedModelId and explanationSpecOverride cut from
// the bytes, the rest under the predict rules and adaptation) and the default explain route.
import { splitExplain } from '../../src/payload/explain.js';
import { preparePredict } from '../../src/payload/prepare.js';
import type { Framework } from '../../src/api/types.js';

/** What the explain handler does with a body once the deployed model is known. */
function prepareExplain(raw: Buffer, framework: Framework, maxDepth: number) {
  const { body, deployedModelId } = splitExplain(raw, maxDepth);
  return { ...preparePredict(body, framework, maxDepth), deployedModelId };
}
import { explainRouteOf } from '../../src/gateway/routing.js';
import { ApiError } from '../../src/errors.js';
import { thrownBy } from '../helpers/expect.js';

test('deployedModelId and explanationSpecOverride are cut out; the rest is the predict body, adapted', () => {
  const p = prepareExplain(Buffer.from('{"deployedModelId": "m2", "instances": [1, {"data": 2}], "explanationSpecOverride": {"parameters": {}}, "parameters": {"k": NaN}}'), 'pytorch', 64);
  expect(p.deployedModelId).toBe('m2');
  expect(JSON.parse(p.body.toString().replace('NaN', 'null'))).toEqual({ instances: [{ data: 1 }, { data: 2 }], parameters: { k: null } });
  expect(p.body.toString()).toContain('NaN'); // bytes kept as sent
  expect(p.shape.instanceCount).toBe(2);
  expect(prepareExplain(Buffer.from('{"instances": ["a"]}'), 'tensorflow', 64)).toMatchObject({ deployedModelId: undefined, shape: { instanceCount: 1 } });
});

test('a body with nothing to cut is passed on as the same bytes', () => {
  const raw = Buffer.from('{"instances": [1]}');
  expect(splitExplain(raw, 64).body).toBe(raw);
});

test.each([
  ['{"instances": [1], "deployedModelId": ""}', 'invalid_payload', 'deployedModelId: expected a non-empty string, got ""'],
  ['{"instances": [1], "deployedModelId": ["a"]}', 'invalid_payload', 'deployedModelId: expected a non-empty string, got ["a"]'],
  ['{"instances": [1], "deployedModelId": NaN}', 'invalid_payload', 'deployedModelId: expected a non-empty string, got NaN'],
  ['{"instances": [1], "explanationSpecOverride": []}', 'invalid_payload', 'explanationSpecOverride: expected an object'],
  ['{"instances": [1], "deployedModelId": "m2\t"}', 'invalid_json', 'invalid JSON at byte 41: a raw control character in the string deployedModelId (write it as a \\u escape)'],
  ['{"deployedModelId": "a\u0001b", "instances": [1]}', 'invalid_json', 'invalid JSON at byte 22: a raw control character in the string deployedModelId (write it as a \\u escape)'],
  ['[1]', 'invalid_payload', /expected a JSON object/],
  ['{"instances": [1]', 'invalid_json', /^invalid JSON/],
  ['{"instances": [1, "a"]}', 'invalid_payload', /^instances\[1\]/],
])('%s is refused (%s)', (body, code, message) => {
  const err = thrownBy(() => prepareExplain(Buffer.from(body), 'tensorflow', 64), ApiError);
  expect(err.code).toBe(code);
  expect(err.message).toMatch(message);
});

test.each([
  [undefined, '/v1/models/m:predict', 'pytorch', '/v1/models/m:explain'],
  [undefined, '/v1/models/m:predict', 'custom', '/v1/models/m:explain'],
  [undefined, '/v1/models/m:predict', 'tensorflow', null],
  [undefined, '/predict', 'pytorch', null],
  ['/explain', '/predict', 'tensorflow', '/explain'],
] as const)('explain route of (%s, %s, %s) is %s', (explicit, predict, framework, expected) => {
  expect(explainRouteOf(explicit, predict, framework)).toBe(expected);
});
