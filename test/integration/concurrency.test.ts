// spec.serving.maxConcurrency in local mode, against a model process that holds every call until the
// test releases it (so "in flight" is a state the test controls, not a race): calls past the limit
// wait in the queue and go in order as slots free; past the queue they are refused at once with 429
// RESOURCE_EXHAUSTED and Retry-After (predict and streamed rawPredict alike) and never reach the model; a call that
// waits longer than queueTimeoutSeconds is refused the same way. The CRD refuses queue settings
// without maxConcurrency.
import { startLocal, ready, faultyYaml, faultyModelCalls, endpointYaml, post, type LocalHarness } from '../helpers/local.js';
import { metricValue } from '../helpers/metrics.js';
import { waitFor } from '../helpers/cluster.js';

let h: LocalHarness;

beforeAll(async () => {
  h = await startLocal({
    'busy.yaml': `${faultyYaml('busy', 'hold', { serving: { maxConcurrency: 2, maxQueuedCalls: 1 } })}---\n${endpointYaml('busy', [{ model: 'busy' }])}`,
    'brief.yaml': `${faultyYaml('brief', 'hold', { serving: { maxConcurrency: 1, queueTimeoutSeconds: 0.2 } })}---\n${endpointYaml('brief', [{ model: 'brief' }])}`,
  }, { settings: { healthIntervalMs: 600_000 } });
  await h.until((x) => ready(x, 'Endpoint', 'default/busy') && ready(x, 'Endpoint', 'default/brief'), 'both endpoints Ready');
});

afterAll(async () => {
  await h?.stop();
});

function modelUrl(model: string, path: string): string {
  return `${h.model(`default/${model}`)!.status!.replicaAddresses![0]}${path}`;
}

const calls = (model: string): Promise<{ predicts: number; held: number }> => faultyModelCalls(modelUrl(model, ''));
const metric = (name: string): Promise<number> => metricValue(h.url('/metrics'), name);
/** Polls a condition on something outside the store (the model's count, the gateway's metrics). */
const until = (what: string, pred: () => Promise<boolean>): Promise<boolean> => waitFor(pred, what, 20_000, 10);

test('two in flight, one queued, the fourth refused at once with 429 RESOURCE_EXHAUSTED and Retry-After; the queued one goes when a slot frees', async () => {
  const before = (await calls('busy')).predicts;
  const running = [post(h.vertex('busy'), '{"instances": [1]}'), post(h.vertex('busy'), '{"instances": [2]}')];
  await until('two calls held by the model', async () => (await calls('busy')).held === 2);
  const queued = post(h.vertex('busy'), '{"instances": [3]}');
  await until('one call queued', async () => (await metric('predictgate_queued_calls')) === 1);

  const refused = await post(h.vertex('busy'), '{"instances": [4]}');
  expect([refused.status, refused.headers.get('retry-after'), refused.headers.get('connection')]).toEqual([429, '1', 'close']);
  expect(refused.json()).toEqual({ error: { code: 429, status: 'RESOURCE_EXHAUSTED', message: 'deployed model busy has its 2 calls in flight (maxConcurrency 2 per replica, 1 in rotation) and its queue is full (1 waiting, maxQueuedCalls 1 per replica); retry later' } });
  // A streamed rawPredict is held to the same limit.
  const raw = await post(h.vertex('busy', 'rawPredict'), '{"instances": [5]}');
  expect([raw.status, raw.headers.get('retry-after'), (raw.json() as { error: { status: string } }).error.status]).toEqual([429, '1', 'RESOURCE_EXHAUSTED']);

  await fetch(modelUrl('busy', '/release'));
  const first = await Promise.all(running);
  expect(first.map((r) => r.status)).toEqual([200, 200]);
  await until('the queued call held by the model', async () => (await calls('busy')).held === 1);
  await fetch(modelUrl('busy', '/release'));
  expect((await queued).status).toBe(200);
  // The refused calls never reached the model.
  expect((await calls('busy')).predicts - before).toBe(3);
  expect(await metric('predictgate_calls_refused_busy_total{reason="queue_full"}')).toBe(2);
});

test('a call that waits longer than queueTimeoutSeconds for a slot is refused with 429, and the slot holder is unaffected', async () => {
  const holder = post(h.vertex('brief'), '{"instances": [1]}');
  await until('one call held by the model', async () => (await calls('brief')).held === 1);
  const waited = await post(h.vertex('brief'), '{"instances": [2]}');
  expect([waited.status, waited.headers.get('retry-after')]).toEqual([429, '1']);
  expect((waited.json() as { error: { message: string } }).error.message).toBe('deployed model brief had no free slot within queueTimeoutSeconds (0.2 s; maxConcurrency 1 per replica, 1 in rotation); retry later');
  await fetch(modelUrl('brief', '/release'));
  expect((await holder).status).toBe(200);
  expect([(await calls('brief')).predicts, await metric('predictgate_calls_refused_busy_total{reason="queue_timeout"}'), await metric('predictgate_queued_calls')]).toEqual([1, 1, 0]);
});

test('queue settings without maxConcurrency break a rule of the manifest', async () => {
  await h.write('loose.yaml', faultyYaml('loose', 'none', { serving: { maxQueuedCalls: 5 } }));
  await h.until((x) => x.model('default/loose')?.status?.conditions?.some((c) => c.type === 'Ready' && c.reason === 'InvalidSpec') === true, 'loose refused');
  const ready = h.model('default/loose')!.status!.conditions!.find((c) => c.type === 'Ready')!;
  expect(ready.message).toContain('maxQueuedCalls and queueTimeoutSeconds need maxConcurrency');
});
