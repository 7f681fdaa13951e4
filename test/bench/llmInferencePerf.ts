// The inference-perf part of `npm run bench:llm` (BENCH_LLM_PARTS=inference-perf): the Kubernetes
// project's benchmark tool for model servers (kubernetes-sigs/inference-perf, PyPI, in a venv of its
// own, test/python/inference-perf-requirements.txt) against the gateway and against the model
// directly, in turn over rounds. One `predictgate local` serves the tiny-llm sample; inference-perf
// calls it as it calls a vLLM server: streamed /v1/completions at the server's root, random prompts
// and lengths from a word-level tokenizer written offline (test/python/inference_perf_tokenizer.py),
// the Endpoint chosen by the Host header. Its figures, from its own summary report: time to first
// token, between tokens and per output token, request latency, throughput, failures. Renders the
// table and the goal line; writes the generative-inference-perf block.

import fs from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { waitQuiet } from './cell.js';
import { measuredOn, writeBlock } from './docsBlock.js';
import {
  allDefault, docsSkipReason, f, findModelProcesses, loadAverage, log, PartContext, readSetting, ROOT, sampleDocs, signed, SettingsTable, stopTree, waitExit,
} from './llmShared.js';
import { freePort, httpCall, spawnPinned, waitReady } from './procs.js';
import { describeRuntime, withRuntime } from './runtime.js';
import { ensureVenv, INFERENCE_PERF_VENV, PYTHON_DIR, run } from '../helpers/python.js';

/** The part's settings (environment variables): also the docs' settings table. */
export const IP_SETTINGS = {
  BENCH_LLM_IP_RATE: { def: 4, help: 'Calls a second that inference-perf sends (its `constant` load).' },
  BENCH_LLM_IP_SECONDS: { def: 30, help: 'Seconds of each run (one per target and round).' },
  BENCH_LLM_IP_ROUNDS: { def: 2, help: 'Rounds; each runs every target once, the first target swapped each round.' },
  BENCH_LLM_IP_INTERVAL_MS: { def: 20, help: '`TINY_LLM_TOKEN_INTERVAL_MS` of the model.' },
} satisfies SettingsTable;
type IpSetting = keyof typeof IP_SETTINGS;
const setting = (name: IpSetting): number => readSetting(IP_SETTINGS, name);

const MODEL = 'tiny-llm';
const HOST = `${MODEL}.default.predictgate.internal`;
/** inference-perf's random prompts and answers, in tokens of the bench's tokenizer. */
const INPUT = { min: 10, max: 100, mean: 50, std_dev: 10 };
const OUTPUT = { min: 8, max: 24, mean: 16, std_dev: 4 };
/** inference-perf's random source, fixed: every run sends the same prompts at the same times. */
const SEED = 20261204;
/** Goals for what the gateway adds (the proxies part's, for the same model pace). */
const GOALS = { ttftP50: 1, itlP50: 0.2 };

type TargetName = 'direct' | 'predictgate';
const TARGETS: readonly TargetName[] = ['direct', 'predictgate'];

interface Target {
  name: TargetName;
  baseUrl: string;
  headers: Record<string, string>;
}

/** inference-perf's quantiles of one figure, in seconds. */
interface Quantiles {
  median: number;
  p90: number;
  p99: number;
}

/** One run's figures, from inference-perf's summary_lifecycle_metrics.json. */
export interface RunFigures {
  target: TargetName;
  round: number;
  successes: number;
  failures: number;
  ttft: Quantiles;
  itl: Quantiles;
  tpot: Quantiles;
  latency: Quantiles;
  requestsPerS: number;
  outputTokensPerS: number;
  outputTokensMean: number;
}

/** Reads inference-perf's summary report (its field names as in inference-perf 0.7). */
export function readSummary(file: string, target: TargetName, round: number): RunFigures {
  const d = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, any>;
  const s = d.successes as Record<string, any> | undefined;
  if (!s || typeof s.count !== 'number' || !s.latency) throw new Error(`${file}: no "successes" with a count and latencies (is inference-perf the version the requirements pin?)`);
  const q = (name: string): Quantiles => {
    const x = s.latency[name] as Record<string, number> | null | undefined;
    return { median: x?.median ?? NaN, p90: x?.p90 ?? NaN, p99: x?.p99 ?? NaN };
  };
  return {
    target, round,
    successes: s.count,
    failures: (d.failures as { count?: number } | undefined)?.count ?? NaN,
    ttft: q('time_to_first_token'),
    itl: q('inter_token_latency'),
    tpot: q('time_per_output_token'),
    latency: q('request_latency'),
    requestsPerS: s.throughput?.requests_per_sec ?? NaN,
    outputTokensPerS: s.throughput?.output_tokens_per_sec ?? NaN,
    outputTokensMean: s.output_len?.mean ?? NaN,
  };
}

/** inference-perf's configuration of one run (docs/config.md of inference-perf). */
function config(t: Target, rate: number, seconds: number, tokenizer: string, reportDir: string): string {
  return stringify({
    load: { type: 'constant', stages: [{ rate, duration: seconds }], num_workers: 1, base_seed: SEED, request_timeout: 60 },
    api: { type: 'completion', streaming: true, headers: t.headers },
    server: { type: 'vllm', model_name: MODEL, base_url: t.baseUrl, ignore_eos: true },
    tokenizer: { pretrained_model_name_or_path: tokenizer },
    data: { type: 'random', input_distribution: INPUT, output_distribution: OUTPUT },
    report: { request_lifecycle: { summary: true, per_stage: false, per_request: false } },
    storage: { local_storage: { path: reportDir } },
  });
}

/** Nothing fetched from the Hugging Face Hub; no user site-packages. */
const offline = (env: NodeJS.ProcessEnv): NodeJS.ProcessEnv => ({ ...env, HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1', PYTHONNOUSERSITE: '1', HF_HUB_DISABLE_TELEMETRY: '1' });

/** Writes the tokenizer into `dir` with the venv's transformers. */
async function writeTokenizer(python: string, dir: string): Promise<void> {
  const r = await run(python, [path.join(PYTHON_DIR, 'inference_perf_tokenizer.py'), dir], offline(process.env), 120_000);
  if (r.code !== 0) throw new Error(`writing the tokenizer into ${dir} failed (${r.code ?? r.signal}):\n${r.output.trimEnd()}`);
}

async function versionOf(python: string): Promise<string> {
  const r = await run(python, ['-c', "import importlib.metadata as m; print(m.version('inference-perf'))"], process.env, 60_000);
  return r.code === 0 ? r.output.trim().split('\n').pop() ?? '?' : '?';
}

/** One inference-perf run against `t`, bounded; its figures. */
async function runOnce(bin: string, t: Target, round: number, tokenizer: string, c: PartContext, rate: number, seconds: number): Promise<RunFigures> {
  const name = `inference-perf-${t.name}-${round}`;
  const dir = path.join(c.tmp, name);
  fs.mkdirSync(dir);
  const cfg = path.join(dir, 'config.yml');
  fs.writeFileSync(cfg, config(t, rate, seconds, tokenizer, path.join(dir, 'report')));
  const child = spawnPinned(name, bin, ['--config_file', cfg], { cpu: c.loadCpu, env: offline(process.env), cwd: dir, logDir: c.logDir });
  await waitExit(child, name, seconds + 180);
  return readSummary(path.join(dir, 'report', 'summary_lifecycle_metrics.json'), t.name, round);
}

const ms = (s: number, digits = 1): string => f(s * 1000, digits);
const q3 = (x: Quantiles, digits = 1): string => `${ms(x.median, digits)} / ${ms(x.p90, digits)} / ${ms(x.p99, digits)} ms`;

export interface IpGoal {
  met: boolean;
  line: string;
}

/** The goal: no failure through the gateway, the same tokens as direct, and the added time within the proxies part's goals in every round. */
export function ipGoal(runs: RunFigures[]): IpGoal {
  const rounds = [...new Set(runs.map((r) => r.round))];
  const of = (t: TargetName, round: number): RunFigures | undefined => runs.find((r) => r.target === t && r.round === round);
  const added = rounds.map((round) => {
    const d = of('direct', round);
    const g = of('predictgate', round);
    return { ttft: (g?.ttft.median ?? NaN) - (d?.ttft.median ?? NaN), itl: (g?.itl.median ?? NaN) - (d?.itl.median ?? NaN), tokens: (g?.outputTokensMean ?? NaN) - (d?.outputTokensMean ?? NaN) };
  });
  const failures = runs.filter((r) => r.target === 'predictgate').reduce((n, r) => n + r.failures, 0);
  const ttftOk = added.every((a) => a.ttft * 1000 <= GOALS.ttftP50);
  const itlOk = added.every((a) => a.itl * 1000 <= GOALS.itlP50);
  const tokensOk = added.every((a) => a.tokens === 0);
  const met = failures === 0 && ttftOk && itlOk && tokensOk;
  const line =
    `Goal: no failed call through the gateway (${failures}), the same output tokens as the direct call (difference of the means per round: ${added.map((a) => f(a.tokens, 2)).join(', ')}), ` +
    `and in every round time to first token p50 added ≤ ${GOALS.ttftP50} ms (${added.map((a) => signed(a.ttft * 1000, 2)).join(', ')} ms) and time between tokens p50 added ≤ ${GOALS.itlP50} ms ` +
    `(${added.map((a) => signed(a.itl * 1000, 3)).join(', ')} ms): **${met ? 'met' : 'not met'}**.`;
  return { met, line };
}

export function renderIp(header: string, runs: RunFigures[], goal: IpGoal, notes: string[]): string {
  const rows = [
    '| target | round | calls ok / failed | time to first token p50 / p90 / p99 | between tokens p50 / p90 / p99 | per output token p50 | request latency p50 / p99 | calls/s | output tokens/s (mean per call) |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...[...runs].sort((a, b) => TARGETS.indexOf(a.target) - TARGETS.indexOf(b.target) || a.round - b.round).map((r) =>
      `| ${r.target} | ${r.round} | ${r.successes} / ${r.failures} | ${q3(r.ttft)} | ${q3(r.itl, 2)} | ${ms(r.tpot.median, 2)} ms | ${ms(r.latency.median, 0)} / ${ms(r.latency.p99, 0)} ms | ${f(r.requestsPerS)} | ${f(r.outputTokensPerS, 1)} (${f(r.outputTokensMean, 2)}) |`),
  ];
  return [header, '', rows.join('\n'), '', goal.line, ...(notes.length > 0 ? ['', ...notes.map((n) => `Note: ${n}.`)] : [])].join('\n');
}

/** The part: prints (and writes) its table; true when the goal was missed. */
export async function runInferencePerf(c: PartContext): Promise<boolean> {
  const t0 = Date.now();
  const rate = Math.max(0.1, setting('BENCH_LLM_IP_RATE'));
  const seconds = Math.max(1, Math.floor(setting('BENCH_LLM_IP_SECONDS')));
  const rounds = Math.max(1, Math.floor(setting('BENCH_LLM_IP_ROUNDS')));
  const intervalMs = Math.max(1, setting('BENCH_LLM_IP_INTERVAL_MS'));
  const python = await ensureVenv(INFERENCE_PERF_VENV, log);
  const bin = path.join(path.dirname(python), 'inference-perf');
  const version = await versionOf(python);
  const tokenizer = path.join(c.tmp, 'inference-perf-tokenizer');
  await writeTokenizer(python, tokenizer);

  const folder = path.join(c.tmp, 'inference-perf-manifests');
  fs.mkdirSync(folder);
  const env = { TINY_LLM_TOKEN_INTERVAL_MS: String(intervalMs), TINY_LLM_MAX_RUNNING: '256', NODE_OPTIONS: '', GLIBC_TUNABLES: '' };
  fs.writeFileSync(path.join(folder, `${MODEL}.yaml`), `# predictgate bench:llm inference-perf: generated by test/bench/llmInferencePerf.ts from crds/samples/tiny-llm.yaml\n${sampleDocs(MODEL, env).map((d) => stringify(d)).join('---\n')}`);
  const port = await freePort();
  const gw = spawnPinned('gateway-inference-perf', process.execPath, [...c.nodeFlags, path.join(ROOT, 'bin', 'predictgate.js'), 'local', folder], {
    cpu: c.serverCpu,
    env: withRuntime({ ...process.env, PORT: String(port), LOG_LEVEL: 'warn' }, c.runtime),
    cwd: ROOT,
    logDir: c.logDir,
  });
  const probe = Buffer.from(JSON.stringify({ model: MODEL, prompt: 'ready?', max_tokens: 1 }));
  await waitReady(`the gateway's root /v1/completions for Host ${HOST}`, () => httpCall(`http://127.0.0.1:${port}/v1/completions`, 'POST', probe, 5000, { Host: HOST }), [gw], 60_000);
  const [model] = findModelProcesses(gw.pid, MODEL);
  if (!model) throw new Error(`could not find the gateway's ${MODEL} model process (AIP_DEPLOYED_MODEL_ID=${MODEL})`);
  const targets: Target[] = [
    { name: 'direct', baseUrl: `http://127.0.0.1:${model.port}`, headers: {} },
    { name: 'predictgate', baseUrl: `http://127.0.0.1:${port}`, headers: { Host: HOST } },
  ];
  const pids = (): number[] => [gw.pid, model.pid];
  const loads = { start: loadAverage(), end: '' };
  log(`inference-perf ${version}: gateway :${port}, model :${model.port}; ${rounds} × ${targets.length} targets × ${seconds} s at ${rate} calls/s`);
  const runs: RunFigures[] = [];
  for (let round = 1; round <= rounds; round++) {
    for (const t of round % 2 === 1 ? targets : [...targets].reverse()) {
      await waitQuiet(pids);
      const r = await runOnce(bin, t, round, tokenizer, c, rate, seconds);
      if (gw.exited) throw new Error(`the gateway exited (${gw.exited.code ?? gw.exited.signal}); log ${gw.logFile}`);
      runs.push(r);
      log(`[inference-perf round ${round}] ${t.name.padEnd(11)} ${r.successes} ok, ${r.failures} failed, TTFT p50 ${ms(r.ttft.median, 2)} p99 ${ms(r.ttft.p99, 2)} ms, between tokens p50 ${ms(r.itl.median, 3)} ms, ${f(r.requestsPerS)} calls/s`);
    }
  }
  loads.end = loadAverage();
  await stopTree(gw);
  const goal = ipGoal(runs);
  const runS = (Date.now() - t0) / 1000;
  const header =
    `Measured ${measuredOn(ROOT, c.started)} with inference-perf ${version}; load average ${loads.start} at the start, ${loads.end} at the end. inference-perf (1 worker) on CPU ${c.loadCpu}, ` +
    `the gateway and the model on CPU ${c.serverCpu}; the gateway with ${describeRuntime(c.runtime)}${c.nodeFlags.length > 0 ? `, node flags ${c.nodeFlags.join(' ')}` : ''}. ` +
    `Each run: ${rate} calls a second for ${seconds} s, streamed /v1/completions with \`ignore_eos\`, prompts of ${INPUT.min}–${INPUT.max} tokens (mean ${INPUT.mean}) and answers of ${OUTPUT.min}–${OUTPUT.max} (mean ${OUTPUT.mean}), ` +
    `the same seed for every run; the model sends a token every ${intervalMs} ms. The gateway is called at its root with \`Host: ${HOST}\`. ${rounds === 1 ? '1 round' : `${rounds} rounds, the first target swapped each round`}. Run time ${f(runS / 60, 1)} min.`;
  const notes = runs.filter((r) => r.failures > 0).map((r) => `${r.target}, round ${r.round}: ${r.failures} failed calls (their errors are in the run's log under ${c.logDir})`);
  const text = renderIp(header, runs, goal, notes);
  process.stdout.write(`## predictgate bench:llm: inference-perf\n\n${text}\n`);
  const why = docsSkipReason(allDefault(IP_SETTINGS) && c.sharedDefault, c.nodeFlags, c.imageNode);
  if (why === null) log(`inference-perf table written to ${writeBlock(ROOT, 'generative-inference-perf', text)}`);
  else log(`docs/performance.md left as it is for the inference-perf table: ${why}`);
  return !goal.met;
}
