// `npm run bench:hostile`: the whole hostile corpus (test/helpers/hostile/) against `predictgate
// local` as a process with the bundled models and the image's runtime settings: a warm-up of the
// corpus's first bodies, the gateway's heap read once it settles, the rest of the corpus, the heap
// read again the same way (session.ts); every answer checked (no 5xx,
// errors JSON of the route's dialect, successes JSON). Prints markdown tables: the summary, bodies and
// answers per family, the violations with seed and index. On a run with the defaults it writes the
// tables into docs/performance.md between the hostile-bench markers (BENCH_WRITE_DOCS=1 writes any
// run's, =0 none). Exits 1 when a body crashed the gateway, got a 5xx or a non-JSON error, or the heap
// did not come back within 10 %.
// Settings: BENCH_HOSTILE_BODIES (120000), BENCH_HOSTILE_SEED (1), BENCH_HOSTILE_CONCURRENCY (16),
// BENCH_HOSTILE_ONLY=INDEX[,INDEX...] (replay those bodies of the seed, printing each answer).
import { ROOT } from '../helpers/local.js';
import { Pool } from 'undici';
import { hostileCase } from '../helpers/hostile/corpus.js';
import { answerProblems } from '../helpers/hostile/check.js';
import { startHostileGateway } from '../helpers/hostile/gateway.js';
import { send } from '../helpers/hostile/runner.js';
import { runHostile } from '../helpers/hostile/session.js';
import { familyTable, heapRatio, summaryTable, violationList } from '../helpers/hostile/report.js';
import { describeRuntime, shippedRuntime } from './runtime.js';
import { measuredOn, writeBlock } from './docsBlock.js';

const DEFAULTS = { bodies: 120_000, seed: 1, concurrency: 16 };
const BODIES = Number(process.env.BENCH_HOSTILE_BODIES ?? DEFAULTS.bodies);
const SEED = Number(process.env.BENCH_HOSTILE_SEED ?? DEFAULTS.seed);
const CONCURRENCY = Number(process.env.BENCH_HOSTILE_CONCURRENCY ?? DEFAULTS.concurrency);
const ONLY = process.env.BENCH_HOSTILE_ONLY?.split(',').map(Number);
/** The heap after the run may be this much over the heap after the warm-up. */
const HEAP_TOLERANCE = 1.1;
const log = (msg: string): void => void process.stderr.write(`${msg}\n`);

/** Replays single bodies: what was sent and what came back. */
async function replay(base: string, indexes: number[]): Promise<void> {
  const pool = new Pool(base, { connections: 1 });
  for (const i of indexes) {
    const c = hostileCase(SEED, i);
    const a = await send(pool, c);
    process.stdout.write(`# seed ${SEED} index ${i}: ${c.family}, ${c.target.name} (${c.target.path}${c.chunks ? ', chunked' : ''})\n`);
    process.stdout.write(`sent ${c.body.length} bytes ${JSON.stringify(c.headers)}: ${JSON.stringify(c.body.subarray(0, 400).toString('latin1'))}\n`);
    process.stdout.write(`answer HTTP ${a.status} ${String(a.headers['content-type'] ?? '')}: ${a.error ?? a.body.subarray(0, 400).toString('utf8')}\n`);
    process.stdout.write(`problems: ${a.status === 0 ? 'no answer' : answerProblems(c, a).join('; ') || 'none'}\n\n`);
  }
  await pool.close();
}

async function main(): Promise<void> {
  const started = new Date();
  const gw = await startHostileGateway(shippedRuntime(ROOT));
  try {
    if (ONLY) return await replay(gw.base, ONLY);
    let lastLog = 0;
    const progress = (done: number): void => {
      if (Date.now() - lastLog < 10_000) return;
      lastLog = Date.now();
      log(`${done} of ${BODIES} bodies`);
    };
    const run = await runHostile(gw, { seed: SEED, bodies: BODIES, concurrency: CONCURRENCY, windowBodies: 2000, progress });
    const record = run.record;
    const text = [
      `Measured ${measuredOn(ROOT, started)}; seed ${SEED}, ${BODIES} bodies, ${CONCURRENCY} in flight; the gateway with ${describeRuntime(shippedRuntime(ROOT))}.`,
      '',
      summaryTable(run),
      '',
      familyTable(record),
      '',
      violationList(record),
    ].join('\n');
    process.stdout.write(`## Hostile bodies\n\n${text}\n`);
    const defaults = BODIES === DEFAULTS.bodies && SEED === DEFAULTS.seed && CONCURRENCY === DEFAULTS.concurrency;
    if (process.env.BENCH_WRITE_DOCS === '1' || (process.env.BENCH_WRITE_DOCS !== '0' && defaults)) log(`wrote ${writeBlock(ROOT, 'hostile-bench', text)}`);
    const failed = !run.alive || run.modelRestarts.length > 0 || record.violations.length > 0 || heapRatio(run) > HEAP_TOLERANCE;
    if (failed) process.exitCode = 1;
  } finally {
    await gw.stop();
  }
}

main().catch((err: unknown) => {
  log(err instanceof Error ? err.stack ?? err.message : String(err));
  process.exit(1);
});
