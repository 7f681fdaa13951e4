// The balancer on its own, with an injected clock and random source: least outstanding of two
// random picks, the share each replica gets, ejection after consecutive failures (how long, how
// many at once, what happens when all are out, health checks' verdicts among them), and the retry budget.
import { Balancer, BALANCER_DEFAULTS, type BalancerOptions } from '../../src/gateway/upstream/balancer.js';
import { outcomeOf } from '../../src/gateway/upstream/failures.js';
import { ApiError } from '../../src/errors.js';
import { prng } from '../helpers/expect.js';

const A = 'http://10.0.0.1:8080';
const B = 'http://10.0.0.2:8080';
const C = 'http://10.0.0.3:8080';
const THREE = [A, B, C];

function balancer(opts: Partial<BalancerOptions> = {}): { b: Balancer; clock: { now: number } } {
  const clock = { now: 1_000_000 };
  const b = new Balancer({ ...BALANCER_DEFAULTS, random: prng(7), now: () => clock.now, ...opts });
  return { b, clock };
}

/** Fails `n` attempts on `address` in a row. */
function fail(b: Balancer, address: string, addresses: readonly string[], n: number): void {
  for (let i = 0; i < n; i++) {
    b.begin(address);
    b.end(address, addresses, 'failure');
  }
}

test('of the two replicas drawn, the one with fewer calls in flight gets the call', () => {
  // random 0 draws ranks 0 and 1: A and B.
  const { b } = balancer({ random: () => 0 });
  expect(b.pick(THREE)).toBe(A);
  b.begin(A);
  expect(b.pick(THREE)).toBe(B);
  b.begin(B);
  b.begin(B);
  expect(b.pick(THREE)).toBe(A);
  // C is never drawn with this random source, however idle it is.
  expect(b.outstanding(C)).toBe(0);
});

test('each of three replicas gets its share of 10,000 calls within 10% of even, with calls overlapping', () => {
  const { b } = balancer({ random: prng(42) });
  const order = prng(99);
  const counts = new Map<string, number>(THREE.map((a) => [a, 0]));
  const inFlight: string[] = [];
  for (let i = 0; i < 10_000; i++) {
    const a = b.pick(THREE) as string;
    b.begin(a);
    inFlight.push(a);
    counts.set(a, (counts.get(a) ?? 0) + 1);
    // About eight calls in flight, ending in random order.
    while (inFlight.length > 8) {
      const [done] = inFlight.splice(Math.floor(order() * inFlight.length), 1);
      b.end(done, THREE, 'success');
    }
  }
  for (const n of counts.values()) expect(Math.abs(n - 10_000 / 3) / (10_000 / 3)).toBeLessThan(0.1);
});

test('a replica that is much slower than the others gets fewer calls (least outstanding)', () => {
  const { b } = balancer({ random: prng(3) });
  const counts = new Map<string, number>(THREE.map((a) => [a, 0]));
  // A's calls never end during the run; B's and C's end at once.
  for (let i = 0; i < 3000; i++) {
    const a = b.pick(THREE) as string;
    b.begin(a);
    counts.set(a, (counts.get(a) ?? 0) + 1);
    if (a !== A) b.end(a, THREE, 'success');
  }
  expect(counts.get(A)).toBeLessThan(10);
  expect((counts.get(B) ?? 0) + (counts.get(C) ?? 0)).toBeGreaterThan(2990);
});

test('five failures in a row take a replica out for 30 s; it then comes back', () => {
  const { b, clock } = balancer();
  fail(b, A, THREE, 4);
  expect(b.isEjected(A)).toBe(false);
  fail(b, A, THREE, 1);
  expect(b.isEjected(A)).toBe(true);
  expect(b.stats.ejectionsTotal).toBe(1);
  const picked = new Set(Array.from({ length: 200 }, () => b.pick(THREE)));
  expect(picked).toEqual(new Set([B, C]));
  clock.now += 29_999;
  expect(b.isEjected(A)).toBe(true);
  clock.now += 1;
  expect(b.isEjected(A)).toBe(false);
  expect(new Set(Array.from({ length: 200 }, () => b.pick(THREE)))).toEqual(new Set(THREE));
});

test('a success between failures starts the count again; neutral outcomes do not count either way', () => {
  const { b } = balancer();
  fail(b, A, THREE, 4);
  b.begin(A);
  b.end(A, THREE, 'success');
  fail(b, A, THREE, 4);
  b.begin(A);
  b.end(A, THREE, 'neutral');
  expect(b.isEjected(A)).toBe(false);
  fail(b, A, THREE, 1);
  expect(b.isEjected(A)).toBe(true);
});

test('each ejection in a row lasts one base time longer, up to 300 s; a replica serving well for a base time starts from the base again', () => {
  const { b, clock } = balancer();
  const lengths: number[] = [];
  for (let i = 0; i < 12; i++) {
    fail(b, A, THREE, 5);
    const start = clock.now;
    while (b.isEjected(A)) clock.now += 1000;
    lengths.push((clock.now - start) / 1000);
  }
  expect(lengths).toEqual([30, 60, 90, 120, 150, 180, 210, 240, 270, 300, 300, 300]);
  // Back, and serving for 30 s: the next ejection is a first one again.
  clock.now += 30_000;
  b.begin(A);
  b.end(A, THREE, 'success');
  fail(b, A, THREE, 5);
  const start = clock.now;
  while (b.isEjected(A)) clock.now += 1000;
  expect((clock.now - start) / 1000).toBe(30);
});

test('at most half of a model\'s replicas are out at once, but one of two may always go', () => {
  const { b } = balancer();
  fail(b, A, [A, B], 5);
  fail(b, B, [A, B], 5);
  expect([b.isEjected(A), b.isEjected(B)]).toEqual([true, false]);
  const four = [A, B, C, 'http://10.0.0.4:8080'];
  const { b: b4 } = balancer();
  for (const a of four) fail(b4, a, four, 5);
  expect(four.map((a) => b4.isEjected(a))).toEqual([true, true, false, false]);
  // A single replica is never taken out: there is nowhere else to send its calls.
  const { b: b1 } = balancer();
  fail(b1, A, [A], 5);
  expect(b1.isEjected(A)).toBe(false);
  // Ejection can be turned off.
  const { b: off } = balancer({ consecutiveFailures: 0 });
  fail(off, A, THREE, 50);
  expect(off.isEjected(A)).toBe(false);
});

test('when every candidate is out, they are all candidates again; a retry never picks the replica it moves off', () => {
  const { b } = balancer({ maxEjectionPercent: 100 });
  fail(b, A, [A, B], 5);
  fail(b, B, [A, B], 5);
  expect([b.isEjected(A), b.isEjected(B)]).toEqual([true, true]);
  expect(new Set(Array.from({ length: 100 }, () => b.pick([A, B])))).toEqual(new Set([A, B]));
  for (let i = 0; i < 100; i++) expect(b.pick(THREE, A)).not.toBe(A);
  expect(b.pick([A], A)).toBeUndefined();
  expect(b.pick([A, B], A)).toBe(B);
});

test('the retry budget: at least 3 retries in flight, else 20% of the calls in flight; refusals are counted', () => {
  const { b } = balancer();
  expect([b.tryRetry(), b.tryRetry(), b.tryRetry(), b.tryRetry()]).toEqual([true, true, true, false]);
  for (let i = 0; i < 25; i++) b.begin(A);
  // 25 in flight: 20% is 5.
  expect([b.tryRetry(), b.tryRetry(), b.tryRetry()]).toEqual([true, true, false]);
  b.retryDone();
  expect(b.tryRetry()).toBe(true);
  expect(b.stats).toEqual({ ejectionsTotal: 0, retriesTotal: 6, retriesRefusedTotal: 2 });
});

test('what an attempt\'s failure says about its replica', () => {
  const err = (code: string) => Object.assign(new Error(code), { code });
  for (const code of ['ECONNREFUSED', 'ECONNRESET', 'UPSTREAM_TIMEOUT', 'UPSTREAM_IDLE_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_SOCKET', 'EHOSTUNREACH']) {
    expect([code, outcomeOf(err(code))]).toEqual([code, 'failure']);
  }
  for (const code of ['CLIENT_ABORTED', 'ERR_STREAM_PREMATURE_CLOSE']) expect([code, outcomeOf(err(code))]).toEqual([code, 'neutral']);
  expect(outcomeOf(new ApiError('payload_too_large', 'too big'))).toBe('neutral');
});

test('an unhealthy replica counts toward the ejection cap: failures of the last one in rotation do not eject it', () => {
  const { b } = balancer({ random: () => 0 });
  b.setHealthy(A, false);
  fail(b, B, [A, B], 5);
  expect([b.isEjected(B), b.inRotationCount([A, B]), b.pick([A, B]), b.pick([A, B])]).toEqual([false, 1, B, B]);
});

test('when every replica is out, the healthy ejected ones take calls before the unhealthy ones', () => {
  let r = 0;
  const { b } = balancer({ random: () => r, maxEjectionPercent: 100 });
  fail(b, B, THREE, 5);
  b.setHealthy(A, false);
  b.setHealthy(C, false);
  // All three out: B (ejected, but its health checks pass) is the one that takes calls.
  const picks = (): (string | undefined)[] => [0, 0.4, 0.8].map((x) => ((r = x), b.pick(THREE)));
  expect([b.inRotationCount(THREE), ...picks()]).toEqual([0, B, B, B]);
  // None healthy: all of them again, by the draw.
  b.setHealthy(B, false);
  expect(picks()).toEqual([A, B, C]);
});
