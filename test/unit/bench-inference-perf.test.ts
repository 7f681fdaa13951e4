// The inference-perf part of bench:llm (test/bench/llmInferencePerf.ts): its figures read from
// inference-perf's summary report, its goal and table from them; and the venv helper's choice of
// interpreter for inference-perf (test/helpers/python.ts), which refuses one older than the venv needs.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ipGoal, readSummary, renderIp, RunFigures } from '../bench/llmInferencePerf.js';
import { basePython, INFERENCE_PERF_VENV } from '../helpers/python.js';

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'predictgate-ip-test-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const quantiles = (median: number, p90: number, p99: number): Record<string, number> => ({ mean: median, min: median / 2, median, p90, p99, max: p99 * 2 });

let written = 0;

/** A summary_lifecycle_metrics.json as inference-perf 0.7 writes it (the fields the bench reads, and some it does not). */
function summary(over: { count?: number; failures?: number; ttft?: number; outputMean?: number } = {}): string {
  const file = path.join(dir, `summary-${++written}.json`);
  fs.writeFileSync(file, JSON.stringify({
    benchmark_time_seconds: 30.1,
    load_summary: { count: 120, schedule_delay: quantiles(0.0004, 0.001, 0.005) },
    successes: {
      count: over.count ?? 120,
      latency: {
        request_latency: quantiles(0.33, 0.42, 0.49),
        normalized_time_per_output_token: quantiles(0.0205, 0.021, 0.022),
        time_per_output_token: quantiles(0.0203, 0.0205, 0.021),
        time_to_first_token: quantiles(over.ttft ?? 0.0213, 0.0219, 0.0271),
        inter_token_latency: quantiles(0.0203, 0.0207, 0.0211),
      },
      throughput: { input_tokens_per_sec: 194.6, output_tokens_per_sec: 64.3, total_tokens_per_sec: 258.9, requests_per_sec: 4.01 },
      output_len: { mean: over.outputMean ?? 16.05 },
    },
    failures: { count: over.failures ?? 0, request_latency: null, prompt_tokens: { total: 0 }, by_label: {} },
  }));
  return file;
}

test("a run's figures come from inference-perf's summary report", () => {
  const r = readSummary(summary(), 'direct', 1);
  expect(r).toMatchObject({ target: 'direct', round: 1, successes: 120, failures: 0, requestsPerS: 4.01, outputTokensPerS: 64.3, outputTokensMean: 16.05 });
  expect(r.ttft).toEqual({ median: 0.0213, p90: 0.0219, p99: 0.0271 });
  expect(r.itl.median).toBe(0.0203);
  expect(r.tpot.median).toBe(0.0203);
  expect(r.latency.p99).toBe(0.49);
});

test('a report without successes is an error naming the file', () => {
  const file = path.join(dir, 'empty.json');
  fs.writeFileSync(file, '{"failures": {"count": 3}}');
  expect(() => readSummary(file, 'predictgate', 2)).toThrow(`${file}: no "successes" with a count and latencies`);
});

test('the goal is met when the gateway adds little, fails nothing and sends the same tokens', () => {
  const runs: RunFigures[] = [
    readSummary(summary({ ttft: 0.0210 }), 'direct', 1),
    readSummary(summary({ ttft: 0.0215 }), 'predictgate', 1),
    readSummary(summary({ ttft: 0.0212 }), 'predictgate', 2),
    readSummary(summary({ ttft: 0.0211 }), 'direct', 2),
  ];
  const goal = ipGoal(runs);
  expect(goal.met).toBe(true);
  expect(goal.line).toContain('no failed call through the gateway (0)');
  expect(goal.line).toContain('time to first token p50 added ≤ 1 ms (+0.50, +0.10 ms)');
  expect(goal.line).toMatch(/\*\*met\*\*\.$/);
  const table = renderIp('header', runs, goal, []);
  // Direct's rows first, each target's rounds in order.
  expect(table.split('\n').filter((l) => /^\| (direct|predictgate) \|/.test(l)).map((l) => l.split(' | ').slice(0, 2).join(' '))).toEqual(['| direct 1', '| direct 2', '| predictgate 1', '| predictgate 2']);
  expect(table).toContain('| direct | 1 | 120 / 0 | 21.0 / 21.9 / 27.1 ms | 20.30 / 20.70 / 21.10 ms | 20.30 ms | 330 / 490 ms | 4.01 | 64.3 (16.05) |');
});

test.each([
  ['a failed call through the gateway', { failures: 1 }, 'no failed call through the gateway (1)'],
  ['other output tokens', { outputMean: 15.5 }, 'difference of the means per round: -0.55'],
  ['a first token 2 ms later', { ttft: 0.0233 }, '(+2.00 ms)'],
])('the goal is not met with %s', (_name, gateway, says) => {
  const goal = ipGoal([readSummary(summary({ ttft: 0.0213 }), 'direct', 1), readSummary(summary({ ttft: 0.0213, ...gateway }), 'predictgate', 1)]);
  expect(goal.met).toBe(false);
  expect(goal.line).toContain(says);
  expect(goal.line).toMatch(/\*\*not met\*\*\.$/);
});

/** An interpreter that says it is Python `version` (what basePython asks it). */
function fakePython(version: string): string {
  const file = path.join(dir, `python-${version}`);
  fs.writeFileSync(file, `#!/bin/sh\necho /opt/fake/bin/python${version}\necho ${version}\n`, { mode: 0o755 });
  return file;
}

test('inference-perf is given Python 3.12 or newer, and an older interpreter is refused by name', () => {
  expect(basePython({ ...process.env, PREDICTGATE_PYTHON: fakePython('3.12.4') }, INFERENCE_PERF_VENV)).toEqual({ executable: '/opt/fake/bin/python3.12.4', version: '3.12.4' });
  expect(basePython({ ...process.env, PREDICTGATE_PYTHON: fakePython('3.13.0') }, INFERENCE_PERF_VENV).version).toBe('3.13.0');
  const old = fakePython('3.11.7');
  expect(() => basePython({ ...process.env, PREDICTGATE_PYTHON: old }, INFERENCE_PERF_VENV)).toThrow(`inference-perf needs Python 3.12 or newer (its requirements file pins wheels for 3.12) and none was found (${old}: Python 3.11.7)`);
});
