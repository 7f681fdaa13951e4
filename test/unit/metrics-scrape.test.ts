// A real scrape of the gateway's /metrics (local mode in-process, the bundled half-plus-two model as
// a child process) after calls of every kind: Prometheus's linter passes on it, every metric in it
// is in docs/metrics.md, and calls to paths and hosts that name nothing add no series of their own.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ROOT, metricLine, post, ready, startLocal, type LocalHarness } from '../helpers/local.js';
import { documentedMetrics, metricNames, promtoolCheck } from '../helpers/metrics.js';

let h: LocalHarness;

beforeAll(async () => {
  h = await startLocal({ 'half-plus-two.yaml': await readFile(join(ROOT, 'crds/samples/half-plus-two.yaml'), 'utf8') });
  await h.until((x) => ready(x, 'Endpoint', 'default/half-plus-two'), 'the half-plus-two Endpoint Ready');
});

afterAll(async () => {
  await h?.stop();
});

const HPT = 'endpoint_namespace="default",endpoint="half-plus-two",deployed_model_namespace="default",deployed_model="half-plus-two"';
const UNRESOLVED = 'endpoint_namespace="-",endpoint="-",deployed_model_namespace="-",deployed_model="-"';

test('a scrape after calls of every kind passes promtool and holds one series per resource, not per URL', async () => {
  const instances = '{"instances": [1.0, 2.0, 5.0]}';
  expect((await post(h.vertex('half-plus-two'), instances)).status).toBe(200);
  expect((await post(h.vertex('half-plus-two', 'rawPredict'), instances)).status).toBe(200);
  expect((await post(h.url('/tfserving/default/half-plus-two/v1/models/half_plus_two:predict'), instances)).status).toBe(200);
  // Paths and a Host that name nothing: each a 404 of its own URL, all in one series.
  expect((await post(h.vertex('no-such-endpoint'), instances)).status).toBe(404);
  expect((await post(h.vertex('another-one', 'predict', 'other-project'), instances)).status).toBe(404);
  expect((await post(h.url('/v1/model:predict'), instances, { host: 'nothing.default.example' })).status).toBe(404);
  expect((await post(h.url('/tfserving/default/no-such-model/v1/models/x:predict'), instances)).status).toBe(404);

  // Calls are counted once both the handler and the answer are over: wait for the last one.
  const { text } = await metricLine(h, /^predictgate_requests_total\{endpoint_namespace="-",endpoint="-",deployed_model_namespace="-",deployed_model="-",method="tfserving",code="404"\} 1$/m);
  expect(text.split('\n').filter((l) => l.startsWith('predictgate_requests_total{')).sort()).toEqual([
    `predictgate_requests_total{${HPT},method="predict",code="200"} 1`,
    `predictgate_requests_total{${HPT},method="rawPredict",code="200"} 1`,
    `predictgate_requests_total{${UNRESOLVED},method="predict",code="404"} 3`,
    `predictgate_requests_total{${UNRESOLVED},method="tfserving",code="404"} 1`,
    'predictgate_requests_total{endpoint_namespace="-",endpoint="-",deployed_model_namespace="default",deployed_model="half-plus-two",method="tfserving",code="200"} 1',
  ].sort());
  expect(text.split('\n').filter((l) => l.startsWith('predictgate_request_duration_seconds_count{')).sort()).toEqual([
    `predictgate_request_duration_seconds_count{${HPT},method="predict"} 1`,
    `predictgate_request_duration_seconds_count{${HPT},method="rawPredict"} 1`,
    `predictgate_request_duration_seconds_count{${UNRESOLVED},method="predict"} 3`,
    `predictgate_request_duration_seconds_count{${UNRESOLVED},method="tfserving"} 1`,
    'predictgate_request_duration_seconds_count{endpoint_namespace="-",endpoint="-",deployed_model_namespace="default",deployed_model="half-plus-two",method="tfserving"} 1',
  ].sort());
  // The model answered three calls: predict, streamed rawPredict and the TF Serving one.
  for (const name of ['predictgate_upstream_headers_seconds', 'predictgate_upstream_duration_seconds']) {
    expect(text).toMatch(new RegExp(`^${name}_count\\{deployed_model_namespace="default",deployed_model="half-plus-two"\\} 3$`, 'm'));
  }

  expect(await promtoolCheck(text)).toEqual({ code: 0, output: '' });

  // Every metric of the scrape is documented; local mode has all of the gateway's but the watch
  // counters, and the gRPC one without GRPC_PORT.
  const documented = [...documentedMetrics('Gateway'), ...documentedMetrics('Controller'), ...documentedMetrics('Process')];
  expect(metricNames(text).filter((n) => !documented.includes(n))).toEqual([]);
  expect(documentedMetrics('Gateway').filter((n) => !metricNames(text).includes(n))).toEqual(['predictgate_grpc_calls_total', 'predictgate_watch_lists_total', 'predictgate_watch_restarts_total']);
  expect(documentedMetrics('Process').filter((n) => !metricNames(text).includes(n))).toEqual([]);
});

test('promtool refuses what the gateway must not expose (the check is live)', async () => {
  const bad = '# HELP x_total A gauge named like a counter.\n# TYPE x_total gauge\nx_total 1\n';
  const result = await promtoolCheck(bad);
  expect(result.code).not.toBe(0);
  expect(result.output).toContain('x_total non-counter metrics should not have "_total" suffix');
});
