// The gateway through real sockets: local mode in-process, with the bundled models and the faulty
// model as real child processes. Covers predict and rawPredict, both dialects, traffic split, every
// error path, request ids and operations routes.
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { gunzipSync, gzipSync } from 'node:zlib';
import { ROOT, startLocal, ready, faultyYaml, endpointYaml, deployedModelYaml, post, rawRequest, metricLine, FAULTY, type LocalHarness } from '../helpers/local.js';

let h: LocalHarness;
// Deterministic traffic split: the injected random source walks 0.005, 0.015, ... 0.995.
let tick = 0;
const random = (): number => ((tick++ % 100) + 0.5) / 100;

const ENDPOINTS = ['half-plus-two', 'echo', 'slow', 'hold', 'status500', 'garbage', 'html500', 'wrong-count', 'reset', 'unhealthy', 'split', 'small', 'pinned', 'explain-split', 'explain-tf'];

beforeAll(async () => {
  const samples = {
    'half-plus-two.yaml': await readFile(join(ROOT, 'crds/samples/half-plus-two.yaml'), 'utf8'),
    'echo.yaml': await readFile(join(ROOT, 'crds/samples/echo.yaml'), 'utf8'),
  };
  const faults: Record<string, string> = {};
  for (const f of ['status500', 'garbage', 'html500', 'wrong-count', 'reset']) {
    faults[`${f}.yaml`] = `${faultyYaml(f, f)}---\n${endpointYaml(f, [{ model: f }])}`;
  }
  faults['slow.yaml'] = `${faultyYaml('slow', 'slow', { env: { FAULT_DELAY_MS: '3000' }, serving: { timeoutSeconds: 0.3 } })}---\n${endpointYaml('slow', [{ model: 'slow' }])}`;
  // Answers after 2 s, within the default timeout: a call that waits for its model.
  faults['hold.yaml'] = `${faultyYaml('hold', 'slow', { env: { FAULT_DELAY_MS: '2000' } })}---\n${endpointYaml('hold', [{ model: 'hold' }])}`;
  faults['unhealthy.yaml'] = `${faultyYaml('unhealthy', 'none', { env: { FAULT_UNHEALTHY: '1' } })}---\n${endpointYaml('unhealthy', [{ model: 'unhealthy' }])}`;
  faults['split.yaml'] = [faultyYaml('split-a', 'none', { id: 'model-a' }), faultyYaml('split-b', 'none', { id: 'model-b' }),
    endpointYaml('split', [{ model: 'split-a', traffic: 80 }, { model: 'split-b', traffic: 20 }])].join('---\n');
  // All traffic to split-a; split-b (Ready) and unhealthy (never Ready) only by pinning.
  faults['pinned.yaml'] = endpointYaml('pinned', [{ model: 'split-a', traffic: 100 }, { model: 'split-b', traffic: 0 }, { model: 'unhealthy', traffic: 0 }]);
  faults['explain-split.yaml'] = endpointYaml('explain-split', [{ model: 'echo', traffic: 100 }, { model: 'small', traffic: 0 }]);
  // Traffic to a tensorflow model, a pytorch one named by the body.
  faults['explain-tf.yaml'] = endpointYaml('explain-tf', [{ model: 'half-plus-two', traffic: 100 }, { model: 'small', traffic: 0 }]);
  faults['small.yaml'] = [deployedModelYaml({ name: 'small', framework: 'pytorch', command: ['predictgate', 'model', 'echo'], predictRoute: '/v1/models/echo:predict', healthRoute: '/ping' }),
    endpointYaml('small', [{ model: 'small' }], 'default', { maxRequestBytes: 1000 })].join('---\n');
  h = await startLocal({ ...samples, ...faults }, { random });
  await h.until((x) => ENDPOINTS.filter((e) => e !== 'unhealthy').every((e) => ready(x, 'Endpoint', `default/${e}`)), 'every endpoint but one Ready');
});

afterAll(async () => {
  await h?.stop();
});

describe('predict', () => {
  test('half-plus-two answers the reference example exactly, with the Vertex headers', async () => {
    const r = await post(h.vertex('half-plus-two'), '{"instances": [1.0, 2.0, 5.0]}');
    expect(r.status).toBe(200);
    expect(r.text).toBe('{"predictions":[2.5,3,4.5],"deployedModelId":"half-plus-two","modelDisplayName":"half-plus-two","modelVersionId":"1"}');
    expect(r.headers.get('content-type')).toBe('application/json');
    expect(r.headers.get('x-vertex-ai-endpoint-id')).toBe('half-plus-two');
    expect(r.headers.get('x-vertex-ai-deployed-model-id')).toBe('half-plus-two');
    expect(r.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  test('NaN and Infinity survive the trip both ways for tensorflow models', async () => {
    const r = await post(h.vertex('half-plus-two'), '{"instances": [NaN, Infinity, -Infinity, 2.0]}');
    expect(r.status).toBe(200);
    expect(r.text).toBe('{"predictions":[NaN,Infinity,-Infinity,3],"deployedModelId":"half-plus-two","modelDisplayName":"half-plus-two","modelVersionId":"1"}');
  });

  test('TF columnar inputs answer outputs; named row inputs work', async () => {
    const col = await post(h.vertex('half-plus-two'), '{"inputs": {"x": [1.0, 3.0]}}');
    expect([col.status, col.text]).toEqual([200, '{"outputs":[2.5,3.5],"deployedModelId":"half-plus-two","modelDisplayName":"half-plus-two","modelVersionId":"1"}']);
    const named = await post(h.vertex('half-plus-two'), '{"instances": [{"x": 2.0}, {"x": 4.0}], "signature_name": "serving_default"}');
    expect([named.status, named.text]).toEqual([200, '{"predictions":[3,4],"deployedModelId":"half-plus-two","modelDisplayName":"half-plus-two","modelVersionId":"1"}']);
  });

  test('pytorch instances are wrapped as {"data": ...} unless they already are', async () => {
    const r = await post(h.vertex('echo'), '{"instances": [1.5, {"data": [1, 2]}, "text", {"b64": "aGk="}]}');
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text)).toEqual({ predictions: [1.5, [1, 2], 'text', { b64: 'aGk=' }], deployedModelId: 'echo', modelDisplayName: 'echo', modelVersionId: '1' });
  });

  test('the GDC form chooses the endpoint by Host and answers GDC errors', async () => {
    // fetch may not set Host; node:http may.
    const gdc = (host: string, body: string) => rawRequest(h.url('/v1/model:predict'), Buffer.from(body), { host, 'content-type': 'application/json' });
    const ok = await gdc('half-plus-two.default.predictgate.internal', '{"instances": [1.0]}');
    expect([ok.status, ok.body.toString()]).toEqual([200, '{"predictions":[2.5],"deployedModelId":"half-plus-two","modelDisplayName":"half-plus-two","modelVersionId":"1"}']);
    const bad = await gdc('Half-Plus-Two.default.predictgate.internal:8080', '{"instances": []}');
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body.toString())).toEqual({ error: 'instances: expected a non-empty list, got an empty list' });
    const unknown = await gdc('nope.default.predictgate.internal', '{"instances": [1]}');
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.body.toString())).toEqual({ error: 'no endpoint has the FQDN "nope.default.predictgate.internal"; calls on this route choose the endpoint by the Host header ({endpoint}.{namespace}.{domain})' });
    const raw = await rawRequest(h.url('/v1/model:rawPredict'), Buffer.from('abc'), { host: 'echo.default.predictgate.internal' });
    expect(raw.status).toBe(200);
    expect(raw.body.toString()).toBe('abc');
  });

  test('an Endpoint reports its FQDN and traffic split in status', () => {
    expect(h.endpoint('default/split')?.status).toMatchObject({ endpointFQDN: 'split.default.predictgate.internal', trafficSplit: { 'model-a': 80, 'model-b': 20 } });
  });

  test('traffic is split by trafficPercentage (exactly, with the injected random source)', async () => {
    tick = 0;
    const counts: Record<string, number> = {};
    for (let i = 0; i < 100; i++) {
      const r = await post(h.vertex('split'), '{"instances": [1]}');
      expect(r.status).toBe(200);
      const id = JSON.parse(r.text).deployedModelId as string;
      counts[id] = (counts[id] ?? 0) + 1;
      expect(r.headers.get('x-vertex-ai-deployed-model-id')).toBe(id);
    }
    expect(counts).toEqual({ 'model-a': 80, 'model-b': 20 });
  });

  test('X-Request-Id is honoured when sane and generated otherwise', async () => {
    const a = await post(h.vertex('half-plus-two'), '{"instances": [1]}', { 'x-request-id': 'req-123' });
    expect(a.headers.get('x-request-id')).toBe('req-123');
    const b = await post(h.vertex('half-plus-two'), '{"instances": []}', { 'x-request-id': 'req-456' });
    expect(b.headers.get('x-request-id')).toBe('req-456');
    const c = await post(h.vertex('half-plus-two'), '{"instances": [1]}', { 'x-request-id': 'x'.repeat(500) });
    expect(c.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('rawPredict', () => {
  test('JSON goes through unchanged with its content type', async () => {
    const body = '{"anything":  [1, 2.50, NaN]}';
    const r = await post(h.vertex('echo', 'rawPredict'), body);
    expect(r.status).toBe(200);
    expect(r.text).toBe(body);
    expect(r.headers.get('content-type')).toBe('application/json');
    expect(r.headers.get('x-vertex-ai-deployed-model-id')).toBe('echo');
  });

  test('octet-stream bytes go through unchanged', async () => {
    const bytes = randomBytes(4096);
    const res = await fetch(h.vertex('echo', 'rawPredict'), { method: 'POST', body: new Uint8Array(bytes), headers: { 'content-type': 'application/octet-stream' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
  });

  test('no content type in, none out', async () => {
    const { status, headers, body } = await rawRequest(h.vertex('echo', 'rawPredict'), Buffer.from('plain bytes'), {});
    expect(status).toBe(200);
    expect(headers['content-type']).toBeUndefined();
    expect(body.toString()).toBe('plain bytes');
  });

  test('a 5 MB chunked body streams both ways', async () => {
    const bytes = randomBytes(5 * 1024 * 1024);
    const { status, body } = await rawRequest(h.vertex('echo', 'rawPredict'), bytes, { 'content-type': 'application/octet-stream' }, true);
    expect(status).toBe(200);
    expect(createHash('sha256').update(body).digest('hex')).toBe(createHash('sha256').update(bytes).digest('hex'));
  });

  test('a model error status and body are passed through as they are', async () => {
    const r = await post(h.vertex('status500', 'rawPredict'), '{}');
    expect(r.status).toBe(500);
    expect(r.text).toBe('{"error":"model exploded"}');
  });

  test('a client that leaves mid-answer is counted as 499, not blamed on the model', async () => {
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest(h.vertex('echo', 'rawPredict'), { method: 'POST', headers: { 'content-type': 'application/octet-stream' } }, (res) => {
        // The answer has started streaming back: leave now.
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', () => undefined);
      req.write(Buffer.alloc(256 * 1024, 1));
      setImmediate(() => req.write(Buffer.alloc(64 * 1024, 2)));
      req.once('close', () => resolve());
      req.once('timeout', () => reject(new Error('timeout')));
    });
    const { text } = await metricLine(h, /predictgate_requests_total\{endpoint_namespace="default",endpoint="echo",deployed_model_namespace="default",deployed_model="echo",method="rawPredict",code="499"\} 1/);
    expect(text).not.toMatch(/deployed_model="echo",method="rawPredict",code="502"/);
  });

  test('a predict call whose client leaves once it has sent a large body counts 499 and gives its body memory back', async () => {
    // 300 KB: read into a pooled buffer under a reservation; the client leaves once it has sent it (while
    // the gateway reads it or the slow model works: either way nothing stays reserved).
    const body = JSON.stringify({ instances: [{ data: 'x'.repeat(300 * 1024) }] });
    await new Promise<void>((resolve) => {
      const req = httpRequest(h.vertex('slow'), { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': String(body.length) } });
      req.once('error', () => resolve());
      req.once('finish', () => {
        req.destroy();
        resolve();
      });
      req.end(body);
    });
    const { match, text } = await metricLine(h, /^predictgate_requests_total\{endpoint_namespace="default",endpoint="slow",deployed_model_namespace="default",deployed_model="slow",method="predict",code="(\d+)"\} 1$/m);
    expect(match[1]).toBe('499');
    expect(text).toMatch(/^predictgate_body_memory_reserved_bytes 0$/m);
    expect(text).toMatch(/^predictgate_body_memory_waiting_calls 0$/m);
  });

  test('a large predict call waiting for its model holds no body memory: its request share went back once sent', async () => {
    const instance = 'x'.repeat(300 * 1024);
    const before = h.mode.calls().started;
    const call = post(h.vertex('hold'), JSON.stringify({ instances: [{ data: instance }] }), { 'content-type': 'application/json' });
    // In flight with nothing reserved: the model (2 s) holds the call after the gateway sent it the
    // body, which was admitted and read under a 300 KB reservation in the same turn the call counted
    // as in flight (so a scrape never sees the call without it until it is sent).
    await metricLine(h, /^(?=[\s\S]*^predictgate_requests_in_flight 1$)(?=[\s\S]*^predictgate_body_memory_reserved_bytes 0$)/m);
    // What the memory trim watches: the call counts as started and in flight (scrapes do not count).
    expect(h.mode.calls()).toEqual({ started: before + 1, inFlight: 1 });
    const res = await call;
    expect(res.status).toBe(200);
    expect(res.json()).toMatchObject({ predictions: [{ data: instance }], deployedModelId: 'hold' });
    // The handler wrote the answer and the call's bookkeeping ran in the same turn, before the
    // answer could reach this client: the call is over by now.
    expect(h.mode.calls()).toEqual({ started: before + 1, inFlight: 0 });
  });

  test('a model that resets mid-answer aborts the client connection (never a truncated 200)', async () => {
    await expect(rawRequest(h.vertex('reset', 'rawPredict'), Buffer.from('{}'), { 'content-type': 'application/json' })).rejects.toThrow();
    // The gateway aborted that connection because of the model: a 502, not a client that left (499).
    const line = /^predictgate_requests_total\{endpoint_namespace="default",endpoint="reset",deployed_model_namespace="default",deployed_model="reset",method="rawPredict",code="(\d+)"\} 1$/m;
    const { match } = await metricLine(h, line);
    expect(match[1]).toBe('502');
  });
});

describe('errors', () => {
  const vertexError = (code: number, status: string, message: string | RegExp) => ({
    error: { code, status, message: typeof message === 'string' ? message : expect.stringMatching(message) },
  });

  test.each([
    ['unknown endpoint', 'nope', '{"instances":[1]}', 404, 'NOT_FOUND', 'endpoint nope not found in project default'],
    ['bad JSON', 'half-plus-two', '{"instances": [1,', 400, 'INVALID_ARGUMENT', /^invalid JSON: /],
    ['empty body', 'half-plus-two', '', 400, 'INVALID_ARGUMENT', 'request body is empty; expected a JSON object'],
    ['missing instances', 'half-plus-two', '{"parameters": {}}', 400, 'INVALID_ARGUMENT', 'body: missing required field "instances"; expected "instances" or "inputs", optionally "signature_name" and "parameters"'],
    ['mixed list', 'half-plus-two', '{"instances": [[1, "a"]]}', 400, 'INVALID_ARGUMENT', /^instances\[0\]\[1\]: expected a number like the items before it, got a string \(a list must not mix strings and numbers\)$/],
    ['bad base64', 'echo', '{"instances": [{"data": {"b64": "!!!"}}]}', 400, 'INVALID_ARGUMENT', /^instances\[0\]\.data\.b64: expected valid base64/],
    ['model not Ready', 'unhealthy', '{"instances":[1]}', 503, 'UNAVAILABLE', /^endpoint unhealthy has no Ready deployed model with traffic/],
    ['model slow', 'slow', '{"instances":[1]}', 504, 'DEADLINE_EXCEEDED', 'deployed model slow did not answer within 0.3 s'],
    ['model 500', 'status500', '{"instances":[1]}', 500, 'INTERNAL', 'model exploded'],
    ['model HTML 500', 'html500', '{"instances":[1]}', 500, 'INTERNAL', 'deployed model html500 answered HTTP 500 with an HTML page'],
    ['model garbage', 'garbage', '{"instances":[1]}', 502, 'INTERNAL', /^deployed model garbage answered with a body that is not a JSON object/],
    ['wrong prediction count', 'wrong-count', '{"instances":[1,2,3]}', 502, 'INTERNAL', 'deployed model wrong-count returned 1 prediction for 3 instances; expected exactly one per instance'],
    ['model reset', 'reset', '{"instances":[1]}', 502, 'UNAVAILABLE', /^deployed model reset closed the connection before answering/],
    ['too large (declared)', 'small', JSON.stringify({ instances: ['x'.repeat(2000)] }), 413, 'INVALID_ARGUMENT', /^request body of \d+ bytes is larger than the limit of 1000 bytes$/],
  ])('%s', async (_name, endpoint, body, code, status, message) => {
    const r = await post(h.vertex(endpoint), body);
    expect(r.status).toBe(code);
    expect(r.headers.get('content-type')).toBe('application/json');
    expect(JSON.parse(r.text)).toEqual(vertexError(code, status, message));
  });

  test('too large without Content-Length (chunked) on predict and rawPredict', async () => {
    for (const verb of ['predict', 'rawPredict']) {
      const { status, body } = await rawRequest(h.vertex('small', verb), Buffer.alloc(5000, 0x20), { 'content-type': 'application/json' }, true);
      expect(status).toBe(413);
      expect(JSON.parse(body.toString())).toEqual(vertexError(413, 'INVALID_ARGUMENT', 'request body is larger than the limit of 1000 bytes'));
    }
  });

  test('malformed percent escapes in the path are a JSON 400, and the gateway keeps serving', async () => {
    const r = await post(h.url('/v1/projects/def%ZZ/locations/l/endpoints/e%:predict'), '{}');
    expect([r.status, JSON.parse(r.text)]).toEqual([400, { error: { code: 400, status: 'INVALID_ARGUMENT', message: 'the path /v1/projects/def%ZZ/locations/l/endpoints/e%:predict has a malformed percent-escape' } }]);
    const escaped = await post(h.vertex('half%2Dplus-two'), '{"instances": [1]}');
    expect([escaped.status, escaped.text]).toEqual([200, '{"predictions":[2.5],"deployedModelId":"half-plus-two","modelDisplayName":"half-plus-two","modelVersionId":"1"}']);
  });

  test('a body nested deeper than the limit is refused before it is parsed', async () => {
    const deep = `{"instances": [${'['.repeat(5000)}${']'.repeat(5000)}]}`;
    const r = await post(h.vertex('echo'), deep);
    expect(r.status).toBe(400);
    expect(JSON.parse(r.text).error.message).toBe('body: nesting deeper than 64 levels');
    const list = await post(h.vertex('echo'), `${'['.repeat(100000)}${']'.repeat(100000)}`);
    expect(JSON.parse(list.text).error.message).toBe('body: expected a JSON object, got list');
  });

  test('a malformed percent-escape in a path is a 400, not a 404 or an internal error', async () => {
    const r = await fetch(h.url('/apis/prediction.predictgate.dev/v1/namespaces/%E0%A4%A/endpoints/x'));
    expect([r.status, await r.json()]).toEqual([400, { error: { code: 400, status: 'INVALID_ARGUMENT', message: 'the path /apis/prediction.predictgate.dev/v1/namespaces/%E0%A4%A/endpoints/x has a malformed percent-escape' } }]);
    const p = await fetch(h.url('/v1/projects/%E0%A4%A/locations/l/endpoints/e:predict'), { method: 'POST', body: '{}' });
    expect([p.status, (await p.json()).error.status]).toEqual([400, 'INVALID_ARGUMENT']);
  });

  test('malformed HTTP gets a JSON 400', async () => {
    const { connect } = await import('node:net');
    const answer = await new Promise<string>((resolve, reject) => {
      const sock = connect(h.mode.port, '127.0.0.1', () => sock.write('POST /v1 HTTP/1.1\r\nContent-Length: nope\r\n\r\n'));
      let text = '';
      sock.on('data', (d: Buffer) => (text += d.toString()));
      sock.on('end', () => resolve(text));
      sock.on('error', reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toEqual({ error: { code: 400, status: 'INVALID_ARGUMENT', message: 'malformed HTTP request: the Content-Length header is not a number (HPE_INVALID_CONTENT_LENGTH)' } });
  });

  test('malformed HTTP pipelined after a call waits for that call\'s answer, then gets its JSON 400', async () => {
    const { connect } = await import('node:net');
    const body = '{"pipelined": [1, 2]}';
    const path = new URL(h.vertex('echo', 'rawPredict')).pathname;
    const answer = await new Promise<string>((resolve) => {
      const sock = connect(h.mode.port, '127.0.0.1', () => sock.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}` +
        'POST /v1 HTTP/1.1\r\nContent-Length: nope\r\n\r\n'));
      let text = '';
      sock.on('data', (d: Buffer) => (text += d.toString()));
      // A connection cut short shows as a missing answer below.
      sock.on('error', () => undefined);
      sock.on('close', () => resolve(text));
    });
    const second = answer.indexOf('HTTP/1.1 400 Bad Request\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(second).toBeGreaterThan(0);
    expect(answer.slice(answer.indexOf('\r\n\r\n') + 4, second)).toBe(body);
    const tail = answer.slice(second);
    expect(JSON.parse(tail.slice(tail.indexOf('\r\n\r\n') + 4))).toEqual({ error: { code: 400, status: 'INVALID_ARGUMENT', message: 'malformed HTTP request: the Content-Length header is not a number (HPE_INVALID_CONTENT_LENGTH)' } });
  });

  test('wrong method is 405, unknown route is 404, both JSON', async () => {
    const get = await fetch(h.vertex('half-plus-two'));
    expect([get.status, await get.json()]).toEqual([405, { error: { code: 405, status: 'UNIMPLEMENTED', message: 'GET is not allowed on /v1/projects/default/locations/local/endpoints/half-plus-two:predict; it takes POST' } }]);
    expect(get.headers.get('allow')).toBe('POST');
    const nowhere = await fetch(h.url('/nowhere'));
    expect([nowhere.status, await nowhere.json()]).toEqual([404, { error: { code: 404, status: 'NOT_FOUND', message: 'no route for GET /nowhere; prediction calls are POST /v1/projects/{project}/locations/{location}/endpoints/{endpoint}:predict or :rawPredict' } }]);
  });
});

describe('operations', () => {
  test('healthz and readyz', async () => {
    expect(await (await fetch(h.url('/healthz'))).json()).toEqual({ status: 'ok' });
    const r = await fetch(h.url('/readyz'));
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ status: 'ready' });
  });

  test('metrics count calls by endpoint, deployed model, method and code', async () => {
    await post(h.vertex('half-plus-two'), '{"instances": [1]}');
    const text = await (await fetch(h.url('/metrics'))).text();
    expect(text).toMatch(/predictgate_requests_total\{endpoint_namespace="default",endpoint="half-plus-two",deployed_model_namespace="default",deployed_model="half-plus-two",method="predict",code="200"\} \d+/);
    expect(text).toMatch(/predictgate_requests_total\{endpoint_namespace="-",endpoint="-",deployed_model_namespace="-",deployed_model="-",method="predict",code="404"\} \d+/);
    expect(text).toContain('predictgate_upstream_headers_seconds_bucket');
    expect(text).toContain('predictgate_upstream_duration_seconds_bucket');
    expect(text).toContain('predictgate_requests_in_flight');
    expect(text).toContain('predictgate_request_bytes_bucket');
    expect(text).toContain('predictgate_reconcile_total');
  });

  test('the status API shows the reference primaryCondition shape', () => {
    const pc = h.model('default/half-plus-two')?.status?.primaryCondition;
    expect(pc).toEqual({
      firstObservedTime: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
      lastUpdateTime: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
      message: 'DeployedModel is ready',
      observedGeneration: 1,
      reason: 'Ready',
      resourceName: 'half-plus-two',
      type: 'DeployedModel',
    });
  });

  test('the status API takes a trailing slash and any letter case in its fixed parts, as kubectl-style paths did', async () => {
    const exact = await fetch(h.url('/apis/prediction.predictgate.dev/v1/namespaces/default/endpoints/echo'));
    const expected = await exact.json();
    expect([exact.status, (expected as { metadata: { name: string } }).metadata.name]).toEqual([200, 'echo']);
    for (const path of ['/apis/prediction.predictgate.dev/v1/namespaces/default/endpoints/echo/', '/APIS/prediction.predictgate.dev/V1/namespaces/default/endpoints/echo']) {
      const r = await fetch(h.url(path));
      expect([path, r.status, await r.json()]).toEqual([path, 200, expected]);
    }
    const list = await fetch(h.url('/apis/prediction.predictgate.dev/v1/endpoints/'));
    expect([list.status, ((await list.json()) as { kind: string }).kind]).toEqual([200, 'EndpointList']);
  });
});

test('the faulty model helper exists where the manifests expect it', async () => {
  expect((await stat(FAULTY)).isFile()).toBe(true);
});

/** A request with node:http, for cases fetch cannot express (no content type, chunked bodies). */
describe('pinning a call to one deployed model (X-Predictgate-Deployed-Model-Id)', () => {
  const pin = (id: string): Record<string, string> => ({ 'x-predictgate-deployed-model-id': id });

  test('without the header the split decides; with it, the named model answers, traffic 0 or not', async () => {
    const plain = await post(h.vertex('pinned'), '{"instances": [1]}');
    expect(plain.headers.get('x-vertex-ai-deployed-model-id')).toBe('model-a');
    for (const id of ['model-b', 'model-a']) {
      const r = await post(h.vertex('pinned'), '{"instances": [1]}', pin(id));
      expect(r.status).toBe(200);
      expect(JSON.parse(r.text)).toMatchObject({ deployedModelId: id });
      expect(r.headers.get('x-vertex-ai-deployed-model-id')).toBe(id);
    }
    const raw = await post(h.vertex('pinned', 'rawPredict'), '{"instances": [1]}', pin('model-b'));
    expect(raw.status).toBe(200);
    expect(raw.headers.get('x-vertex-ai-deployed-model-id')).toBe('model-b');
  });

  test('an id the Endpoint does not have is a 400 naming its deployed models', async () => {
    const r = await post(h.vertex('pinned'), '{"instances": [1]}', pin('model-z'));
    expect(r.status).toBe(400);
    expect(JSON.parse(r.text)).toEqual({ error: { code: 400, status: 'INVALID_ARGUMENT', message: 'x-predictgate-deployed-model-id: endpoint pinned has no deployed model "model-z"; its deployed models: model-a, model-b, unhealthy' } });
    const gdc = await rawRequest(h.url('/v1/model:predict'), Buffer.from('{"instances": [1]}'), { host: 'pinned.default.predictgate.internal', 'content-type': 'application/json', ...pin('model-z') });
    expect(gdc.status).toBe(400);
    expect(JSON.parse(gdc.body.toString())).toEqual({ error: 'x-predictgate-deployed-model-id: endpoint pinned has no deployed model "model-z"; its deployed models: model-a, model-b, unhealthy' });
  });

  test('a deployed model of the Endpoint that is not Ready is a 503', async () => {
    const r = await post(h.vertex('pinned'), '{"instances": [1]}', pin('unhealthy'));
    expect(r.status).toBe(503);
    expect(JSON.parse(r.text)).toEqual({ error: { code: 503, status: 'UNAVAILABLE', message: 'deployed model unhealthy of endpoint pinned is not Ready: waiting for replicas to become ready (0/1 ready)' } });
  });
});

describe('explain', () => {
  test('routes like predict and answers one explanation per instance, with the deployed model ids', async () => {
    const r = await post(h.vertex('echo', 'explain'), '{"instances": [1.5, {"data": "x"}]}');
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text)).toEqual({
      explanations: [
        { attributions: [{ outputIndex: [0], featureAttributions: { data: 1 }, instanceOutputValue: 1.5 }] },
        { attributions: [{ outputIndex: [0], featureAttributions: { data: 1 }, instanceOutputValue: null }] },
      ],
      predictions: [1.5, 'x'],
      deployedModelId: 'echo',
      modelDisplayName: 'echo',
      modelVersionId: '1',
    });
    expect(r.headers.get('x-vertex-ai-deployed-model-id')).toBe('echo');
  });

  test('the body\'s deployedModelId picks the deployed model over the traffic split (traffic 0 included)', async () => {
    const split = await post(h.vertex('explain-split', 'explain'), '{"instances": [1]}');
    expect(JSON.parse(split.text)).toMatchObject({ deployedModelId: 'echo' });
    const chosen = await post(h.vertex('explain-split', 'explain'), '{"deployedModelId": "small", "instances": [1], "explanationSpecOverride": {"parameters": {}}}');
    expect(chosen.status).toBe(200);
    expect(JSON.parse(chosen.text)).toMatchObject({ deployedModelId: 'small', predictions: [1] });
  });

  test('the named deployed model\'s rules apply, not those of the model the traffic split would pick', async () => {
    // Mixed strings and numbers: refused by the tensorflow rules, any JSON for a pytorch model.
    const r = await post(h.vertex('explain-tf', 'explain'), '{"deployedModelId": "small", "instances": [1, "a"]}');
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text)).toMatchObject({ deployedModelId: 'small', predictions: [1, 'a'] });
  });

  test.each([
    ['an unknown deployedModelId', 'explain-split', '{"deployedModelId": "zz", "instances": [1]}', 400, 'INVALID_ARGUMENT', 'deployedModelId: endpoint explain-split has no deployed model "zz"; its deployed models: echo, small'],
    ['a deployedModelId that is not a string', 'explain-split', '{"deployedModelId": 5, "instances": [1]}', 400, 'INVALID_ARGUMENT', 'deployedModelId: expected a non-empty string, got 5'],
    ['explanationSpecOverride that is not an object', 'echo', '{"instances": [1], "explanationSpecOverride": 1}', 400, 'INVALID_ARGUMENT', 'explanationSpecOverride: expected an object'],
    ['an empty instances list (the predict rules)', 'echo', '{"instances": []}', 400, 'INVALID_ARGUMENT', 'instances: expected a non-empty list, got an empty list'],
    ['a TensorFlow model (TF Serving has no explain)', 'half-plus-two', '{"instances": [1]}', 400, 'FAILED_PRECONDITION', 'deployed model half-plus-two has no explain route (set containerSpec.explainRoute, or use a predictRoute ending in :predict)'],
    ['a TensorFlow model, whatever the body', 'explain-tf', '{"instances": [1, "a"]}', 400, 'FAILED_PRECONDITION', 'deployed model half-plus-two has no explain route (set containerSpec.explainRoute, or use a predictRoute ending in :predict)'],
  ])('%s is refused', async (_what, endpoint, body, code, status, message) => {
    const r = await post(h.vertex(endpoint, 'explain'), body);
    expect(r.status).toBe(code);
    expect(JSON.parse(r.text)).toEqual({ error: { code, status, message } });
  });
});

describe('the TF Serving surface of a tensorflow DeployedModel (/tfserving/{namespace}/{name}/v1/models/...)', () => {
  const tf = (path: string): string => h.url(`/tfserving/default/half-plus-two${path}`);
  const get = async (url: string): Promise<{ status: number; body: unknown }> => {
    const r = await fetch(url);
    return { status: r.status, body: await r.json() };
  };

  test('model status, metadata and versions answer as TF Serving does', async () => {
    expect(await get(tf('/v1/models/half_plus_two'))).toEqual({ status: 200, body: { model_version_status: [{ version: '1', state: 'AVAILABLE', status: { error_code: 'OK', error_message: '' } }] } });
    const meta = await get(tf('/v1/models/half_plus_two/metadata'));
    expect(meta.status).toBe(200);
    expect(meta.body).toMatchObject({ model_spec: { name: 'half_plus_two', version: '1' } });
  });

  test('predict in row and columnar form; NaN passes both ways; the answer is TF\'s, unchanged', async () => {
    const row = await post(tf('/v1/models/half_plus_two:predict'), '{"instances": [1.0, NaN, 5.0]}');
    expect(row.status).toBe(200);
    expect(row.text).toBe('{"predictions":[2.5,NaN,4.5]}');
    expect(row.headers.get('x-vertex-ai-deployed-model-id')).toBe('half-plus-two');
    const columnar = await post(tf('/v1/models/half_plus_two:predict'), '{"inputs": [1.0, 2.0]}');
    expect(columnar.text).toBe('{"outputs":[2.5,3]}');
    const versioned = await post(tf('/v1/models/half_plus_two/versions/1:predict'), '{"instances": [1.0]}');
    expect(versioned.text).toBe('{"predictions":[2.5]}');
  });

  test.each([
    ['mixed kinds of instances (the gateway\'s predict rules)', '/v1/models/half_plus_two:predict', '{"instances": [1.0, "a"]}', 400, 'instances[1]: expected a number like instances[0], got a string (instances are stacked into one batch)'],
    ['named inputs of different 0th dimensions in row form', '/v1/models/half_plus_two:predict', '{"instances": [{"a": [1, 2], "b": [1]}, {"a": [1, 2], "b": [1, 2]}]}', 400, 'instances[1].b: expected a list of 1 number like instances[0].b, got a list of 2 numbers (named inputs share their 0th dimension and shape across instances)'],
    ['a version the model does not have (the model\'s own error)', '/v1/models/half_plus_two/versions/123:predict', '{"instances": [1.0]}', 404, 'Servable not found for request: Specific(half_plus_two, 123)'],
    ['regress on a predict signature (passed on with its code)', '/v1/models/half_plus_two:regress', '{"examples": [{"x": 1.0}]}', 400, 'Expected regression signature method_name to be tensorflow/serving/regress. Was: tensorflow/serving/predict'],
  ])('%s: TF\'s {"error"} with the right code', async (_what, path, body, status, message) => {
    const r = await post(tf(path), body);
    expect(r.status).toBe(status);
    expect(JSON.parse(r.text)).toEqual({ error: message });
  });

  /** A request whose path is sent exactly as written (fetch and URL parsing would resolve dot segments). */
  const exact = (method: string, path: string, body = ''): Promise<{ status: number; body: unknown }> => new Promise((resolve, reject) => {
    const u = new URL(h.base);
    const req = httpRequest({ host: u.hostname, port: u.port, method, path: `/tfserving/default/half-plus-two${path}`, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end(body);
  });

  test.each([
    ['GET', '/v1/models/half_plus_two/../../../healthz', 'has a ".." segment'],
    ['GET', '/v1/models/%2e%2e/%2E%2E/metrics', 'has a ".." segment (written "%2e%2e")'],
    ['POST', '/v1/models/half_plus_two%2f..%2f..:predict', 'has an encoded slash or backslash (%2F, %5C)'],
    ['POST', '/v1/models/half_plus_two\\..:predict', 'has a backslash'],
    ['GET', '/v1/models//half_plus_two', 'has an empty segment (a doubled or trailing slash)'],
  ])('%s %s never reaches the model: a 400 saying why', async (method, path, why) => {
    expect(await exact(method, path, method === 'POST' ? '{"instances": [1.0]}' : '')).toEqual({ status: 400, body: { error: `the TF Serving path ${JSON.stringify(path)} ${why}; it must be a plain path under /v1/models/` } });
  });

  test('gzip both ways: a compressed predict is inflated for the model, and its large answer comes back compressed to a client that takes gzip', async () => {
    const values = Array.from({ length: 5000 }, (_, i) => i / 8);
    const body = gzipSync(JSON.stringify({ instances: values }));
    const u = new URL(h.base);
    const answer = await new Promise<{ status: number; encoding?: string; text: string }>((resolve, reject) => {
      const req = httpRequest({ host: u.hostname, port: u.port, method: 'POST', path: '/tfserving/default/half-plus-two/v1/models/half_plus_two:predict', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', 'accept-encoding': 'gzip' } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const raw = Buffer.concat(chunks);
          const encoding = res.headers['content-encoding'];
          resolve({ status: res.statusCode ?? 0, encoding, text: (encoding === 'gzip' ? gunzipSync(raw) : raw).toString() });
        });
      });
      req.on('error', reject);
      req.end(body);
    });
    expect([answer.status, answer.encoding]).toEqual([200, 'gzip']);
    expect(JSON.parse(answer.text)).toEqual({ predictions: values.map((x) => x / 2 + 2) });
  });

  test('every POST verb is checked: classify and regress by TF Serving\'s request shape, an unknown verb refused', async () => {
    expect(await exact('POST', '/v1/models/half_plus_two:classify', '{"examples": [{"x": 1.0}, {"x": 2.0}, 3]}')).toEqual({ status: 400, body: { error: 'examples[2]: expected an object, got number' } });
    expect(await exact('POST', '/v1/models/half_plus_two:regress', '{"instances": [1.0]}')).toEqual({ status: 400, body: { error: 'body: "examples" is required (a list of objects of features; TF Serving\'s regress request)' } });
    expect(await exact('POST', '/v1/models/half_plus_two:explode', '{}')).toEqual({ status: 400, body: { error: 'unknown TF Serving verb :explode; POST takes :predict, :classify or :regress' } });
    expect(await exact('POST', '/v1/models/half_plus_two', '{}')).toEqual({ status: 400, body: { error: 'POST /v1/models/half_plus_two has no verb; TF Serving takes POST .../v1/models/{model}[/versions/{n}|/labels/{label}]:predict, :classify or :regress' } });
    // A well-formed classify goes to the model, which answers for itself.
    expect(await exact('POST', '/v1/models/half_plus_two:regress', '{"signature_name": "tensorflow/serving/regress", "examples": [{"x": 1.0}, {"x": 4.0}]}')).toEqual({ status: 200, body: { results: [2.5, 4] } });
  });

  test('only tensorflow DeployedModels that exist have the surface', async () => {
    expect(await get(h.url('/tfserving/default/echo/v1/models/echo'))).toEqual({ status: 400, body: { error: 'deployed model echo is a pytorch model; the TF Serving surface serves tensorflow models only' } });
    expect(await get(h.url('/tfserving/default/none/v1/models/x'))).toEqual({ status: 404, body: { error: 'no DeployedModel none in namespace default' } });
    // Not a TF Serving path: the gateway's 404, in the TF Serving surface's error form.
    expect(await get(h.url('/tfserving/default/half-plus-two/v2/models/x'))).toEqual({ status: 404, body: { error: 'no route for GET /tfserving/default/half-plus-two/v2/models/x; prediction calls are POST /v1/projects/{project}/locations/{location}/endpoints/{endpoint}:predict or :rawPredict' } });
  });
});
