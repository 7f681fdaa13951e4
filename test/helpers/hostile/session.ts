// One run of the hostile corpus with the gateway's memory measured around it, as the suite and the
// bench do it. Heap in use holds garbage until V8 runs a full collection, and nothing forces one:
// V8's memory reducer runs some once the gateway idles after its heap grew (and a collection under
// load keeps what the calls in flight allocated during it, so it does not count). So each figure is
// read in the idle wait after a stretch of the corpus, once a full collection has come and the
// figure stopped falling (gateway.ts, settledMemory); a wait without one is followed by more of the
// corpus and another wait. The warm-up (the corpus's first bodies) ends with the baseline; the run's
// last bodies with the figure after it.
import { readMemory, settledMemory, type HostileGateway, type Settled } from './gateway.js';
import { addRecord, emptyRecord, runCorpus } from './runner.js';
import type { HostileRun } from './report.js';

export interface SessionOptions {
  seed: number;
  bodies: number;
  concurrency: number;
  /** Bodies per measured window (and of the warm-up's first stretch). */
  windowBodies: number;
  progress?(done: number): void;
}

export async function runHostile(gw: HostileGateway, opts: SessionOptions): Promise<HostileRun> {
  const record = emptyRecord();
  let at = 0;
  const batch = async (to: number): Promise<void> => {
    const from = at;
    addRecord(record, await runCorpus({ base: gw.base, seed: opts.seed, from, to, concurrency: opts.concurrency, progress: (n) => opts.progress?.(from + n) }));
    at = to;
  };
  /** Bodies up to `to` as a measured window: the settled heap, or undefined without a full collection in it. */
  const window = async (to: number): Promise<Settled | undefined> => {
    await batch(to);
    // Only an idle collection counts: one under load keeps what calls in flight allocated meanwhile.
    return settledMemory(gw.base, { since: (await readMemory(gw.base)).majorGcs, prior: [] });
  };
  const step = opts.windowBodies;
  await batch(Math.min(step, opts.bodies));
  let before: Settled | undefined;
  while (before === undefined && at + step <= opts.bodies / 2) before = await window(at + step);
  if (before === undefined) throw new Error(`the gateway ran no full collection in the warm-up's windows (${at} bodies): no baseline for its heap`);
  const warmupBodies = at;
  if (opts.bodies - step > at) await batch(opts.bodies - step);
  let after = await window(Math.max(opts.bodies, at));
  while (after === undefined && at < opts.bodies * 2) after = await window(at + step);
  if (after === undefined) throw new Error(`the gateway ran no full collection in the run's last windows (${at} bodies): no figure for its heap after the run`);
  return { seed: opts.seed, concurrency: opts.concurrency, record, warmupBodies, before, after, alive: gw.alive(), modelRestarts: gw.modelRestarts() };
}
