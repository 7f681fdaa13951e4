// parseJson / stringifyJson: strict JSON unchanged, TF Serving's NaN/Infinity/-Infinity tokens only
// with allowNonFinite, tokens inside strings untouched, JsonSyntaxError with a caller-ready message.
import { JsonSyntaxError, parseJson, replaceNonFiniteTokens, stringifyJson } from '../../src/payload/json.js';
import { thrownBy } from '../helpers/expect.js';

function syntaxErrorOf(fn: () => unknown): string {
  const err = thrownBy(fn, JsonSyntaxError);
  expect(err.name).toBe('JsonSyntaxError');
  return err.message;
}

describe('parseJson: valid JSON is returned unchanged, whatever allowNonFinite says', () => {
  const valid: [string, string][] = [
    ['an object', '{"instances": [1, 2.5, -3e2], "parameters": {"k": true}}'],
    ['an array at top level', '[1, "two", null, false]'],
    ['a bare number', '  42.0e-1  '],
    ['a bare string with escapes', '"tab\\t quote\\" slash\\/ \\u00e9"'],
    ['strings spelling the tokens', '{"a": "NaN", "b": "Infinity", "c": "-Infinity", "NaN": "x"}'],
    ['the TF Serving predict example', '{"instances": [1.0,2.0,5.0]}'],
    ['deep nesting', '[[[[[[[[[[{"a": [[]]}]]]]]]]]]]'],
    ['unicode text', '{"text": "日本語 – ünïcødé 🚀"}'],
  ];
  test.each(valid)('%s', (_name, text) => {
    const expected: unknown = JSON.parse(text);
    expect(parseJson(text, false)).toEqual(expected);
    expect(parseJson(text, true)).toEqual(expected);
  });
});

describe('parseJson: NaN, Infinity and -Infinity tokens', () => {
  const rows: [string, string, unknown][] = [
    ['NaN in a list', '{"x": [1.0, NaN]}', { x: [1, NaN] }],
    ['Infinity in a list', '{"x": [Infinity, 2]}', { x: [Infinity, 2] }],
    ['-Infinity in a list', '{"x": [-Infinity]}', { x: [-Infinity] }],
    ['all three, no spaces', '[NaN,Infinity,-Infinity]', [NaN, Infinity, -Infinity]],
    ['bare NaN at top level', 'NaN', NaN],
    ['bare -Infinity at top level', '-Infinity', -Infinity],
    ['as a member value', '{"loss": Infinity, "name": "x"}', { loss: Infinity, name: 'x' }],
    ['TF doc JSON-conformance example (with NaN spelled right)', '{"example": [{"sensor_readings": [ 1.0, -3.14, NaN, Infinity ]}]}',
      { example: [{ sensor_readings: [1, -3.14, NaN, Infinity] }] }],
    ['a token next to a string that spells a token', '["NaN", NaN, "Infinity", Infinity]', ['NaN', NaN, 'Infinity', Infinity]],
    ['a token after a string with an escaped quote and backslash', '["a\\"NaN\\\\", NaN]', ['a"NaN\\', NaN]],
    ['a token after a string ending in an escaped backslash', '["\\\\", Infinity]', ['\\', Infinity]],
  ];

  test.each(rows)('accepted with allowNonFinite: %s', (_name, text, expected) => {
    const v = parseJson(text, true);
    expect(v).toEqual(expected);
  });

  test.each(rows)('rejected without allowNonFinite: %s', (_name, text) => {
    expect(syntaxErrorOf(() => parseJson(text, false))).toMatch(/^invalid JSON: /);
  });

  test('the tokens become real JS numbers (not strings, not null)', () => {
    const v = parseJson('[NaN, Infinity, -Infinity]', true) as number[];
    expect(typeof v[0]).toBe('number');
    expect(Number.isNaN(v[0])).toBe(true);
    expect(v[1]).toBe(Number.POSITIVE_INFINITY);
    expect(v[2]).toBe(Number.NEGATIVE_INFINITY);
  });

  const stringsOnly: [string, string, unknown][] = [
    ['"NaN" string stays a string', '{"a": "NaN"}', { a: 'NaN' }],
    ['"-Infinity" string stays a string', '["-Infinity"]', ['-Infinity']],
    ['token-like text inside a longer string', '["x NaN y Infinity z"]', ['x NaN y Infinity z']],
  ];
  test.each(stringsOnly)('tokens inside strings are untouched: %s', (_name, text, expected) => {
    expect(parseJson(text, true)).toEqual(expected);
    expect(replaceNonFiniteTokens(text)).toBeNull();
  });

  const stillInvalid: [string, string][] = [
    ['the TF doc typo "Nan"', '{"example": [{"sensor_readings": [ 1.0, -3.14, Nan, Infinity ]}]}'],
    ['-NaN', '[-NaN]'],
    ['lower-case nan', '[nan]'],
    ['lower-case infinity', '[infinity]'],
    ['+Infinity', '[+Infinity]'],
    ['a token glued to a number', '[1NaN]'],
    ['two tokens glued', '[NaNNaN]'],
    ['a token glued to letters', '[Infinityx]'],
    ['a token with a syntax error elsewhere', '[NaN, ]'],
  ];
  test.each(stillInvalid)('still rejected with allowNonFinite: %s', (_name, text) => {
    expect(syntaxErrorOf(() => parseJson(text, true))).toMatch(/^invalid JSON: /);
  });
});

describe('parseJson: errors are JsonSyntaxError with clear messages', () => {
  const empty: [string, string][] = [
    ['empty', ''],
    ['spaces', '   '],
    ['newlines and tabs', '\n\t\r\n'],
  ];
  test.each(empty)('an empty body (%s) says so', (_name, text) => {
    expect(syntaxErrorOf(() => parseJson(text, false))).toBe('request body is empty; expected a JSON object');
    expect(syntaxErrorOf(() => parseJson(text, true))).toBe('request body is empty; expected a JSON object');
  });

  const broken: [string, string, RegExp][] = [
    ['a truncated object', '{"instances": [1, 2', /^invalid JSON: .*(end of JSON input|Expected)/],
    ['a trailing comma', '{"a": 1,}', /^invalid JSON: /],
    ['single quotes', "{'a': 1}", /^invalid JSON: /],
    ['a bare word', 'hello', /^invalid JSON: /],
    ['two values', '{} {}', /^invalid JSON: /],
    ['an unquoted key', '{a: 1}', /^invalid JSON: /],
  ];
  test.each(broken)('%s', (_name, text, pattern) => {
    expect(syntaxErrorOf(() => parseJson(text, false))).toMatch(pattern);
    // The fallback must report the error of the original text, not of a rewritten one.
    expect(syntaxErrorOf(() => parseJson(text, true))).toMatch(pattern);
  });

  test('the error of the original text is reported, without the internal sentinel', () => {
    const msg = syntaxErrorOf(() => parseJson('[NaN, }', true));
    expect(msg).toMatch(/^invalid JSON: /);
    expect(msg).not.toContain('\u0000');
    expect(msg).not.toMatch(/pg[0-9a-f]{12}:/);
  });

  test('a long invalid body gives a message bounded to 300 characters of detail plus an ellipsis', () => {
    const text = `{"a": [${'1,'.repeat(5000)}}`;
    const msg = syntaxErrorOf(() => parseJson(text, true));
    expect(msg.startsWith('invalid JSON: ')).toBe(true);
    expect(msg.length).toBeLessThanOrEqual('invalid JSON: '.length + 300 + 1);
  });
});

describe('stringifyJson', () => {
  const nonFinite: [string, unknown, string][] = [
    ['NaN in a list', { x: [1, NaN] }, '{"x":[1,NaN]}'],
    ['Infinity and -Infinity', [Infinity, -Infinity], '[Infinity,-Infinity]'],
    ['a bare NaN', NaN, 'NaN'],
    ['a bare -Infinity', -Infinity, '-Infinity'],
    ['mixed with null and a "null" string', { a: null, b: 'null', c: NaN }, '{"a":null,"b":"null","c":NaN}'],
    ['a "NaN" string next to a NaN number', ['NaN', NaN], '["NaN",NaN]'],
    ['nested in objects', { predictions: [{ scores: [0.5, Infinity] }] }, '{"predictions":[{"scores":[0.5,Infinity]}]}'],
  ];
  test.each(nonFinite)('writes the tokens: %s', (_name, value, expected) => {
    expect(stringifyJson(value)).toBe(expected);
  });

  const plain: [string, unknown][] = [
    ['an object', { a: 1, b: [true, false], c: 'x' }],
    ['with nulls', { a: null, b: [null] }],
    ['with a string containing null', ['null', 'nullable']],
    ['strings with escapes', { s: 'quote " backslash \\ newline \n tab \t nul \u0000' }],
    ['unicode', { s: 'é 日本 🚀' }],
    ['numbers', [0, -0, 1.5, -2e-7, 1e21, Number.MAX_SAFE_INTEGER]],
    ['a Date (toJSON)', { at: new Date(Date.UTC(2024, 0, 19, 1, 18, 30)) }],
    ['undefined members dropped', { a: undefined, b: 1 }],
    ['an empty object', {}],
    ['a string', 'hello'],
  ];
  test.each(plain)('is identical to JSON.stringify otherwise: %s', (_name, value) => {
    expect(stringifyJson(value)).toBe(JSON.stringify(value));
  });

  const roundTrip: [string, unknown][] = [
    ['TF tensors with non-finite values', { instances: [[1.5, NaN], [Infinity, -Infinity]], signature_name: 'serving_default' }],
    ['strings that spell the tokens', { a: 'NaN', b: ['Infinity', -Infinity], NaN: NaN }],
    ['nested objects', { predictions: [{ label: 'beach', scores: [0.1, 0.9] }], deployedModelId: '123' }],
  ];
  test.each(roundTrip)('round trip parseJson(stringifyJson(v), true) equals v: %s', (_name, value) => {
    const text = stringifyJson(value);
    expect(parseJson(text, true)).toEqual(value);
    // and the text is stable across a second trip
    expect(stringifyJson(parseJson(text, true))).toBe(text);
  });
});
