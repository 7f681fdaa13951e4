// Gateway metrics: what the hot path records (batched on its way to prom-client) reads back exactly
// as the same observations made one by one on plain prom-client metrics, at any point a scrape
// comes: before a batch is full, at the batch boundary, and past it.
import { Counter, Histogram, Registry } from 'prom-client';
import { GatewayMetrics, OBSERVATION_BATCH } from '../../src/gateway/metrics.js';

const LATENCY = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const BYTES = [256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864];

/** The same five metrics on plain prom-client, fed one observation at a time. */
function reference() {
  const registry = new Registry();
  const r = [registry];
  return {
    registry,
    requests: new Counter({ name: 'predictgate_requests_total', help: 'x', labelNames: ['endpoint', 'deployed_model', 'method', 'code'], registers: r }),
    duration: new Histogram({ name: 'predictgate_request_duration_seconds', help: 'x', labelNames: ['method'], buckets: LATENCY, registers: r }),
    upstream: new Histogram({ name: 'predictgate_upstream_duration_seconds', help: 'x', labelNames: ['deployed_model'], buckets: LATENCY, registers: r }),
    requestBytes: new Histogram({ name: 'predictgate_request_bytes', help: 'x', labelNames: ['method'], buckets: BYTES, registers: r }),
    responseBytes: new Histogram({ name: 'predictgate_response_bytes', help: 'x', labelNames: ['method'], buckets: BYTES, registers: r }),
  };
}

/** Series lines only (HELP texts differ from the reference's), sorted. */
async function series(registry: Registry): Promise<string[]> {
  return (await registry.metrics()).split('\n').filter((l) => l.startsWith('predictgate_')).sort();
}

/** Call i of a deterministic sequence: two endpoints, two methods, a few codes, spread values. */
function call(i: number) {
  const method = i % 3 === 0 ? 'rawPredict' : 'predict';
  return {
    labels: { endpoint: `default/e${i % 2}`, deployedModel: `m${i % 2}`, method },
    code: [200, 200, 200, 400, 503][i % 5],
    seconds: ((i * 7919) % 1000) / 10000,
    upstreamSeconds: ((i * 104729) % 1000) / 20000,
    requestBytes: (i * 2654435761) % 5_000_000,
    responseBytes: i % 4 === 0 ? undefined : (i * 40503) % 300_000,
  };
}

describe('gateway metrics', () => {
  for (const calls of [1, OBSERVATION_BATCH / 4, OBSERVATION_BATCH / 4 + 1, 3 * OBSERVATION_BATCH + 5]) {
    test(`${calls} calls read back exactly as prom-client fed one by one`, async () => {
      const m = new GatewayMetrics({ defaultMetrics: false });
      const ref = reference();
      for (let i = 0; i < calls; i++) {
        const c = call(i);
        m.upstream(c.labels.deployedModel, c.upstreamSeconds);
        m.finished(c.labels, c.code, c.seconds);
        m.bytes(c.labels.method, c.requestBytes, c.responseBytes);
        ref.upstream.labels(c.labels.deployedModel).observe(c.upstreamSeconds);
        ref.requests.labels(c.labels.endpoint, c.labels.deployedModel, c.labels.method, String(c.code)).inc();
        ref.duration.labels(c.labels.method).observe(c.seconds);
        ref.requestBytes.labels(c.labels.method).observe(c.requestBytes);
        if (c.responseBytes !== undefined) ref.responseBytes.labels(c.labels.method).observe(c.responseBytes);
      }
      const got = await series(m.registry);
      expect(got.length).toBeGreaterThan(0);
      expect(got).toEqual(await series(ref.registry));
    });
  }

  test('a scrape between calls takes in what is pending and counts nothing twice', async () => {
    const m = new GatewayMetrics({ defaultMetrics: false });
    const labels = { endpoint: 'default/e', deployedModel: 'm', method: 'predict' };
    const count = async () => {
      const text = await m.registry.metrics();
      return [/^predictgate_requests_total\{[^}]*\} (\d+)$/m, /^predictgate_request_duration_seconds_count\{[^}]*\} (\d+)$/m].map((re) => Number(re.exec(text)?.[1]));
    };
    m.finished(labels, 200, 0.01);
    expect(await count()).toEqual([1, 1]);
    expect(await count()).toEqual([1, 1]);
    for (let i = 0; i < OBSERVATION_BATCH; i++) m.finished(labels, 200, 0.01);
    expect(await count()).toEqual([OBSERVATION_BATCH + 1, OBSERVATION_BATCH + 1]);
  });
});
