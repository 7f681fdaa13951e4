// The documents hold together: every relative link in the README, CONTRIBUTING.md and docs/ names a
// file of the repository (and a heading that exists, when it has an anchor), the LICENSE is the
// license package.json names, the README's performance summary quotes the bench table in
// docs/performance.md, and each benchmark has its block there. Also the markdown reading they use.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { ROOT } from '../helpers/local.js';
import { consoleExamples, fencedBlocks, headingAnchors, relativeLinks } from '../helpers/markdown.js';
import { WALKTHROUGH } from '../node/walkthrough.js';

const DOCUMENTS = ['README.md', 'CONTRIBUTING.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const read = (file: string): string => readFileSync(join(ROOT, file), 'utf8');

test.each(DOCUMENTS)('every relative link in %s resolves inside the repository', (doc) => {
  const md = read(doc);
  const broken: string[] = [];
  for (const { target, line } of relativeLinks(md)) {
    const [path, anchor] = target.split('#');
    const file = path === '' ? join(ROOT, doc) : resolve(ROOT, dirname(doc), decodeURIComponent(path));
    const inside = !relative(ROOT, file).startsWith('..');
    if (!inside || !existsSync(file)) {
      broken.push(`${doc}:${line}: ${target} (no such file in the repository)`);
      continue;
    }
    if (anchor !== undefined && file.endsWith('.md') && !headingAnchors(readFileSync(file, 'utf8')).has(anchor)) {
      broken.push(`${doc}:${line}: ${target} (no heading with that anchor)`);
    }
  }
  expect(broken).toEqual([]);
});

test('LICENSE is the Apache License 2.0 that package.json names', () => {
  expect((JSON.parse(read('package.json')) as { license: string }).license).toBe('Apache-2.0');
  const text = read('LICENSE');
  expect(text.split('\n').slice(1, 3).map((l) => l.trim())).toEqual(['Apache License', 'Version 2.0, January 2004']);
  expect(text).toContain('END OF TERMS AND CONDITIONS');
});

/** The rows of the markdown table that starts with a `| payload | target |` header line, by column name. */
function benchRows(md: string): Record<string, string>[] {
  const block = /<!-- bench-table:start -->([\s\S]*?)<!-- bench-table:end -->/.exec(md);
  if (!block) throw new Error('docs/performance.md has no bench-table markers');
  const lines = block[1].split('\n');
  const head = lines.findIndex((l) => /^\|\s*payload\s*\|\s*target\s*\|/.test(l));
  if (head < 0) throw new Error('the bench table has no "| payload | target |" header');
  const cells = (l: string): string[] => l.split('|').slice(1, -1).map((c) => c.trim());
  const names = cells(lines[head]);
  const rows: Record<string, string>[] = [];
  for (const l of lines.slice(head + 2)) {
    if (!l.startsWith('|')) break;
    const c = cells(l);
    rows.push(Object.fromEntries(names.map((n, i) => [n, c[i]])));
  }
  return rows;
}

test('the README performance summary quotes the bench table of docs/performance.md', () => {
  const summary = /<!-- bench-summary:start -->\n([\s\S]*?)\n<!-- bench-summary:end -->/.exec(read('README.md'));
  if (!summary) throw new Error('README has no bench-summary markers');
  const rows = benchRows(read('docs/performance.md'));
  const lines = summary[1].split('\n');
  const targets: Record<string, string> = { predict: 'predict', rawPredict: 'rawPredict', nginx: 'nginx', 'bare node:http proxy': 'bare' };
  const cells = (l: string): string[] => l.split('|').slice(1, -1).map((c) => c.trim());
  const columns = cells(lines[0]).slice(1);
  const quoted: string[] = [];
  const found: string[] = [];
  for (const l of lines.slice(2)) {
    const [payload, ...values] = cells(l);
    values.forEach((v, i) => {
      const target = targets[columns[i]];
      const row = rows.find((r) => r.payload.startsWith(payload) && r.target === target);
      const ratio = /\(([\d.]+x)\)/.exec(row?.['req/s'] ?? '')?.[1];
      const cpu = /^(\d+)/.exec(row?.['CPU µs/req'] ?? '')?.[1];
      quoted.push(`${payload} / ${columns[i]}: ${v}`);
      found.push(`${payload} / ${columns[i]}: ${ratio}, ${cpu} µs`);
    });
  }
  expect(quoted.length).toBeGreaterThan(0);
  expect(quoted).toEqual(found);
});

test('each benchmark has one block in docs/performance.md to write its results into', () => {
  const md = read('docs/performance.md');
  for (const name of ['bench-table', 'controller-bench', 'autoscale-bench']) {
    expect([name, md.split(`<!-- ${name}:start -->`).length - 1, md.split(`<!-- ${name}:end -->`).length - 1]).toEqual([name, 1, 1]);
  }
});

test('a console block splits into commands (continuation lines and here-documents included) and their output', () => {
  const md = [
    'text [a](#x) `[b](nope.md)`',
    '```console',
    "$ curl -s localhost:8080/a \\",
    "    -d '{}'",
    '{"a":1}',
    '',
    "$ curl -s localhost:8080/b -d @- <<'EOF'",
    '{"b":',
    ' 2}',
    'EOF',
    'HTTP/1.1 200 OK',
    '',
    'body',
    '```',
    '# X',
  ].join('\n');
  const [block] = fencedBlocks(md);
  expect(block).toEqual({ lang: 'console', text: expect.any(String), line: 2 });
  expect(consoleExamples(block)).toEqual([
    { line: 3, command: "curl -s localhost:8080/a \\\n    -d '{}'", output: '{"a":1}' },
    { line: 7, command: "curl -s localhost:8080/b -d @- <<'EOF'\n{\"b\":\n 2}\nEOF", output: 'HTTP/1.1 200 OK\n\nbody' },
  ]);
  expect(relativeLinks(md)).toEqual([{ target: '#x', line: 1 }]);
  expect([...headingAnchors('# Resources: DeployedModel and Endpoint\n## `predict`\n## predict\n')]).toEqual(['resources-deployedmodel-and-endpoint', 'predict', 'predict-1']);
});

test('the README walkthrough on a real node is the sequence the node suite runs', () => {
  const block = fencedBlocks(read('README.md')).find((b) => b.lang === 'sh' && b.text.startsWith('npm run cluster:up -- --node'));
  expect(block?.text.split('\n').filter(Boolean)).toEqual(WALKTHROUGH.flatMap((s) => [s.command, ...(s.output === undefined ? [] : [`# ${s.output}`])]));
});
