// A gateway's demand counters (gateway/demand.ts) on an injected clock: calls in flight, calls that
// arrived, the exact integral of calls in flight over time (call-seconds), a held call still in
// flight and announced at once to the listeners and to the reads that wait for one, and read()
// bringing the integral up to the moment of reading.
import { EventEmitter } from 'node:events';
import { Demand, FORGET_IDLE_MS } from '../../src/gateway/demand.js';

function clocked(): { demand: Demand; at(ms: number): void } {
  let now = 0;
  return { demand: new Demand(() => now), at: (ms) => void (now = ms) };
}

test('two overlapping calls: the call-seconds integral is exact, requestsTotal counts both, inFlight follows; each read says the gateway\'s clock', () => {
  const { demand, at } = clocked();
  demand.begin('ns/m'); // A: 0 → 3 s
  at(1000);
  demand.begin('ns/m'); // B: 1 → 4 s
  expect(demand.read().get('ns/m')).toEqual({ inFlight: 2, requestsTotal: 2, callSecondsTotal: 1, clockSeconds: 1 });
  at(3000);
  demand.end('ns/m');
  at(4000);
  demand.end('ns/m');
  at(5000);
  // 1 s alone, 2 s together, 1 s alone: 1 + 4 + 1.
  expect(demand.read().get('ns/m')).toEqual({ inFlight: 0, requestsTotal: 2, callSecondsTotal: 6, clockSeconds: 5 });
});

test('read() brings the integral up to now without disturbing it; models are counted apart', () => {
  const { demand, at } = clocked();
  demand.begin('ns/a');
  at(2500);
  expect(demand.read().get('ns/a')?.callSecondsTotal).toBe(2.5);
  at(4000);
  demand.begin('ns/b');
  const read = demand.read();
  expect([read.get('ns/a'), read.get('ns/b')]).toEqual([
    { inFlight: 1, requestsTotal: 1, callSecondsTotal: 4, clockSeconds: 4 },
    { inFlight: 1, requestsTotal: 1, callSecondsTotal: 0, clockSeconds: 4 },
  ]);
});

test('a held call stays a call in flight, and every onHeld listener hears it at the hold', () => {
  const { demand } = clocked();
  const heard: string[] = [];
  demand.onHeld((key) => heard.push(`first ${key}`));
  demand.onHeld((key) => heard.push(`second ${key}`));
  demand.begin('ns/z');
  demand.hold('ns/z');
  expect(heard).toEqual(['first ns/z', 'second ns/z']);
  expect(demand.read().get('ns/z')).toMatchObject({ inFlight: 1, requestsTotal: 1 });
  expect(heard).toHaveLength(2);
});

test('report() is what GET /stats/demand answers: the models\' counters and the replicas with calls on them', () => {
  let now = 0;
  const busy = new Map([['http://10.0.0.7:8080', 2]]);
  const demand = new Demand(() => now, () => busy);
  demand.begin('ns/m');
  now = 1000;
  demand.hold('ns/m');
  expect(demand.report()).toEqual({ models: { 'ns/m': { inFlight: 1, requestsTotal: 1, callSecondsTotal: 1, clockSeconds: 1 } }, replicas: { 'http://10.0.0.7:8080': 2 }, held: 1 });
  expect(new Demand(() => 0).report()).toEqual({ models: {}, replicas: {}, held: 0 });
});

describe('a read that waits for a held call (waitForHeld)', () => {
  const LONG = 600_000;

  test('answers at once when more than `after` calls were held already; else at the next hold', async () => {
    const demand = new Demand(() => 0);
    demand.hold('ns/a');
    await demand.waitForHeld(0, LONG);
    let over = false;
    const waiting = demand.waitForHeld(1, LONG).then(() => (over = true));
    await Promise.resolve();
    expect(over).toBe(false);
    demand.hold('ns/b');
    await waiting;
    expect(demand.report().held).toBe(2);
  });

  test('a reader that leaves ends its wait; a listener that stops listening hears nothing more', async () => {
    const demand = new Demand(() => 0);
    const res = new EventEmitter();
    const waiting = demand.waitForHeld(0, LONG, res as never);
    expect(res.listenerCount('close')).toBe(1);
    res.emit('close');
    await waiting;
    expect(res.listenerCount('close')).toBe(0);
    const heard: string[] = [];
    const stop = demand.onHeld((key) => heard.push(key));
    demand.hold('ns/a');
    stop();
    demand.hold('ns/b');
    expect(heard).toEqual(['ns/a']);
  });

  test('release (the gateway drains) ends every wait, and later ones do not wait', async () => {
    const demand = new Demand(() => 0);
    const waits = [demand.waitForHeld(0, LONG), demand.waitForHeld(5, LONG)];
    demand.release();
    await Promise.all(waits);
    await demand.waitForHeld(9, LONG);
  });
});

test('a model without a call for FORGET_IDLE_MS is forgotten (a deleted model\'s counters go); one with a call in flight never is', () => {
  const { demand, at } = clocked();
  demand.begin('ns/gone');
  demand.end('ns/gone');
  demand.begin('ns/streaming');
  at(FORGET_IDLE_MS - 1);
  expect([...demand.read().keys()]).toEqual(['ns/gone', 'ns/streaming']);
  at(FORGET_IDLE_MS);
  expect([...demand.read().keys()]).toEqual(['ns/streaming']);
  // Its next call counts from zero again (the autoscaler takes that as a gateway that restarted).
  demand.begin('ns/gone');
  expect(demand.read().get('ns/gone')).toEqual({ inFlight: 1, requestsTotal: 1, callSecondsTotal: 0, clockSeconds: FORGET_IDLE_MS / 1000 });
});
