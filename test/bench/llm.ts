// `npm run bench:llm`, its proxies part (and the start of every part): streamed chat/completions
// (server-sent events) through predictgate against the direct call to the model and nginx
// (`proxy_buffering off`, HTTP/1.1 keep-alive upstream), side by side in one run. predictgate runs
// as `predictgate local` (a process, with the runtime settings the image ships) over a folder with
// the tiny-llm sample manifest (crds/samples/tiny-llm.yaml, its pacing set in containerSpec.env), a
// second copy of it for the held streams, and the instrumented model sseProbe.ts; the gateway's model processes are the ones every target calls (direct and nginx
// too). A load generator of its own (llmLoad.ts) runs pinned to BENCH_LOAD_CPU, every server on
// BENCH_SERVER_CPU. Figures: time to first token and between tokens added by each proxy, 2,000
// streams held (errors, RSS against idle, CPU per event), and how fast a client's disconnect reaches
// the model. Prints a table; a run with the defaults writes it into docs/performance.md
// (generative-bench markers; BENCH_WRITE_DOCS=1 writes any run's, =0 none). BENCH_STRICT=1 exits 1
// when a goal is missed; BENCH_GATEWAY_NODE_FLAGS adds node flags to the gateway (an experiment, e.g.
// --cpu-prof). Settings: see SETTINGS below and docs/performance.md. BENCH_LLM_PARTS picks the parts:
// `proxies` (this table), `picks` (load-aware picks against least-request, llmPicks.ts) and
// `inference-perf` (the Kubernetes project's benchmark tool, llmInferencePerf.ts); all by default.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { measureForeignLoad, NOISY_PCT, waitQuiet } from './cell.js';
import { measuredOn, writeBlock } from './docsBlock.js';
import type { LoadConfig, LoadResult } from './llmLoad.js';
import { runInferencePerf } from './llmInferencePerf.js';
import { runPicks } from './llmPicks.js';
import {
  allDefault, chatBody, copyLoadGenerator, docsSkipReason, f, findModelProcesses, loadAverage, log, PartContext, readSetting, ROOT, runLoad, sampleDocs, signed, stopTree,
} from './llmShared.js';
import { percentile } from '../helpers/load.js';
import { startNginx } from './nginx.js';
import { cpusAllowed, readCmdline } from './procfs.js';
import { Child, cleanup, freePort, httpCall, installCleanupHandlers, isStopping, logTail, makeTempDir, pinSelf, sleep, spawnPinned, waitReady, whichBinary } from './procs.js';
import { describeRuntime, imageNodeMajor, shippedRuntime, withRuntime } from './runtime.js';

/** The settings (environment variables), their defaults and meaning: also the docs' settings table. */
const SETTINGS = {
  BENCH_LLM_CONCURRENCY: { def: 16, help: 'Streams at once in the latency cells.' },
  BENCH_LLM_INTERVAL_MS: { def: 20, help: 'TINY_LLM_TOKEN_INTERVAL_MS of the latency cells\' model.' },
  BENCH_LLM_MAX_TOKENS: { def: 32, help: 'max_tokens of each stream of the latency cells.' },
  BENCH_LLM_SECONDS: { def: 8, help: 'Seconds of each latency cell (one per target and round).' },
  BENCH_LLM_ROUNDS: { def: 3, help: 'Rounds of latency cells; the target order rotates each round.' },
  BENCH_LLM_HOLD_STREAMS: { def: 2000, help: 'Streams held open at once per target.' },
  BENCH_LLM_HOLD_INTERVAL_MS: { def: 500, help: 'TINY_LLM_TOKEN_INTERVAL_MS of the held streams\' model.' },
  BENCH_LLM_HOLD_SECONDS: { def: 15, help: 'The window, once every stream has its first token, in which CPU and events are counted.' },
  BENCH_LLM_SOURCES: { def: 8, help: 'Loopback addresses (127.0.0.1 to 127.0.0.N) the held streams come from, in turn.' },
  BENCH_LLM_ABORT_SECONDS: { def: 5, help: 'Seconds of each disconnect cell (16 streams at once, each closed by the client after 2 tokens).' },
  BENCH_LOAD_CPU: { def: 0, help: 'The CPU of the load generator and of the bench.' },
  BENCH_SERVER_CPU: { def: 1, help: 'The CPU of the model processes, nginx and the gateway.' },
} as const;
type SettingName = keyof typeof SETTINGS;
const setting = (name: SettingName): number => readSetting(SETTINGS, name);

/** The parts of the bench (BENCH_LLM_PARTS, a comma list; every one by default). */
const PARTS = ['proxies', 'picks', 'inference-perf'] as const;
type Part = (typeof PARTS)[number];
function readParts(): Set<Part> {
  const raw = (process.env.BENCH_LLM_PARTS ?? '').split(',').map((x) => x.trim()).filter((x) => x !== '');
  const unknown = raw.filter((x) => !(PARTS as readonly string[]).includes(x));
  if (unknown.length > 0) throw new Error(`BENCH_LLM_PARTS: unknown part(s) ${unknown.join(', ')} (the parts: ${PARTS.join(', ')})`);
  return new Set(raw.length > 0 ? (raw as Part[]) : PARTS);
}

const TARGETS = ['direct', 'nginx', 'predictgate'] as const;
type TargetName = (typeof TARGETS)[number];
/** The three DeployedModels (and Endpoints) of the gateway's folder. */
const LATENCY_MODEL = 'tiny-llm';
const HOLD_MODEL = 'tiny-llm-hold';
const PROBE_MODEL = 'sse-probe';
const MODEL_NAMES = [LATENCY_MODEL, HOLD_MODEL, PROBE_MODEL] as const;
type ModelName = (typeof MODEL_NAMES)[number];
const ABORT_CONCURRENCY = 16;
const ABORT_AFTER_TOKENS = 2;
const PROBE_INTERVAL_MS = 20;
/** Descriptors each process may need: 2 per held stream for the proxies, and some to spare. */
const WANTED_NOFILE = 16384;

const GOALS = {
  ttftP50: 1,
  ttftP99: 5,
  gapP50: 0.2,
  holdErrors: 0,
  rssRatio: 2,
  cpuRatio: 2,
  abortP99: 100,
};

interface Target {
  name: TargetName;
  url(model: ModelName): string;
  /** The proxy's processes (direct: the model's). */
  pids(model: ModelName): number[];
}

interface Model {
  name: ModelName;
  pid: number;
  port: number;
}

/** The probe model (sseProbe.ts) as a DeployedModel speaking the OpenAI API, and its Endpoint. */
function probeDocs(): unknown[] {
  const [dm, ep] = sampleDocs(PROBE_MODEL, { PROBE_EVENT_INTERVAL_MS: String(PROBE_INTERVAL_MS), NODE_OPTIONS: '', GLIBC_TUNABLES: '' }) as Record<string, any>[];
  dm.spec.modelSpec.modelDisplayName = PROBE_MODEL;
  dm.spec.modelSpec.containerSpec.command = ['node', path.join(ROOT, 'dist', 'test', 'bench', 'sseProbe.js')];
  return [dm, ep];
}

function manifest(latencyIntervalMs: number, latencyRunning: number, holdIntervalMs: number, holdRunning: number): string {
  const plain = { NODE_OPTIONS: '', GLIBC_TUNABLES: '' };
  const docs = [
    ...sampleDocs(LATENCY_MODEL, { TINY_LLM_TOKEN_INTERVAL_MS: String(latencyIntervalMs), TINY_LLM_MAX_RUNNING: String(latencyRunning), ...plain }),
    ...sampleDocs(HOLD_MODEL, { TINY_LLM_TOKEN_INTERVAL_MS: String(holdIntervalMs), TINY_LLM_MAX_RUNNING: String(holdRunning), ...plain }),
    ...probeDocs(),
  ];
  return `# predictgate bench:llm: generated by test/bench/llm.ts from crds/samples/tiny-llm.yaml\n${docs.map((d) => stringify(d)).join('---\n')}`;
}

/** The soft open-files limit, raised (prlimit, up to the hard limit) when under WANTED_NOFILE; children inherit it. */
function ensureNofile(): string {
  const limits = fs.readFileSync('/proc/self/limits', 'utf8');
  const m = /^Max open files\s+(\S+)\s+(\S+)/m.exec(limits);
  if (!m) return 'unknown';
  const soft = m[1] === 'unlimited' ? Infinity : Number(m[1]);
  const hard = m[2] === 'unlimited' ? Infinity : Number(m[2]);
  if (soft >= WANTED_NOFILE) return `${m[1]} (soft), as found`;
  const want = Math.min(WANTED_NOFILE, hard);
  const r = spawnSync('prlimit', ['--pid', String(process.pid), `--nofile=${want}:${m[2]}`], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`the open-files limit is ${soft} and prlimit could not raise it to ${want}: ${r.stderr}; run \`ulimit -n ${WANTED_NOFILE}\` first`);
  if (want < WANTED_NOFILE) log(`warning: the hard open-files limit ${hard} is under ${WANTED_NOFILE}: held streams may fail for want of descriptors`);
  return `${want} (soft; raised by the bench from ${soft})`;
}

/** The model child of the gateway serving DeployedModel `name` (its only replica). */
function findModel(gatewayPid: number, name: ModelName): Model | null {
  const [found] = findModelProcesses(gatewayPid, name);
  return found ? { name, ...found } : null;
}

interface HoldFigures {
  streams: number;
  held: number;
  errors: number;
  errorSamples: string[];
  eventsPerS: number;
  cpuUsPerEvent: number;
  idleRssMb: number;
  peakRssMb: number;
  ttftP99Ms: number;
}

interface AbortFigures {
  aborts: number;
  seen: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  errors: number;
  errorSamples: string[];
}

/** What every part runs with: the run's folders, the CPUs, the gateway's runtime settings and node flags. */
interface Setup extends PartContext {
  nginxBin: string;
  nofile: string;
}

/** Checks the tools and dist/, raises the open-files limit, pins this process, makes the run's folder. */
function setUp(parts: Set<Part>): Setup {
  const loadCpu = setting('BENCH_LOAD_CPU');
  const missing = ['taskset', 'prlimit', ...(parts.has('proxies') ? ['nginx'] : [])].filter((b) => !whichBinary(b));
  if (missing.length > 0) throw new Error(`missing tools: ${missing.join(', ')} (apt-get install -y nginx-light util-linux)`);
  for (const file of ['src/cli.js', 'test/bench/llmLoad.js', 'test/bench/sseProbe.js']) {
    if (!fs.existsSync(path.join(ROOT, 'dist', file))) throw new Error(`dist/${file} is missing: run \`npm run build\``);
  }
  const nofile = ensureNofile();
  pinSelf(String(loadCpu));
  const runtime = shippedRuntime(ROOT);
  // An experiment (e.g. --cpu-prof --cpu-prof-dir=DIR): node flags for the gateway; such a run does not write the docs.
  const nodeFlags = (process.env.BENCH_GATEWAY_NODE_FLAGS ?? '').split(' ').filter((x) => x !== '');
  const imageNode = imageNodeMajor(ROOT);
  const nodeMajor = Number(process.versions.node.split('.')[0]);
  log(`bench:llm (${[...parts].join(', ')}): Node ${process.version}${imageNode !== null && imageNode !== nodeMajor ? ` (the image runs Node ${imageNode})` : ''}; gateway ${describeRuntime(runtime)}; open files ${nofile}`);
  const tmp = makeTempDir('predictgate-llm-bench-');
  const logDir = path.join(tmp, 'logs');
  fs.mkdirSync(logDir);
  copyLoadGenerator(tmp);
  return {
    tmp, logDir, loadCpu, serverCpu: setting('BENCH_SERVER_CPU'), runtime, nodeFlags, imageNode, nofile, started: new Date(),
    nginxBin: whichBinary('nginx') ?? '',
    sharedDefault: (['BENCH_LOAD_CPU', 'BENCH_SERVER_CPU'] as const).every((k) => setting(k) === SETTINGS[k].def),
  };
}

/** The proxies part: direct, nginx and the gateway side by side; prints (and writes) its table; true when a goal was missed. */
async function runProxies(setup: Setup): Promise<boolean> {
  const { tmp, logDir, loadCpu, serverCpu, runtime, nodeFlags, nofile, nginxBin, imageNode } = setup;
  const started = new Date();
  const t0 = Date.now();
  const concurrency = setting('BENCH_LLM_CONCURRENCY');
  const intervalMs = setting('BENCH_LLM_INTERVAL_MS');
  const maxTokens = setting('BENCH_LLM_MAX_TOKENS');
  const cellS = setting('BENCH_LLM_SECONDS');
  const rounds = setting('BENCH_LLM_ROUNDS');
  const holdStreams = setting('BENCH_LLM_HOLD_STREAMS');
  const holdIntervalMs = setting('BENCH_LLM_HOLD_INTERVAL_MS');
  const holdS = setting('BENCH_LLM_HOLD_SECONDS');
  const nSources = Math.max(1, Math.min(254, setting('BENCH_LLM_SOURCES')));
  const abortS = setting('BENCH_LLM_ABORT_SECONDS');
  const sources = Array.from({ length: nSources }, (_, i) => `127.0.0.${i + 1}`);

  // The gateway, with its three models as children; every target calls those same model processes.
  const folder = path.join(tmp, 'manifests');
  fs.mkdirSync(folder);
  fs.writeFileSync(path.join(folder, 'tiny-llm.yaml'), manifest(intervalMs, Math.max(64, 4 * concurrency), holdIntervalMs, Math.max(4000, 2 * holdStreams)));
  const gwPort = await freePort();
  const gw = spawnPinned('gateway', process.execPath, [...nodeFlags, path.join(ROOT, 'bin', 'predictgate.js'), 'local', folder], {
    cpu: serverCpu,
    env: withRuntime({ ...process.env, PORT: String(gwPort), LOG_LEVEL: 'warn' }, runtime),
    cwd: ROOT,
    logDir,
  });
  const gwUrl = (m: ModelName): string => `http://127.0.0.1:${gwPort}/v1/projects/default/locations/local/endpoints/${m}/chat/completions`;
  const probe = Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'ready?' }], max_tokens: 1 }));
  for (const m of MODEL_NAMES) await waitReady(`gateway route to ${m}`, () => httpCall(gwUrl(m), 'POST', probe), [gw], 60_000);
  const models = new Map<ModelName, Model>();
  for (const m of MODEL_NAMES) {
    const found = findModel(gw.pid, m);
    if (!found) throw new Error(`could not find the gateway's ${m} model process (AIP_DEPLOYED_MODEL_ID=${m})`);
    models.set(m, found);
  }
  const model = (m: ModelName): Model => models.get(m) as Model;

  const ngPort = await freePort();
  const ngDir = path.join(tmp, 'nginx');
  fs.mkdirSync(ngDir);
  const ng = startNginx({
    binary: nginxBin,
    dir: ngDir,
    port: ngPort,
    routes: MODEL_NAMES.map((m) => ({ name: m, prefix: `/${m}/`, upstreamPath: '/', upstreamPort: model(m).port })),
    cpu: serverCpu,
    logDir,
    streaming: true,
    workerConnections: 3 * holdStreams + 1024,
  });
  const ngUrl = (m: ModelName): string => `http://127.0.0.1:${ngPort}/${m}/v1/chat/completions`;
  const directUrl = (m: ModelName): string => `http://127.0.0.1:${model(m).port}/v1/chat/completions`;
  for (const m of MODEL_NAMES) {
    await waitReady(`direct ${m}`, () => httpCall(directUrl(m), 'POST', probe), [gw], 20_000);
    await waitReady(`nginx ${m} (error log ${path.join(ngDir, 'error.log')})`, () => httpCall(ngUrl(m), 'POST', probe), [ng.master, gw], 20_000);
  }
  const targets: Target[] = [
    { name: 'direct', url: directUrl, pids: (m) => [model(m).pid] },
    { name: 'nginx', url: ngUrl, pids: () => ng.pids() },
    { name: 'predictgate', url: gwUrl, pids: () => [gw.pid] },
  ];
  const servers = (): Child[] => [gw, ng.master];
  const allPids = (): number[] => [gw.pid, ...ng.pids(), ...MODEL_NAMES.map((m) => model(m).pid)];
  const warnings: string[] = [];
  for (const pid of allPids()) {
    if (cpusAllowed(pid) !== String(serverCpu)) warnings.push(`process ${pid} (${readCmdline(pid).join(' ')}) may run on CPUs ${cpusAllowed(pid)}, not ${serverCpu}`);
  }
  for (const w of warnings) log(`warning: ${w}`);
  const alive = (): void => {
    for (const c of servers()) if (c.exited) throw new Error(`${c.name} exited (${c.exited.code ?? c.exited.signal}); log ${c.logFile}:\n${logTail(c)}`);
    for (const m of MODEL_NAMES) if (!fs.existsSync(`/proc/${model(m).pid}`)) throw new Error(`the ${m} model process ${model(m).pid} is gone (local mode restarted it?)`);
  };
  log(`ready in ${((Date.now() - t0) / 1000).toFixed(1)} s: gateway :${gwPort}, nginx :${ngPort}, models ${MODEL_NAMES.map((m) => `${m} :${model(m).port}`).join(', ')}`);

  const noisy: string[] = [];
  const idleLoad = await measureForeignLoad(serverCpu, allPids);
  if (idleLoad >= NOISY_PCT) noisy.push(`with every server idle, other processes took ${idleLoad.toFixed(0)}% of CPU ${serverCpu}`);

  // 1, 2: time to first token and between tokens, interleaved rounds.
  const latencyCfg = (t: Target, s: number): Omit<LoadConfig, 'out'> => ({ mode: 'latency', url: t.url(LATENCY_MODEL), body: chatBody(maxTokens), concurrency, durationS: s });
  log('warm-up...');
  for (const t of targets) await runLoad(`warm-${t.name}`, latencyCfg(t, 2), tmp, logDir, loadCpu, 60);
  const lat = new Map<TargetName, LoadResult[]>(TARGETS.map((n) => [n, []]));
  const streamS = (maxTokens * intervalMs) / 1000;
  for (let round = 1; round <= rounds; round++) {
    const shift = (round - 1) % targets.length;
    for (const t of [...targets.slice(shift), ...targets.slice(0, shift)]) {
      await waitQuiet(allPids);
      const r = await runLoad(`latency-${t.name}-${round}`, latencyCfg(t, cellS), tmp, logDir, loadCpu, cellS + 10 * streamS + 30);
      alive();
      lat.get(t.name)?.push(r);
      log(`[round ${round}] ${t.name.padEnd(11)} ${r.completed}/${r.streams} streams, TTFT p50 ${f(percentile(r.ttftMs, 0.5))} p99 ${f(percentile(r.ttftMs, 0.99))} ms, gap p50 ${f(percentile(r.gapMs, 0.5), 3)} ms, errors ${r.errors}${r.errorSamples.length ? ` (${r.errorSamples[0]})` : ''}`);
    }
  }
  const pooled = (n: TargetName, k: 'ttftMs' | 'gapMs'): number[] => (lat.get(n) ?? []).flatMap((r) => r[k]);
  const latErrors = (n: TargetName): number => (lat.get(n) ?? []).reduce((s, r) => s + r.errors, 0);
  const latStreams = (n: TargetName): number => (lat.get(n) ?? []).reduce((s, r) => s + r.streams, 0);
  /** A quantile of a target's samples, and per round the difference to direct's in the same round. */
  const perRoundDiff = (n: TargetName, k: 'ttftMs' | 'gapMs', q: number): number[] =>
    (lat.get(n) ?? []).map((r, i) => percentile(r[k], q) - percentile((lat.get('direct') ?? [])[i]?.[k] ?? [], q));

  // 4: a client's disconnect reaching the model (the probe model records when its answer closed).
  const aborts = new Map<TargetName, AbortFigures>();
  for (const t of targets) {
    await waitQuiet(allPids);
    await httpCall(`http://127.0.0.1:${model(PROBE_MODEL).port}/bench/closes`, 'GET'); // forget earlier closes
    const r = await runLoad(`abort-${t.name}`, {
      mode: 'abort', url: t.url(PROBE_MODEL), body: chatBody(1000), concurrency: ABORT_CONCURRENCY, durationS: abortS, abortAfterTokens: ABORT_AFTER_TOKENS, idPrefix: `abort-${t.name}`,
    }, tmp, logDir, loadCpu, abortS + 60);
    await sleep(1000);
    alive();
    const ans = await httpCall(`http://127.0.0.1:${model(PROBE_MODEL).port}/bench/closes`, 'GET');
    const closes = (JSON.parse(ans.body.toString('utf8')) as { closes: Record<string, string> }).closes;
    const delays: number[] = [];
    const destroyed = Object.entries(r.destroyedAt ?? {});
    for (const [id, at] of destroyed) {
      const c = closes[id];
      if (c !== undefined) delays.push(Number(BigInt(c) - BigInt(at)) / 1e6);
    }
    const fig: AbortFigures = {
      aborts: destroyed.length, seen: delays.length, p50Ms: percentile(delays, 0.5), p99Ms: percentile(delays, 0.99), maxMs: Math.max(...delays), errors: r.errors, errorSamples: r.errorSamples,
    };
    aborts.set(t.name, fig);
    log(`[disconnect] ${t.name.padEnd(11)} ${fig.seen}/${fig.aborts} seen by the model, p50 ${f(fig.p50Ms, 3)} ms, p99 ${f(fig.p99Ms, 3)} ms, max ${f(fig.maxMs)} ms, errors ${fig.errors}`);
  }

  // 3: streams held open at once.
  const holds = new Map<TargetName, HoldFigures>();
  for (const t of targets) {
    await waitQuiet(allPids, 20_000);
    const ramp = 500;
    const r = await runLoad(`hold-${t.name}`, {
      mode: 'hold', url: t.url(HOLD_MODEL), body: chatBody(4096), concurrency: holdStreams, durationS: 0, sources, rampPerSecond: ramp,
      firstTokenTimeoutMs: 15_000, holdS, watch: [{ name: 'proxy', pids: t.pids(HOLD_MODEL) }],
    }, tmp, logDir, loadCpu, holdStreams / ramp + holdS + 90);
    alive();
    const w = r.watch?.[0];
    const fig: HoldFigures = {
      streams: r.streams,
      held: r.held ?? 0,
      errors: r.errors,
      errorSamples: r.errorSamples,
      eventsPerS: (r.windowEvents ?? 0) / (r.windowS ?? NaN),
      cpuUsPerEvent: (w?.cpuUs ?? NaN) / (r.windowEvents ?? NaN),
      idleRssMb: (w?.idleRssKb ?? NaN) / 1024,
      peakRssMb: (w?.peakRssKb ?? NaN) / 1024,
      ttftP99Ms: percentile(r.ttftMs, 0.99),
    };
    holds.set(t.name, fig);
    log(`[hold] ${t.name.padEnd(11)} ${fig.held}/${fig.streams} held, errors ${fig.errors}${fig.errorSamples.length ? ` (${fig.errorSamples.join('; ')})` : ''}, ${f(fig.eventsPerS, 0)} events/s, ${f(fig.cpuUsPerEvent, 1)} CPU µs/event, RSS ${f(fig.idleRssMb, 1)} → ${f(fig.peakRssMb, 1)} MB, TTFT p99 ${f(fig.ttftP99Ms)} ms`);
    // The model lets go of the closed streams before the next target's.
    await sleep(2000);
  }
  const runS = (Date.now() - t0) / 1000;

  // The table.
  const d = (n: TargetName, k: 'ttftMs' | 'gapMs', q: number): number => percentile(pooled(n, k), q);
  const added = (n: TargetName, k: 'ttftMs' | 'gapMs', q: number): number => d(n, k, q) - d('direct', k, q);
  const cell = (n: TargetName, k: 'ttftMs' | 'gapMs', q: number, digits = 2): string =>
    n === 'direct' ? `${f(d(n, k, q), digits)} ms` : `${f(d(n, k, q), digits)} ms (${signed(added(n, k, q), digits)})`;
  const met = (ok: boolean): string => (ok ? 'yes' : '**no**');
  const h = (n: TargetName): HoldFigures => holds.get(n) as HoldFigures;
  const a = (n: TargetName): AbortFigures => aborts.get(n) as AbortFigures;
  const rssRatio = (n: TargetName): number => h(n).peakRssMb / h(n).idleRssMb;
  const cpuRatio = h('predictgate').cpuUsPerEvent / h('nginx').cpuUsPerEvent;
  const abortOk = (n: TargetName): boolean => a(n).seen === a(n).aborts && a(n).aborts > 0 && a(n).p99Ms <= GOALS.abortP99;
  const goals = {
    ttftP50: added('predictgate', 'ttftMs', 0.5) <= GOALS.ttftP50,
    ttftP99: added('predictgate', 'ttftMs', 0.99) <= GOALS.ttftP99,
    gapP50: added('predictgate', 'gapMs', 0.5) <= GOALS.gapP50,
    holdErrors: h('predictgate').errors <= GOALS.holdErrors,
    rss: rssRatio('predictgate') <= GOALS.rssRatio,
    cpu: cpuRatio <= GOALS.cpuRatio,
    abort: abortOk('predictgate'),
  };
  const holdCell = (n: TargetName): string => `${h(n).errors} of ${h(n).streams}${h(n).errors > 0 ? ` (${h(n).held} held)` : ''}`;
  const rows = [
    '| figure | direct | nginx | predictgate | goal (predictgate) | met? |',
    '| --- | ---: | ---: | ---: | --- | --- |',
    `| time to first token, p50 (added to direct's) | ${cell('direct', 'ttftMs', 0.5)} | ${cell('nginx', 'ttftMs', 0.5)} | ${cell('predictgate', 'ttftMs', 0.5)} | added ≤ ${GOALS.ttftP50} ms | ${met(goals.ttftP50)} |`,
    `| time to first token, p99 (added) | ${cell('direct', 'ttftMs', 0.99)} | ${cell('nginx', 'ttftMs', 0.99)} | ${cell('predictgate', 'ttftMs', 0.99)} | added ≤ ${GOALS.ttftP99} ms | ${met(goals.ttftP99)} |`,
    `| time between tokens, p50 (added) | ${cell('direct', 'gapMs', 0.5, 3)} | ${cell('nginx', 'gapMs', 0.5, 3)} | ${cell('predictgate', 'gapMs', 0.5, 3)} | added ≤ ${GOALS.gapP50} ms | ${met(goals.gapP50)} |`,
    `| time between tokens, p99 (added) | ${cell('direct', 'gapMs', 0.99, 3)} | ${cell('nginx', 'gapMs', 0.99, 3)} | ${cell('predictgate', 'gapMs', 0.99, 3)} | (information) | |`,
    `| latency streams: errors / streams | ${TARGETS.map((n) => `${latErrors(n)} / ${latStreams(n)}`).join(' | ')} | 0 | ${met(latErrors('predictgate') === 0)} |`,
    `| ${holdStreams} streams held: errors | ${TARGETS.map(holdCell).join(' | ')} | ${GOALS.holdErrors} | ${met(goals.holdErrors)} |`,
    `| ${holdStreams} streams held: RSS idle → peak (ratio) | ${TARGETS.map((n) => `${f(h(n).idleRssMb, 1)} → ${f(h(n).peakRssMb, 1)} MB (${f(rssRatio(n))}x)`).join(' | ')} | ≤ ${GOALS.rssRatio}x idle | ${met(goals.rss)} |`,
    `| ${holdStreams} streams held: CPU µs per event (events/s) | ${TARGETS.map((n) => `${f(h(n).cpuUsPerEvent, 1)} (${f(h(n).eventsPerS, 0)})`).join(' | ')} | ≤ ${GOALS.cpuRatio}x nginx's (${f(cpuRatio)}x) | ${met(goals.cpu)} |`,
    `| ${holdStreams} streams held: time to first token, p99 | ${TARGETS.map((n) => `${f(h(n).ttftP99Ms)} ms`).join(' | ')} | (information) | |`,
    `| disconnect reaching the model, p50 / p99 (seen / closed) | ${TARGETS.map((n) => `${f(a(n).p50Ms, 2)} / ${f(a(n).p99Ms, 2)} ms (${a(n).seen} / ${a(n).aborts})`).join(' | ')} | p99 ≤ ${GOALS.abortP99} ms, every one seen | ${met(goals.abort)} |`,
  ];
  const machine = `load average ${loadAverage()} at the end`;
  const out: string[] = [];
  out.push(
    `Measured ${measuredOn(ROOT, started)}; ${machine}. Load generator on CPU ${loadCpu}, the models, nginx and the gateway on CPU ${serverCpu}; ` +
      `the gateway with ${describeRuntime(runtime)} (as the image ships them)${nodeFlags.length > 0 ? `, node flags ${nodeFlags.join(' ')}` : ''}, the models with Node's and glibc's defaults; open files ${nofile}. Run time ${f(runS / 60, 1)} min.`,
  );
  out.push('');
  out.push(
    `Latency cells: ${concurrency} streams at once, max_tokens ${maxTokens}, ${intervalMs} ms between tokens, ${rounds} rounds × ${cellS} s per target (the order rotating), ` +
      `quantiles over every stream of a target; "added" is the quantile through the proxy minus the direct call's. Held streams: ${holdStreams} per target from ${nSources} loopback address${nSources > 1 ? 'es' : ''}, ` +
      `${holdIntervalMs} ms between tokens, counted over ${holdS} s once every stream had its first token; CPU: the proxy process(es) alone (direct: the model), over the events that reached the client. ` +
      `Disconnects: ${ABORT_CONCURRENCY} streams at once to the instrumented model for ${abortS} s per target, each closed by the client after ${ABORT_AFTER_TOKENS} tokens.`,
  );
  out.push('');
  out.push(rows.join('\n'));
  const perRound = (['ttftMs', 'gapMs'] as const).map((k) =>
    `${k === 'ttftMs' ? 'TTFT p50' : 'gap p50'} added per round: nginx ${perRoundDiff('nginx', k, 0.5).map((x) => signed(x, 3)).join(', ')}; predictgate ${perRoundDiff('predictgate', k, 0.5).map((x) => signed(x, 3)).join(', ')} ms`);
  out.push('');
  out.push(`Within each round (${perRound.join('; ')}); TTFT p99 added per round: predictgate ${perRoundDiff('predictgate', 'ttftMs', 0.99).map((x) => signed(x, 2)).join(', ')} ms.`);
  const notes: string[] = [];
  for (const n of TARGETS) {
    if (h(n).errors > 0) notes.push(`${n}, held streams: ${h(n).errorSamples.join('; ')}`);
    if (latErrors(n) > 0) notes.push(`${n}, latency streams: ${(lat.get(n) ?? []).flatMap((r) => r.errorSamples).slice(0, 3).join('; ')}`);
    if (a(n).errors > 0) notes.push(`${n}, disconnects: ${a(n).errorSamples.join('; ')}`);
    if (a(n).seen < a(n).aborts) notes.push(`${n}: the model saw ${a(n).aborts - a(n).seen} of the ${a(n).aborts} closed streams still open a second after the client closed them`);
  }
  if (!goals.cpu) notes.push(`the gateway's CPU per event is ${f(cpuRatio)}x nginx's: where it goes (a profile of the held window) is in "Where the time goes" under this table`);
  if ((!goals.ttftP50 || !goals.ttftP99 || !goals.gapP50) && (noisy.length > 0 || idleLoad >= NOISY_PCT)) {
    notes.push(`a latency goal missed on a CPU that other processes kept busy: the servers share CPU ${serverCpu} with them, and a proxy that needs more CPU per stream (the gateway) waits longer for it; see the rounds above, and rerun on a quiet machine`);
  }
  notes.push(...noisy, ...warnings);
  if (notes.length > 0) {
    out.push('');
    for (const n of notes) out.push(`Note: ${n}.`);
  }
  const text = out.join('\n');
  process.stdout.write(`## predictgate bench:llm\n\n${text}\n`);
  const why = docsSkipReason(allDefault(SETTINGS), nodeFlags, imageNode);
  if (why === null) log(`table written to ${writeBlock(ROOT, 'generative-bench', text)}`);
  else log(`docs/performance.md left as it is: ${why}`);
  // The next part's servers get the CPU to themselves.
  await stopTree(ng.master);
  await stopTree(gw);
  return Object.values(goals).some((g) => !g);
}

async function main(): Promise<number> {
  installCleanupHandlers();
  const t0 = Date.now();
  const parts = readParts();
  const setup = setUp(parts);
  let failed = false;
  if (parts.has('proxies')) failed = (await runProxies(setup)) || failed;
  if (parts.has('picks')) failed = (await runPicks(setup)) || failed;
  if (parts.has('inference-perf')) failed = (await runInferencePerf(setup)) || failed;
  log(`bench:llm: ${f((Date.now() - t0) / 1000, 0)} s`);
  return process.env.BENCH_STRICT === '1' && failed ? 1 : 0;
}

main()
  .then(async (code) => {
    await cleanup();
    process.exit(code);
  })
  .catch(async (err: unknown) => {
    if (isStopping()) return;
    log(`bench:llm: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
    await cleanup();
    process.exit(1);
  });

