// `npm run bench`: the performance harness. Starts the models the selected payloads go to (echo for
// small/tensor/base64, graphstorm for the GraphStorm graph, half-plus-two for the TF columnar tensor),
// predictgate (local mode, one Endpoint per model, with the runtime settings the image ships),
// nginx and a bare node:http proxy (both routing by path to the right model) on one CPU, drives them
// with wrk from the other, interleaved per round, and prints req/s, p50/p99, CPU µs/request and peak
// RSS as ratios to the direct call, plus the goals (and the same CPU comparison as information for
// graphstorm and columnar). A run with the defaults writes its table into docs/performance.md.
// Settings: BENCH_CONNECTIONS, BENCH_DURATION, BENCH_WARMUP, BENCH_ROUNDS, BENCH_TARGETS, BENCH_PAYLOADS,
// BENCH_RSS_CONNECTIONS, BENCH_SKIP_RSS=1, BENCH_STRICT=1, BENCH_KEEP_TMP=1 (see config.ts);
// BENCH_WRITE_DOCS=1 writes the table of any run, =0 of none. Runtime experiments:
// BENCH_GATEWAY_NODE_OPTIONS / BENCH_GATEWAY_GLIBC_TUNABLES replace the gateway's setting (empty: none),
// BENCH_GATEWAY_NODE_FLAGS adds node flags to its command line; BENCH_COMPARE_NODE_OPTIONS,
// BENCH_COMPARE_GLIBC_TUNABLES and BENCH_COMPARE_NODE_FLAGS do the same for a second gateway run beside
// it (targets predict-b and rawPredict-b, compared with the first in every round), BENCH_COMPARE_ROOT
// makes that one run another checkout's built command, BENCH_COMPARE_AUTH=kubernetes makes it check
// every call's bearer token (--auth kubernetes, against a control plane this run starts; every target
// gets the same token).

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  BenchConfig,
  PAYLOAD_LABELS,
  PayloadName,
  TargetName,
  estimateSeconds,
  isDefaultRun,
  modelKinds,
  readConfig,
  rssTargets,
  usesGateway,
} from './config.js';
import { Payload, buildPayload, formatBytes, measureParseCost, median } from './payloads.js';
import { LOAD_BOUND_PCT, NOISY_PCT, describeCell, measureForeignLoad, runCell, waitQuiet } from './cell.js';
import { cleanup, installCleanupHandlers, isStopping, makeTempDir, pinSelf, whichBinary } from './procs.js';
import {
  Cell,
  aggregate,
  anyGoalFailed,
  evaluateGoals,
  renderComparison,
  renderGoals,
  renderMainTable,
  renderSummary,
  renderRssTable,
} from './report.js';
import { commitOf, measuredOn, writeBlock } from './docsBlock.js';
import { RuntimeVar, describeRuntime, imageNodeMajor, overrideRuntime, shippedRuntime } from './runtime.js';
import { GatewaySettings } from './targets.js';
import { startAuthCluster, type AuthCluster } from './authCluster.js';
import { allServerPids, smokeCheck, startTargets } from './targets.js';
import { runWrk, writeWrkScript } from './wrk.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const log = (msg: string) => process.stderr.write(`${msg}\n`);

function checkPrerequisites(cfg: BenchConfig): { nginx: string | null } {
  const missing: string[] = [];
  if (!whichBinary('taskset')) missing.push('taskset (apt-get install -y util-linux)');
  if (!whichBinary('wrk')) missing.push('wrk (apt-get install -y wrk)');
  const nginx = whichBinary('nginx');
  if (cfg.targets.includes('nginx') && !nginx) missing.push('nginx (apt-get install -y nginx-light, or nginx)');
  if (missing.length > 0) {
    throw new Error(
      `missing tools: ${missing.join(', ')}\n` +
        `install them with: sudo apt-get update && sudo apt-get install -y wrk nginx-light\n` +
        `(or leave nginx out with BENCH_TARGETS=direct,predict,rawPredict,bare)`,
    );
  }
  const cli = path.join(ROOT, 'dist', 'src', 'cli.js');
  if (!fs.existsSync(cli)) {
    throw new Error(`${cli} is missing: the models and the gateway run from the build; run \`npm run build\``);
  }
  return { nginx };
}

function toolVersion(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return `${r.stdout ?? ''}${r.stderr ?? ''}`.split('\n').find((l) => l.trim() !== '')?.trim() ?? '?';
}

const flagsEnv = (name: string): string[] => (process.env[name] ?? '').split(' ').filter((f) => f !== '');

/** The gateway's runtime settings (shipped, or replaced by BENCH_GATEWAY_*) and the second gateway's in an A/B run. */
function gatewaySettings(cfg: BenchConfig, shipped: ReturnType<typeof shippedRuntime>): { a: GatewaySettings; b: GatewaySettings | null; replaced: RuntimeVar[] } {
  const a = overrideRuntime(shipped, process.env, 'BENCH_GATEWAY_');
  const gateway = { runtime: a.env, nodeFlags: flagsEnv('BENCH_GATEWAY_NODE_FLAGS'), root: ROOT };
  const compareRoot = process.env.BENCH_COMPARE_ROOT ? path.resolve(process.env.BENCH_COMPARE_ROOT) : ROOT;
  if (cfg.compare && !fs.existsSync(path.join(compareRoot, 'dist', 'src', 'cli.js'))) {
    throw new Error(`BENCH_COMPARE_ROOT=${compareRoot}: no dist/src/cli.js there; run \`npm ci && npm run build\` in it`);
  }
  const b = cfg.compare
    ? {
        runtime: overrideRuntime(a.env, process.env, 'BENCH_COMPARE_').env,
        nodeFlags: [...gateway.nodeFlags, ...flagsEnv('BENCH_COMPARE_NODE_FLAGS')],
        root: compareRoot,
      }
    : null;
  return { a: gateway, b, replaced: a.replaced };
}

const describeGateway = (g: GatewaySettings): string =>
  `${describeRuntime(g.runtime)}${g.nodeFlags.length > 0 ? `, node flags ${g.nodeFlags.join(' ')}` : ''}` +
  (g.root !== ROOT ? `, the command of ${g.root} (commit ${commitOf(g.root)})` : '');

async function main(): Promise<number> {
  installCleanupHandlers();
  const cfg = readConfig();
  const tools = checkPrerequisites(cfg);
  const shipped = shippedRuntime(ROOT);
  const gw = gatewaySettings(cfg, shipped);
  const runtimeLines = [
    `Gateway runtime settings: ${describeGateway(gw.a)}` +
      (gw.replaced.length > 0 || gw.a.nodeFlags.length > 0
        ? ` (NOT the shipped ones, which are ${describeRuntime(shipped)})`
        : ' (as the image and the chart ship them)') +
      '; the models and the bare proxy run with Node\'s and glibc\'s defaults.',
    ...(gw.b ? [`Second gateway (predict-b, rawPredict-b): ${describeGateway(gw.b)}${process.env.BENCH_COMPARE_AUTH ? `, --auth ${process.env.BENCH_COMPARE_AUTH} (every call of every target carries a permitted token)` : ''}.`] : []),
  ];
  for (const l of runtimeLines) log(l);
  const nodeMajor = Number(process.versions.node.split('.')[0]);
  const imageNode = imageNodeMajor(ROOT);
  log(`Node ${process.version}${imageNode !== null && nodeMajor !== imageNode ? `; warning: the image runs Node ${imageNode}` : ''}`);
  const est = estimateSeconds(cfg);
  const kinds = modelKinds(cfg);
  log(
    `predictgate bench: targets ${cfg.targets.join(',')}; payloads ${cfg.payloads.join(',')} ` +
      `(models ${kinds.join(',')}); ` +
      `${cfg.rounds} round(s) × ${cfg.durationS} s (+${cfg.warmupS} s warm-up) at ${cfg.connections} connections` +
      (rssTargets(cfg).length > 0 ? `, memory round at ${cfg.rssConnections}` : '') +
      `; wrk on CPU ${cfg.loadCpu}, servers on CPU ${cfg.serverCpu}`,
  );
  log(`estimated duration: ~${Math.floor(est / 60)} min ${est % 60} s`);
  if (cfg.loadCpu === cfg.serverCpu) log('warning: load generator and servers share one CPU; ratios will be skewed');

  // Payloads, and the cost of one JSON.parse of each, measured on the servers' CPU while it is idle.
  const payloads = cfg.payloads.map((n: PayloadName) => buildPayload(n));
  // Re-measured at the start of every round (drift hits it like the cells); the table shows the median.
  const parseSamples = new Map<PayloadName, number[]>(payloads.map((p) => [p.name, []]));
  const measureParse = () => {
    pinSelf(String(cfg.serverCpu));
    for (const p of payloads) parseSamples.get(p.name)?.push(measureParseCost(p.body));
    pinSelf(String(cfg.loadCpu));
    for (const p of payloads) p.parseUs = median(parseSamples.get(p.name) ?? []);
  };
  measureParse();
  for (const p of payloads) {
    log(`payload ${p.name}: ${formatBytes(p.body.length)} to ${p.model}, JSON.parse ${p.parseUs.toFixed(0)} µs`);
  }

  const tmp = makeTempDir('predictgate-bench-');
  const logDir = path.join(tmp, 'logs');
  fs.mkdirSync(logDir);
  // An auth A/B run: the second gateway checks tokens with a control plane started here.
  let auth: AuthCluster | undefined;
  if (process.env.BENCH_COMPARE_AUTH !== undefined) {
    if (process.env.BENCH_COMPARE_AUTH !== 'kubernetes' || !gw.b) throw new Error(`BENCH_COMPARE_AUTH=${process.env.BENCH_COMPARE_AUTH}: expected kubernetes`);
    log('starting a control plane for the second gateway\'s TokenReviews and SubjectAccessReviews...');
    auth = await startAuthCluster(path.join(tmp, 'auth'), log);
    stopAuth = auth.stop;
    gw.b.env = auth.env;
  }
  const headers = auth?.headers ?? {};
  const scripts = new Map<PayloadName, string>();
  for (const p of payloads) {
    const bodyFile = path.join(tmp, `${p.name}.json`);
    fs.writeFileSync(bodyFile, p.body);
    scripts.set(p.name, writeWrkScript(tmp, p.name, bodyFile, headers));
  }

  log('starting servers...');
  const { targets, warnings } = await startTargets(cfg.targets, {
    root: ROOT,
    cpu: cfg.serverCpu,
    tmp,
    logDir,
    nginxBinary: tools.nginx,
    kinds,
    readyTimeoutMs: usesGateway(cfg) ? 60_000 : 20_000,
    gateway: gw.a,
    compare: gw.b,
    headers,
  });
  for (const w of warnings) log(`warning: ${w}`);
  for (const t of targets) {
    for (const p of payloads) {
      const problem = await smokeCheck(t, p, headers);
      if (problem) throw new Error(`smoke check failed with ${p.name} payload: ${problem}`);
    }
  }
  log(`ready: ${targets.map((t) => `${t.name} ${kinds.map((k) => t.url(k)).join(' ')}`).join('\n       ')}`);

  const script = (p: Payload) => scripts.get(p.name) as string;
  // Prime every target with every payload once (JIT, pools, buffers) before any measured cell.
  log('priming...');
  for (const payload of payloads) {
    for (const target of targets) {
      await runWrk({
        url: target.url(payload.model),
        scriptFile: script(payload),
        connections: cfg.connections,
        cpu: cfg.loadCpu,
        durationS: Math.max(1, cfg.warmupS),
      });
    }
  }
  const allPids = () => allServerPids(targets, kinds);
  await waitQuiet(allPids);
  const idle = await measureForeignLoad(cfg.serverCpu, allPids);
  if (idle >= NOISY_PCT) {
    log(
      `warning: with every target idle, CPU ${cfg.serverCpu} is ${idle.toFixed(0)}% busy: ` +
        'other work on this machine will skew the results',
    );
  }

  const started = Date.now();
  const cells: Cell[] = [];
  for (let round = 1; round <= cfg.rounds; round++) {
    if (round > 1) {
      await waitQuiet(allPids);
      measureParse();
    }
    for (const payload of payloads) {
      // Rotate the target order each round so no target always runs right after the same neighbour.
      const shift = (round - 1) % targets.length;
      const order = [...targets.slice(shift), ...targets.slice(0, shift)];
      for (const target of order) {
        const cell = await runCell(
          { phase: 'main', round, target, payload, script: script(payload), connections: cfg.connections, allPids },
          cfg,
        );
        cells.push(cell);
        log(`[round ${round}] ${payload.name.padEnd(10)} ${target.name.padEnd(10)} ${describeCell(cell)}`);
      }
    }
  }
  const rssNames: TargetName[] = rssTargets(cfg);
  for (const payload of payloads) {
    for (const target of targets.filter((t) => rssNames.includes(t.name))) {
      const cell = await runCell(
        { phase: 'rss', round: 1, target, payload, script: script(payload), connections: cfg.rssConnections, allPids },
        cfg,
      );
      cells.push(cell);
      log(`[memory @${cfg.rssConnections}] ${payload.name.padEnd(10)} ${target.name.padEnd(10)} ${describeCell(cell)}`);
    }
  }
  log(`measured in ${((Date.now() - started) / 1000).toFixed(0)} s`);

  const rows = aggregate(cells, 'main');
  const rssRows = aggregate(cells, 'rss');
  const goals = evaluateGoals(rows, rssRows, payloads);
  const names = targets.map((t) => t.name);

  const measured = measuredOn(ROOT, new Date(started));
  const out: string[] = [];
  out.push(
    `Measured ${measured}: wrk -t1 -c${cfg.connections} on CPU ${cfg.loadCpu}, servers on CPU ${cfg.serverCpu}, ` +
      `median of ${cfg.rounds} × ${cfg.durationS} s.`,
  );
  out.push('');
  out.push(...runtimeLines);
  out.push('');
  out.push('Values with their ratio to the direct call. CPU µs/req: the proxy process alone (direct: the model);');
  out.push(
    'model µs/req: the model behind it (echo; graphstorm for the GraphStorm graph; half-plus-two for the columnar tensor);',
  );
  out.push('JSON.parse µs: one parse of the body, the floor of any validating gateway.');
  out.push('');
  out.push(renderMainTable(rows, payloads, names));
  const rssTable = renderRssTable(rssRows, payloads);
  if (rssTable !== '') {
    out.push('');
    out.push(`Memory round at ${cfg.rssConnections} connections (one run of ${cfg.durationS} s each):`);
    out.push('');
    out.push(rssTable);
  }
  const noisy = cells.filter((c) => c.foreignCpuPct >= NOISY_PCT);
  if (noisy.length > 0) {
    out.push('');
    out.push(
      `Note: in ${noisy.length} of ${cells.length} cells other processes took ≥ ${NOISY_PCT}% of CPU ${cfg.serverCpu} ` +
        `(worst ${Math.max(...noisy.map((c) => c.foreignCpuPct)).toFixed(0)}%, ` +
        `${noisy.map((c) => `${c.target}/${c.payload}`).slice(0, 6).join(', ')}${noisy.length > 6 ? ', ...' : ''}); ` +
        'rerun on a quiet machine for trustworthy ratios.',
    );
  }
  const loadBound = rows.filter((r) => {
    const cs = cells.filter((c) => c.phase === 'main' && c.target === r.target && c.payload === r.payload);
    return cs.filter((c) => c.loadCpuBusyPct >= LOAD_BOUND_PCT).length * 2 > cs.length;
  });
  if (loadBound.length > 0) {
    out.push('');
    out.push(
      `Note: CPU ${cfg.loadCpu} (wrk, and anything else running there) was ≥ ${LOAD_BOUND_PCT}% busy in most ` +
        `rounds of ${loadBound.map((r) => `${r.target}/${r.payload}`).join(', ')}: their req/s may be limited by ` +
        'the load side rather than by the target.',
    );
  }
  out.push('');
  out.push('Goals (ratios within this run; a goal missed says MISSED with its figure):');
  out.push('');
  out.push(renderGoals(goals, payloads));
  const comparison = renderComparison(rows, rssRows, payloads);
  if (comparison !== '') {
    out.push('');
    out.push('A/B: the second gateway (B) against the first (A), same route and payload:');
    out.push('');
    out.push(comparison);
  }
  process.stdout.write(`## predictgate bench\n\n${out.join('\n')}\n`);
  const write = process.env.BENCH_WRITE_DOCS;
  const asShipped = gw.replaced.length === 0 && gw.a.nodeFlags.length === 0;
  const why =
    write === '0'
      ? 'BENCH_WRITE_DOCS=0'
      : !isDefaultRun(cfg) || !asShipped
        ? 'not a default run with the shipped runtime settings (BENCH_WRITE_DOCS=1 writes it anyway)'
        : nodeMajor !== imageNode
          ? `Node ${process.version} ran it and the image runs ${imageNode === null ? 'a Node the Dockerfile does not name' : `Node ${imageNode}`} (PATH="$(.ci/node)":$PATH npm run bench)`
          : null;
  if (write === '1' || why === null) {
    log(`table written to ${writeBlock(ROOT, 'bench-table', out.join('\n'))}`);
    log(`summary written to ${writeBlock(ROOT, 'bench-summary', renderSummary(rows, payloads), 'README.md')}`);
  }
  else log(`docs/performance.md and README.md's summary left as they are: ${why}`);

  const resultsFile = path.join(ROOT, 'dist', 'bench-results.json');
  fs.mkdirSync(path.dirname(resultsFile), { recursive: true });
  fs.writeFileSync(
    resultsFile,
    JSON.stringify(
      {
        date: new Date().toISOString(),
        machine: {
          cpus: os.cpus().length,
          cpuModel: os.cpus()[0]?.model ?? '?',
          node: process.version,
          gatewayRuntime: gw.a,
          compareRuntime: gw.b,
          wrk: toolVersion('wrk', ['--version']),
          nginx: tools.nginx ? toolVersion(tools.nginx, ['-v']) : null,
        },
        config: cfg,
        payloads: payloads.map((p) => ({
          name: p.name,
          label: PAYLOAD_LABELS[p.name],
          model: p.model,
          bytes: p.body.length,
          parseUs: p.parseUs,
          parseUsPerRound: parseSamples.get(p.name),
        })),
        targets: targets.map((t) => ({ name: t.name, urls: Object.fromEntries(kinds.map((k) => [k, t.url(k)])) })),
        rows,
        rssRows,
        goals,
        cells,
        warnings,
      },
      null,
      2,
    ),
  );
  log(`results written to ${resultsFile}`);
  const failed = anyGoalFailed(goals);
  return cfg.strict && failed ? 1 : 0;
}

/** Stops the control plane of an auth A/B run, once started. */
let stopAuth: () => Promise<void> = async () => {};

main()
  .then(async (code) => {
    await cleanup();
    await stopAuth();
    process.exit(code);
  })
  .catch(async (err: unknown) => {
    if (isStopping()) return; // the signal handler cleans up and exits
    log(`bench: ${err instanceof Error ? err.message : String(err)}`);
    await cleanup();
    await stopAuth();
    process.exit(1);
  });
