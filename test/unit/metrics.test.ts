// Gateway metrics: what the hot path records (batched on its way to prom-client) reads back exactly
// as the same observations made one by one on plain prom-client metrics, at any point a scrape
// comes: before a batch is full, at the batch boundary, and past it. A call is taken in once both
// its handler and its answer are over, in either order, timed to the answer's end. The process
// metrics keep their standard names; the watch counters follow the caches' counts.
import { Counter, Histogram, Registry } from 'prom-client';
import { GatewayMetrics, OBSERVATION_BATCH, type CallRecord, type ModelLabels } from '../../src/gateway/metrics.js';
import { getHeapStatistics } from 'node:v8';
import { collectProcessMetrics, OMITTED_DEFAULT_METRICS } from '../../src/metrics/process.js';
import { registerWatchMetrics, type WatchCounts } from '../../src/metrics/watch.js';

const LATENCY = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const BYTES = [256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864];
const CALL_LABELS = ['endpoint_namespace', 'endpoint', 'deployed_model_namespace', 'deployed_model', 'method'];
const MODEL_LABELS = ['deployed_model_namespace', 'deployed_model'];

/** The same six metrics on plain prom-client, fed one observation at a time. */
function reference() {
  const registry = new Registry();
  const r = [registry];
  return {
    registry,
    requests: new Counter({ name: 'predictgate_requests_total', help: 'x', labelNames: [...CALL_LABELS, 'code'], registers: r }),
    duration: new Histogram({ name: 'predictgate_request_duration_seconds', help: 'x', labelNames: CALL_LABELS, buckets: LATENCY, registers: r }),
    headers: new Histogram({ name: 'predictgate_upstream_headers_seconds', help: 'x', labelNames: MODEL_LABELS, buckets: LATENCY, registers: r }),
    upstream: new Histogram({ name: 'predictgate_upstream_duration_seconds', help: 'x', labelNames: MODEL_LABELS, buckets: LATENCY, registers: r }),
    requestBytes: new Histogram({ name: 'predictgate_request_bytes', help: 'x', labelNames: ['method'], buckets: BYTES, registers: r }),
    responseBytes: new Histogram({ name: 'predictgate_response_bytes', help: 'x', labelNames: ['method'], buckets: BYTES, registers: r }),
  };
}

/** Series lines only (HELP texts differ from the reference's), sorted. */
async function series(registry: Registry): Promise<string[]> {
  return (await registry.metrics()).split('\n').filter((l) => l.startsWith('predictgate_')).sort();
}

/** A clock the test moves by hand, in nanoseconds. */
function manualClock() {
  let ns = 0n;
  return { now: () => ns, set: (seconds: number) => void (ns = BigInt(Math.round(seconds * 1e9))) };
}

/** The routing table's destinations: one object per deployed model, as the gateway passes them. */
const MODELS: ModelLabels[] = [{ modelKey: 'default/m0', deployedModelId: 'm0' }, { modelKey: 'team-b/m1', deployedModelId: 'id-1' }];

/**
 * Call i of a deterministic sequence: two endpoints (one in another namespace than its model),
 * unresolved calls, the TF Serving surface, a few codes, spread values, clients that leave.
 */
function call(i: number) {
  const model = MODELS[i % 2];
  const method = i % 7 === 0 ? 'tfserving' : i % 3 === 0 ? 'rawPredict' : 'predict';
  const unresolved = i % 11 === 0;
  const record: CallRecord = {
    endpoint: unresolved || method === 'tfserving' ? '-' : i % 2 === 0 ? 'default/e0' : 'team-a/e1',
    modelKey: unresolved ? '-' : model.modelKey,
    deployedModelId: unresolved ? '-' : model.deployedModelId,
    method,
    requestBytes: (i * 2654435761) % 5_000_000,
    responseBytes: i % 4 === 0 ? undefined : (i * 40503) % 300_000,
  };
  const delivered = i % 13 !== 0;
  const code = unresolved ? 404 : [200, 200, 200, 400, 503][i % 5];
  return {
    record,
    model,
    unresolved,
    code,
    delivered,
    /** What the counter must say: an undelivered answer that was not an error is a 499. */
    countedCode: !delivered && code < 400 ? 499 : code,
    startSeconds: i * 0.001,
    seconds: ((i * 7919) % 1000) / 10000,
    upstreamHeaders: ((i * 104729) % 1000) / 40000,
    upstreamSeconds: ((i * 104729) % 1000) / 20000,
    /** Whether the answer ends before the handler returns (a small answer) or after (a slow client). */
    responseFirst: i % 2 === 0,
  };
}

function labelValues(r: CallRecord): string[] {
  const split = (k: string) => (k === '-' ? ['-', '-'] : k.split('/'));
  return [...split(r.endpoint), split(r.modelKey)[0], r.deployedModelId, r.method];
}

describe('gateway metrics', () => {
  for (const calls of [1, OBSERVATION_BATCH / 4, OBSERVATION_BATCH / 4 + 1, 3 * OBSERVATION_BATCH + 5]) {
    test(`${calls} calls read back exactly as prom-client fed one by one`, async () => {
      const clock = manualClock();
      const m = new GatewayMetrics({ defaultMetrics: false, now: clock.now });
      const ref = reference();
      for (let i = 0; i < calls; i++) {
        const c = call(i);
        clock.set(c.startSeconds);
        const meter = m.meter(clock.now());
        if (!c.unresolved) {
          m.upstreamHeaders(c.model, c.upstreamHeaders);
          m.upstreamDone(c.model, c.upstreamSeconds);
          ref.headers.labels(c.model.modelKey.split('/')[0], c.model.deployedModelId).observe(c.upstreamHeaders);
          ref.upstream.labels(c.model.modelKey.split('/')[0], c.model.deployedModelId).observe(c.upstreamSeconds);
        }
        clock.set(c.startSeconds + c.seconds);
        if (c.responseFirst) {
          meter.responseOver(c.delivered);
          clock.set(c.startSeconds + c.seconds + 0.5);
          meter.handlerOver(c.record, c.code);
        } else {
          meter.handlerOver(c.record, c.code);
          meter.responseOver(c.delivered);
        }
        const values = labelValues(c.record);
        ref.requests.labels(...values, String(c.countedCode)).inc();
        ref.duration.labels(...values).observe(Number(BigInt(Math.round((c.startSeconds + c.seconds) * 1e9)) - BigInt(Math.round(c.startSeconds * 1e9))) / 1e9);
        ref.requestBytes.labels(c.record.method).observe(c.record.requestBytes);
        if (c.record.responseBytes !== undefined) ref.responseBytes.labels(c.record.method).observe(c.record.responseBytes);
      }
      const got = await series(m.registry);
      expect(got.length).toBeGreaterThan(0);
      expect(got).toEqual(await series(ref.registry));
    });
  }

  const record: CallRecord = { endpoint: 'team-a/e', modelKey: 'team-b/m', deployedModelId: 'm-id', method: 'predict', requestBytes: 10, responseBytes: 20 };
  const labels = 'endpoint_namespace="team-a",endpoint="e",deployed_model_namespace="team-b",deployed_model="m-id",method="predict"';

  /** The count and sum of the duration histogram, and the request counts by code, from one scrape. */
  async function read(m: GatewayMetrics) {
    const text = await m.registry.metrics();
    const one = (re: RegExp) => re.exec(text)?.[1];
    return {
      count: one(new RegExp(`^predictgate_request_duration_seconds_count\\{${labels}\\} (\\S+)$`, 'm')),
      sum: one(new RegExp(`^predictgate_request_duration_seconds_sum\\{${labels}\\} (\\S+)$`, 'm')),
      codes: [...text.matchAll(new RegExp(`^predictgate_requests_total\\{${labels},code="(\\d+)"\\} (\\d+)$`, 'gm'))].map((x) => `${x[1]}:${x[2]}`),
    };
  }

  test('a call is timed to the end of its answer, which may come after its handler returned', async () => {
    const clock = manualClock();
    const m = new GatewayMetrics({ defaultMetrics: false, now: clock.now });
    clock.set(10);
    const meter = m.meter(clock.now());
    clock.set(10.25); // the handler wrote the answer and returned
    meter.handlerOver(record, 200);
    expect(await read(m)).toEqual({ count: undefined, sum: undefined, codes: [] });
    clock.set(12); // a slow client took the last byte
    meter.responseOver(true);
    clock.set(20);
    expect(await read(m)).toEqual({ count: '1', sum: '2', codes: ['200:1'] });
  });

  test('an answer over before the handler returns is timed to its end and counted when the handler returns', async () => {
    const clock = manualClock();
    const m = new GatewayMetrics({ defaultMetrics: false, now: clock.now });
    const meter = m.meter(clock.now());
    clock.set(0.5);
    meter.responseOver(true);
    expect(await read(m)).toEqual({ count: undefined, sum: undefined, codes: [] });
    clock.set(0.75);
    meter.handlerOver(record, 200);
    // A second report of either end changes nothing.
    meter.responseOver(false);
    meter.handlerOver(record, 500);
    expect(await read(m)).toEqual({ count: '1', sum: '0.5', codes: ['200:1'] });
  });

  test('an answer the client did not take whole counts 499, unless it was an error already', async () => {
    const clock = manualClock();
    const m = new GatewayMetrics({ defaultMetrics: false, now: clock.now });
    for (const code of [200, 404, 502]) {
      const meter = m.meter(clock.now());
      meter.handlerOver(record, code);
      meter.responseOver(false);
    }
    expect((await read(m)).codes.sort()).toEqual(['404:1', '499:1', '502:1']);
  });

  test('a scrape between calls takes in what is pending and counts nothing twice', async () => {
    const m = new GatewayMetrics({ defaultMetrics: false });
    const count = async () => {
      const { count: n, codes } = await read(m);
      return [Number(codes[0]?.split(':')[1]), Number(n)];
    };
    m.finished(record, 200, 0.01);
    expect(await count()).toEqual([1, 1]);
    expect(await count()).toEqual([1, 1]);
    for (let i = 0; i < OBSERVATION_BATCH; i++) m.finished(record, 200, 0.01);
    expect(await count()).toEqual([OBSERVATION_BATCH + 1, OBSERVATION_BATCH + 1]);
  });
});

describe('process metrics', () => {
  test('keep prom-client\'s standard names, without the gauges named like counters', async () => {
    const registry = new Registry();
    collectProcessMetrics(registry);
    const text = await registry.metrics();
    for (const name of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'process_start_time_seconds', 'nodejs_heap_size_used_bytes', 'nodejs_eventloop_lag_seconds', 'nodejs_gc_duration_seconds', 'nodejs_active_handles']) {
      expect(text).toMatch(new RegExp(`^# TYPE ${name} `, 'm'));
    }
    expect(OMITTED_DEFAULT_METRICS).toEqual(['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']);
    for (const name of OMITTED_DEFAULT_METRICS) expect(text).not.toContain(name);
    // Every counter ends in _total and nothing else does.
    for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) expect([name, name.endsWith('_total')]).toEqual([name, type === 'counter']);
  });

  test("report the heap's limit as V8 has it", async () => {
    const registry = new Registry();
    collectProcessMetrics(registry);
    const limit = getHeapStatistics().heap_size_limit;
    expect(limit).toBeGreaterThan(0);
    expect((await registry.metrics()).split('\n')).toContain(`predictgate_heap_limit_bytes ${limit}`);
  });
});

describe('watch counters', () => {
  test('follow the caches\' growing counts by resource, from two sources', async () => {
    const registry = new Registry();
    const store: Record<string, WatchCounts> = { deployedmodels: { lists: 1, restarts: 0 }, endpoints: { lists: 1, restarts: 0 } };
    const backend: Record<string, WatchCounts> = { deployments: { lists: 2, restarts: 0 } };
    registerWatchMetrics(registry, () => store, () => backend);
    const lines = async () => (await registry.metrics()).split('\n').filter((l) => /^predictgate_watch_\w+_total\{/.test(l));
    expect(await lines()).toEqual([
      'predictgate_watch_lists_total{resource="deployedmodels"} 1',
      'predictgate_watch_lists_total{resource="endpoints"} 1',
      'predictgate_watch_lists_total{resource="deployments"} 2',
      'predictgate_watch_restarts_total{resource="deployedmodels"} 0',
      'predictgate_watch_restarts_total{resource="endpoints"} 0',
      'predictgate_watch_restarts_total{resource="deployments"} 0',
    ]);
    store.endpoints = { lists: 3, restarts: 2 };
    backend.deployments.restarts = 1;
    expect(await lines()).toEqual([
      'predictgate_watch_lists_total{resource="deployedmodels"} 1',
      'predictgate_watch_lists_total{resource="endpoints"} 3',
      'predictgate_watch_lists_total{resource="deployments"} 2',
      'predictgate_watch_restarts_total{resource="deployedmodels"} 0',
      'predictgate_watch_restarts_total{resource="endpoints"} 2',
      'predictgate_watch_restarts_total{resource="deployments"} 1',
    ]);
  });
});
