// The request autoscaler's decisions: ModelScaler (decide.ts: stable and panic windows, time-weighted
// samples, scale-down by halves and not before a stable window of watching, bounds, waking from zero and
// going to zero), DemandRates (counters read from the gateways turned into samples) and Autoscaler.tick
// (scale written, an Event, the status of the decision, a held call heard at once) with fake demand,
// target, events, clocks and timers. Time is the test's: every sample says when it was taken.
import { ModelScaler, windowsOf, type Decision, type DemandSample } from '../../src/autoscale/decide.js';
import { Autoscaler, DemandRates, type DemandSource, type ScaleTarget } from '../../src/autoscale/autoscaler.js';
import type { ModelDemand, RequestAutoscaling } from '../../src/api/autoscaling.js';
import type { DeployedModel } from '../../src/api/types.js';
import type { EventRecord, EventRecorder } from '../../src/api/events.js';
import type { WorkloadObservation } from '../../src/workload/workload.js';
import { silentLogger } from '../../src/log.js';

const policy = (over: Partial<RequestAutoscaling> = {}): RequestAutoscaling => ({ targetConcurrency: 1, targetRequestsPerSecond: undefined, min: 1, max: 10, scaleToZero: undefined, ...over });

/** A sample of `concurrency` calls in flight over the `spanMs` before `atMs`. */
const at = (atMs: number, concurrency: number, more: Partial<DemandSample> = {}): DemandSample => ({ atMs, spanMs: 2000, concurrency, rate: 0, current: concurrency, ...more });

/**
 * A sample every 2 s from `fromMs` to `toMs` (both included), `load(t)` calls in flight, each followed by
 * a decision applied at once (all replicas ready): the decisions made, as [t, replicas, reason, message].
 */
function run(scaler: ModelScaler, p: RequestAutoscaling, state: { replicas: number }, fromMs: number, toMs: number, load: (t: number) => number): [number, number, string, string][] {
  const made: [number, number, string, string][] = [];
  for (let t = fromMs; t <= toMs; t += 2000) {
    scaler.observe(at(t, load(t)));
    const d = scaler.decide(p, t, state.replicas, state.replicas);
    if (!d) continue;
    made.push([t, d.replicas, d.reason, d.message]);
    state.replicas = d.replicas;
  }
  return made;
}

describe('ModelScaler', () => {
  test('desired = ceil(average concurrency / target) over the 60 s window, each sample weighed by its span', () => {
    const s = new ModelScaler(0);
    s.observe(at(0, 100, { spanMs: 1000 })); // 60 s old at the decision: out of the window
    s.observe(at(45_000, 4, { spanMs: 45_000 }));
    s.observe(at(60_000, 1, { spanMs: 15_000 }));
    // (4 × 45 + 1 × 15) / 60 = 3.25 calls in flight; an unweighted mean (2.5) would ask for 3.
    expect(s.decide(policy(), 60_000, 2, 2)).toEqual<Decision>({ replicas: 4, reason: 'ScaledUp', message: '2 → 4 replicas: 3.25 calls in flight over 60 s, 1 over 6 s, target 1 per replica' });
  });

  test('a shorter stable window (AUTOSCALE_STABLE_WINDOW_SECONDS) averages over it, panics over a tenth of it and scales down once it has passed', () => {
    const w = windowsOf(10);
    expect(w).toEqual({ stableMs: 10_000, panicMs: 1000 });
    const state = { replicas: 1 };
    const s = new ModelScaler(0, w);
    const made: [number, number, string][] = [];
    // 8 calls in flight from 0.5 s to 1.5 s, then none: the 1 s panic window follows the burst as it
    // comes; 10 s after it, the calm stable window lets the replicas halve at each step down to one.
    for (let t = 500; t <= 20_000; t += 500) {
      s.observe({ atMs: t, spanMs: 500, concurrency: t === 1000 || t === 1500 ? 8 : 0, rate: 0, current: 0 });
      const d = s.decide(policy(), t, state.replicas, state.replicas);
      if (d) made.push([t, (state.replicas = d.replicas), d.message]);
    }
    expect(made).toEqual([
      [1000, 4, '1 → 4 replicas: 4 calls in flight over 10 s, 4 over 1 s, target 1 per replica (panic mode)'],
      [1500, 8, '4 → 8 replicas: 5.33 calls in flight over 10 s, 8 over 1 s, target 1 per replica (panic mode)'],
      [11_500, 4, '8 → 4 replicas: 0 calls in flight over 10 s, 0 over 1 s, target 1 per replica'],
      [12_000, 2, '4 → 2 replicas: 0 calls in flight over 10 s, 0 over 1 s, target 1 per replica'],
      [12_500, 1, '2 → 1 replicas: 0 calls in flight over 10 s, 0 over 1 s, target 1 per replica'],
    ]);
  });

  test('the larger of the concurrency and the rate answers', () => {
    const p = policy({ targetConcurrency: 10, targetRequestsPerSecond: 5 });
    const byRate = new ModelScaler(0);
    byRate.observe(at(2000, 10, { rate: 20 }));
    expect(byRate.decide(p, 2000, 3, 3)).toEqual<Decision>({ replicas: 4, reason: 'ScaledUp', message: '3 → 4 replicas: 10 calls in flight over 60 s, 10 over 6 s, target 10 per replica; 20 calls/s over 60 s, 20 over 6 s, target 5 per replica' });
    const byConcurrency = new ModelScaler(0);
    byConcurrency.observe(at(2000, 50, { rate: 5 }));
    expect(byConcurrency.decide(p, 2000, 3, 3)?.replicas).toBe(5);
  });

  test('panic mode follows a burst at once and scales down not at all until the stable window has been calm', () => {
    const state = { replicas: 2 };
    // 2 calls in flight for 54 s, a burst of 20 at 56 s, then nothing.
    const made = run(new ModelScaler(0), policy(), state, 2000, 122_000, (t) => (t <= 54_000 ? 2 : t === 56_000 ? 20 : 0));
    expect(made).toEqual([
      // The 6 s window asks for 8 = (2 + 2 + 20) / 3, at least twice the 2 ready: all at once.
      [56_000, 8, 'ScaledUp', '2 → 8 replicas: 2.64 calls in flight over 60 s, 8 over 6 s, target 1 per replica (panic mode)'],
      // Panic lasts 60 s after it began; only then down, by halves.
      [116_000, 4, 'ScaledDown', '8 → 4 replicas: 0 calls in flight over 60 s, 0 over 6 s, target 1 per replica'],
      [118_000, 2, 'ScaledDown', '4 → 2 replicas: 0 calls in flight over 60 s, 0 over 6 s, target 1 per replica'],
      [120_000, 1, 'ScaledDown', '2 → 1 replicas: 0 calls in flight over 60 s, 0 over 6 s, target 1 per replica'],
    ]);
  });

  test('panic starts when the 6 s window asks for twice the ready replicas, not below', () => {
    const [below, twice] = [3, 4].map((load) => {
      const s = new ModelScaler(0);
      s.observe(at(2000, load));
      return s.decide(policy(), 2000, 2, 2)?.message;
    });
    expect([below, twice]).toEqual([
      '2 → 3 replicas: 3 calls in flight over 60 s, 3 over 6 s, target 1 per replica',
      '2 → 4 replicas: 4 calls in flight over 60 s, 4 over 6 s, target 1 per replica (panic mode)',
    ]);
  });

  test('scale-down at most halves the replicas per decision', () => {
    const s = new ModelScaler(0);
    s.observe(at(60_000, 0));
    const steps: number[] = [];
    for (let replicas = 10; replicas > 1;) steps.push((replicas = s.decide(policy(), 60_000, replicas, replicas)!.replicas));
    expect(steps).toEqual([5, 3, 2, 1]);
  });

  test('no scale-down before a full stable window (60 s) of watching, counted from the constructor\'s sinceMs', () => {
    const s = new ModelScaler(100_000);
    s.observe(at(158_000, 0));
    expect(s.decide(policy(), 158_000, 4, 4)).toBeUndefined();
    s.observe(at(160_000, 0));
    expect(s.decide(policy(), 160_000, 4, 4)).toEqual<Decision>({ replicas: 2, reason: 'ScaledDown', message: '4 → 2 replicas: 0 calls in flight over 60 s, 0 over 6 s, target 1 per replica' });
  });

  test('bounded by maxReplicaCount and minReplicaCount', () => {
    const up = new ModelScaler(0);
    up.observe(at(2000, 100));
    expect(up.decide(policy({ max: 5 }), 2000, 1, 1)).toEqual<Decision>({ replicas: 5, reason: 'ScaledUp', message: '1 → 5 replicas: 100 calls in flight over 60 s, 100 over 6 s, target 1 per replica (panic mode)' });
    const down = new ModelScaler(0);
    down.observe(at(60_000, 0));
    expect(down.decide(policy({ min: 3 }), 60_000, 4, 4)?.replicas).toBe(3);
    expect(down.decide(policy({ min: 3 }), 60_000, 3, 3)).toBeUndefined();
  });

  test('decide returns undefined when nothing changes; a flat load does not flap (16 in flight, target 2: 8, and 8 it stays)', () => {
    const s = new ModelScaler(0);
    expect(s.decide(policy(), 0, 1, 1)).toBeUndefined(); // no sample yet: no load, min 1
    const state = { replicas: 1 };
    expect(run(s, policy({ targetConcurrency: 2 }), state, 2000, 600_000, () => 16)).toEqual([
      [2000, 8, 'ScaledUp', '1 → 8 replicas: 16 calls in flight over 60 s, 16 over 6 s, target 2 per replica (panic mode)'],
    ]);
    expect(state.replicas).toBe(8);
  });

  test('no scale-down below what the panic window asks for: a rising load whose panic ends does not lose replicas it needs', () => {
    // A ramp of 2, 4, 8, 12, 16, 16 calls in flight, 4 s a step, target 2, a 10 s window, a sample a
    // second. The panic begun at 9 s ends at 19 s while the stable average (12.4) still lags the 16
    // calls in flight; scaling to its 7 would queue calls and scale up again a second later.
    const ramp = [2, 4, 8, 12, 16, 16];
    const s = new ModelScaler(-60_000, windowsOf(10));
    let replicas = 1;
    const made: [number, number, string][] = [];
    for (let t = 1000; t <= 24_000; t += 1000) {
      const load = ramp[Math.floor((t - 1) / 4000)];
      s.observe({ atMs: t, spanMs: 1000, concurrency: load, rate: 0, current: load });
      const d = s.decide(policy({ targetConcurrency: 2, max: 8 }), t, replicas, replicas);
      if (d) made.push([t, (replicas = d.replicas), d.reason]);
    }
    expect(made.map(([, n]) => n)).toEqual([2, 4, 6, 8]);
    expect(made.every(([, , reason]) => reason === 'ScaledUp')).toBe(true);
  });

  const ZERO = (idleMs: number, minScaleupMs: number): RequestAutoscaling => policy({ min: 0, scaleToZero: { idleMs, minScaleupMs } });

  test('a model at zero wakes on a held call; one at zero without calls stays there, even for a scaler that just started', () => {
    const s = new ModelScaler(0);
    s.observe(at(2000, 0));
    expect(s.decide(ZERO(60_000, 60_000), 2000, 0, 0)).toBeUndefined();
    s.observe(at(4000, 1, { current: 1 }));
    expect(s.decide(ZERO(60_000, 60_000), 4000, 0, 0)).toEqual<Decision>({ replicas: 1, reason: 'ScaledFromZero', message: '0 → 1 replicas: 1 call waiting' });
  });

  test('to zero only after idleScaledownPeriod without a call', () => {
    const state = { replicas: 0 };
    // Woken by a call at 2 s, another at 10 s; idle 120 s, up at least 1 s.
    const made = run(new ModelScaler(0), ZERO(120_000, 1000), state, 2000, 200_000, (t) => (t === 2000 || t === 10_000 ? 1 : 0));
    expect(made).toEqual([
      [2000, 1, 'ScaledFromZero', '0 → 1 replicas: 1 call waiting'],
      [130_000, 0, 'ScaledToZero', '1 → 0 replicas: no call for 120 s (idleScaledownPeriod 120 s)'],
    ]);
  });

  test('idle for idleScaledownPeriod: to zero at once from any count, whatever the stable window still remembers, once watched for a window', () => {
    const p = policy({ min: 0, max: 8, scaleToZero: { idleMs: 5000, minScaleupMs: 1000 } });
    const s = new ModelScaler(0);
    // 8 calls in flight until 70 s, then none: at 74 s the 60 s average still asks for 8 (in halves:
    // 4), and the idle period has not passed; at 76 s it has, and all go.
    for (let t = 2000; t <= 70_000; t += 2000) s.observe(at(t, 8));
    s.observe(at(72_000, 0));
    s.observe(at(74_000, 0));
    expect(s.decide(p, 74_000, 8, 8)).toBeUndefined();
    s.observe(at(76_000, 0));
    expect(s.decide(p, 76_000, 8, 8)).toEqual<Decision>({ replicas: 0, reason: 'ScaledToZero', message: '8 → 0 replicas: no call for 6 s (idleScaledownPeriod 5 s)' });
    // At zero it stays there while the window still remembers the load, until a call comes.
    for (let t = 78_000; t <= 90_000; t += 2000) {
      s.observe(at(t, 0));
      expect(s.decide(p, t, 0, 0)).toBeUndefined();
    }
    s.observe(at(92_000, 1, { current: 1 }));
    expect(s.decide(p, 92_000, 0, 0)?.reason).toBe('ScaledFromZero');
    // A scaler that has watched for less than a stable window keeps the replicas it found.
    const fresh = new ModelScaler(50_000);
    fresh.observe(at(76_000, 0));
    expect(fresh.decide(p, 76_000, 3, 3)).toBeUndefined();
    fresh.observe(at(110_000, 0));
    expect(fresh.decide(p, 110_000, 3, 3)?.replicas).toBe(0);
  });

  test('and not before minScaleupPeriod after the last wake', () => {
    const state = { replicas: 0 };
    // Idle after 60 s, but up at least 300 s after waking at 2 s.
    const made = run(new ModelScaler(0), ZERO(60_000, 300_000), state, 2000, 400_000, (t) => (t === 2000 ? 1 : 0));
    expect(made).toEqual([
      [2000, 1, 'ScaledFromZero', '0 → 1 replicas: 1 call waiting'],
      [302_000, 0, 'ScaledToZero', '1 → 0 replicas: no call for 300 s (idleScaledownPeriod 60 s)'],
    ]);
  });
});

const demand = (inFlight: number, requestsTotal: number, callSecondsTotal: number): ModelDemand => ({ inFlight, requestsTotal, callSecondsTotal });
const reads = (byGateway: Record<string, Record<string, ModelDemand>>): Map<string, Map<string, ModelDemand>> =>
  new Map(Object.entries(byGateway).map(([g, models]) => [g, new Map(Object.entries(models))]));

describe('DemandRates', () => {
  test('the first read stands for the interval with its calls in flight; later reads difference the counters', () => {
    const r = new DemandRates();
    expect(r.sample(reads({ g1: { 'ns/m': demand(3, 10, 5) } }), 1000, 2000).get('ns/m')).toEqual<DemandSample>({ atMs: 1000, spanMs: 2000, concurrency: 3, rate: 0, current: 3 });
    // 4 call-seconds and 20 calls over 2 s.
    expect(r.sample(reads({ g1: { 'ns/m': demand(1, 30, 9) } }), 3000, 2000).get('ns/m')).toEqual<DemandSample>({ atMs: 3000, spanMs: 2000, concurrency: 2, rate: 10, current: 1 });
  });

  test('counters are differenced over the gateway\'s own time when it reports its clock, not the controller\'s time between reads', () => {
    const r = new DemandRates();
    const at = (clockSeconds: number, callSecondsTotal: number, requestsTotal: number): ModelDemand => ({ inFlight: 1, requestsTotal, callSecondsTotal, clockSeconds });
    r.sample(reads({ g1: { 'ns/m': at(100, 50, 10) } }), 0, 1000);
    // One call in flight the whole second the gateway counted, read 0.98 s apart by the controller:
    // 1 call in flight (not 1.02, which would ask for two replicas), 2 calls/s.
    expect(r.sample(reads({ g1: { 'ns/m': at(101, 51, 12) } }), 980, 1000).get('ns/m')).toEqual<DemandSample>({ atMs: 980, spanMs: 980, concurrency: 1, rate: 2, current: 1 });
    // A gateway without the clock (an older one): the controller's time.
    const old = new DemandRates();
    old.sample(reads({ g1: { 'ns/m': demand(1, 10, 50) } }), 0, 1000);
    expect(old.sample(reads({ g1: { 'ns/m': demand(1, 12, 51) } }), 500, 1000).get('ns/m')).toMatchObject({ concurrency: 2, rate: 4 });
  });

  test('the gateways are summed', () => {
    const r = new DemandRates();
    r.sample(reads({ g1: { 'ns/m': demand(0, 10, 5) }, g2: { 'ns/m': demand(0, 100, 50) } }), 0, 4000);
    const s = r.sample(reads({ g1: { 'ns/m': demand(2, 18, 9) }, g2: { 'ns/m': demand(1, 104, 52) } }), 4000, 4000);
    expect(s.get('ns/m')).toEqual<DemandSample>({ atMs: 4000, spanMs: 4000, concurrency: 1.5, rate: 3, current: 3 });
  });

  test('a gateway whose counters went back (restarted) is differenced from zero, then from its new counters', () => {
    const r = new DemandRates();
    r.sample(reads({ g1: { 'ns/m': demand(0, 100, 80) } }), 0, 2000);
    // No negative load from the drop: what it counted since its restart is the interval's (as Prometheus' rate() takes a reset).
    expect(r.sample(reads({ g1: { 'ns/m': demand(2, 4, 1) } }), 2000, 2000).get('ns/m')).toEqual<DemandSample>({ atMs: 2000, spanMs: 2000, concurrency: 0.5, rate: 2, current: 2 });
    expect(r.sample(reads({ g1: { 'ns/m': demand(0, 8, 3) } }), 4000, 2000).get('ns/m')).toEqual<DemandSample>({ atMs: 4000, spanMs: 2000, concurrency: 1, rate: 2, current: 0 });
  });
});

describe('Autoscaler.tick', () => {
  const model = (name: string, dedicatedResources: Record<string, unknown>): DeployedModel => ({
    apiVersion: 'prediction.predictgate.dev/v1', kind: 'DeployedModel', metadata: { name, namespace: 'ns' },
    spec: { modelSpec: { framework: 'custom', containerSpec: { image: 'x' } }, dedicatedResources },
  } as unknown as DeployedModel);
  const obs = (replicas: number): WorkloadObservation => ({ replicas, runningReplicas: replicas, readyReplicas: replicas, addresses: [], progressing: false });
  const CLOCK = new Date('2026-03-02T10:11:12.345Z');

  /**
   * An autoscaler over fakes: `models` listed, `replicas` per key, `inFlight` per key on one gateway;
   * `replicaCalls`, the calls on each replica address (undefined: a gateway did not answer); the target
   * keeps `busyKept` replicas above a lower count asked for, as for replicas with calls on them.
   */
  function setup(models: DeployedModel[], replicas: Record<string, number>, inFlight: Record<string, number>, more: { replicaCalls?: Map<string, number> | undefined; busyKept?: number } = {}) {
    let held: (key: string) => void = () => undefined;
    const clock = { ms: 10_000 };
    const scaled: [string, number][] = [];
    const given: (ReadonlyMap<string, number>)[] = [];
    const observed: string[] = [];
    const events: [string, EventRecord][] = [];
    const timers: (() => void)[] = [];
    const source: DemandSource = {
      read: () => reads({ g1: Object.fromEntries(Object.entries(inFlight).map(([k, n]) => [k, { inFlight: n, requestsTotal: n, callSecondsTotal: 0 }])) }),
      onHeld: (l) => ((held = l), () => void (held = () => undefined)),
      replicasInFlight: () => ('replicaCalls' in more ? more.replicaCalls : new Map()),
    };
    const target: ScaleTarget = {
      observe: (key) => (observed.push(key), replicas[key] === undefined ? undefined : obs(replicas[key])),
      scale: async (key, n, calls) => {
        given.push(calls);
        const asked = n < replicas[key] ? Math.min(replicas[key], n + (more.busyKept ?? 0)) : n;
        if (asked !== replicas[key]) scaled.push([key, (replicas[key] = asked)]);
        return asked;
      },
    };
    const recorder: EventRecorder = { record: (obj, e) => void events.push([obj.metadata.name, e]) };
    const a = new Autoscaler({
      models: { listDeployedModels: () => models, getDeployedModel: (key) => models.find((m) => `ns/${m.metadata.name}` === key) },
      target, demand: source, events: recorder, logger: silentLogger(), intervalMs: 2000, windows: windowsOf(60),
      now: () => clock.ms, clock: () => CLOCK,
      timers: { setTimeout: (fn) => timers.push(fn), clearTimeout: () => undefined },
    });
    return { a, clock, scaled, given, observed, events, timers, held: (key: string) => held(key) };
  }

  /** A model at 4 replicas with no call, watched for a minute and more: its next tick halves it. */
  async function idleFor70s(f: ReturnType<typeof setup>): Promise<void> {
    await f.a.tick();
    f.clock.ms += 70_000;
    await f.a.tick();
  }
  const idleModel = (): DeployedModel[] => [model('m', { minReplicaCount: 1, maxReplicaCount: 10, autoscaling: { targetConcurrency: 1 } })];

  test('a scale-down hands the target the calls on each replica; replicas it keeps for their calls are in the decision', async () => {
    const calls = new Map([['http://10.0.0.7:8080', 2]]);
    const f = setup(idleModel(), { 'ns/m': 4 }, {}, { replicaCalls: calls, busyKept: 1 });
    await idleFor70s(f);
    const message = '4 → 3 replicas (2 asked for; 1 kept for their calls in flight): 0 calls in flight over 60 s, 0 over 6 s, target 1 per replica';
    expect([f.scaled, f.given]).toEqual([[['ns/m', 3]], [calls]]);
    expect(f.events).toEqual([['m', { type: 'Normal', reason: 'ScaledDown', message }]]);
    expect(f.a.statusOf('ns/m')).toMatchObject({ desiredReplicas: 3, lastScaleMessage: message });
  });

  test('a scale-down that finds every replica it could take busy is no decision: no Event, the status as it was', async () => {
    const f = setup(idleModel(), { 'ns/m': 4 }, {}, { busyKept: 2 });
    await idleFor70s(f);
    expect([f.scaled, f.events, f.a.statusOf('ns/m')]).toEqual([[], [], undefined]);
  });

  test('no scale-down when a gateway did not answer the read (its calls are unknown); a scale-up goes on', async () => {
    const f = setup(idleModel(), { 'ns/m': 4 }, {}, { replicaCalls: undefined });
    await idleFor70s(f);
    expect([f.scaled, f.given]).toEqual([[], []]);
    const up = setup(idleModel(), { 'ns/m': 1 }, { 'ns/m': 3 }, { replicaCalls: undefined });
    await up.a.tick();
    expect(up.scaled).toEqual([['ns/m', 3]]);
  });

  test('writes the scale, records an Event and keeps the decision for the status; models not scaled on calls are skipped', async () => {
    const models = [model('m', { minReplicaCount: 1, maxReplicaCount: 10, autoscaling: { targetConcurrency: 1 } }), model('fixed', { minReplicaCount: 2 }), model('cpu', { minReplicaCount: 1, maxReplicaCount: 4 })];
    const f = setup(models, { 'ns/m': 2, 'ns/fixed': 2, 'ns/cpu': 1 }, { 'ns/m': 3, 'ns/fixed': 50, 'ns/cpu': 50 });
    await f.a.tick();
    const message = '2 → 3 replicas: 3 calls in flight over 60 s, 3 over 6 s, target 1 per replica';
    expect([f.scaled, f.observed]).toEqual([[['ns/m', 3]], ['ns/m']]);
    expect(f.events).toEqual([['m', { type: 'Normal', reason: 'ScaledUp', message }]]);
    expect(f.a.statusOf('ns/m')).toEqual({ desiredReplicas: 3, lastScaleReason: 'ScaledUp', lastScaleMessage: message, lastScaleTime: '2026-03-02T10:11:12Z' });
    expect(f.a.statusOf('ns/fixed')).toBeUndefined();
  });

  test('a held call is decided on at once, without waiting for the timer', async () => {
    const m = model('z', { minReplicaCount: 0, autoscaling: { targetConcurrency: 1 }, scaleToZeroSpec: {} });
    const f = setup([m], { 'ns/z': 0 }, { 'ns/z': 1 });
    f.a.start();
    expect(f.timers).toHaveLength(1);
    const ticked = f.a.afterNextTick();
    f.held('ns/z');
    await ticked;
    expect([f.scaled, f.a.statusOf('ns/z')?.lastScaleMessage, f.events[0][1].reason]).toEqual([[['ns/z', 1]], '0 → 1 replicas: 1 call waiting', 'ScaledFromZero']);
    f.a.stop();
  });

  test('a deleted model\'s decision is forgotten', async () => {
    const models = [model('m', { minReplicaCount: 1, maxReplicaCount: 10, autoscaling: { targetConcurrency: 1 } })];
    const f = setup(models, { 'ns/m': 2 }, { 'ns/m': 3 });
    await f.a.tick();
    expect(f.a.statusOf('ns/m')?.desiredReplicas).toBe(3);
    models.pop();
    await f.a.tick();
    expect(f.a.statusOf('ns/m')).toBeUndefined();
  });
});
