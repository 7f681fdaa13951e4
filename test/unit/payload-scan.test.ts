// scanObject: member spans, element spans of one array member, close index, the grammar it checks,
// and a seeded property check that every span agrees with JSON.parse.
import { JsonSyntaxError } from '../../src/payload/json.js';
import { scanObject, type ScanOptions, type ScanResult } from '../../src/payload/scan.js';
import { thrownBy, prng } from '../helpers/expect.js';

const STRICT: ScanOptions = { allowNonFinite: false, maxDepth: 64 };

function scan(text: string, opts: Partial<ScanOptions> = {}): { buf: Buffer; r: ScanResult } {
  const buf = Buffer.from(text, 'utf8');
  return { buf, r: scanObject(buf, { ...STRICT, ...opts }) };
}

function slice(buf: Buffer, s: { start: number; end: number }): string {
  return buf.toString('utf8', s.start, s.end);
}

function syntaxErrorOf(fn: () => unknown): string {
  return thrownBy(fn, JsonSyntaxError).message;
}

describe('scanObject: members and their spans', () => {
  // [name, text, expected keys, expected raw member texts]
  const rows: [string, string, string[], string[]][] = [
    ['one number', '{"a":1}', ['a'], ['1']],
    ['number spellings are kept', '{"a": 1.0, "b": -0.50e+01, "c": 0}', ['a', 'b', 'c'], ['1.0', '-0.50e+01', '0']],
    ['all scalar kinds', '{"s":"x","t":true,"f":false,"n":null}', ['s', 't', 'f', 'n'], ['"x"', 'true', 'false', 'null']],
    ['nested containers', '{"o": {"k": [1, {"z": []}]}, "l": [[1], [2, 3]]}', ['o', 'l'], ['{"k": [1, {"z": []}]}', '[[1], [2, 3]]']],
    ['strings with escaped quotes and brackets', '{"s": "a\\"}]{[\\\\", "t": "]"}', ['s', 't'], ['"a\\"}]{[\\\\"', '"]"']],
    ['brackets inside strings in containers', '{"o": {"k": "}}]]", "m": ["[", "{"]}}', ['o'], ['{"k": "}}]]", "m": ["[", "{"]}']],
    ['unicode escapes and raw unicode', '{"u": "\\u00e9\\uD83D\\uDE80", "r": "日本🚀"}', ['u', 'r'], ['"\\u00e9\\uD83D\\uDE80"', '"日本🚀"']],
    ['keys with escapes are decoded', '{"a\\"b": 1, "c\\\\d": 2, "\\u0065": 3, "tab\\t": 4}', ['a"b', 'c\\d', 'e', 'tab\t'], ['1', '2', '3', '4']],
    ['raw unicode keys', '{"日本": 1, "é": [2]}', ['日本', 'é'], ['1', '[2]']],
    ['whitespace everywhere', ' \n\t{ \r\n "a" \t : \n 1 , "b"  :  [ 1 , 2 ]  \n } \n ', ['a', 'b'], ['1', '[ 1 , 2 ]']],
    ['empty object', '{}', [], []],
    ['empty object with whitespace', '  {  \n }  ', [], []],
    ['empty containers as values', '{"a": [], "b": {}, "c": ""}', ['a', 'b', 'c'], ['[]', '{}', '""']],
    ['duplicate keys are all reported', '{"a": 1, "a": 2}', ['a', 'a'], ['1', '2']],
  ];

  test.each(rows)('%s', (_name, text, keys, raws) => {
    const { buf, r } = scan(text);
    expect(r.members.map((m) => m.key)).toEqual(keys);
    expect(r.members.map((m) => slice(buf, m))).toEqual(raws);
    // Each member's bytes parse to the value JSON.parse gives (last duplicate wins in JSON.parse).
    const parsed = JSON.parse(text) as Record<string, unknown>;
    const last = new Map(r.members.map((m) => [m.key, m]));
    for (const [k, m] of last) expect(JSON.parse(slice(buf, m))).toEqual(parsed[k]);
    // close is the index of the object's closing brace
    expect(buf[r.close]).toBe(0x7d);
    expect(buf.toString('utf8', r.close + 1).trim()).toBe('');
    expect(r.elements).toBeNull();
  });

  test('close is the last brace even with nested objects before it', () => {
    const text = '{"a": {"b": {}}}  ';
    const { r } = scan(text);
    expect(r.close).toBe(15);
  });

  test('byte offsets (not character offsets) with multi-byte UTF-8 before the value', () => {
    const { buf, r } = scan('{"ключ": "значение", "n": 12}');
    const n = r.members[1];
    expect(n.key).toBe('n');
    expect(buf.toString('utf8', n.start, n.end)).toBe('12');
    // a character index would be smaller than the byte index here
    expect(n.start).toBe(Buffer.byteLength('{"ключ": "значение", "n": '));
  });
});

describe('scanObject: elementsOf', () => {
  // [name, text, member, expected raw element texts]
  const rows: [string, string, string, string[]][] = [
    ['numbers', '{"instances": [1, 2.50, -3e2]}', 'instances', ['1', '2.50', '-3e2']],
    ['nested arrays and objects', '{"instances": [[1, [2]], {"a": [3]}, []]}', 'instances', ['[1, [2]]', '{"a": [3]}', '[]']],
    ['strings with escaped quotes and brackets', '{"p": ["a\\"],", "]", "\\\\", "{"]}', 'p', ['"a\\"],"', '"]"', '"\\\\"', '"{"']],
    ['unicode escapes', '{"p": ["\\u005d", "\\u0022x"]}', 'p', ['"\\u005d"', '"\\u0022x"']],
    ['whitespace around and between', '{ "p" : [ \n 1 \t, \r\n {"b" : 2} ,"x"  ] }', 'p', ['1', '{"b" : 2}', '"x"']],
    ['empty array', '{"p": []}', 'p', []],
    ['empty array with whitespace', '{"p": [  \n ]}', 'p', []],
    ['booleans and null', '{"p": [true, false, null]}', 'p', ['true', 'false', 'null']],
    ['other members before and after', '{"a": [9], "p": [1, 2], "z": {"p": [3]}}', 'p', ['1', '2']],
    ['the key spelled with an escape', '{"\\u0070": [7, 8]}', 'p', ['7', '8']],
    ['last duplicate wins, like JSON.parse', '{"p": [1], "p": [2, 3]}', 'p', ['2', '3']],
  ];

  test.each(rows)('%s', (_name, text, member, raws) => {
    const { buf, r } = scan(text, { elementsOf: member });
    expect(r.elements).not.toBeNull();
    expect(r.elements!.map((e) => slice(buf, e))).toEqual(raws);
    const parsed = (JSON.parse(text) as Record<string, unknown[]>)[member];
    expect(r.elements!.map((e) => JSON.parse(slice(buf, e)))).toEqual(parsed);
  });

  const absent: [string, string][] = [
    ['member absent', '{"a": [1]}'],
    ['member is an object', '{"p": {"0": 1}}'],
    ['member is a string', '{"p": "[1, 2]"}'],
    ['member is null', '{"p": null}'],
    ['member is a number', '{"p": 3}'],
    ['only nested deeper', '{"a": {"p": [1]}}'],
  ];
  test.each(absent)('elements is null when %s', (_name, text) => {
    const { r } = scan(text, { elementsOf: 'p' });
    expect(r.elements).toBeNull();
    expect(r.members.length).toBeGreaterThan(0);
  });
});

describe('scanObject: NaN / Infinity / -Infinity tokens', () => {
  const rows: [string, string, string | null, string[]][] = [
    ['NaN as a member value', '{"a": NaN}', null, ['NaN']],
    ['Infinity as a member value', '{"a": Infinity}', null, ['Infinity']],
    ['-Infinity as a member value', '{"a": -Infinity}', null, ['-Infinity']],
    ['tokens as elements', '{"p": [NaN, -Infinity, Infinity, 1.0]}', 'p', ['NaN', '-Infinity', 'Infinity', '1.0']],
  ];

  test.each(rows)('accepted with allowNonFinite: %s', (_name, text, elementsOf, raws) => {
    const { buf, r } = scan(text, { allowNonFinite: true, elementsOf: elementsOf ?? undefined });
    const spans = elementsOf === null ? r.members : r.elements!;
    expect(spans.map((s) => slice(buf, s))).toEqual(raws);
  });

  test.each(rows)('rejected without allowNonFinite: %s', (_name, text, elementsOf) => {
    expect(syntaxErrorOf(() => scan(text, { allowNonFinite: false, elementsOf: elementsOf ?? undefined })))
      .toMatch(/^invalid JSON at byte \d+: (unexpected token|bad number)$/);
  });

  const stillBad: [string, string, string][] = [
    ['-NaN', '{"a": -NaN}', 'invalid JSON at byte 6: bad number'],
    ['lower-case nan', '{"a": nan}', 'invalid JSON at byte 6: unexpected token'],
    ['truncated Infinit', '{"a": Infinit}', 'invalid JSON at byte 6: unexpected token'],
    ['the TF doc typo Nan as an element', '{"p": [1.0, Nan]}', 'invalid JSON at byte 12: unexpected token'],
  ];
  test.each(stillBad)('still rejected with allowNonFinite: %s', (_name, text, message) => {
    expect(syntaxErrorOf(() => scan(text, { allowNonFinite: true, elementsOf: 'p' }))).toBe(message);
  });
});

describe('scanObject: malformed input is a JsonSyntaxError naming the byte', () => {
  // [name, text, elementsOf, exact message]
  const rows: [string, string, string | undefined, string][] = [
    ['empty input', '', undefined, 'invalid JSON at byte 0: expected a JSON object'],
    ['an array, not an object', '[1, 2]', undefined, 'invalid JSON at byte 0: expected a JSON object'],
    ['a string, not an object', '  "x"', undefined, 'invalid JSON at byte 2: expected a JSON object'],
    ['HTML, not an object', '<html></html>', undefined, 'invalid JSON at byte 0: expected a JSON object'],
    ['trailing garbage', '{"a": 1} x', undefined, 'invalid JSON at byte 8: unexpected data after the JSON value'],
    ['a second object', '{}{}', undefined, 'invalid JSON at byte 2: unexpected data after the JSON value'],
    ['unterminated object', '{"a": 1', undefined, 'invalid JSON at byte 7: expected , or }'],
    ['unterminated string value', '{"a": "abc', undefined, 'invalid JSON at byte 6: unterminated string'],
    ['unterminated string ending in an escaped quote', '{"a": "ab\\"}', undefined, 'invalid JSON at byte 6: unterminated string'],
    ['unterminated key', '{"abc', undefined, 'invalid JSON at byte 1: unterminated string'],
    ['bad escape', '{"a": "x\\q"}', undefined, 'invalid JSON at byte 8: bad escape'],
    ['bad \\u escape', '{"a": "\\u12G4"}', undefined, 'invalid JSON at byte 7: bad \\u escape'],
    ['truncated \\u escape', '{"a": "\\u12"}', undefined, 'invalid JSON at byte 7: bad \\u escape'],
    ['bad escape in a key', '{"a\\x": 1}', undefined, 'invalid JSON at byte 3: bad escape'],
    ['mismatched brackets in a member value', '{"a": [1, 2}}', undefined, 'invalid JSON at byte 11: mismatched bracket'],
    ['mismatched brackets the other way', '{"a": {"b": 1]}', undefined, 'invalid JSON at byte 13: mismatched bracket'],
    ['mismatched brackets in an element', '{"p": [[1}]}', 'p', 'invalid JSON at byte 9: mismatched bracket'],
    ['unclosed container in a member value', '{"a": [1, 2', undefined, 'invalid JSON at byte 11: unexpected end of input'],
    ['a stray character in a container', '{"a": [1, @]}', undefined, 'invalid JSON at byte 10: unexpected token'],
    ['bad number: lone minus', '{"a": -}', undefined, 'invalid JSON at byte 6: bad number'],
    ['bad number: dot without digits', '{"a": 1.}', undefined, 'invalid JSON at byte 6: bad number'],
    ['bad number: exponent without digits', '{"a": 1e+}', undefined, 'invalid JSON at byte 6: bad number'],
    ['bad number: leading dot', '{"a": .5}', undefined, 'invalid JSON at byte 6: unexpected token'],
    ['bad number: plus sign', '{"a": +1}', undefined, 'invalid JSON at byte 6: unexpected token'],
    ['bad number: leading zero', '{"a": 01}', undefined, 'invalid JSON at byte 7: expected , or }'],
    ['bad number: two dots', '{"a": 1.2.3}', undefined, 'invalid JSON at byte 9: expected , or }'],
    ['bad number as an element', '{"p": [1, -]}', 'p', 'invalid JSON at byte 10: bad number'],
    ['bad number as an element: exponent', '{"p": [2e]}', 'p', 'invalid JSON at byte 7: bad number'],
    ['bad literal as a member value', '{"a": tru}', undefined, 'invalid JSON at byte 6: unexpected token'],
    ['bad literal as an element', '{"p": [nul]}', 'p', 'invalid JSON at byte 7: unexpected token'],
    ['missing value', '{"a": }', undefined, 'invalid JSON at byte 6: unexpected token'],
    ['missing colon', '{"a" 1}', undefined, 'invalid JSON at byte 5: expected :'],
    ['missing comma between members', '{"a": 1 "b": 2}', undefined, 'invalid JSON at byte 8: expected , or }'],
    ['missing comma between elements', '{"p": [1 2]}', 'p', 'invalid JSON at byte 9: expected , or ]'],
    ['trailing comma in the object', '{"a": 1,}', undefined, 'invalid JSON at byte 8: expected a property name'],
    ['trailing comma in the elements', '{"p": [1,]}', 'p', 'invalid JSON at byte 9: unexpected token'],
    ['leading comma in the elements', '{"p": [,1]}', 'p', 'invalid JSON at byte 7: unexpected token'],
    ['unquoted key', '{a: 1}', undefined, 'invalid JSON at byte 1: expected a property name'],
    ['single-quoted key', "{'a': 1}", undefined, 'invalid JSON at byte 1: expected a property name'],
    ['unterminated elements', '{"p": [1, 2', 'p', 'invalid JSON at byte 11: expected , or ]'],
  ];

  test.each(rows)('%s', (_name, text, elementsOf, message) => {
    expect(syntaxErrorOf(() => scan(text, { elementsOf }))).toBe(message);
  });
});

describe('scanObject: maxDepth (the top-level object is level 1)', () => {
  // [name, text, elementsOf, maxDepth, ok]
  const rows: [string, string, string | undefined, number, boolean][] = [
    ['scalar member at depth 1', '{"a": 1}', undefined, 1, true],
    ['array member needs depth 2', '{"a": [1]}', undefined, 1, false],
    ['array member at depth 2', '{"a": [1]}', undefined, 2, true],
    ['3 levels at maxDepth 3', '{"a": [{"b": 1}]}', undefined, 3, true],
    ['4 levels at maxDepth 3', '{"a": [{"b": []}]}', undefined, 3, false],
    ['elementsOf: scalar elements at maxDepth 2', '{"p": [1, 2]}', 'p', 2, true],
    ['elementsOf: container element needs depth 3', '{"p": [[1]]}', 'p', 2, false],
    ['elementsOf: container element at depth 3', '{"p": [[1]]}', 'p', 3, true],
    ['elementsOf: 5 levels at maxDepth 5', '{"p": [[[[1]]]]}', 'p', 5, true],
    ['elementsOf: 6 levels at maxDepth 5', '{"p": [[[[[1]]]]]}', 'p', 5, false],
    ['other member: 6 levels at maxDepth 5', '{"q": [[[[[1]]]]], "p": []}', 'p', 5, false],
  ];

  test.each(rows)('%s', (_name, text, elementsOf, maxDepth, ok) => {
    const run = () => scan(text, { elementsOf, maxDepth });
    if (ok) {
      expect(() => run()).not.toThrow();
    } else {
      expect(syntaxErrorOf(run)).toMatch(/^invalid JSON at byte \d+: nesting too deep$/);
    }
  });

  test('a very deep document fails on depth, not on the stack', () => {
    const depth = 100_000;
    const text = `{"p": ${'['.repeat(depth)}${']'.repeat(depth)}}`;
    expect(syntaxErrorOf(() => scan(text, { elementsOf: 'p', maxDepth: 64 }))).toMatch(/nesting too deep$/);
  });
});

// ---- property check: spans agree with JSON.parse --------------------------------------------------


const STRING_PIECES = ['a', 'Z', ' ', '"', '\\', '[', ']', '{', '}', ',', ':', '/', '\n', '\t', 'é', '日', '🚀', '\u0001', 'NaN', 'null', 'x y'];

function genString(rnd: () => number): string {
  let s = '';
  const n = Math.floor(rnd() * 6);
  for (let i = 0; i < n; i++) s += STRING_PIECES[Math.floor(rnd() * STRING_PIECES.length)];
  return s;
}

function genValue(rnd: () => number, depth: number): unknown {
  const r = rnd();
  if (depth > 4 || r < 0.45) {
    const k = Math.floor(rnd() * 6);
    if (k === 0) return Math.floor(rnd() * 2000) - 1000;
    if (k === 1) return (rnd() - 0.5) * 1e6;
    if (k === 2) return genString(rnd);
    if (k === 3) return rnd() < 0.5;
    if (k === 4) return null;
    return Number((rnd() * 1e-5).toExponential(3));
  }
  if (r < 0.75) {
    const n = Math.floor(rnd() * 5);
    return Array.from({ length: n }, () => genValue(rnd, depth + 1));
  }
  return genObject(rnd, depth + 1, 4);
}

function genObject(rnd: () => number, depth: number, maxMembers: number): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  const n = Math.floor(rnd() * (maxMembers + 1));
  for (let i = 0; i < n; i++) o[`${genString(rnd)}#${i}`] = genValue(rnd, depth);
  return o;
}

const WS = ['', '', '', ' ', '\n', '\t', '\r\n', '  '];

/** Escapes a string the many ways JSON allows (plain, \uXXXX, short escapes). */
function writeString(s: string, rnd: () => number): string {
  let out = '"';
  for (const ch of s) {
    const code = ch.codePointAt(0)!;
    if (ch === '"') out += rnd() < 0.5 ? '\\"' : '\\u0022';
    else if (ch === '\\') out += rnd() < 0.5 ? '\\\\' : '\\u005C';
    else if (ch === '/') out += rnd() < 0.5 ? '/' : '\\/';
    else if (code < 0x20) out += ch === '\n' ? '\\n' : ch === '\t' ? '\\t' : `\\u${code.toString(16).padStart(4, '0')}`;
    else if (code > 0xffff) out += rnd() < 0.5 ? ch : Array.from({ length: ch.length }, (_, i) => `\\u${ch.charCodeAt(i).toString(16)}`).join('');
    else if (rnd() < 0.1) out += `\\u${code.toString(16).padStart(4, '0')}`;
    else out += ch;
  }
  return out + '"';
}

function writeValue(v: unknown, rnd: () => number): string {
  const ws = () => WS[Math.floor(rnd() * WS.length)];
  if (typeof v === 'string') return writeString(v, rnd);
  if (Array.isArray(v)) return `[${ws()}${v.map((x) => writeValue(x, rnd)).join(`${ws()},${ws()}`)}${ws()}]`;
  if (v !== null && typeof v === 'object') {
    const parts = Object.entries(v).map(([k, x]) => `${writeString(k, rnd)}${ws()}:${ws()}${writeValue(x, rnd)}`);
    return `{${ws()}${parts.join(`${ws()},${ws()}`)}${ws()}}`;
  }
  return JSON.stringify(v);
}

describe('scanObject: seeded property check against JSON.parse', () => {
  const seeds = Array.from({ length: 200 }, (_, i) => [i * 7919 + 1] as [number]);

  test.each(seeds)('seed %i', (seed) => {
    const rnd = prng(seed);
    const doc = genObject(rnd, 1, 6);
    // Always have an array member to report elements of, at a random position.
    const arr = Array.from({ length: Math.floor(rnd() * 6) }, () => genValue(rnd, 2));
    const entries = Object.entries(doc);
    entries.splice(Math.floor(rnd() * (entries.length + 1)), 0, ['instances', arr]);
    const obj = Object.fromEntries(entries);
    const text = `${WS[seed % WS.length]}${writeValue(obj, rnd)}${WS[(seed >> 3) % WS.length]}`;
    const buf = Buffer.from(text, 'utf8');
    expect(JSON.parse(text)).toEqual(obj); // the generator writes valid JSON

    const r = scanObject(buf, { allowNonFinite: false, maxDepth: 64, elementsOf: 'instances' });
    expect(r.members.map((m) => m.key)).toEqual(Object.keys(obj));
    for (const m of r.members) expect(JSON.parse(buf.toString('utf8', m.start, m.end))).toEqual(obj[m.key]);
    expect(r.elements).not.toBeNull();
    expect(r.elements!.map((e) => JSON.parse(buf.toString('utf8', e.start, e.end)))).toEqual(arr);
    expect(buf[r.close]).toBe(0x7d);
    expect(buf.toString('utf8', r.close + 1).trim()).toBe('');
    // Spans are tight: no white space at either end.
    for (const s of [...r.members, ...r.elements!]) {
      expect(/\s/.test(String.fromCharCode(buf[s.start]))).toBe(false);
      expect(/\s/.test(String.fromCharCode(buf[s.end - 1]))).toBe(false);
    }
  });
});
