// Per-model concurrency (admission.ts): slots per ready replica, a first-in-first-out queue with a
// bound and a timeout, 429 model_busy with Retry-After, a client leaving while it waits, and the
// gate forgotten once idle; a model that scales to zero with no replica in rotation holds its calls
// (a bound of its own, 429 model_busy beyond it; 503 model_starting past its deadline) until recheck()
// finds a replica. Timers are the test's: a timeout fires when the test says so.
import { Admission, type AdmissionTarget, type ConcurrencyLimit, type Timers } from '../../src/gateway/admission.js';
import { ApiError } from '../../src/errors.js';
import { CLIENT_ABORTED, type Cancellation } from '../../src/gateway/upstream/transport.js';
import { concurrencyOf } from '../../src/gateway/routing.js';

/** Timers that fire only when `fire` is called, in the order they were set. */
function manualTimers(): Timers & { fire(): void; pending(): number } {
  const timers = new Map<number, () => void>();
  let next = 0;
  return {
    setTimeout: (fn) => (timers.set(++next, fn), next),
    clearTimeout: (h) => void timers.delete(h as number),
    fire() {
      const [id, fn] = timers.entries().next().value as [number, () => void];
      timers.delete(id);
      fn();
    },
    pending: () => timers.size,
  };
}

const M: AdmissionTarget = { modelKey: 'default/m', deployedModelId: 'm' };
const LIMIT: ConcurrencyLimit = { maxConcurrency: 2, maxQueued: 1, queueTimeoutMs: 5000 };

/** Settles to 'in', or to the error's code. */
function outcome(p: Promise<void>): { value: string | undefined } {
  const box: { value: string | undefined } = { value: undefined };
  p.then(() => (box.value = 'in'), (err: unknown) => (box.value = err instanceof ApiError ? err.code : String((err as { code?: string }).code)));
  return box;
}
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

test('maxConcurrency slots per ready replica go at once; the next call waits and takes the first slot freed', async () => {
  const timers = manualTimers();
  const a = new Admission(timers);
  const first = [outcome(a.enter(M, LIMIT, () => 1)), outcome(a.enter(M, LIMIT, () => 1))];
  const waiting = outcome(a.enter(M, LIMIT, () => 1));
  await settle();
  expect([...first.map((o) => o.value), waiting.value]).toEqual(['in', 'in', undefined]);
  expect(a.load('default/m')).toEqual({ inFlight: 2, queued: 1 });
  a.leave('default/m');
  await settle();
  expect(waiting.value).toBe('in');
  expect([a.load('default/m'), timers.pending(), a.stats.queuedTotal]).toEqual([{ inFlight: 2, queued: 0 }, 0, 1]);
});

test('a full queue refuses at once with 429 model_busy, RESOURCE_EXHAUSTED and Retry-After, naming the limit', async () => {
  const a = new Admission(manualTimers());
  await a.enter(M, LIMIT, () => 1);
  await a.enter(M, LIMIT, () => 1);
  void a.enter(M, LIMIT, () => 1);
  const err = await a.enter(M, LIMIT, () => 1).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ApiError);
  const api = err as ApiError;
  expect([api.code, api.httpStatus, api.rpcStatus, api.headers]).toEqual(['model_busy', 429, 'RESOURCE_EXHAUSTED', { 'Retry-After': '1' }]);
  expect(api.message).toBe('deployed model m has its 2 calls in flight (maxConcurrency 2 per replica, 1 in rotation) and its queue is full (1 waiting, maxQueuedCalls 1 per replica); retry later');
  expect(a.stats.refusedQueueFullTotal).toBe(1);
});

test('slots and queue grow with the replicas in rotation: 3 replicas take 6 at once and queue 3', async () => {
  const a = new Admission(manualTimers());
  const calls = Array.from({ length: 10 }, () => outcome(a.enter(M, LIMIT, () => 3)));
  await settle();
  expect(calls.map((c) => c.value)).toEqual(['in', 'in', 'in', 'in', 'in', 'in', undefined, undefined, undefined, 'model_busy']);
});

test('more replicas in rotation give the waiting calls the new slots at once, first come first served', async () => {
  const a = new Admission(manualTimers());
  const limit = { ...LIMIT, maxConcurrency: 1, maxQueued: 2 };
  await a.enter(M, limit, () => 1);
  const waiting = [outcome(a.enter(M, limit, () => 1)), outcome(a.enter(M, limit, () => 1))];
  await settle();
  expect(waiting.map((w) => w.value)).toEqual([undefined, undefined]);
  // The model scaled to 3: the next call sees it, and the two waiting go before it.
  const next = outcome(a.enter(M, limit, () => 3));
  await settle();
  expect([...waiting.map((w) => w.value), next.value]).toEqual(['in', 'in', undefined]);
  expect(a.load('default/m')).toEqual({ inFlight: 3, queued: 1 });
});

test('a call that waits longer than the queue timeout is refused with 429 and leaves its place', async () => {
  const timers = manualTimers();
  const a = new Admission(timers);
  await a.enter(M, LIMIT, () => 1);
  await a.enter(M, LIMIT, () => 1);
  const waiting = a.enter(M, LIMIT, () => 1).catch((e: unknown) => e as ApiError);
  timers.fire();
  const err = await waiting;
  expect([err instanceof ApiError && err.code, (err as ApiError).message, (err as ApiError).headers]).toEqual(['model_busy', 'deployed model m had no free slot within queueTimeoutSeconds (5 s; maxConcurrency 2 per replica, 1 in rotation); retry later', { 'Retry-After': '1' }]);
  expect([a.load('default/m'), a.stats.refusedQueueTimeoutTotal]).toEqual([{ inFlight: 2, queued: 0 }, 1]);
  // The freed slot is not given to the call that gave up.
  a.leave('default/m');
  expect(a.load('default/m')).toEqual({ inFlight: 1, queued: 0 });
});

test('a waiting call whose client leaves fails as client_closed, and a cancelled call is never admitted', async () => {
  const timers = manualTimers();
  const a = new Admission(timers);
  await a.enter(M, LIMIT, () => 1);
  await a.enter(M, LIMIT, () => 1);
  const cancel: Cancellation = { requested: false };
  const waiting = a.enter(M, LIMIT, () => 1, cancel).then(() => ({ code: 'admitted' }), (e: unknown) => e as { code: string });
  cancel.requested = true;
  cancel.onCancel?.();
  expect((await waiting).code).toBe(CLIENT_ABORTED);
  expect([a.load('default/m'), timers.pending(), cancel.onCancel]).toEqual([{ inFlight: 2, queued: 0 }, 0, undefined]);
  expect(((await a.enter(M, LIMIT, () => 1, cancel).catch((e: unknown) => e)) as { code: string }).code).toBe(CLIENT_ABORTED);
});

test('calls are admitted in arrival order', async () => {
  const a = new Admission(manualTimers());
  const limit = { ...LIMIT, maxConcurrency: 1, maxQueued: 3 };
  await a.enter(M, limit, () => 1);
  const order: number[] = [];
  const waits = [1, 2, 3].map((n) => a.enter(M, limit, () => 1).then(() => order.push(n)));
  for (let i = 0; i < 3; i++) {
    a.leave('default/m');
    await waits[i];
  }
  expect(order).toEqual([1, 2, 3]);
});

test('a model with nothing in flight or waiting is forgotten; maxQueuedCalls 0 refuses at once', async () => {
  const a = new Admission(manualTimers());
  await a.enter(M, LIMIT, () => 1);
  a.leave('default/m');
  expect(a.activeModels).toBe(0);
  const none = { ...LIMIT, maxConcurrency: 1, maxQueued: 0 };
  await a.enter(M, none, () => 1);
  expect(((await a.enter(M, none, () => 1).catch((e: unknown) => e)) as ApiError).code).toBe('model_busy');
});

test('spec.serving becomes a limit: Knative\'s ten waiting per slot and 10 s by default, none without maxConcurrency', () => {
  expect(concurrencyOf(undefined)).toBeUndefined();
  expect(concurrencyOf({ timeoutSeconds: 3 })).toBeUndefined();
  expect(concurrencyOf({ maxConcurrency: 4 })).toEqual({ maxConcurrency: 4, maxQueued: 40, queueTimeoutMs: 10_000 });
  expect(concurrencyOf({ maxConcurrency: 4, maxQueuedCalls: 0, queueTimeoutSeconds: 0.5 })).toEqual({ maxConcurrency: 4, maxQueued: 0, queueTimeoutMs: 500 });
});

describe('a model at zero replicas (coldStart)', () => {
  const COLD = concurrencyOf(undefined, { maxHeld: 2, timeoutMs: 30_000 })!;

  test('its call is held, not refused, and goes when recheck() finds a replica in rotation', async () => {
    const timers = manualTimers();
    const a = new Admission(timers);
    let rotation = 0;
    const held = outcome(a.enter(M, COLD, () => rotation));
    await settle();
    expect([held.value, a.load('default/m'), timers.pending()]).toEqual([undefined, { inFlight: 0, queued: 1 }, 1]);
    a.recheck(); // still none
    await settle();
    expect(held.value).toBeUndefined();
    rotation = 1;
    a.recheck();
    await settle();
    expect([held.value, a.load('default/m'), timers.pending()]).toEqual(['in', { inFlight: 1, queued: 0 }, 0]);
  });

  test('beyond maxHeld (COLD_START_QUEUE) the next call is refused with 429 model_busy and Retry-After', async () => {
    const a = new Admission(manualTimers());
    void a.enter(M, COLD, () => 0);
    void a.enter(M, COLD, () => 0);
    const err = (await a.enter(M, COLD, () => 0).catch((e: unknown) => e)) as ApiError;
    expect([err.code, err.httpStatus, err.headers, err.message]).toEqual(['model_busy', 429, { 'Retry-After': '1' }, 'deployed model m is waking from zero replicas and already holds 2 calls (COLD_START_QUEUE); retry later']);
    expect(a.load('default/m')).toEqual({ inFlight: 0, queued: 2 });
  });

  test('a call held past its deadline is refused with 503 model_starting and Retry-After', async () => {
    const timers = manualTimers();
    const a = new Admission(timers);
    const held = a.enter(M, COLD, () => 0).catch((e: unknown) => e);
    timers.fire();
    const err = (await held) as ApiError;
    expect([err.code, err.httpStatus, err.rpcStatus, err.headers, err.message]).toEqual(['model_starting', 503, 'UNAVAILABLE', { 'Retry-After': '1' }, 'deployed model m was scaled to zero and no replica was ready within 30 s; retry later']);
    expect([a.load('default/m'), a.activeModels]).toEqual([{ inFlight: 0, queued: 0 }, 0]);
  });

  test('a held call whose client leaves fails as client_closed and leaves the queue', async () => {
    const timers = manualTimers();
    const a = new Admission(timers);
    const cancel: Cancellation = { requested: false };
    const held = a.enter(M, COLD, () => 0, cancel).then(() => ({ code: 'admitted' }), (e: unknown) => e as { code: string });
    cancel.requested = true;
    cancel.onCancel?.();
    expect((await held).code).toBe(CLIENT_ABORTED);
    expect([a.load('default/m'), timers.pending()]).toEqual([{ inFlight: 0, queued: 0 }, 0]);
  });
});
