// GraphStorm real-time inference through the gateway (local mode in-process, the bundled graphstorm
// model as a real child process): the spec's response body on success, each payload rule answered
// by the gateway with its status code without reaching the model, the model's own errors passed on,
// the GDC form, rawPredict straight to /invocations, and a regression model.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ROOT, startLocal, ready, endpointYaml, post, rawRequest, type LocalHarness } from '../helpers/local.js';

let h: LocalHarness;

const REGRESSION = `apiVersion: prediction.predictgate.dev/v1
kind: DeployedModel
metadata:
  name: gs-regression
  namespace: default
spec:
  modelSpec:
    framework: graphstorm
    gmlTask: node_regression
    containerSpec:
      command: ["predictgate", "model", "graphstorm"]
      env:
        - name: GRAPHSTORM_TASK
          value: node_regression
`;

beforeAll(async () => {
  h = await startLocal({
    'graphstorm.yaml': await readFile(join(ROOT, 'crds/samples/graphstorm.yaml'), 'utf8'),
    'regression.yaml': `${REGRESSION}---\n${endpointYaml('gs-regression', [{ model: 'gs-regression' }])}`,
  });
  await h.until((x) => ready(x, 'Endpoint', 'default/graphstorm') && ready(x, 'Endpoint', 'default/gs-regression'), 'both GraphStorm endpoints Ready');
});

afterAll(async () => {
  await h?.stop();
});

type Json = Record<string, unknown>;

function payload(task = 'node_classification'): Json & { graph: { nodes: Json[]; edges: Json[] }; targets: Json[] } {
  return {
    version: 'gs-realtime-v0.1',
    gml_task: task,
    graph: {
      nodes: [
        { node_type: 'author', node_id: 'a4444', features: { feat: [1, 3] } },
        { node_type: 'author', node_id: 'a39', features: { feat: [0.5, 1.5] } },
        { node_type: 'paper', node_id: 'p1', features: { title: 'ten chars.' } },
      ],
      edges: [
        { edge_type: ['author', 'writing', 'paper'], src_node_id: 'a39', dest_node_id: 'p1', features: {} },
        { edge_type: ['author', 'writing', 'paper'], src_node_id: 'a4444', dest_node_id: 'p1', features: {} },
      ],
    },
    targets: [{ node_type: 'author', node_id: 'a39' }, { node_type: 'paper', node_id: 'p1' }],
  };
}

/**
 * How many calls the gateway has sent to deployed model `id` (its upstream latency histogram count).
 * The line must be there (the first test calls the model): a renamed metric must not make "no call" pass.
 */
async function upstreamCalls(id: string): Promise<number> {
  const text = await (await fetch(h.url('/metrics'))).text();
  const m = new RegExp(`^predictgate_upstream_duration_seconds_count\\{deployed_model_namespace="default",deployed_model="${id}"\\} (\\d+)$`, 'm').exec(text);
  if (!m) throw new Error(`no predictgate_upstream_duration_seconds_count line for ${id} in /metrics`);
  return Number(m[1]);
}

test('predict answers the spec\'s response body, request_uid = the request id, HTTP status = status_code', async () => {
  const r = await post(h.vertex('graphstorm'), JSON.stringify(payload()), { 'x-request-id': 'gs-req-1' });
  expect(r.status).toBe(200);
  expect(r.headers.get('x-request-id')).toBe('gs-req-1');
  expect(r.headers.get('x-vertex-ai-deployed-model-id')).toBe('graphstorm');
  // The bundled model: logits [mean feature value, degree]; text counts length / 10.
  expect(r.json()).toEqual({
    status_code: 200,
    request_uid: 'gs-req-1',
    message: 'Request processed successfully.',
    error: '',
    data: { results: [
      { node_type: 'author', node_id: 'a39', predictions: [1, 1] },
      { node_type: 'paper', node_id: 'p1', predictions: [1, 2] },
    ] },
  });
  expect(Object.keys(r.json() as Json)).toEqual(['status_code', 'request_uid', 'message', 'error', 'data']);
});

test('a node_regression model answers one value per target', async () => {
  const r = await post(h.vertex('gs-regression'), JSON.stringify(payload('node_regression')));
  expect(r.status).toBe(200);
  expect((r.json() as { data: unknown }).data).toEqual({ results: [
    { node_type: 'author', node_id: 'a39', predictions: [2] },
    { node_type: 'paper', node_id: 'p1', predictions: [3] },
  ] });
});

test('the GDC form chooses the GraphStorm endpoint by Host', async () => {
  const r = await rawRequest(h.url('/v1/model:predict'), Buffer.from(JSON.stringify(payload())), { host: 'graphstorm.default.predictgate.internal', 'content-type': 'application/json', 'x-request-id': 'gdc-1' });
  expect([r.status, JSON.parse(r.body.toString())]).toEqual([200, {
    status_code: 200,
    request_uid: 'gdc-1',
    message: 'Request processed successfully.',
    error: '',
    data: { results: [
      { node_type: 'author', node_id: 'a39', predictions: [1, 1] },
      { node_type: 'paper', node_id: 'p1', predictions: [1, 2] },
    ] },
  }]);
});

const REFUSED: [string, (p: ReturnType<typeof payload>) => unknown, number, string][] = [
  ['bad JSON', () => '{"version": "gs-realtime-v0.1",', 400, 'invalid JSON'],
  ['a missing field', (p) => ({ ...p, graph: { nodes: p.graph.nodes } }), 401, 'graph.edges: required field is missing'],
  ['a missing value', (p) => ({ ...p, targets: [] }), 402, 'targets: has no value (empty list)'],
  ['a target node_type not in the graph', (p) => ({ ...p, targets: [{ node_type: 'venue', node_id: 'v1' }] }), 403, 'targets[0].node_type: "venue" is the node_type of no node in graph.nodes (node types: author, paper)'],
  ['a target node_id not in the graph', (p) => ({ ...p, targets: [{ node_type: 'author', node_id: 'a1' }] }), 404, 'targets[0].node_id: "a1" is not a node of type "author" in graph.nodes'],
  ['an edge to a missing node', (p) => ({ ...p, graph: { ...p.graph, edges: [{ edge_type: ['author', 'writing', 'paper'], src_node_id: 'a39', dest_node_id: 'p2', features: {} }] } }), 411, 'graph.edges[0].dest_node_id: node paper/p2 is not in graph.nodes'],
  ['another task', (p) => ({ ...p, gml_task: 'node_regression' }), 421, 'gml_task: "node_regression" does not match the deployed model\'s task "node_classification"'],
];

test.each(REFUSED)('the gateway refuses %s with that status_code, without calling the model', async (_what, edit, status, error) => {
  const before = await upstreamCalls('graphstorm');
  const body = edit(payload());
  const r = await post(h.vertex('graphstorm'), typeof body === 'string' ? body : JSON.stringify(body), { 'x-request-id': `refused-${status}` });
  expect(r.status).toBe(status);
  const json = r.json() as Json;
  expect(Object.keys(json)).toEqual(['status_code', 'request_uid', 'message', 'error', 'data']);
  expect(json).toMatchObject({ status_code: status, request_uid: `refused-${status}`, message: '', data: {} });
  if (error === 'invalid JSON') expect(json.error).toMatch(/^invalid JSON/);
  else expect(json.error).toBe(error);
  expect(await upstreamCalls('graphstorm')).toBe(before);
});

test('an error found by the model (a feature it cannot convert) is passed on with its status_code', async () => {
  const p = payload();
  p.graph.nodes[1].features = { feat: { nested: true } };
  const r = await post(h.vertex('graphstorm'), JSON.stringify(p), { 'x-request-id': 'model-411' });
  expect(r.status).toBe(411);
  expect(r.json()).toEqual({ status_code: 411, request_uid: 'model-411', message: '', error: 'node author/a39 feature feat: an object cannot be a feature tensor; features are numbers, lists of numbers or text', data: {} });
});

test('rawPredict goes to /invocations unchecked: the model answers for itself', async () => {
  const r = await post(h.vertex('graphstorm', 'rawPredict'), JSON.stringify({ ...payload(), gml_task: 'node_regression' }), { 'x-request-id': 'raw-1' });
  expect(r.status).toBe(421);
  // The model's own body (it got the request id in X-Request-Id).
  expect(r.json()).toEqual({ status_code: 421, request_uid: 'raw-1', message: '', error: 'gml_task: "node_regression" does not match the deployed model\'s task "node_classification"', data: {} });
});

test('errors before a GraphStorm model is chosen keep the path\'s dialect; explain is unsupported', async () => {
  const missing = await post(h.vertex('no-such-endpoint'), JSON.stringify(payload()));
  expect([missing.status, missing.json()]).toEqual([404, { error: { code: 404, status: 'NOT_FOUND', message: 'endpoint no-such-endpoint not found in project default' } }]);
  const explain = await post(h.vertex('graphstorm', 'explain'), JSON.stringify({ instances: [1] }));
  expect([explain.status, explain.json()]).toEqual([400, { error: { code: 400, status: 'FAILED_PRECONDITION', message: 'deployed model graphstorm has no explain route (set containerSpec.explainRoute, or use a predictRoute ending in :predict)' } }]);
});
