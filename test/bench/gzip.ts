// `npm run bench:gzip`: what compressed bodies cost the gateway and save on the wire. One gateway in
// local mode (the image's runtime settings) with the bundled echo model behind an Endpoint, which
// answers one prediction per instance (as large as the request); the bench's small, tensor (400 KB)
// and base64 (1 MB) predict bodies, each sent four ways: plain, the request gzip-compressed
// (Content-Encoding: gzip), the answer asked for compressed (Accept-Encoding: gzip), and both. Per
// cell: calls a second over BENCH_CONNECTIONS keep-alive connections for BENCH_DURATION seconds after
// a warm-up, the gateway process's CPU per call (its own threads: zlib's thread pool included, the
// model's not), and the bytes each way per call. Medians over BENCH_ROUNDS rounds, printed as markdown.
// The gateway (its zlib threads included) and its model share CPU 0, the load runs on CPU 1: on two
// cores the model's work depresses every cell's calls a second alike. The small body's answer is
// under RESPONSE_GZIP_MIN_BYTES (set to its default, 16 KiB), so it is never compressed: its rows show
// what asking costs.
import { gzipSync } from 'node:zlib';
import { Pool } from 'undici';
import { ROOT } from '../helpers/local.js';
import { base64Body, formatBytes, median, smallBody, tensorBody } from './payloads.js';
import { cpuUs } from './procfs.js';
import { cleanup, installCleanupHandlers, makeTempDir, pinSelf, sleep } from './procs.js';
import { shippedRuntime } from './runtime.js';
import { startTargets } from './targets.js';
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 8);
const DURATION_S = Number(process.env.BENCH_DURATION ?? 8);
const WARMUP_S = Number(process.env.BENCH_WARMUP ?? 2);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

interface Mode {
  name: string;
  gzipRequest: boolean;
  gzipAnswer: boolean;
}
const MODES: Mode[] = [
  { name: 'plain', gzipRequest: false, gzipAnswer: false },
  { name: 'request gzip', gzipRequest: true, gzipAnswer: false },
  { name: 'answer gzip', gzipRequest: false, gzipAnswer: true },
  { name: 'both gzip', gzipRequest: true, gzipAnswer: true },
];
const PAYLOADS: [string, Buffer][] = [['small', smallBody()], ['tensor', tensorBody()], ['base64', base64Body()]];

interface Cell {
  callsPerSecond: number;
  cpuUsPerCall: number;
  sentBytes: number;
  answerBytes: number;
  answerEncoding: string;
}

/** Closed-loop calls on `pool` for `seconds`: how many answered 200, and one answer's size and coding. */
async function load(pool: Pool, url: string, body: Buffer, headers: Record<string, string>, seconds: number): Promise<{ calls: number; answerBytes: number; answerEncoding: string }> {
  const until = Date.now() + seconds * 1000;
  let calls = 0;
  let answerBytes = 0;
  let answerEncoding = 'none';
  const worker = async (): Promise<void> => {
    while (Date.now() < until) {
      const res = await pool.request({ path: url, method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
      const answer = Buffer.from(await res.body.arrayBuffer());
      if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}: ${answer.toString('utf8', 0, 300)}`);
      calls++;
      answerBytes = answer.length;
      answerEncoding = String(res.headers['content-encoding'] ?? 'none');
    }
  };
  await Promise.all(Array.from({ length: CONNECTIONS }, worker));
  return { calls, answerBytes, answerEncoding };
}

async function main(): Promise<void> {
  installCleanupHandlers();
  pinSelf('1');
  const tmp = makeTempDir('predictgate-bench-gzip-');
  // The bench's own gateway target (targets.ts): local mode pinned to CPU 0 with the image's
  // runtime settings, the echo model its child.
  const { targets, warnings } = await startTargets(['predict'], {
    root: ROOT,
    cpu: 0,
    tmp,
    logDir: tmp,
    nginxBinary: null,
    kinds: ['echo'],
    readyTimeoutMs: 60_000,
    gateway: { runtime: shippedRuntime(ROOT), nodeFlags: [], root: ROOT, env: { RESPONSE_GZIP_MIN_BYTES: String(16 * 1024) } },
    compare: null,
    headers: {},
  });
  for (const w of warnings) process.stderr.write(`warning: ${w}\n`);
  const target = targets[0];
  const { origin, pathname: url } = new URL(target.url('echo'));
  const [gatewayPid] = target.proxyPids('echo');
  const pool = new Pool(origin, { connections: CONNECTIONS, pipelining: 1 });
  const results = new Map<string, Cell[]>();
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [payload, plain] of PAYLOADS) {
      const zipped = gzipSync(plain);
      for (const mode of MODES) {
        const body = mode.gzipRequest ? zipped : plain;
        const headers: Record<string, string> = {
          ...(mode.gzipRequest ? { 'content-encoding': 'gzip' } : {}),
          ...(mode.gzipAnswer ? { 'accept-encoding': 'gzip' } : {}),
        };
        await load(pool, url, body, headers, WARMUP_S);
        await sleep(200);
        const cpuBefore = cpuUs(gatewayPid);
        const started = process.hrtime.bigint();
        const r = await load(pool, url, body, headers, DURATION_S);
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        const cell = { callsPerSecond: r.calls / seconds, cpuUsPerCall: (cpuUs(gatewayPid) - cpuBefore) / r.calls, sentBytes: body.length, answerBytes: r.answerBytes, answerEncoding: r.answerEncoding };
        const key = `${payload}\t${mode.name}`;
        results.set(key, [...(results.get(key) ?? []), cell]);
        process.stderr.write(`[round ${round}] ${payload.padEnd(7)} ${mode.name.padEnd(13)} ${cell.callsPerSecond.toFixed(0)} calls/s, ${cell.cpuUsPerCall.toFixed(0)} µs of gateway CPU a call, ${formatBytes(cell.sentBytes)} sent, ${formatBytes(cell.answerBytes)} back (${cell.answerEncoding})\n`);
      }
    }
  }
  await pool.close();
  const lines = [
    `Measured ${new Date().toISOString().slice(0, 10)}, Node ${process.version}, ${ROUNDS} rounds of ${DURATION_S} s a cell (medians), ${CONNECTIONS} connections from CPU 1, the gateway and its echo model on CPU 0, the gateway with the image's runtime settings and RESPONSE_GZIP_MIN_BYTES at its default (16 KiB).`,
    '',
    '| payload | sent as | calls/s | gateway CPU µs a call | bytes sent a call | bytes back a call (coding) |',
    '| --- | --- | --- | --- | --- | --- |',
  ];
  for (const [payload] of PAYLOADS) {
    for (const mode of MODES) {
      const cells = results.get(`${payload}\t${mode.name}`)!;
      const last = cells[cells.length - 1];
      lines.push(`| ${payload} | ${mode.name} | ${median(cells.map((c) => c.callsPerSecond)).toFixed(0)} | ${median(cells.map((c) => c.cpuUsPerCall)).toFixed(0)} | ${formatBytes(last.sentBytes)} | ${formatBytes(last.answerBytes)} (${last.answerEncoding}) |`);
    }
  }
  process.stdout.write(`${lines.join('\n')}\n`);
  await cleanup();
}

main().catch(async (err: unknown) => {
  process.stderr.write(`bench:gzip: ${err instanceof Error ? err.stack : String(err)}\n`);
  await cleanup();
  process.exit(1);
});
