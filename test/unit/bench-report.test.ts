// The bench's verdicts from figures (test/bench/report.ts) and where it writes its table
// (test/bench/docsBlock.ts): each goal met or missed with its figure, the A/B lines of a run with a
// second gateway, and the marked block of docs/performance.md replaced without touching the rest.
import { PayloadName, TargetName } from '../bench/config.js';
import { Payload, median } from '../bench/payloads.js';
import { Row, evaluateGoals, renderComparison, renderGoals } from '../bench/report.js';
import { replaceBlock } from '../bench/docsBlock.js';

const payload = (name: PayloadName, parseUs: number): Payload => ({ name, model: 'echo', body: Buffer.alloc(0), parseUs });

function row(payload: PayloadName, target: TargetName, rps: number[], cpu: number[], rss = 100, phase: 'main' | 'rss' = 'main'): Row {
  const byRound = (xs: number[]) => Object.fromEntries(xs.map((x, i) => [i + 1, x]));
  return {
    phase, target, payload, connections: phase === 'main' ? 32 : 64, rounds: rps.length,
    rps: median(rps), rpsByRound: byRound(rps), cpuByRound: byRound(cpu), p50Ms: 1, p99Ms: 2,
    cpuUsPerReq: median(cpu), upstreamCpuUsPerReq: 10, peakRssMb: rss, errors: 0, errorDetail: '',
  };
}

test('each goal is met or missed with its figure', () => {
  const payloads = [payload('small', 1), payload('base64', 1000)];
  const rows = [
    row('small', 'predict', [900, 950, 1000], [50, 50, 50]),
    row('small', 'rawPredict', [940, 940, 940], [40, 40, 40]),
    row('small', 'bare', [1000, 1000, 1000], [30, 30, 30]),
    row('base64', 'rawPredict', [100, 100, 100], [900, 900, 900]),
    row('base64', 'bare', [100, 100, 100], [1000, 1000, 1000]),
    row('base64', 'predict', [80, 80, 80], [2600, 2600, 2600]),
  ];
  const rss = [
    row('small', 'predict', [1], [1], 150, 'rss'),
    row('small', 'rawPredict', [1], [1], 170, 'rss'),
    row('small', 'bare', [1], [1], 100, 'rss'),
    row('base64', 'predict', [1], [1], 160, 'rss'),
    row('base64', 'bare', [1], [1], 100, 'rss'),
  ];
  const goals = evaluateGoals(rows, rss, payloads);
  expect(renderGoals(goals, payloads).split('\n')).toEqual([
    '- small JSON: predict/bare req/s 0.95 ≥ 0.90 (within each round: 0.90, 0.95, 1.00; their median 0.95) **PASS** · ' +
      'rawPredict/bare req/s 0.94 ≥ 0.95 (within each round: 0.94, 0.94, 0.94; their median 0.94) **MISSED** · ' +
      'gateway RSS 170.0 MB (rawPredict) / bare 100.0 MB = 1.70x ≤ 1.60x at 64 connections **MISSED**',
    '- ~1 MB base64: rawPredict/bare req/s 1.00 ≥ 0.95 (within each round: 1.00, 1.00, 1.00; their median 1.00) **PASS** · ' +
      'predict CPU 2600 µs ≤ bare 1000 + 1.5×1000 = 2500 µs **MISSED** · ' +
      'gateway RSS 160.0 MB (predict) / bare 100.0 MB = 1.60x ≤ 1.60x at 64 connections **PASS**',
    '- no errors: no socket errors or non-2xx answers on any target **PASS**',
  ]);
});

test('a payload outside the CPU goal gets its comparison as information; a run without the memory round says so', () => {
  const payloads = [payload('graphstorm', 100)];
  const rows = [row('graphstorm', 'predict', [10], [300]), row('graphstorm', 'rawPredict', [10], [100]), row('graphstorm', 'bare', [10], [100])];
  expect(renderGoals(evaluateGoals(rows, [], payloads), payloads).split('\n')).toEqual([
    '- GraphStorm 200 nodes/400 edges: rawPredict/bare req/s 1.00 ≥ 0.95 **PASS** · ' +
      'predict CPU 300 µs ≤ bare 100 + 1.5×100 = 250 µs *over* (information, not a goal)',
    "- gateway RSS ≤ 1.6× bare's: (memory round not run) **SKIP**",
    '- no errors: no socket errors or non-2xx answers on any target **PASS**',
  ]);
});

test('an A/B run compares the second gateway with the first, round by round', () => {
  const payloads = [payload('tensor', 1000)];
  const rows = [row('tensor', 'predict', [50, 60, 40], [4000, 5000, 4500], 120), row('tensor', 'predict-b', [55, 60, 44], [3000, 4500, 4050], 150)];
  const rss = [row('tensor', 'predict', [1], [1], 130, 'rss'), row('tensor', 'predict-b', [1], [1], 169, 'rss')];
  expect(renderComparison(rows, rss, payloads)).toBe(
    '- ~400 KB nested lists, predict: CPU µs/req A 4500, B 4050, B/A 0.90 (within each round: 0.75, 0.90, 0.90; their median 0.90) · ' +
      'req/s B/A 1.10 (within each round: 1.10, 1.00, 1.10; their median 1.10) · peak RSS A 120.0, B 150.0 MB (B/A 1.25); ' +
      'at 64 connections A 130.0, B 169.0 MB (B/A 1.30)',
  );
});

test('the bench replaces only its marked block, or appends one to a file without it', () => {
  const doc = '# Performance\n\nprose\n\n<!-- bench-table:start -->\nold\n<!-- bench-table:end -->\n\nmore prose\n';
  expect(replaceBlock(doc, 'bench-table', 'new\ntable\n')).toBe(
    '# Performance\n\nprose\n\n<!-- bench-table:start -->\nnew\ntable\n<!-- bench-table:end -->\n\nmore prose\n',
  );
  expect(replaceBlock('# Performance\n', 'controller-bench', 'x')).toBe(
    '# Performance\n\n<!-- controller-bench:start -->\nx\n<!-- controller-bench:end -->\n',
  );
  expect(() => replaceBlock('<!-- bench-table:end -->\n<!-- bench-table:start -->', 'bench-table', 'x')).toThrow(
    'bench-table: the markers <!-- bench-table:start --> and <!-- bench-table:end --> must both be there, in that order',
  );
});
