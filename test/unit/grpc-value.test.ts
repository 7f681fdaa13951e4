// google.protobuf.Value and JSON on the gRPC surface: every kind both ways, through the wire form
// (the protobuf codecs the surface uses: a Value's kind is set when it is decoded), and the refusals
// with the path of the bad value.
import { jsonToValue, valueToJson } from '../../src/gateway/grpc/value.js';
import { PredictRequest, PredictResponse } from '../../src/gateway/grpc/proto.js';
import { ApiError } from '../../src/errors.js';
import { thrownBy } from '../helpers/expect.js';

const DEPTH = 8;
/** A Value through the wire: encoded in a PredictRequest and decoded, as a call's instance arrives. */
const wire = (v: object): object | null | undefined => PredictRequest.decode(PredictRequest.encode({ instances: [v] })).instances?.[0];
const SAMPLES: unknown[] = [0, -1.5, 1e300, '', 'héllo', true, false, null, [], {}, [1, 'a', null, [true]], { a: { b: [1, { c: 'd' }] }, '': 0 }];

test.each(SAMPLES.map((x) => [JSON.stringify(x), x]))('%s: JSON to Value to the wire and back is the same JSON', (_name, x) => {
  const wire = PredictRequest.encode({ endpoint: 'e', instances: [jsonToValue(x)], parameters: jsonToValue({ p: x }) });
  const back = PredictRequest.decode(wire);
  expect(back.instances?.map((v, i) => valueToJson(v, `instances[${i}]`, DEPTH))).toEqual([x]);
  expect(valueToJson(back.parameters, 'parameters', DEPTH)).toEqual({ p: x });
});

test('a Value with no kind set, and a missing one, are null', () => {
  expect(valueToJson({}, 'instances[0]', DEPTH)).toBeNull();
  expect(valueToJson(undefined, 'instances[0]', DEPTH)).toBeNull();
  expect(valueToJson(PredictRequest.decode(PredictRequest.encode({ instances: [{}] })).instances?.[0], 'instances[0]', DEPTH)).toBeNull();
});

test('a field named __proto__ is kept as a field, both ways', () => {
  const doc = JSON.parse('{"__proto__": {"x": 1}, "y": 2}') as Record<string, unknown>;
  const json = valueToJson(wire(jsonToValue(doc)), 'instances[0]', DEPTH);
  expect(JSON.stringify(json)).toBe('{"__proto__":{"x":1},"y":2}');
  expect(Object.getPrototypeOf(json)).toBeNull();
});

test.each([
  [NaN, 'instances[0].a[1]: NaN is not a number JSON can carry'],
  [Infinity, 'instances[0].a[1]: Infinity is not a number JSON can carry'],
  [-Infinity, 'instances[0].a[1]: -Infinity is not a number JSON can carry'],
])('%s in a Value is refused at its path', (n, message) => {
  const v = { structValue: { fields: { a: { listValue: { values: [{ numberValue: 1 }, { numberValue: n }] } } } } };
  const err = thrownBy(() => valueToJson(wire(v), 'instances[0]', DEPTH), ApiError);
  expect([err.code, err.message]).toEqual(['invalid_payload', message]);
});

test('nesting past maxDepth is refused at the level it passes, before the rest is read', () => {
  let v: Record<string, unknown> = { numberValue: 1 };
  // 40 levels: within what protobuf itself decodes (it refuses past 100).
  for (let i = 0; i < 40; i++) v = { listValue: { values: [v] } };
  const err = thrownBy(() => valueToJson(wire(v), 'instances[0]', DEPTH), ApiError);
  expect([err.code, err.message]).toEqual(['invalid_payload', `instances[0]${'[0]'.repeat(DEPTH)}: nesting deeper than ${DEPTH} levels`]);
  let ok: Record<string, unknown> = { numberValue: 1 };
  for (let i = 1; i < DEPTH; i++) ok = { listValue: { values: [ok] } };
  expect(valueToJson(wire(ok), 'instances[0]', DEPTH)).toEqual(JSON.parse(`${'['.repeat(DEPTH - 1)}1${']'.repeat(DEPTH - 1)}`));
});

test('predictions go out as Values that decode to the REST answer\'s JSON', () => {
  const predictions = [{ scores: [0.1, 0.9], label: 'cat' }, 2.5, null];
  const wire = PredictResponse.encode({ predictions: predictions.map(jsonToValue), deployed_model_id: 'dm' });
  const back = PredictResponse.decode(wire);
  expect(back.predictions?.map((v, i) => valueToJson(v, `predictions[${i}]`, DEPTH))).toEqual(predictions);
  expect(back.deployed_model_id).toBe('dm');
});
