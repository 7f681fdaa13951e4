// The work queue: per-key serial processing, re-run of a key added while it runs, dedupe, backoff
// on failure, requeueAfter.
import { WorkQueue } from '../../src/controller/queue.js';
import { silentLogger } from '../../src/log.js';

function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

test('a key is never reconciled twice at once; an add while running runs it once more', async () => {
  const g = gate();
  const runs: string[] = [];
  let active = 0;
  let maxActive = 0;
  const q = new WorkQueue({ name: 't', logger: silentLogger(), workers: 4, reconcile: async (key) => {
    active++;
    maxActive = Math.max(maxActive, active);
    runs.push(key);
    if (runs.length === 1) await g.promise;
    active--;
  } });
  q.add('a');
  q.add('a');
  q.add('a');
  q.add('b');
  await Promise.resolve();
  g.open();
  await q.whenIdle();
  expect(runs.sort()).toEqual(['a', 'a', 'b']);
  expect(maxActive).toBe(2);
  q.stop();
});

test('failures are retried with backoff until they succeed', async () => {
  let n = 0;
  const done = gate();
  const q = new WorkQueue({ name: 't', logger: silentLogger(), backoffBaseMs: 1, reconcile: async () => {
    n++;
    if (n < 3) throw new Error('not yet');
    done.open();
  } });
  q.add('k');
  await done.promise;
  expect(n).toBe(3);
  q.stop();
});

test('requeueAfter runs the key again; metrics see each result', async () => {
  const results: string[] = [];
  const done = gate();
  let n = 0;
  const q = new WorkQueue({
    name: 't', logger: silentLogger(),
    metrics: { reconciled: (_c, r) => results.push(r), depth: () => undefined },
    reconcile: async () => (++n === 1 ? { requeueAfterMs: 1 } : done.open()),
  });
  q.add('k');
  await done.promise;
  await q.whenIdle();
  expect(results).toEqual(['requeue', 'success']);
  q.stop();
});
