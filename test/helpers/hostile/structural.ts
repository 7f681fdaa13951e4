// The structural hostile families: valid JSON that breaks a payload rule, or sits at its edge.
// Duplicate keys, `__proto__`/`constructor`/`prototype` keys at any level, a wrong type at a random
// path, `{"b64"}` values and `_bytes` names gone wrong, TorchServe `data` wrapping, TF columnar
// inputs that disagree, mixed instances, GraphStorm graphs that cannot be built, `parameters` and
// explain's members of the wrong type, sizes near and past MAX_REQUEST_BYTES, and plain valid bodies.
import { Obj, Raw, clone, member, objects, tree, type Node } from './tree.js';
import { mainEntry, pickObject, pickSlot, placeAnywhere, setMain, type Family } from './place.js';
import { MAX_REQUEST_BYTES, type Target } from './targets.js';
import { B64 } from './bases.js';
import type { Rand } from './rand.js';

const WRONG: readonly Node[] = [null, true, false, 0, -1.5, '', 'text', [], [1], tree({}), tree({ k: 1 }), [[]], tree({ b64: 'AA==' }), tree([{ data: 1 }]), 'NaN'];
const wrong = (r: Rand): Node => clone(r.pick(WRONG));

const SPECIAL_KEYS = ['__proto__', 'constructor', 'prototype', 'hasOwnProperty', 'toString', 'valueOf', '__defineGetter__', '__lookupSetter__', 'isPrototypeOf', 'toJSON'];
const SPECIAL_VALUES = (): Node[] => [tree({}), tree({ polluted: true }), tree({ b64: 'AA==' }), null, 1, 'x', [], tree({ data: 1 }), tree({ instances: [1] }), tree({ node_type: 'author' })];

const BAD_B64: readonly Node[] = [
  1, 1.5, null, true, [], ['aGVsbG8='], tree({}), tree({ b64: 'AA==' }), 'a', 'abc!', 'aGVs bG8=', 'aGVs\nbG8=', ' aGVsbG8=', 'A===', 'AB=', '=AAA', 'AAA=A',
  'AAAAA', 'aGVsbG8==', '====', 'ab+_', 'Zm9v\u0000', '😀', 'aGVsbG8=\r\n', '%%%%', 'AA=\u0000',
];

const isTf = (t: Target): boolean => t.body === 'tf-predict';
const isPt = (t: Target): boolean => t.body === 'pt-predict' || t.body === 'custom-predict';
const isPredictLike = (t: Target): boolean => isTf(t) || isPt(t);
const isGs = (t: Target): boolean => t.body === 'gs-predict';

/** A body padded with one long string to `size` bytes (as near as the frame allows). */
function sized(r: Rand, t: Target, size: number): Buffer {
  const frame = t.body === 'gs-predict'
    ? ['{"version":"gs-realtime-v0.1","gml_task":"node_classification","graph":{"nodes":[{"node_type":"author","node_id":"a0","features":{"t":"', '"}}],"edges":[]},"targets":[{"node_type":"author","node_id":"a0"}]}']
    : t.body === 'tf-examples' ? ['{"examples":[{"x":1.0,"s":"', '"}]}'] : t.body === 'httpbody' ? ['{"httpBody":{"data":"', '"}}'] : [r.chance(0.5) ? '{"instances":[{"data":"' : '{"instances":["', r.chance(0.5) ? '"}]}' : '"]}'];
  const fill = Math.max(0, size - frame[0].length - frame[1].length);
  return Buffer.from(frame[0] + (t.body === 'httpbody' ? 'A' : 'z').repeat(fill) + frame[1]);
}

const GS_FIELDS = ['version', 'gml_task', 'graph', 'targets', 'nodes', 'edges', 'node_type', 'node_id', 'features', 'edge_type', 'src_node_id', 'dest_node_id'];

/** One way to break a gs-realtime-v0.1 payload. */
function breakGraph(r: Rand, body: Node): Node {
  const graph = member(body, 'graph');
  const nodes = member(graph ?? null, 'nodes');
  const edges = member(graph ?? null, 'edges');
  const targets = member(body, 'targets');
  const set = (o: Node | undefined, key: string, v: Node): void => {
    if (!(o instanceof Obj)) return;
    const e = o.entries.find(([k]) => k === key);
    if (e) e[1] = v;
    else o.entries.push([key, v]);
  };
  const anyOf = (list: Node | undefined): Node | undefined => (Array.isArray(list) && list.length ? r.pick(list) : undefined);
  switch (r.int(12)) {
    case 0: // a dangling edge
      if (Array.isArray(edges)) edges.push(tree({ edge_type: ['author', 'writes', 'paper'], src_node_id: r.pick(['a0', 'zz']), dest_node_id: r.pick(['nope', 'p0', 'a0']), features: {} }));
      break;
    case 1: // a node listed twice
      if (Array.isArray(nodes) && nodes.length) nodes.push(clone(r.pick(nodes)));
      break;
    case 2: { // a required field missing, anywhere
      const key = r.pick(GS_FIELDS);
      for (const o of objects(body)) if (r.chance(0.5)) o.entries = o.entries.filter(([k]) => k !== key);
      break;
    }
    case 3: // a field without a value
      set(r.pick([body, graph, anyOf(nodes), anyOf(targets), anyOf(edges)]), r.pick(GS_FIELDS), r.pick<Node>([null, '', []]));
      break;
    case 4:
      set(body, 'gml_task', r.pick<Node>(['node_regression', 'edge_classification', 'link_prediction', '', 5, null, 'NODE_CLASSIFICATION', 'node_classification ']));
      break;
    case 5:
      set(body, 'version', r.pick<Node>(['gs-realtime-v0.2', '', 0.1, null, 'gs-realtime-v0.1\u0000']));
      break;
    case 6: // a target not in the graph, or twice
      if (Array.isArray(targets)) targets.push(r.chance(0.5) && targets.length ? clone(targets[0]) : tree({ node_type: r.pick(['author', 'venue', '']), node_id: r.pick(['a0', 'a99', '']) }));
      break;
    case 7:
      set(anyOf(edges) ?? anyOf(nodes), 'edge_type', r.pick<Node>([['author', 'writes'], ['author', 'writes', 'paper', 'x'], ['', 'writes', 'paper'], [1, 2, 3], 'author-writes-paper', tree({})]));
      break;
    case 8: { // feature names that differ within a type, or features of the wrong type
      const n = anyOf(nodes);
      set(n, 'features', r.pick<Node>([tree({ other: 1 }), null, [], 'f', tree({ feat: null }), tree({ feat: { deep: [1] } }), tree({ feat: [[1, 2], [3]] })]));
      break;
    }
    case 9:
      set(graph, r.pick(['nodes', 'edges']), r.pick<Node>([tree({}), 'nodes', 1, [1, 2], [null], [[]]]));
      break;
    case 10:
      set(body, 'targets', r.pick<Node>([tree({ node_type: 'author', node_id: 'a0' }), 'a0', [null], [['author', 'a0']], [tree({ node_id: 'a0' })]]));
      break;
    default: { // ids of the wrong type
      const n = anyOf(nodes) ?? anyOf(targets);
      set(n, r.pick(['node_id', 'node_type']), r.pick<Node>([0, true, tree({ id: 'a0' }), ['a0'], 'a0\u0000']));
    }
  }
  return body;
}

export const STRUCTURAL: readonly Family[] = [
  { name: 'valid', weight: 3, make: (_r, _t, valid) => ({ body: valid }) },
  {
    name: 'duplicate keys', weight: 4,
    make: (r, _t, valid) => {
      const o = r.chance(0.5) && valid instanceof Obj ? valid : pickObject(r, valid);
      if (o && o.entries.length) {
        const e = r.pick(o.entries);
        o.entries.splice(r.int(o.entries.length + 1), 0, [e[0], r.chance(0.5) ? clone(e[1]) : wrong(r)]);
      }
      return { body: valid };
    },
  },
  {
    name: '__proto__ and constructor keys', weight: 4,
    make: (r, _t, valid) => {
      const every = r.chance(0.3);
      for (const o of objects(valid)) {
        if (!every && !r.chance(0.3)) continue;
        const key = r.pick(SPECIAL_KEYS);
        if (r.chance(0.2) && o.entries.length) r.pick(o.entries)[0] = key;
        else o.entries.splice(r.int(o.entries.length + 1), 0, [key, r.pick(SPECIAL_VALUES())]);
      }
      return { body: valid };
    },
  },
  {
    name: 'wrong type at a path', weight: 6,
    make: (r, _t, valid) => {
      if (r.chance(0.1)) return { body: wrong(r) };
      if (r.chance(0.35)) setMain(valid, wrong(r));
      else pickSlot(r, valid)?.set(wrong(r));
      return { body: valid };
    },
  },
  {
    name: 'b64 values', weight: 4, applies: (t) => isPredictLike(t) || t.body === 'httpbody',
    make: (r, t, valid) => {
      const bad = clone(r.pick(BAD_B64));
      if (t.body === 'httpbody') {
        const hb = member(valid, 'httpBody');
        if (hb instanceof Obj) hb.entries = [...hb.entries.filter(([k]) => k !== 'data'), ['data', bad]];
        return { body: valid };
      }
      const value = r.pick<() => Node>([
        () => new Obj([['b64', bad]]),
        () => new Obj([['b64', r.pick(B64)], [r.pick(['x', 'b64', 'data', 'B64']), 1]]),
        () => new Obj([['B64', r.pick(B64)]]),
        () => new Obj([['b64', new Obj([['b64', 'AA==']])]]),
        () => new Obj([['b64', 'QUFB'.repeat(r.between(1000, 15000))]]),
        () => new Obj([['b64', r.pick(B64)], ['b64', bad]]),
      ])();
      return { body: placeAnywhere(r, valid, r.chance(0.3) ? [value] : value) };
    },
  },
  {
    name: '_bytes names', weight: 3, applies: isPredictLike,
    make: (r, _t, valid) => {
      const name = r.pick(['x_bytes', 'image_bytes', '_bytes', 'X_BYTES', 'x_bytes ', 'bytes']);
      const value = r.pick<Node>([1, 'aGVsbG8=', ['aGVsbG8='], tree({ b64: 'a' }), tree([{ b64: 'AA==' }, 'AA==']), tree([[{ b64: 'AA==' }], [{ b64: 'AA==' }, { b64: 'AA==' }]]), null, tree({ b64: 'AA==' }), [], true]);
      const named = new Obj([[name, value]]);
      if (r.chance(0.5)) named.entries.push(['x', 1]);
      const body = r.chance(0.3) ? new Obj([['inputs', named]]) : new Obj([['instances', r.chance(0.5) ? [named, clone(named)] : [named]]]);
      if (r.chance(0.5)) return { body };
      setMain(valid, member(body, 'instances') ?? named);
      return { body: valid };
    },
  },
  {
    name: 'TorchServe data', weight: 3, applies: isPt,
    make: (r, _t, valid) => {
      const inst = r.pick<() => Node>([
        () => tree({ data: null }), () => tree({ body: r.between(0, 9) }), () => tree({ data: 1, body: 2 }), () => tree({ data: 1, extra: 2 }), () => tree({ DATA: 1 }),
        () => tree({ data: { data: { data: 1 } } }), () => tree({ data: { b64: 'not base64!' } }), () => tree({ data: { b64: 'AA==' } }), () => tree({ body: { b64: 'AA==' } }),
        () => new Obj([['data', 1], ['data', 2]]), () => tree({ data: [] }), () => tree({}), () => tree({ data: 'x'.repeat(r.between(1, 5000)) }),
      ])();
      const list = member(valid, 'instances');
      if (Array.isArray(list)) list.splice(r.int(list.length + 1), r.chance(0.5) ? 1 : 0, inst);
      else setMain(valid, [inst]);
      return { body: valid };
    },
  },
  {
    name: 'columnar inputs', weight: 3, applies: isTf,
    make: (r) => {
      const inputs = r.pick<Node>([
        tree({ x: [1, 2, 3], y: [1, 2] }), tree({ x: [[1, 2], [3]] }), null, 5, 's', tree({}), [], tree([[1, 2], [3]]), tree({ x: [1], x_bytes: [{ b64: 'AA==' }, { b64: 'AA==' }] }),
        tree({ x: { b64: 'AA==' } }), tree({ b64: 'AA==' }), tree({ x: [1, '2'] }), tree({ x: [[], [1]] }), tree({ x: [true, 1] }), tree({ y: [1] }),
      ]);
      const body = new Obj([['inputs', inputs]]);
      if (r.chance(0.25)) body.entries.push(['instances', [1, 2]]);
      if (r.chance(0.25)) body.entries.push(['signature_name', r.pick<Node>([5, '', 'missing', null, 'x'.repeat(2000), 'tensorflow/serving/regress'])]);
      if (r.chance(0.2)) return { body: tree({ instances: [{ x: [1, 2] }, { x: [1] }] }) };
      if (r.chance(0.2)) return { body: tree({ instances: [{ x: 1 }, { y: 1 }] }) };
      return { body };
    },
  },
  {
    name: 'mixed instances', weight: 3, applies: (t) => isPredictLike(t) || t.body === 'tf-examples',
    make: (r, t, valid) => {
      const mixes: Node[] = [
        [1, 'a'], [[1, 2], 3], tree([{ x: 1 }, 2]), [[1, 2], [3]], [true, 1], [null], tree([{ b64: 'AA==' }, 's']), [[], [1]], [1, [1]], tree([{ x: 1 }, { x: 'a' }]),
        tree([[{ b64: 'AA==' }], ['s']]), tree([{ data: 1 }, [1]]), [[[1]], [1]], tree([{ x: [1, 2] }, { x: [[1, 2]] }]),
      ];
      const m = clone(r.pick(mixes));
      const e = mainEntry(valid);
      if (t.body === 'tf-examples' && valid instanceof Obj) valid.entries.push(['examples', m]);
      else if (e) {
        e[0] = 'instances';
        e[1] = m;
      }
      return { body: valid };
    },
  },
  { name: 'GraphStorm graphs', weight: 5, applies: isGs, make: (r, _t, valid) => ({ body: breakGraph(r, r.chance(0.3) ? breakGraph(r, valid) : valid) }) },
  {
    name: 'parameters and unknown fields', weight: 3,
    make: (r, _t, valid) => {
      if (!(valid instanceof Obj)) return { body: valid };
      const key = r.pick(['parameters', 'parameters', 'labels', 'signature_name', 'instance', 'Instances', 'extra', '']);
      const value = r.pick<Node>(['p', 3, [1], true, tree({ a: { b: { c: [1, 2] } } }), new Raw('{"t": NaN}'), tree(Object.fromEntries(Array.from({ length: 70 }, (_, i) => [`l${i}`, 'v']))), tree({ a: 1 }), tree({ team: 'x'.repeat(100) }), null, tree({ b64: 'bad!' })]);
      valid.entries.splice(r.int(valid.entries.length + 1), 0, [key, value]);
      return { body: valid };
    },
  },
  {
    name: 'explain members', weight: 3, applies: (t) => t.explain === true,
    make: (r, t, valid) => {
      if (!(valid instanceof Obj)) return { body: valid };
      valid.entries = valid.entries.filter(([k]) => k !== 'deployedModelId');
      const id = r.pick<Node>([5, null, [], tree({}), '', 'nope', t.model.toUpperCase(), new Raw(`"${t.model}\t"`), new Raw(`"a\u0001b"`), new Raw('"\\ud800"'), new Raw(`"${t.model}\\u0000"`), 'x'.repeat(5000), new Raw('NaN'), new Raw('"unterminated'), true]);
      valid.entries.splice(r.int(valid.entries.length + 1), 0, ['deployedModelId', id]);
      if (r.chance(0.3)) valid.entries.push(['explanationSpecOverride', r.pick<Node>([1, 'x', [], null, tree({}), new Raw('[NaN]')])]);
      if (r.chance(0.2)) valid.entries.push(['deployedModelId', t.model]);
      return { body: valid };
    },
  },
  {
    name: 'just over maxRequestBytes', weight: 1,
    make: (r, t) => {
      const size = MAX_REQUEST_BYTES + r.weighted([[r.between(1, 64), 6], [0, 2], [-r.between(1, 64), 2], [r.between(1000, 50_000), 1]]);
      return { body: sized(r, t, size), chunked: r.chance(0.3) };
    },
  },
  {
    name: 'large strings, keys and arrays', weight: 2,
    make: (r, _t, valid) => {
      const n = r.between(1000, 40_000);
      const value = r.pick<() => Node>([
        () => 's'.repeat(n * 4),
        () => new Obj([['k'.repeat(n * 2), 1]]),
        () => new Obj(Array.from({ length: Math.min(n, 8000) }, (_, i) => [`k${i}`, i] as [string, Node])),
        () => Array.from({ length: n }, (_, i) => i % 10),
        () => Array.from({ length: Math.min(n, 20_000) }, () => [1]),
        () => Array.from({ length: Math.min(n, 10_000) }, (_, i) => tree({ data: i })),
      ])();
      if (r.chance(0.4)) setMain(valid, value);
      else placeAnywhere(r, valid, value);
      return { body: valid };
    },
  },
];
