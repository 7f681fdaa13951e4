// Concurrency across gateway replicas (admission.ts shareOf, peers.ts): each gateway admits its share
// of a model's slots and queue, the shares of all gateways add up to the limit (at least one each),
// a gateway finds its place from its Service's ready endpoints (one not listed counts itself last),
// recognises its own address by interface and port, and a change of the fleet frees waiting calls.
import { Admission, shareOf, type AdmissionTarget, type ConcurrencyLimit, type GatewayShare, type Timers } from '../../src/gateway/admission.js';
import { followShare, ownAddress, placeAmong } from '../../src/gateway/peers.js';
import { ApiError } from '../../src/errors.js';

const noTimers: Timers = { setTimeout: () => 0, clearTimeout: () => undefined };
const M: AdmissionTarget = { modelKey: 'default/m', deployedModelId: 'm' };
const LIMIT: ConcurrencyLimit = { maxConcurrency: 3, maxQueued: 2, queueTimeoutMs: 5000 };

/** How many of `n` calls go at once, and how the rest end (waiting, or the code they are refused with). */
async function admit(a: Admission, n: number, replicas = 1): Promise<string[]> {
  const out: string[] = Array(n).fill('waiting');
  for (let i = 0; i < n; i++) a.enter(M, LIMIT, () => replicas).then(() => (out[i] = 'in'), (e: unknown) => (out[i] = (e as ApiError).code));
  await new Promise((resolve) => setImmediate(resolve));
  return out;
}

test('shares of a total over the gateway replicas add up to it, the remainder to the first ones, at least one each', () => {
  const parts = (total: number, replicas: number) => Array.from({ length: replicas }, (_, index) => shareOf(total, { replicas, index }));
  expect(parts(6, 2)).toEqual([3, 3]);
  expect(parts(7, 3)).toEqual([3, 2, 2]);
  expect(parts(2, 3)).toEqual([1, 1, 1]);
  expect(parts(0, 2)).toEqual([0, 0]);
  expect(parts(Infinity, 2)).toEqual([Infinity, Infinity]);
  expect(shareOf(5, { replicas: 1, index: 0 })).toBe(5);
});

test('two gateways with maxConcurrency 3 on one model replica admit 2 and 1: the fleet lets 3 through, not 6', async () => {
  const first = await admit(new Admission(noTimers, () => ({ replicas: 2, index: 0 })), 5);
  const second = await admit(new Admission(noTimers, () => ({ replicas: 2, index: 1 })), 5);
  // Slots 2 and 1; queue places (2 per replica, 1 replica) 1 and 1.
  expect(first).toEqual(['in', 'in', 'waiting', 'model_busy', 'model_busy']);
  expect(second).toEqual(['in', 'waiting', 'model_busy', 'model_busy', 'model_busy']);
});

test('a refusal at a shared limit says that this gateway admits its share', async () => {
  const a = new Admission(noTimers, () => ({ replicas: 2, index: 1 }));
  await admit(a, 2);
  const err = (await a.enter(M, LIMIT, () => 1).catch((e: unknown) => e)) as ApiError;
  expect(err.message).toBe('deployed model m has its 1 calls in flight (maxConcurrency 3 per replica, 1 in rotation; this gateway admits its share of them, as one of 2 gateway replicas) and its queue is full (1 waiting, maxQueuedCalls 2 per replica); retry later');
});

test('a gateway finds its place among the ready replicas; one not listed counts itself after them; none listed: alone', () => {
  const self = (base: string) => base === 'http://10.0.0.2:8080';
  expect(placeAmong(['http://10.0.0.1:8080', 'http://10.0.0.2:8080', 'http://10.0.0.3:8080'], self)).toEqual({ replicas: 3, index: 1 });
  expect(placeAmong(['http://10.0.0.1:8080', 'http://10.0.0.3:8080'], self)).toEqual({ replicas: 3, index: 2 });
  expect(placeAmong([], self)).toEqual({ replicas: 1, index: 0 });
});

test('its own address is one of the machine\'s interface addresses on its port, IPv6 included', () => {
  const interfaces = { eth0: [{ address: '10.0.0.2' }, { address: 'fd00::2' }] } as unknown as Parameters<typeof ownAddress>[1];
  const own = ownAddress(() => 8080, interfaces);
  expect(['http://10.0.0.2:8080', 'http://[fd00::2]:8080', 'http://10.0.0.2:9090', 'http://10.0.0.3:8080', 'not a url'].map(own)).toEqual([true, true, false, false, false]);
});

test('a second gateway replica halves the share; when it leaves, the waiting calls take the freed slots at once', async () => {
  let replicas = ['http://10.0.0.1:8080', 'http://10.0.0.2:8080'];
  let changed: () => void = () => undefined;
  const peers = { replicas: () => replicas, onChange: (l: () => void) => void (changed = l) };
  let admission: Admission | undefined;
  const share: () => GatewayShare = followShare(peers, (b) => b === 'http://10.0.0.1:8080', () => admission!.recheck());
  admission = new Admission(noTimers, share);
  const calls = await admit(admission, 3);
  expect([share(), calls]).toEqual([{ replicas: 2, index: 0 }, ['in', 'in', 'waiting']]);
  replicas = ['http://10.0.0.1:8080'];
  changed();
  await new Promise((resolve) => setImmediate(resolve));
  expect([share(), calls]).toEqual([{ replicas: 1, index: 0 }, ['in', 'in', 'in']]);
});
