// validatePredictBody for each framework: every example payload of the GDC "format prediction
// requests" page and of the TF Serving REST page is accepted (with its PredictShape), and every
// rule is broken at least once with the exact message, path included.
import { ApiError } from '../../src/errors.js';
import type { Framework } from '../../src/api/types.js';
import { isBase64 } from '../../src/payload/instances.js';
import { parseJson } from '../../src/payload/json.js';
import { validatePredictBody, type PredictShape } from '../../src/payload/validate.js';
import { thrownBy } from '../helpers/expect.js';

const LIMITS = { maxDepth: 32 };

/** Parses like the gateway does (TF Serving's NaN tokens allowed). */
function body(text: string): unknown {
  return parseJson(text, true);
}

function validate(b: unknown, framework: Framework, maxDepth = LIMITS.maxDepth): PredictShape {
  return validatePredictBody(b, framework, { maxDepth });
}

/** Runs fn, expects ApiError('invalid_payload'), returns its message. */
function invalidPayloadMessage(fn: () => unknown): string {
  const err = thrownBy(fn, ApiError);
  expect([err.code, err.httpStatus, err.rpcStatus]).toEqual(['invalid_payload', 400, 'INVALID_ARGUMENT']);
  return err.message;
}

// Valid base64 stand-ins for binary data, computed rather than typed.
const JPEG_1 = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01]).toString('base64');
const JPEG_2 = Buffer.from([0xff, 0xd8, 0xff, 0xdb, 0x00, 0x43, 0x00, 0x08]).toString('base64');
// A serialised tf.Example: Features{feature{"x": float_list{1.0}}}.
const TF_EXAMPLE_1 = Buffer.from([0x0a, 0x0e, 0x0a, 0x0c, 0x0a, 0x01, 0x78, 0x12, 0x07, 0x12, 0x05, 0x0a, 0x03, 0x00, 0x00, 0x80]).toString('base64');
const TF_EXAMPLE_2 = Buffer.from('tf.Example bytes').toString('base64url'); // URL-safe alphabet, no padding

const B64_MESSAGE = 'expected valid base64 (RFC 4648 standard or URL-safe alphabet, optional padding)';
const TF_FIELDS = '"instances" or "inputs", optionally "signature_name" and "parameters"';
const VERTEX_FIELDS = '"instances" and optionally "parameters"';

describe('isBase64 on the GDC page\'s made-up base64 and on real encodings', () => {
  const rows: [string, string, boolean][] = [
    ['GDC tf.Example "X5ad6u" (6 chars = 4 bytes, unpadded): valid', 'X5ad6u', true],
    ['GDC tf.Example "IA9j4nx" (7 chars = 5 bytes, unpadded): valid', 'IA9j4nx', true],
    ['GDC JPEG "ASa8asdf" (8 chars = 6 bytes): valid', 'ASa8asdf', true],
    ['GDC JPEG "JLK7ljk3" (8 chars = 6 bytes): valid', 'JLK7ljk3', true],
    ['TF doc "aW1hZ2UgYnl0ZXM=" ("image bytes"): valid', 'aW1hZ2UgYnl0ZXM=', true],
    ['TF doc "YXdlc29tZSBpbWFnZSBieXRlcw==" ("awesome image bytes"): valid', 'YXdlc29tZSBpbWFnZSBieXRlcw==', true],
    ['computed JPEG header', JPEG_1, true],
    ['computed URL-safe, unpadded', TF_EXAMPLE_2, true],
    ['URL-safe alphabet - and _', 'ab-_', true],
    ['empty string (zero bytes)', '', true],
    ['5 chars (length 1 mod 4) is never base64: "X5ad6"', 'X5ad6', false],
    ['padding on a length that is not a multiple of 4: "X5ad6u="', 'X5ad6u=', false],
    ['a character outside both alphabets: "ASa8as!f"', 'ASa8as!f', false],
    ['a space inside: "JLK7 ljk3"', 'JLK7 ljk3', false],
    ['a newline inside (MIME line breaks)', 'QUJD\nREVG', false],
    ['padding in the middle: "QQ==QUJD"', 'QQ==QUJD', false],
    ['only padding: "===="', '====', false],
    ['three padding characters: "Q==="', 'Q===', false],
  ];
  test.each(rows)('%s', (_name, s, expected) => {
    expect(isBase64(s)).toBe(expected);
  });
});

// ---- accepted --------------------------------------------------------------------------------------

/** [name, body text, instanceCount, pytorch `unwrapped` indexes] — valid for tensorflow, pytorch and custom. */
const DOC_EXAMPLES: [string, string, number, number[]][] = [
  ['GDC: CSV rows as strings', String.raw`{"instances": ["1.0,true,\"x\"", "-2.0,false,\"y\""]}`, 2, [0, 1]],
  ['GDC: plain text', '{"instances": ["the quick brown fox", "the lazy dog"]}', 2, [0, 1]],
  ['GDC: sentences as word lists', '{"instances": [["the","quick","brown"], ["the","lazy","dog"]]}', 2, [0, 1]],
  ['GDC: float scalars', '{"instances": [0.0, 1.1, 2.2]}', 3, [0, 1, 2]],
  ['GDC: integer vectors', '{"instances": [[0, 1, 2], [3, 4, 5]]}', 2, [0, 1]],
  ['GDC: 2-D tensors', '{"instances": [[[0, 1, 2], [3, 4, 5]], [[6, 7, 8], [9, 10, 11]]]}', 2, [0, 1]],
  ['GDC: images as nested lists (rows x cols x RGB)',
    '{"instances": [[[[138, 30, 66], [130, 20, 56]], [[126, 38, 61], [122, 24, 57]]], [[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]]]}', 2, [0, 1]],
  ['GDC: tensor with instance key', '{"instances": [{"values": [1, 2, 3, 4], "key": 1}, {"values": [5, 6, 7, 8], "key": 2}]}', 2, [0, 1]],
  ['GDC: one instance {"values": [1, 2, 3, 4], "key": 1}', '{"instances": [{"values": [1, 2, 3, 4], "key": 1}]}', 1, [0]],
  ['GDC: tf.Examples as the doc writes them ("X5ad6u", "IA9j4nx" are valid base64)', '{"instances": [{"b64": "X5ad6u"}, {"b64": "IA9j4nx"}]}', 2, [0, 1]],
  ['GDC: tf.Examples with real serialised bytes', `{"instances": [{"b64": "${TF_EXAMPLE_1}"}, {"b64": "${TF_EXAMPLE_2}"}]}`, 2, [0, 1]],
  ['GDC: JPEGs as the doc writes them ("ASa8asdf", "JLK7ljk3" are valid base64)', '{"instances": [{"b64": "ASa8asdf"}, {"b64": "JLK7ljk3"}]}', 2, [0, 1]],
  ['GDC: JPEGs with real header bytes', `{"instances": [{"b64": "${JPEG_1}"}, {"b64": "${JPEG_2}"}]}`, 2, [0, 1]],
  ['GDC: named inputs tag + image (b64)',
    '{"instances": [{"tag": "beach", "image": {"b64": "ASa8asdf"}}, {"tag": "car", "image": {"b64": "JLK7ljk3"}}]}', 2, [0, 1]],
  ['GDC: named inputs tag + image (3-D int array)',
    '{"instances": [{"tag": "beach", "image": [[[138, 30, 66], [130, 20, 56]], [[126, 38, 61], [122, 24, 57]]]},' +
    ' {"tag": "car", "image": [[[255, 0, 102], [255, 0, 97]], [[254, 1, 101], [254, 2, 93]]]}]}', 2, [0, 1]],
  ['GDC: Python-style image_bytes', `{"instances": [{"image_bytes": {"b64": "${JPEG_1}"}}]}`, 1, [0]],
  ['TF: list of 3 scalar string tensors', '{"instances": [ "foo", "bar", "baz" ]}', 3, [0, 1, 2]],
  ['TF: list of 2 tensors of shape [1, 2]', '{"instances": [ [[1, 2]], [[3, 4]] ]}', 2, [0, 1]],
  ['TF: row form with 3 named inputs (doc typo "[3, 4, 1, 2, 5]]" fixed)',
    '{"instances": [{"tag": "foo", "signal": [1, 2, 3, 4, 5], "sensor": [[1, 2], [3, 4]]},' +
    ' {"tag": "bar", "signal": [3, 4, 1, 2, 5], "sensor": [[4, 5], [6, 8]]}]}', 2, [0, 1]],
  ['TF: half_plus_three predict', '{"instances": [1.0,2.0,5.0]}', 3, [0, 1, 2]],
  ['TF: NaN and Infinity tokens in a float tensor', '{"instances": [[1.0, -3.14, NaN, Infinity, -Infinity]]}', 1, [0]],
  ['TF: booleans', '{"instances": [[true, false], [false, false]]}', 2, [0, 1]],
  ['TF: a list of b64 values mixed with strings (both DT_STRING)', '{"instances": [["plain", {"b64": "QUJD"}]]}', 1, [0]],
  ['TF: empty lists', '{"instances": [[], []]}', 2, [0, 1]],
  ['labels: {} as the official Node client sends it', '{"instances": [1], "labels": {}}', 1, [0]],
  ['labels with string values', '{"instances": [1], "labels": {"team": "vision", "env": "prod"}}', 1, [0]],
  ['parameters object', '{"instances": [1], "parameters": {"temperature": 0.2, "topK": 5, "stop": ["\\n"]}}', 1, [0]],
  ['parameters: null (proto3 JSON clients send it for absent)', '{"instances": [1], "parameters": null}', 1, [0]],
  ['parameters with a b64 value', `{"instances": [1], "parameters": {"mask": {"b64": "${JPEG_2}"}}}`, 1, [0]],
];

describe.each(['tensorflow', 'pytorch', 'custom'] as Framework[])('accepted by %s', (framework) => {
  test.each(DOC_EXAMPLES)('%s', (_name, text, count, unwrapped) => {
    const shape = validate(body(text), framework);
    expect(shape).toEqual({ instanceCount: count, unwrapped: framework === 'pytorch' ? unwrapped : [] });
  });
});

test('the CSV example keeps its escaped quotes as characters of the string', () => {
  const b = body(String.raw`{"instances": ["1.0,true,\"x\"", "-2.0,false,\"y\""]}`) as { instances: string[] };
  expect(b.instances).toEqual(['1.0,true,"x"', '-2.0,false,"y"']);
});

describe('tensorflow only: columnar inputs, signature_name', () => {
  const rows: [string, string][] = [
    ['columnar inputs object (TF doc)',
      '{"inputs": {"tag": ["foo", "bar"], "signal": [[1, 2, 3, 4, 5], [3, 4, 1, 2, 5]], "sensor": [[[1, 2], [3, 4]], [[4, 5], [6, 8]]]}}'],
    ['columnar named inputs of different 0th dimensions', '{"inputs": {"a": [1, 2, 3], "b": [[1, 2]]}}'],
    ['columnar single tensor', '{"inputs": [[1, 2], [3, 4]]}'],
    ['columnar single scalar', '{"inputs": 3.5}'],
    ['columnar single string', '{"inputs": "foo"}'],
    ['columnar single b64 value', `{"inputs": {"b64": "${JPEG_1}"}}`],
    ['columnar _bytes input', `{"inputs": {"image_bytes": [{"b64": "${JPEG_1}"}, {"b64": "${JPEG_2}"}]}}`],
    ['columnar with signature_name', '{"signature_name": "serving_default", "inputs": {"x": [1.0, NaN]}}'],
  ];
  test.each(rows)('%s: instanceCount null', (_name, text) => {
    expect(validate(body(text), 'tensorflow')).toEqual({ instanceCount: null, unwrapped: [] });
  });

  test('row form with signature_name and parameters', () => {
    const text = '{"signature_name": "classify_objects", "instances": [{"image": {"b64": "aW1hZ2UgYnl0ZXM="}, "caption": "seaside"},' +
      ' {"image": {"b64": "YXdlc29tZSBpbWFnZSBieXRlcw=="}, "caption": "mountains"}], "parameters": {"k": 1}}';
    expect(validate(body(text), 'tensorflow')).toEqual({ instanceCount: 2, unwrapped: [] });
  });
});

describe('pytorch: {"data": ...} wrapping is detected per instance', () => {
  const rows: [string, string, number, number[]][] = [
    ['all wrapped (GDC form)', '{"instances": [{"data": 1}, {"data": [1, 2]}]}', 2, []],
    ['none wrapped', '{"instances": [1, "x", [2]]}', 3, [0, 1, 2]],
    ['mixed', '{"instances": [{"data": 1}, 2, {"data": {"b64": "QUJD"}}, {"x": 1}, null]}', 5, [1, 3, 4]],
    ['wrapped with extra keys counts as wrapped', '{"instances": [{"data": 1, "extra": true}]}', 1, []],
    ['wrapped data may be null', '{"instances": [{"data": null}]}', 1, []],
    ['a b64 object is not wrapped', '{"instances": [{"b64": "QUJD"}]}', 1, [0]],
    ['a list holding a data object is not wrapped', '{"instances": [[{"data": 1}]]}', 1, [0]],
  ];
  test.each(rows)('%s', (_name, text, count, unwrapped) => {
    expect(validate(body(text), 'pytorch')).toEqual({ instanceCount: count, unwrapped });
  });
});

describe('pytorch and custom accept any JSON instance (the TF tensor rules do not apply)', () => {
  const rows: [string, string][] = [
    ['strings mixed with numbers', '{"instances": [["a", 1, true, null]]}'],
    ['ragged lists', '{"instances": [[[1, 2], [3]]]}'],
    ['embedded objects', '{"instances": [{"meta": {"nested": {"deep": [1, {"x": "y"}]}}}]}'],
    ['instances of different kinds', '{"instances": [1, [1], {"a": 1}, "s", null]}'],
    ['nulls', '{"instances": [null, [null]]}'],
    ['_bytes names with plain values', '{"instances": [{"image_bytes": "not b64 at all!"}]}'],
    ['an empty object instance', '{"instances": [{}]}'],
  ];
  test.each(rows)('%s', (_name, text) => {
    const b = body(text);
    const n = (b as { instances: unknown[] }).instances.length;
    expect(validate(b, 'custom')).toEqual({ instanceCount: n, unwrapped: [] });
    expect(validate(b, 'pytorch').instanceCount).toBe(n);
  });
});

describe('maxDepth boundaries (an instance is level 1)', () => {
  const rows: [string, Framework, string, number][] = [
    ['TF: 3-level tensor instance at maxDepth 3', 'tensorflow', '{"instances": [[[[1]]]]}', 3],
    ['TF: named input 2 levels below the instance at maxDepth 3', 'tensorflow', '{"instances": [{"a": [[1]]}]}', 3],
    ['TF: columnar named input of 3 levels at maxDepth 3', 'tensorflow', '{"inputs": {"a": [[[1]]]}}', 3],
    ['pytorch: {"data": [[1]]} at maxDepth 3', 'pytorch', '{"instances": [{"data": [[1]]}]}', 3],
    ['custom: 3 levels at maxDepth 3', 'custom', '{"instances": [[{"a": 1}]], "parameters": {"a": [1]}}', 3],
  ];
  test.each(rows)('%s is accepted', (_name, framework, text, maxDepth) => {
    expect(() => validate(body(text), framework, maxDepth)).not.toThrow();
  });
});

// ---- rejected --------------------------------------------------------------------------------------

/** [name, framework, body text (parsed with NaN tokens allowed), exact message] */
const REJECTED: [string, Framework, string, string][] = [
  // envelope
  ['body not an object (list)', 'custom', '[1, 2]', 'body: expected a JSON object, got list'],
  ['body not an object (null)', 'pytorch', 'null', 'body: expected a JSON object, got null'],
  ['body not an object (string)', 'tensorflow', '"x"', 'body: expected a JSON object, got string'],
  ['missing instances', 'custom', '{}', `body: missing required field "instances"; expected ${VERTEX_FIELDS}`],
  ['missing instances (parameters only)', 'pytorch', '{"parameters": {}}', `body: missing required field "instances"; expected ${VERTEX_FIELDS}`],
  ['TF: neither instances nor inputs', 'tensorflow', '{}', `body: missing required field "instances"; expected ${TF_FIELDS}`],
  ['TF: neither, only signature_name', 'tensorflow', '{"signature_name": "x"}', `body: missing required field "instances"; expected ${TF_FIELDS}`],
  ['TF: instances and inputs both given', 'tensorflow', '{"instances": [1], "inputs": [1]}',
    'body: "instances" (row form) and "inputs" (columnar form) must not both be given; send one of them'],
  ['instances not a list (object)', 'custom', '{"instances": {"a": 1}}', 'instances: expected a list, got object'],
  ['instances not a list (string)', 'pytorch', '{"instances": "x"}', 'instances: expected a list, got string'],
  ['TF: instances not a list (number)', 'tensorflow', '{"instances": 1}', 'instances: expected a list, got number'],
  ['TF: instances null', 'tensorflow', '{"instances": null}', 'instances: expected a list, got null'],
  ['empty instances list', 'custom', '{"instances": []}', 'instances: expected a non-empty list, got an empty list'],
  ['TF: empty instances list', 'tensorflow', '{"instances": []}', 'instances: expected a non-empty list, got an empty list'],
  ['unknown top-level field', 'custom', '{"instances": [1], "instance": [1]}', `body: unknown field "instance"; expected ${VERTEX_FIELDS}`],
  ['TF: unknown top-level field', 'tensorflow', '{"instances": [1], "examples": []}', `body: unknown field "examples"; expected ${TF_FIELDS}`],
  ['pytorch: signature_name is TF only', 'pytorch', '{"instances": [1], "signature_name": "x"}', `body: unknown field "signature_name"; expected ${VERTEX_FIELDS}`],
  ['custom: columnar inputs are TF only', 'custom', '{"instances": [1], "inputs": [1]}', `body: unknown field "inputs"; expected ${VERTEX_FIELDS}`],
  ['parameters not an object (list)', 'custom', '{"instances": [1], "parameters": [1]}', 'parameters: expected a JSON object or null, got list'],
  ['TF: parameters not an object (string)', 'tensorflow', '{"instances": [1], "parameters": "x"}', 'parameters: expected a JSON object or null, got string'],
  ['TF: signature_name not a string', 'tensorflow', '{"instances": [1], "signature_name": 1}', 'signature_name: expected a string, got number'],
  ['labels not an object', 'custom', '{"instances": [1], "labels": []}', 'labels: expected a JSON object, got list'],
  ['label value longer than 63 characters', 'pytorch', `{"instances": [1], "labels": {"team": "${'x'.repeat(64)}"}}`, 'labels.team: longer than 63 characters'],
  ['more than 64 labels', 'tensorflow',
    `{"instances": [1], "labels": {${Array.from({ length: 65 }, (_, i) => `"k${i}": "v"`).join(', ')}}}`, 'labels: more than 64 entries'],

  // binary values
  ['b64 object with an extra key (named input value)', 'tensorflow', '{"instances": [{"image": {"b64": "QUJD", "type": "jpeg"}}]}',
    'instances[0].image: a binary value must be {"b64": string} with no other keys, got keys "b64", "type"'],
  ['b64 object with an extra key (pytorch)', 'pytorch', '{"instances": [{"data": {"b64": "QUJD", "x": 1}}]}',
    'instances[0].data: a binary value must be {"b64": string} with no other keys, got keys "b64", "x"'],
  ['b64 object with an extra key (columnar single tensor)', 'tensorflow', '{"inputs": [{"b64": "QUJD", "mime": "image/png"}]}',
    'inputs[0]: a binary value must be {"b64": string} with no other keys, got keys "b64", "mime"'],
  ['b64 value a number', 'tensorflow', '{"instances": [{"b64": 5}]}', 'instances[0].b64: expected a base64 string, got number'],
  ['b64 value null (named input)', 'tensorflow', '{"instances": [{"image": {"b64": null}}]}', 'instances[0].image.b64: expected a base64 string, got null'],
  ['b64 value a list (custom)', 'custom', '{"instances": [{"b64": ["QUJD"]}]}', 'instances[0].b64: expected a base64 string, got list'],
  ['invalid base64: 5 characters', 'tensorflow', '{"instances": [{"b64": "X5ad6"}]}', `instances[0].b64: ${B64_MESSAGE}`],
  ['invalid base64: "!" in the second instance', 'tensorflow', '{"instances": [{"b64": "ASa8asdf"}, {"b64": "ASa8as!f"}]}', `instances[1].b64: ${B64_MESSAGE}`],
  ['invalid base64: bad padding in a named input', 'tensorflow', '{"instances": [{"tag": "beach", "image": {"b64": "X5ad6u="}}]}',
    `instances[0].image.b64: ${B64_MESSAGE}`],
  ['invalid base64 in columnar inputs', 'tensorflow', '{"inputs": {"image_bytes": [{"b64": "JLK7 ljk3"}]}}', `inputs.image_bytes[0].b64: ${B64_MESSAGE}`],
  ['invalid base64 in parameters (TF)', 'tensorflow', '{"instances": [1], "parameters": {"mask": {"b64": "@@@@"}}}', `parameters.mask.b64: ${B64_MESSAGE}`],
  ['invalid base64 in parameters (custom)', 'custom', '{"instances": [1], "parameters": {"m": [{"b64": "@@@@"}]}}', `parameters.m[0].b64: ${B64_MESSAGE}`],
  ['pytorch: invalid base64 nested deep in an instance', 'pytorch',
    '{"instances": [{"data": 1}, {"data": {"frames": [[{"b64": "QUJD"}, {"b64": "QU$D"}]]}}]}', `instances[1].data.frames[0][1].b64: ${B64_MESSAGE}`],
  ['pytorch: invalid base64 under a key that needs quoting', 'pytorch',
    '{"instances": [{"data": {"my image": {"b64": "Q"}}}]}', `instances[0].data["my image"].b64: ${B64_MESSAGE}`],
  ['custom: invalid base64 inside a list', 'custom', '{"instances": [[1, [{"b64": "a b"}]]]}', `instances[0][1][0].b64: ${B64_MESSAGE}`],
  ['_bytes input a string', 'tensorflow', `{"instances": [{"image_bytes": {"b64": "${JPEG_1}"}}, {"image_bytes": "raw"}]}`,
    'instances[1].image_bytes: expected {"b64": string} (names ending in _bytes carry binary data), got string'],
  ['_bytes input a list of numbers', 'tensorflow', '{"instances": [{"image_bytes": [255, 216]}]}',
    'instances[0].image_bytes[0]: expected {"b64": string} (names ending in _bytes carry binary data), got number'],
  ['_bytes input a boolean', 'tensorflow', '{"instances": [{"flag_bytes": true}]}',
    'instances[0].flag_bytes: expected {"b64": string} (names ending in _bytes carry binary data), got boolean'],
  ['columnar _bytes input a list of strings', 'tensorflow', '{"inputs": {"img_bytes": ["x"]}}',
    'inputs.img_bytes[0]: expected {"b64": string} (names ending in _bytes carry binary data), got string'],

  // TF tensor rules
  ['embedded object in a named input', 'tensorflow', '{"instances": [{"values": [1, 2], "meta": {"source": "cam"}}]}',
    'instances[0].meta: expected a number, string, boolean, list or {"b64": string}, got an object (JSON objects cannot be embedded in a tensor)'],
  ['embedded object inside a tensor list', 'tensorflow', '{"instances": [[1, 2], [{"a": 1}, 2]]}',
    'instances[1][0]: expected a number, string, boolean, list or {"b64": string}, got an object (JSON objects cannot be embedded in a tensor)'],
  ['embedded object in a pytorch-style data wrapper sent to TF', 'tensorflow', '{"instances": [{"data": {"x": 1}}]}',
    'instances[0].data: expected a number, string, boolean, list or {"b64": string}, got an object (JSON objects cannot be embedded in a tensor)'],
  ['list mixing strings then numbers', 'tensorflow', '{"instances": [["the", "quick", 3]]}',
    'instances[0][2]: expected a string like the items before it, got a number (a list must not mix strings and numbers)'],
  ['list mixing numbers then strings', 'tensorflow', '{"instances": [{"signal": [1, "2"]}]}',
    'instances[0].signal[1]: expected a number like the items before it, got a string (a list must not mix strings and numbers)'],
  ['list mixing b64 values and numbers', 'tensorflow', '{"instances": [[{"b64": "QUJD"}, 1]]}',
    'instances[0][1]: expected a string like the items before it, got a number (a list must not mix strings and numbers)'],
  ['list mixing booleans and numbers', 'tensorflow', '{"instances": [[true, 1]]}',
    'instances[0][1]: expected a boolean like the items before it, got a number (lists must be homogeneous and rectangular)'],
  ['ragged list of lists', 'tensorflow', '{"instances": [[[1, 2], [3]]]}',
    'instances[0][1]: expected a list of 2 numbers like the items before it, got a list of 1 number (lists must be homogeneous and rectangular)'],
  ['ragged 3-D image', 'tensorflow', '{"instances": [[[[138, 30, 66], [130, 20]]]]}',
    'instances[0][0][1]: expected a list of 3 numbers like the items before it, got a list of 2 numbers (lists must be homogeneous and rectangular)'],
  ['list of lists mixing depth (scalar after list)', 'tensorflow', '{"instances": [[[1], 2]]}',
    'instances[0][1]: expected a list of 1 number like the items before it, got a number (lists must be homogeneous and rectangular)'],
  ['list of lists mixing depth (list after scalar)', 'tensorflow', '{"instances": [[1, [2]]]}',
    'instances[0][1]: expected a number like the items before it, got a list of 1 number (lists must be homogeneous and rectangular)'],
  ['list of lists mixing depth (deeper list)', 'tensorflow', '{"instances": [[[1, 2], [[1], [2]]]]}',
    'instances[0][1]: expected a list of 2 numbers like the items before it, got a list of 2 lists of 1 number (lists must be homogeneous and rectangular)'],
  ['empty list then a non-empty one', 'tensorflow', '{"instances": [[[], [1]]]}',
    'instances[0][1]: expected a list of 0 items like the items before it, got a list of 1 number (lists must be homogeneous and rectangular)'],
  ['instances of 2-D tensors of different shapes', 'tensorflow', '{"instances": [[[0, 1, 2], [3, 4, 5]], [[6, 7], [8, 9]]]}',
    'instances[1]: expected a list of 2 lists of 3 numbers like instances[0], got a list of 2 lists of 2 numbers (instances are stacked into one batch)'],
  ['columnar single tensor ragged', 'tensorflow', '{"inputs": [[1, 2], [3]]}',
    'inputs[1]: expected a list of 2 numbers like the items before it, got a list of 1 number (lists must be homogeneous and rectangular)'],
  ['null as an instance', 'tensorflow', '{"instances": [null]}', 'instances[0]: expected a number, string, boolean, list or {"b64": string}, got null'],
  ['null inside a tensor', 'tensorflow', '{"instances": [[1.0, null]]}', 'instances[0][1]: expected a number, string, boolean, list or {"b64": string}, got null'],
  ['null as a named input', 'tensorflow', '{"instances": [{"a": null}]}', 'instances[0].a: expected a number, string, boolean, list or {"b64": string}, got null'],
  ['null columnar inputs', 'tensorflow', '{"inputs": null}', 'inputs: expected a number, string, boolean, list or {"b64": string}, got null'],
  ['empty object as the first instance', 'tensorflow', '{"instances": [{}]}', 'instances[0]: expected named inputs, got an empty object'],

  // structure shared across instances
  ['named inputs: one missing', 'tensorflow', '{"instances": [{"tag": "foo", "signal": [1, 2]}, {"tag": "bar"}]}',
    'instances[1]: missing named input "signal" that instances[0] has (named inputs must be the same in every instance)'],
  ['named inputs: an extra one', 'tensorflow', '{"instances": [{"tag": "foo"}, {"tag": "bar", "sensor": [1]}]}',
    'instances[1]: unexpected named input "sensor" that instances[0] does not have'],
  ['named inputs: an extra one in the third instance', 'tensorflow', '{"instances": [{"a": 1}, {"a": 2}, {"a": 3, "b": 4}]}',
    'instances[2]: unexpected named input "b" that instances[0] does not have'],
  ['named inputs: shape differs (TF doc signal shortened)', 'tensorflow',
    '{"instances": [{"tag": "foo", "signal": [1, 2, 3, 4, 5], "sensor": [[1, 2], [3, 4]]}, {"tag": "bar", "signal": [3, 4, 1, 2], "sensor": [[4, 5], [6, 8]]}]}',
    'instances[1].signal: expected a list of 5 numbers like instances[0].signal, got a list of 4 numbers (named inputs share their 0th dimension and shape across instances)'],
  ['named inputs: kind differs', 'tensorflow', '{"instances": [{"tag": "foo"}, {"tag": 1}]}',
    'instances[1].tag: expected a string like instances[0].tag, got a number (named inputs share their 0th dimension and shape across instances)'],
  ['named inputs: b64 image then a 3-D array', 'tensorflow', '{"instances": [{"image": {"b64": "ASa8asdf"}}, {"image": [[[1, 2, 3]]]}]}',
    'instances[1].image: expected a string like instances[0].image, got a list of 1 list of 1 list of 3 numbers (named inputs share their 0th dimension and shape across instances)'],
  ['instance kinds differ: scalar then list', 'tensorflow', '{"instances": [1.0, [2.0]]}',
    'instances[1]: expected a number like instances[0], got a list of 1 number (instances are stacked into one batch)'],
  ['instance kinds differ: list then scalar', 'tensorflow', '{"instances": [[1, 2], 3]}',
    'instances[1]: expected a list of 2 numbers like instances[0], got a number (instances are stacked into one batch)'],
  ['instance kinds differ: string then number', 'tensorflow', '{"instances": ["foo", 2]}',
    'instances[1]: expected a string like instances[0], got a number (instances are stacked into one batch)'],
  ['instance shapes differ: vectors of 3 and 2', 'tensorflow', '{"instances": [[0, 1, 2], [3, 4]]}',
    'instances[1]: expected a list of 3 numbers like instances[0], got a list of 2 numbers (instances are stacked into one batch)'],
  ['instance kinds differ: scalar then named inputs', 'tensorflow', '{"instances": [1, {"a": 1}]}',
    'instances[1]: expected a number like instances[0], got an object of named inputs'],
  ['instance kinds differ: named inputs then list', 'tensorflow', '{"instances": [{"a": 1}, [1]]}',
    'instances[1]: expected an object of named inputs like instances[0], got list'],
  ['instance kinds differ: named inputs then b64 value', 'tensorflow', '{"instances": [{"a": 1}, {"b64": "QUJD"}]}',
    'instances[1]: expected an object of named inputs like instances[0], got object'],

  // depth
  ['TF: tensor nesting deeper than maxDepth', 'tensorflow', '{"instances": [[[[[1]]]]]}', 'instances[0][0][0][0]: nesting deeper than 3 levels'],
  ['TF: named input nesting deeper than maxDepth', 'tensorflow', '{"instances": [{"a": [[[1]]]}]}', 'instances[0].a[0][0]: nesting deeper than 3 levels'],
  ['TF: columnar nesting deeper than maxDepth', 'tensorflow', '{"inputs": {"a": [[[[1]]]]}}', 'inputs.a[0][0][0]: nesting deeper than 3 levels'],
  ['pytorch: nesting deeper than maxDepth', 'pytorch', '{"instances": [{"data": [[[1]]]}]}', 'instances[0].data[0][0]: nesting deeper than 3 levels'],
  ['pytorch: nesting deeper than maxDepth in the second instance', 'pytorch', '{"instances": [1, [[[[2]]]]]}', 'instances[1][0][0][0]: nesting deeper than 3 levels'],
  ['custom: parameters nesting deeper than maxDepth', 'custom', '{"instances": [1], "parameters": {"a": {"b": {"c": {}}}}}', 'parameters.a.b.c: nesting deeper than 3 levels'],
];

describe('rejected with invalid_payload and an exact message', () => {
  test.each(REJECTED)('%s (%s)', (name, framework, text, message) => {
    const maxDepth = name.includes('nesting deeper than maxDepth') ? 3 : LIMITS.maxDepth;
    expect(invalidPayloadMessage(() => validate(body(text), framework, maxDepth))).toBe(message);
  });
});

test('every rejection row names a path before the colon', () => {
  for (const [, , , message] of REJECTED) expect(message).toMatch(/^(body|instances|inputs|parameters|labels|signature_name)[^:]*: /);
});
