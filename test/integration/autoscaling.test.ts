// Replicas that follow the calls, in local mode with real model processes: the scale-to-zero sample
// goes to zero after its idle period and stays Ready (ScaledToZero), as does its Endpoint; the first
// call after that waits for a replica and is answered, and so is every call of a burst at zero; calls
// in flight (streams included, for as long as they run) raise the replicas at once and hold them up,
// and once they are over the replicas come down by halves to the minimum, a scale-down taking idle
// replicas and keeping one with a stream running; a call that cannot wait for
// a wake gets 503 model_starting, and one past COLD_START_QUEUE 429 model_busy, both with Retry-After.
// Time for the autoscaler's windows is the test's clock (`now`), moved forward by the test; the
// autoscaler reads it every 50 ms.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startLocal, ready, endpointYaml, post, scaledToZeroByClock, testClock, ROOT, type LocalHarness } from '../helpers/local.js';

const STREAM_MODEL = join(ROOT, 'dist/test/helpers/streamModel.js');
const FAULTY = join(ROOT, 'dist/test/helpers/faultyModel.js');
const sample = readFileSync(join(ROOT, 'crds/samples/scale-to-zero.yaml'), 'utf8');
const PREDICT = JSON.stringify({ instances: [1, 2, 5] });

/** A DeployedModel manifest (as JSON, which YAML reads) with its dedicatedResources and serving. */
function model(name: string, command: string[], dedicatedResources: Record<string, unknown>, more: Record<string, unknown> = {}, env: Record<string, string> = {}): string {
  return JSON.stringify({
    apiVersion: 'prediction.predictgate.dev/v1',
    kind: 'DeployedModel',
    metadata: { name, namespace: 'default' },
    spec: { modelSpec: { framework: 'custom', containerSpec: { command, env: Object.entries(env).map(([n, value]) => ({ name: n, value })), predictRoute: '/v1/chat/completions', healthRoute: '/health' } }, dedicatedResources, ...more },
  }) + '\n';
}

const statusOf = (h: LocalHarness, key: string) => h.model(key)?.status;
const reasonOf = (h: LocalHarness, key: string): string | undefined => statusOf(h, key)?.primaryCondition?.reason;

describe('the scale-to-zero sample', () => {
  const clock = testClock();
  let h: LocalHarness;
  const key = 'default/scale-to-zero';

  beforeAll(async () => {
    h = await startLocal({ 'scale-to-zero.yaml': sample }, { now: clock.now, settings: { autoscaleIntervalMs: 50 } });
    await h.until((x) => ready(x, 'Endpoint', key), 'the Endpoint Ready');
  });
  afterAll(() => h?.stop());

  /** Moves past the stable window and the idle period, and waits for the model to be at zero. */
  const toZero = (): Promise<void> => scaledToZeroByClock(h, clock, key);

  test('it starts with one replica; without a call for idleScaledownPeriod it goes to zero, still Ready, and so is its Endpoint', async () => {
    expect(statusOf(h, key)).toMatchObject({ replicas: 1, readyReplicas: 1 });
    await toZero();
    const s = statusOf(h, key)!;
    expect(s.conditions?.find((c) => c.type === 'Ready')).toMatchObject({ status: 'True', reason: 'ScaledToZero' });
    expect(s.primaryCondition?.message).toMatch(/^scaled to zero after at least 30 s without a call \(idleScaledownPeriod\); the next call wakes it/);
    expect(s.autoscaling).toMatchObject({ desiredReplicas: 0, lastScaleReason: 'ScaledToZero', lastScaleMessage: expect.stringMatching(/^1 → 0 replicas: no call for \d+ s \(idleScaledownPeriod 30 s\)$/) });
    expect(s.replicaAddresses ?? []).toEqual([]);
    await h.until((x) => /scaled to zero/.test(x.endpoint(key)?.status?.conditions?.[0]?.message ?? ''), 'the Endpoint saying so');
    expect(h.endpoint(key)?.status?.conditions?.find((c) => c.type === 'EndpointReady')).toMatchObject({
      status: 'True', reason: 'ResourceReady', message: `Endpoint Ready; scaled to zero, woken by the next call: DeployedModel ${key}`,
    });
  });

  test('the first call at zero waits for a replica and is answered; the model is up again (ScaledFromZero)', async () => {
    if (statusOf(h, key)?.replicas !== 0) await toZero();
    const res = await post(h.vertex('scale-to-zero'), PREDICT, { 'content-type': 'application/json' });
    expect([res.status, res.json()]).toEqual([200, { predictions: [2.5, 3, 4.5], deployedModelId: 'scale-to-zero', modelDisplayName: 'half-plus-two', modelVersionId: '1' }]);
    expect(statusOf(h, key)?.autoscaling).toMatchObject({ desiredReplicas: 1, lastScaleReason: 'ScaledFromZero', lastScaleMessage: '0 → 1 replicas: 1 call waiting' });
    await h.until((x) => reasonOf(x, key) === 'Ready', 'the model Ready with its replica');
  });

  test('a burst of 200 calls at zero: every one is answered, and the replicas follow it (at most maxReplicaCount 3)', async () => {
    await toZero();
    const answers = await Promise.all(Array.from({ length: 200 }, () => post(h.vertex('scale-to-zero'), PREDICT, { 'content-type': 'application/json' })));
    const byStatus = new Map<number, number>();
    for (const a of answers) byStatus.set(a.status, (byStatus.get(a.status) ?? 0) + 1);
    expect(Object.fromEntries(byStatus)).toEqual({ 200: 200 });
    const s = statusOf(h, key)!;
    expect(s.replicas).toBeGreaterThanOrEqual(1);
    expect(s.replicas).toBeLessThanOrEqual(3);
  });
});

describe('calls in flight', () => {
  const clock = testClock();
  let h: LocalHarness;
  const key = 'default/sm';
  const stream = (): Promise<Response> => fetch(h.vertex('llm', 'streamRawPredict'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ events: 1, then: 'hold' }) });

  beforeAll(async () => {
    h = await startLocal({
      'm.yaml': [model('sm', ['node', STREAM_MODEL], { minReplicaCount: 1, maxReplicaCount: 4, autoscaling: { targetConcurrency: 1 } }), endpointYaml('llm', [{ model: 'sm' }])].join('---\n'),
    }, { now: clock.now, settings: { autoscaleIntervalMs: 50 } });
    await h.until((x) => ready(x, 'Endpoint', 'default/llm'), 'the Endpoint Ready');
  });
  afterAll(() => h?.stop());

  test('four streams against a target of 1 per replica reach 4 replicas within a few reads (panic), hold them while they run, and the replicas halve back to 1 once they are over', async () => {
    const first = statusOf(h, key)!.replicaAddresses![0];
    const streams = await Promise.all([stream(), stream(), stream(), stream()]);
    const readers = streams.map((r) => r.text());
    await h.until((x) => statusOf(x, key)?.readyReplicas === 4, 'four replicas ready');
    expect(statusOf(h, key)?.autoscaling).toMatchObject({ desiredReplicas: 4, lastScaleReason: 'ScaledUp', lastScaleMessage: expect.stringMatching(/^[1-3] → 4 replicas: .* target 1 per replica \(panic mode\)$/) });
    // A stable window later the streams still run: they are calls in flight, and no replica leaves.
    clock.advance(61_000);
    await h.mode.autoscaler.afterNextTick();
    expect(statusOf(h, key)).toMatchObject({ replicas: 4, readyReplicas: 4 });
    // The streams were sent to the first replica; released, each ends whole.
    await fetch(`${first}/release`);
    for (const text of await Promise.all(readers)) expect(text).toContain('data: [DONE]');
    expect(streams.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    clock.advance(61_000);
    await h.until((x) => statusOf(x, key)?.replicas === 2, 'halved to 2');
    expect(statusOf(h, key)?.autoscaling).toMatchObject({ lastScaleReason: 'ScaledDown', lastScaleMessage: expect.stringMatching(/^4 → 2 replicas: /) });
    clock.advance(61_000);
    await h.until((x) => statusOf(x, key)?.replicas === 1, 'down to minReplicaCount 1');
    expect(reasonOf(h, key)).toBe('Ready');
  });
});

describe('a scale-down while a stream runs', () => {
  const clock = testClock();
  let h: LocalHarness;
  const key = 'default/sd';
  const stream = (): Promise<Response> => fetch(h.vertex('sd', 'streamRawPredict'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ events: 1, then: 'hold' }) });
  /** The rest of a stream's answer after `head`. */
  const rest = async (reader: ReadableStreamDefaultReader<Uint8Array>, head: string): Promise<string> => {
    let text = head;
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += Buffer.from(r.value).toString();
    return text;
  };
  /** Streams open on a replica (started, neither finished nor left by the client). */
  const openOn = async (address: string): Promise<number> => {
    const c = (await (await fetch(`${address}/calls`)).json()) as { started: number; finished: number; clientClosed: number };
    return c.started - c.finished - c.clientClosed;
  };

  beforeAll(async () => {
    h = await startLocal({
      'm.yaml': [model('sd', ['node', STREAM_MODEL], { minReplicaCount: 1, maxReplicaCount: 4, autoscaling: { targetConcurrency: 1 } }), endpointYaml('sd', [{ model: 'sd' }])].join('---\n'),
    }, { now: clock.now, settings: { autoscaleIntervalMs: 50 } });
    await h.until((x) => ready(x, 'Endpoint', key), 'the Endpoint Ready');
  });
  afterAll(() => h?.stop());

  test('takes the idle replicas and keeps the one with a stream, which ends whole', async () => {
    const first = statusOf(h, key)!.replicaAddresses![0];
    // Four streams on the one replica raise the model to four; released, they end.
    const burst = await Promise.all([stream(), stream(), stream(), stream()]);
    await h.until((x) => statusOf(x, key)?.readyReplicas === 4, 'four replicas ready');
    await fetch(`${first}/release`);
    await Promise.all(burst.map((r) => r.text()));
    // One stream on a replica other than the first (the oldest, which a scale-down that takes the newest would keep anyway).
    let held: { res: Response; text: Promise<string>; on: string } | undefined;
    for (let attempt = 0; attempt < 20 && !held; attempt++) {
      const res = await stream();
      const reader = res.body!.getReader();
      const head = await reader.read();
      const text = rest(reader, Buffer.from(head.value ?? []).toString());
      const addresses = statusOf(h, key)!.replicaAddresses!;
      const on = (await Promise.all(addresses.map(async (a) => ((await openOn(a)) > 0 ? a : undefined)))).find((a) => a !== undefined)!;
      if (on !== first) held = { res, text, on };
      else {
        await fetch(`${first}/release`);
        await text;
      }
    }
    expect(held).toBeDefined();
    const { res, text, on } = held!;
    // A stable window later the one stream asks for one replica: 4 → 2 → 1 by halves, each time taking idle replicas.
    clock.advance(61_000);
    await h.until((x) => statusOf(x, key)?.replicas === 2, 'halved to 2');
    expect(statusOf(h, key)!.replicaAddresses).toContain(on);
    clock.advance(61_000);
    await h.until((x) => statusOf(x, key)?.replicas === 1, 'down to 1');
    expect(statusOf(h, key)!.replicaAddresses).toEqual([on]);
    await fetch(`${on}/release`);
    expect([res.status, (await text).endsWith('data: [DONE]\n\n')]).toEqual([200, true]);
  });
});

describe('a model that cannot wake in time', () => {
  const clock = testClock();
  let h: LocalHarness;
  const key = 'default/slow';

  beforeAll(async () => {
    // Its health checks fail (FAULT_UNHEALTHY): a replica asked for never becomes ready.
    h = await startLocal({
      'm.yaml': [
        model('slow', ['node', FAULTY], { minReplicaCount: 0, maxReplicaCount: 1, autoscaling: { targetConcurrency: 1 }, scaleToZeroSpec: { idleScaledownPeriod: '1s', minScaleupPeriod: '1s' } }, { serving: { timeoutSeconds: 1 } }, { FAULT_UNHEALTHY: '1' }),
        endpointYaml('slow', [{ model: 'slow' }]),
      ].join('---\n'),
    }, { now: clock.now, settings: { autoscaleIntervalMs: 50, coldStartQueue: 2 } });
    await h.until((x) => statusOf(x, key)?.replicas === 1, 'the model starting');
    await h.mode.autoscaler.afterNextTick();
    clock.advance(61_000);
    await h.until((x) => statusOf(x, key)?.replicas === 0 && reasonOf(x, key) === 'ScaledToZero', 'the model at zero');
  });
  afterAll(() => h?.stop());

  test('held calls past COLD_START_QUEUE get 429 model_busy; a held call past its timeoutSeconds gets 503 model_starting; both with Retry-After', async () => {
    const held = [post(h.vertex('slow'), PREDICT, { 'content-type': 'application/json' }), post(h.vertex('slow'), PREDICT, { 'content-type': 'application/json' })];
    await h.until((x) => statusOf(x, key)?.replicas === 1, 'the wake asked for');
    const third = await post(h.vertex('slow'), PREDICT, { 'content-type': 'application/json' });
    expect([third.status, third.headers.get('retry-after'), (third.json() as { error: { status: string; message: string } }).error]).toEqual([429, '1', {
      code: 429, status: 'RESOURCE_EXHAUSTED', message: 'deployed model slow is waking from zero replicas and already holds 2 calls (COLD_START_QUEUE); retry later',
    }]);
    for (const res of await Promise.all(held)) {
      expect([res.status, res.headers.get('retry-after'), (res.json() as { error: unknown }).error]).toEqual([503, '1', {
        code: 503, status: 'UNAVAILABLE', message: 'deployed model slow was scaled to zero and no replica was ready within 1 s; retry later',
      }]);
    }
  });
});
