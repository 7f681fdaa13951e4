// Dependencies point down: every import in src/ that leaves its top-level folder (or file) goes to a
// lower layer. The layers, lowest first, are listed here; a new folder must be placed in them.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { ROOT } from '../helpers/local.js';

const LAYERS: string[][] = [
  ['log', 'errors', 'timeout', 'backoff', 'api'],
  ['config', 'payload', 'metrics', 'kube'],
  ['workload', 'models'],
  ['store'],
  ['gateway'],
  ['autoscale'],
  ['controller'],
  ['local'],
  ['help'],
  ['cli'],
];
const rank = new Map(LAYERS.flatMap((names, i) => names.map((n) => [n, i] as const)));

/** The top-level folder or file (without .ts/.js) of a path under src/. */
const topOf = (path: string): string => relative(join(ROOT, 'src'), path).split('/')[0].replace(/\.(ts|js)$/, '');

function* sources(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* sources(path);
    else if (entry.name.endsWith('.ts')) yield path;
  }
}

test('every top-level folder and file of src/ has a layer', () => {
  const tops = new Set([...sources(join(ROOT, 'src'))].map(topOf));
  expect([...tops].filter((t) => !rank.has(t))).toEqual([]);
});

test('no import in src/ goes to a higher layer, or across one', () => {
  const upward: string[] = [];
  for (const file of sources(join(ROOT, 'src'))) {
    const from = topOf(file);
    for (const m of readFileSync(file, 'utf8').matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)) {
      const to = topOf(normalize(join(dirname(file), m[1])));
      if (to !== from && !(rank.get(to)! < rank.get(from)!)) upward.push(`${relative(ROOT, file)} imports ${m[1]} (${from} -> ${to})`);
    }
  }
  expect(upward).toEqual([]);
});
