// The byte-level hostile families: bodies that are not JSON, or are JSON only by a narrow margin.
// Truncation, nesting at and past MAX_JSON_DEPTH, number spellings, NaN/Infinity tokens, invalid and
// overlong UTF-8, escapes (lone surrogates, escaped names), raw control characters, BOMs and odd
// white space, trailing garbage and several JSON values, random bytes and random edits of a valid
// body. Each starts from a valid body of the route and breaks one thing (or a few).
import { gzipSync } from 'node:zlib';
import { Obj, Raw, emit, type Node } from './tree.js';
import { placeAnywhere, placeAtLeaf, pickObject, rawString, type Family } from './place.js';
import { MAX_JSON_DEPTH } from './targets.js';
import type { Rand } from './rand.js';

const D = MAX_JSON_DEPTH;
/** Nesting depths: around the limit mostly, and far past it. */
const DEPTHS: readonly (readonly [number, number])[] = [
  [D - 4, 1], [D - 3, 2], [D - 2, 3], [D - 1, 3], [D, 3], [D + 1, 3], [D + 2, 3], [D + 3, 2], [2 * D, 2], [1000, 2], [20_000, 1], [100_000, 1],
];

/** Bytes nested `depth` levels deep around a leaf: lists, objects, or both in turn; sometimes never closed. */
function nested(r: Rand, depth: number): Raw {
  const kind = r.pick(['list', 'object', 'mixed', 'b64']);
  const leaf = kind === 'b64' ? '{"b64":"AA=="}' : r.pick(['1', '"x"', '[]', '{}', 'null', '[1,2]']);
  let open = '';
  let close = '';
  if (kind === 'mixed') {
    const opens: string[] = [];
    const closes: string[] = [];
    for (let i = 0; i < depth; i++) {
      const list = i % 2 === 0;
      opens.push(list ? '[' : '{"k":');
      closes.push(list ? ']' : '}');
    }
    open = opens.join('');
    close = closes.reverse().join('');
  } else {
    open = (kind === 'object' ? '{"a":' : '[').repeat(depth);
    close = (kind === 'object' ? '}' : ']').repeat(depth);
  }
  return new Raw(open + leaf + (r.chance(0.05) ? '' : close));
}

const NUMBERS = [
  '1e999', '-1e999', '1e-999', '-0', '-0.0', '0e0', '0E-0', '01', '-01', '00', '+1', '.5', '1.', '1e', '1e+', '-', '--1', '0x10', '1_000',
  '9007199254740993', '1e308', '1.7976931348623157e309', '5e-324', '4.9e-325', '3.4028234663852886e38', '3.5e38', '-3.5e38', '1.0e+2',
  '12345678901234567890123', '1E5', '1e05', '-1e-7', '0.1e1', '1.5e', '1.e5', '١', '1 2',
];
const NON_FINITE = ['NaN', 'Infinity', '-Infinity', '-NaN', '+Infinity', 'nan', 'inf', '-inf', 'Infinity1', 'NaNx', 'NaN NaN', 'Infinit', '-Infinityy', 'NAN', 'infinity', '"NaN"', 'NaN,', '[NaN]'];

/** Invalid UTF-8 (lone continuation and lead bytes, overlong forms, surrogates, past U+10FFFF) and a few valid oddities. */
const BAD_UTF8 = [
  [0xff], [0xfe], [0xc3], [0x80], [0xbf], [0xc0, 0xaf], [0xc1, 0xbf], [0xe0, 0x80, 0xaf], [0xf0, 0x80, 0x80, 0xaf], [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0xed, 0xa0, 0x80], [0xed, 0xbf, 0xbf], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82], [0xf0, 0x9f, 0x98], [0xc3, 0x28], [0xef, 0xbf, 0xbe], [0xc0, 0x80],
].map((b) => Buffer.from(b));

const ESCAPES = [
  '\\ud800', '\\udc00', '\\udbff\\udfff', '\\udc00\\ud800', '\\ud800\\u0041', '\\uD800', '\\u0000', '\\u001f', '\\x41', '\\u12', '\\u00zz', '\\U0041',
  "\\'", '\\/', '\\a', '\\', '\\u', '\\ud83d\\ude00', '\\ufeff', '\\u2028',
];

/** Property names the gateway reads, spelled with escapes (the same names once decoded). */
const ESCAPED_NAMES: Record<string, string> = {
  instances: 'instan\\u0063es', inputs: '\\u0069nputs', b64: '\\u0062\\u0036\\u0034', data: 'da\\u0074a', deployedModelId: 'deployed\\u004dodelId',
  version: 've\\u0072sion', gml_task: 'gml\\u005ftask', httpBody: 'http\\u0042ody', examples: 'exampl\\u0065s', parameters: 'p\\u0061rameters',
};

const WHITESPACE = [' ', '\n', '\t', '\r', '\r\n', '\v', '\f', '\u00a0', '\u2028', '\u3000', '\u0085'];

function escapeNames(r: Rand, root: Node): Node {
  const rename = (o: Obj): void => {
    for (const e of o.entries) if (typeof e[0] === 'string' && e[0] in ESCAPED_NAMES && r.chance(0.7)) e[0] = new Raw(`"${ESCAPED_NAMES[e[0]]}"`);
  };
  const walk = (n: Node): void => {
    if (Array.isArray(n)) n.forEach(walk);
    else if (n instanceof Obj) {
      rename(n);
      for (const e of n.entries) walk(e[1]);
    }
  };
  walk(root);
  return root;
}

/** One random edit of a byte string. */
function edit(r: Rand, b: Buffer): Buffer {
  if (b.length === 0) return r.bytes(r.between(1, 4));
  const at = r.int(b.length);
  switch (r.int(6)) {
    case 0: {
      const c = Buffer.from(b);
      c[at] = r.chance(0.5) ? r.int(256) : c[at] ^ (1 << r.int(8));
      return c;
    }
    case 1:
      return Buffer.concat([b.subarray(0, at), r.chance(0.5) ? r.bytes(r.between(1, 4)) : Buffer.from(r.pick(['{', '}', '[', ']', ',', ':', '"', '\\', '0', '-', 'e', '.'])), b.subarray(at)]);
    case 2:
      return Buffer.concat([b.subarray(0, at), b.subarray(Math.min(b.length, at + r.between(1, 8)))]);
    case 3: {
      const end = Math.min(b.length, at + r.between(1, 32));
      return Buffer.concat([b.subarray(0, end), b.subarray(at, end), b.subarray(end)]);
    }
    case 4: {
      const c = Buffer.from(b);
      const other = r.int(b.length);
      [c[at], c[other]] = [c[other], c[at]];
      return c;
    }
    default:
      return Buffer.concat([b.subarray(0, at), Buffer.from(r.pick(['{', '}', '[', ']', ',', ':', '"'])), b.subarray(at + 1)]);
  }
}

export const LEXICAL: readonly Family[] = [
  {
    name: 'truncated', weight: 4,
    make: (r, _t, valid) => {
      const b = emit(valid);
      return { body: b.subarray(0, r.int(b.length)) };
    },
  },
  {
    name: 'deep nesting', weight: 5,
    make: (r, _t, valid) => {
      const deep = nested(r, r.weighted(DEPTHS));
      return { body: r.chance(0.15) ? deep.bytes : placeAnywhere(r, valid, deep) };
    },
  },
  { name: 'number spellings', weight: 4, make: (r, _t, valid) => ({ body: placeAtLeaf(r, valid, new Raw(r.chance(0.05) ? '1'.repeat(r.between(20, 5000)) : r.pick(NUMBERS)), 'number') }) },
  {
    name: 'NaN and Infinity', weight: 4,
    make: (r, _t, valid) => {
      const token = r.pick(NON_FINITE);
      if (r.chance(0.1)) {
        const o = pickObject(r, valid);
        o?.entries.push([new Raw(token), 1]);
        return { body: valid };
      }
      return { body: r.chance(0.05) ? Buffer.from(token) : placeAtLeaf(r, valid, new Raw(token), 'number') };
    },
  },
  {
    name: 'invalid UTF-8', weight: 4,
    make: (r, _t, valid) => {
      const bad = r.pick(BAD_UTF8);
      const where = r.int(3);
      if (where === 0) return { body: placeAtLeaf(r, valid, rawString(Buffer.concat([Buffer.from(r.word(0, 3)), bad, Buffer.from(r.word(0, 3))])), 'string') };
      if (where === 1) {
        pickObject(r, valid)?.entries.push([rawString(Buffer.concat([Buffer.from('k'), bad])), 1]);
        return { body: valid };
      }
      const b = emit(valid);
      const at = r.int(b.length + 1);
      return { body: Buffer.concat([b.subarray(0, at), bad, b.subarray(at)]) };
    },
  },
  {
    name: 'escapes and lone surrogates', weight: 4,
    make: (r, _t, valid) => {
      if (r.chance(0.3)) return { body: escapeNames(r, valid) };
      const esc = r.pick(ESCAPES);
      if (r.chance(0.2)) {
        pickObject(r, valid)?.entries.push([new Raw(`"${esc}"`), r.pick<Node>([1, 'v', null])]);
        return { body: valid };
      }
      return { body: placeAtLeaf(r, valid, new Raw(`"${r.word(0, 3)}${esc}${r.word(0, 3)}"`), 'string') };
    },
  },
  {
    name: 'control characters', weight: 3,
    make: (r, _t, valid) => {
      const c = Buffer.from([r.chance(0.3) ? 0 : r.chance(0.9) ? r.int(32) : 0x7f]);
      const where = r.int(3);
      if (where === 0) return { body: placeAtLeaf(r, valid, rawString(Buffer.concat([Buffer.from(r.word(0, 3)), c, Buffer.from(r.word(0, 3))])), 'string') };
      if (where === 1) {
        pickObject(r, valid)?.entries.push([rawString(Buffer.concat([Buffer.from('k'), c])), 1]);
        return { body: valid };
      }
      const b = emit(valid);
      const at = r.int(b.length + 1);
      return { body: Buffer.concat([b.subarray(0, at), c, b.subarray(at)]) };
    },
  },
  {
    name: 'BOM, empty and white space', weight: 3,
    make: (r, _t, valid) => {
      const b = emit(valid);
      switch (r.int(7)) {
        case 0: return { body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), b]) };
        case 1: return { body: Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(b.toString('utf8'), 'utf16le')]) };
        case 2: return { body: Buffer.alloc(0) };
        case 3: return { body: Buffer.from(Array.from({ length: r.between(1, 2000) }, () => r.pick([' ', '\n', '\t', '\r'])).join('')) };
        case 4: {
          const ws = r.pick(WHITESPACE);
          return { body: Buffer.concat([Buffer.from(ws), b, Buffer.from(ws)]) };
        }
        case 5: {
          const ws = r.pick(WHITESPACE);
          const text = b.toString('utf8');
          return { body: Buffer.from(text.replace(/,/g, () => (r.chance(0.3) ? `,${ws}` : ','))) };
        }
        default: return { body: Buffer.concat([b.subarray(0, b.length >> 1), Buffer.from([0xef, 0xbb, 0xbf]), b.subarray(b.length >> 1)]) };
      }
    },
  },
  {
    name: 'trailing garbage', weight: 3,
    make: (r, _t, valid) => ({ body: Buffer.concat([emit(valid), r.chance(0.2) ? r.bytes(r.between(1, 16)) : Buffer.from(r.pick([' x', '}', ']', ',', '\0', ' \n', 'null', '{}', '\u00ff', ';', '//', '/* c */', ' #', '\n\n\n1'])) ]) }),
  },
  {
    name: 'several JSON values', weight: 2,
    make: (r, _t, valid) => {
      const b = emit(valid);
      return { body: Buffer.concat(r.pick([[b, b], [b, Buffer.from('\n'), b], [Buffer.from('[] '), b], [b, Buffer.from(' 1 2')], [Buffer.from('1 2')], [Buffer.from('{}{}')], [b, Buffer.from('[]')]])) };
    },
  },
  {
    name: 'random bytes', weight: 3,
    make: (r) => {
      const noise = r.bytes(r.between(0, 2048));
      const prefix = r.pick(['', '', '{', '{"instances":', '{"inputs":', '{"version":"gs-realtime-v0.1",']);
      return { body: Buffer.concat([Buffer.from(prefix), noise]) };
    },
  },
  {
    name: 'random edits of a valid body', weight: 6,
    make: (r, _t, valid) => {
      let b = emit(valid);
      for (let i = r.between(1, 8); i > 0; i--) b = edit(r, b);
      return { body: b };
    },
  },
  {
    name: 'content type and encoding', weight: 3,
    make: (r, _t, valid) => {
      const json = emit(valid);
      const encoding = r.pick([null, 'gzip', 'gzip', 'deflate', 'br', 'identity', 'gzip, gzip', 'x-unknown', 'GZIP']);
      const body = r.chance(0.3) ? gzipSync(json) : r.chance(0.1) ? r.bytes(64) : json;
      const type = r.pick([null, 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=utf-16', 'application/octet-stream', '*/*', 'application/json;;;', `application/${'x'.repeat(2000)}`, 'application/json', 'APPLICATION/JSON', 'application/json; name=caf\u00e9']);
      return { body, headers: { 'content-type': type, ...(encoding ? { 'content-encoding': encoding } : {}) } };
    },
  },
];
