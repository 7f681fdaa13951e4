// Active health checks (health.ts) with the test's clock and probe: a replica out of rotation after
// the threshold of failed checks in a row and back after one passing check; the replicas of a model
// with calls checked at the interval, an idle model's at the slow pace (failing ones included); one
// check at a time per replica; replicas that left the
// table forgotten, unless they come back within the slow interval with failed checks (a Ready flap).
// And the real probe against real servers: 2xx, 5xx, and one that never answers.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Balancer, BALANCER_DEFAULTS } from '../../src/gateway/upstream/balancer.js';
import { HealthChecker, NO_TRAFFIC_INTERVAL_MS, type Clock, type HealthTarget } from '../../src/gateway/upstream/health.js';
import { loadConfig } from '../../src/config.js';

const A = 'http://10.0.0.1:8080';
const B = 'http://10.0.0.2:8080';
const OPTS = { intervalMs: 1000, timeoutMs: 500, unhealthyThreshold: 2, noTrafficIntervalMs: 60_000 };

function setup(targets: HealthTarget[] | (() => readonly HealthTarget[])) {
  const list = typeof targets === 'function' ? targets : () => targets;
  const clock = { t: 0 };
  const testClock: Clock = { now: () => clock.t, every: () => () => undefined };
  const balancer = new Balancer({ ...BALANCER_DEFAULTS, random: () => 0, now: () => clock.t });
  /** Probes asked and not yet answered, by address. */
  const asked: { address: string; answer: (ok: boolean) => void }[] = [];
  // random() = 0: a replica seen for the first time is due at once.
  const checker = new HealthChecker(list, balancer, OPTS, (t) => new Promise<boolean>((resolve) => asked.push({ address: t.address, answer: resolve })), testClock, () => 0);
  /** Answers every open probe of `address` with `ok`. */
  const answer = async (address: string, ok: boolean): Promise<void> => {
    for (let i = asked.length - 1; i >= 0; i--) if (asked[i].address === address) asked.splice(i, 1)[0].answer(ok);
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { clock, balancer, checker, asked, answer };
}

test('two failed checks in a row take a busy replica out of rotation; more failed checks keep it out; one passing check brings it back', async () => {
  const { clock, balancer, checker, answer } = setup([{ address: A, path: '/health', model: 'ns/a' }, { address: B, path: '/health', model: 'ns/b' }]);
  balancer.begin(A);
  balancer.end(A, [A, B], 'success');
  checker.tick();
  await answer(A, false);
  expect(balancer.pick([A, B])).toBe(A);
  clock.t += 1000;
  checker.tick();
  await answer(A, false);
  expect(balancer.unhealthyNow()).toBe(1);
  // random() = 0 would pick A first: it is out, so B takes every call.
  expect([balancer.pick([A, B]), balancer.pick([A, B])]).toEqual([B, B]);
  expect(checker.stats).toEqual({ checksTotal: 3, failedChecksTotal: 2, connectionLossesTotal: 0 });
  // Failed checks after it is out keep it out, however many.
  for (let i = 0; i < 3; i++) {
    clock.t += 1000;
    checker.tick();
    await answer(A, false);
    expect([balancer.unhealthyNow(), balancer.pick([A, B])]).toEqual([1, B]);
  }
  clock.t += 1000;
  checker.tick();
  await answer(A, true);
  expect([balancer.unhealthyNow(), balancer.pick([A, B])]).toEqual([0, A]);
});

test("a model's replicas are checked every interval while it has calls, failing ones included, and once a minute when it has none, failing ones included", async () => {
  const A2 = 'http://10.0.0.3:8080';
  const { clock, balancer, checker, asked, answer } = setup([{ address: A, path: '/health', model: 'ns/a' }, { address: A2, path: '/health', model: 'ns/a' }, { address: B, path: '/health', model: 'ns/b' }]);
  balancer.begin(A);
  balancer.end(A, [A, A2], 'success');
  /** Answers the open checks: A and B pass, A2 fails (or B too, with `bFails`). */
  const answerAll = async (bFails = false): Promise<void> => {
    await answer(A, true);
    await answer(A2, false);
    await answer(B, !bFails);
  };
  const checked: string[][] = [];
  for (let s = 0; s < 5; s++) {
    checker.tick();
    checked.push(asked.map((x) => x.address));
    await answerAll();
    clock.t += 1000;
  }
  // Model a took a call: A and A2 every interval, A2 out after two failed checks and checked on.
  // Model b took none: B is checked when it first appears, then not for a minute.
  expect(checked).toEqual([[A, A2, B], [A, A2], [A, A2], [A, A2], [A, A2]]);
  expect(balancer.unhealthyNow()).toBe(1);
  // A minute after the call, model a is idle too: every replica at the slow pace, failing ones included.
  clock.t = 64_000;
  checker.tick();
  expect(asked.map((x) => x.address)).toEqual([A, A2, B]);
  await answerAll(true);
  clock.t += 1000;
  checker.tick();
  expect(asked).toEqual([]);
  clock.t = 124_000;
  checker.tick();
  expect(asked.map((x) => x.address)).toEqual([A, A2, B]);
  await answerAll(true);
  expect(balancer.unhealthyNow()).toBe(2);
  // A call to model b brings its replicas back to the fast pace, the unhealthy B among them.
  balancer.begin(B);
  balancer.end(B, [B], 'success');
  clock.t += 1000;
  checker.tick();
  expect(asked.map((x) => x.address)).toEqual([B]);
  await answer(B, true);
  expect(balancer.unhealthyNow()).toBe(1);
});

test('replicas seen together are first checked spread over the slow interval, a busy one within an interval', async () => {
  const clock = { t: 100_000 };
  const balancer = new Balancer({ ...BALANCER_DEFAULTS, random: () => 0, now: () => clock.t });
  const asked: string[] = [];
  const draws = [0.5, 0.999];
  const targets = [{ address: A, path: '/health', model: 'ns/a' }, { address: B, path: '/health', model: 'ns/b' }];
  const checker = new HealthChecker(() => targets, balancer, OPTS, (t) => (asked.push(t.address), Promise.resolve(true)), { now: () => clock.t, every: () => () => undefined }, () => draws.shift() ?? 0);
  balancer.begin(B);
  balancer.end(B, [A, B], 'success');
  checker.tick();
  expect(asked).toEqual([]);
  clock.t += 1000;
  checker.tick();
  expect(asked).toEqual([B]);
  await new Promise((resolve) => setImmediate(resolve));
  clock.t += 29_000;
  checker.tick();
  expect(asked).toEqual([B, A, B]);
});

test('a replica that starts taking calls is checked at the fast pace from then on', async () => {
  const { clock, balancer, checker, asked, answer } = setup([{ address: A, path: '/health', model: 'ns/a' }]);
  checker.tick();
  await answer(A, true);
  clock.t += 1000;
  checker.tick();
  expect(asked).toHaveLength(0);
  balancer.begin(A);
  balancer.end(A, [A], 'success');
  checker.tick();
  expect(asked.map((x) => x.address)).toEqual([A]);
});

test('a replica with a check still unanswered gets no second one; a replica gone from the table is forgotten and healthy again', async () => {
  const targets = [{ address: A, path: '/health', model: 'ns/a' }, { address: B, path: '/health', model: 'ns/b' }];
  let list = targets;
  const { clock, balancer, checker, asked, answer } = setup(() => list);
  for (const a of [A, B]) {
    balancer.begin(a);
    balancer.end(a, [A, B], 'success');
  }
  checker.tick();
  await answer(A, false);
  clock.t += 1000;
  checker.tick();
  await answer(A, false);
  clock.t += 1000;
  checker.tick();
  checker.tick();
  expect(asked.filter((x) => x.address === B)).toHaveLength(1);
  expect(balancer.unhealthyNow()).toBe(1);
  // The routing table makes a new list when the replicas change.
  list = targets.slice(1);
  checker.tick();
  expect(balancer.unhealthyNow()).toBe(0);
  // The forgotten replica's late answer changes nothing.
  await answer(A, false);
  expect(balancer.unhealthyNow()).toBe(0);
});

test('a replica out of rotation whose Ready flaps (it leaves the table and comes back within a slow interval) stays out until a check passes; one back later starts afresh', async () => {
  const targets = [{ address: A, path: '/health', model: 'ns/a' }, { address: B, path: '/health', model: 'ns/b' }];
  let list = targets;
  const { clock, balancer, checker, asked, answer } = setup(() => list);
  balancer.begin(A);
  balancer.end(A, [A, B], 'success');
  const failCheck = async (): Promise<void> => {
    checker.tick();
    await answer(A, false);
    clock.t += 1000;
  };
  /** Two failed checks take A out; then it leaves the table for `awayMs` and comes back. */
  const outThenAway = async (awayMs: number): Promise<void> => {
    await failCheck();
    await failCheck();
    expect(balancer.unhealthyNow()).toBe(1);
    list = targets.slice(1);
    checker.tick();
    clock.t += awayMs;
    list = [...targets];
    checker.tick();
  };
  // The kubelet marks it not ready, then ready again 10 s later: it comes back out of rotation, checked at once.
  await outThenAway(10_000);
  expect([balancer.unhealthyNow(), balancer.pick([A, B])]).toEqual([1, B]);
  expect(asked.filter((x) => x.address === A)).toHaveLength(1);
  await answer(A, false);
  expect(balancer.unhealthyNow()).toBe(1);
  clock.t += 1000;
  checker.tick();
  await answer(A, true);
  expect([balancer.unhealthyNow(), balancer.pick([A, B])]).toEqual([0, A]);
  clock.t += 1000;
  // Failing again, then gone for longer than the slow interval: back, it is a replica like a new one.
  await outThenAway(NO_TRAFFIC_INTERVAL_MS);
  expect([balancer.unhealthyNow(), balancer.pick([A, B])]).toEqual([0, A]);
});

test('with the default settings, a busy replica that freezes right after a passing check is out within 3.5 s', async () => {
  const { config } = loadConfig([], {});
  const opts = { intervalMs: config.healthCheckIntervalMs, timeoutMs: config.healthCheckTimeoutMs, unhealthyThreshold: config.unhealthyThreshold, noTrafficIntervalMs: NO_TRAFFIC_INTERVAL_MS };
  const clock = { t: 0 };
  let tickEvery = 0;
  const balancer = new Balancer({ ...BALANCER_DEFAULTS, random: () => 0, now: () => clock.t });
  let frozenAt = Infinity;
  /** Probes started while frozen: they fail once their timeout has passed. */
  const hanging: { startedAt: number; fail: (ok: boolean) => void }[] = [];
  const probe = (): Promise<boolean> => (clock.t < frozenAt ? Promise.resolve(true) : new Promise((resolve) => hanging.push({ startedAt: clock.t, fail: resolve })));
  const checker = new HealthChecker(() => [{ address: A, path: '/health', model: 'ns/a' }], balancer, opts, probe, { now: () => clock.t, every: (ms) => ((tickEvery = ms), () => undefined) }, () => 0);
  checker.start();
  const step = async (): Promise<void> => {
    clock.t += tickEvery;
    for (let i = hanging.length - 1; i >= 0; i--) if (clock.t - hanging[i].startedAt >= opts.timeoutMs) hanging.splice(i, 1)[0].fail(false);
    await new Promise((resolve) => setImmediate(resolve));
    checker.tick();
    await new Promise((resolve) => setImmediate(resolve));
  };
  balancer.begin(A);
  balancer.end(A, [A], 'success');
  checker.tick();
  await new Promise((resolve) => setImmediate(resolve));
  // A check passed at 0; the replica freezes at once.
  frozenAt = 0;
  let outAt: number | undefined;
  while (outAt === undefined && clock.t < 10_000) {
    await step();
    if (balancer.unhealthyNow() === 1) outAt = clock.t;
  }
  expect(tickEvery).toBe(250);
  expect(outAt).toBeLessThanOrEqual(3500);
  await checker.stop();
});

describe('the real probe', () => {
  const servers: Server[] = [];
  afterAll(async () => {
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise((resolve) => s.close(resolve));
    }
  });

  async function serve(handler: Parameters<typeof createServer>[1]): Promise<string> {
    const s = createServer(handler);
    servers.push(s);
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
  }

  test('passes on 2xx from the health route, fails on 5xx and on no answer within the timeout', async () => {
    const paths: string[] = [];
    const ok = await serve((req, res) => (paths.push(req.url ?? ''), res.end('{}')));
    const failing = await serve((_req, res) => ((res.statusCode = 503), res.end('{}')));
    const frozen = await serve(() => undefined);
    const targets = [{ address: ok, path: '/v1/models/m', model: 'ns/ok' }, { address: failing, path: '/health', model: 'ns/failing' }, { address: frozen, path: '/health', model: 'ns/frozen' }];
    const balancer = new Balancer({ ...BALANCER_DEFAULTS, random: Math.random, now: () => performance.now() });
    let ticks = 0;
    const done: Promise<void>[] = [];
    const clock: Clock = { now: () => ticks * 60_000, every: () => () => undefined };
    const checker = new HealthChecker(() => targets, balancer, { ...OPTS, timeoutMs: 200, unhealthyThreshold: 1 }, undefined, clock, () => 0);
    // Wraps the checker's own balancer calls to know when the three verdicts are in.
    const verdicts = new Map<string, boolean>();
    const all = new Promise<void>((resolve) => {
      const set = balancer.setHealthy.bind(balancer);
      balancer.setHealthy = (address, healthy) => {
        set(address, healthy);
        verdicts.set(address, healthy);
        if (verdicts.size === 3) resolve();
      };
    });
    done.push(all);
    checker.tick();
    ticks++;
    await Promise.all(done);
    await checker.stop();
    expect([verdicts.get(ok), verdicts.get(failing), verdicts.get(frozen), paths]).toEqual([true, false, false, ['/v1/models/m']]);
  });
});

test('a replica whose connection was lost is out at once until a check passes; one the checks do not know is left alone', async () => {
  const { clock, balancer, checker, asked, answer } = setup([{ address: A, path: '/health', model: 'ns/a' }, { address: B, path: '/health', model: 'ns/b' }]);
  balancer.begin(A);
  balancer.end(A, [A, B], 'failure');
  checker.tick();
  await answer(A, true);
  await answer(B, true);
  checker.suspect(A);
  checker.suspect(A);
  checker.suspect('http://10.0.0.9:8080');
  expect([balancer.unhealthyNow(), balancer.pick([A, B]), checker.stats.connectionLossesTotal]).toEqual([1, B, 1]);
  clock.t += 1000;
  checker.tick();
  expect(asked.map((x) => x.address)).toContain(A);
  await answer(A, true);
  expect([balancer.unhealthyNow(), balancer.pick([A, B])]).toEqual([0, A]);
});
