// The gateway's limits and failures as a caller meets them (local mode in-process, faulty models as
// real child processes), each with its exact body: a predict answer over MAX_RESPONSE_BYTES (declared
// or chunked, on both transports), a call whose body finds the gateway's body memory
// (BUFFERED_BODY_BYTES) full for its whole timeout (its request, or the model's answer: 503
// overloaded), and GraphStorm's own body for 413, 503 and 504.
import { request as httpRequest } from 'node:http';
import { startLocal, ready, faultyYaml, endpointYaml, deployedModelYaml, post, rawRequest, metricLine, FAULTY, type LocalHarness } from '../helpers/local.js';
import { refuseConnections } from '../helpers/procs.js';

let h: LocalHarness;
const MAX_RESPONSE = 400_000;
const BUDGET = 512 * 1024;
const ENDPOINTS = ['big', 'big-chunked', 'fits', 'mem', 'gs-slow', 'gs-small', 'gs-down'];

/** A faulty model serving GraphStorm's contract (/invocations) for the node_classification task. */
const graphStormFaulty = (name: string, fault: string, env: Record<string, string> = {}, serving?: Record<string, number>): string =>
  deployedModelYaml({ name, framework: 'graphstorm', gmlTask: 'node_classification', command: ['node', FAULTY], predictRoute: '/invocations', healthRoute: '/health', env: { FAULT: fault, ...env }, serving });

beforeAll(async () => {
  h = await startLocal({
    'big.yaml': `${faultyYaml('big', 'large', { env: { FAULT_ANSWER_BYTES: '500000' } })}---\n${endpointYaml('big', [{ model: 'big' }])}`,
    'big-chunked.yaml': `${faultyYaml('big-chunked', 'large-chunked', { env: { FAULT_ANSWER_BYTES: '500000' } })}---\n${endpointYaml('big-chunked', [{ model: 'big-chunked' }])}`,
    // 300 KB answers: under the response limit, and large enough to wait for body memory.
    'fits.yaml': `${faultyYaml('fits', 'large', { env: { FAULT_ANSWER_BYTES: '300000' }, serving: { timeoutSeconds: 0.5 } })}---\n${endpointYaml('fits', [{ model: 'fits' }])}`,
    'mem.yaml': `${faultyYaml('mem', 'none', { serving: { timeoutSeconds: 0.5 } })}---\n${endpointYaml('mem', [{ model: 'mem' }])}`,
    'gs-slow.yaml': `${graphStormFaulty('gs-slow', 'slow', { FAULT_DELAY_MS: '3000' }, { timeoutSeconds: 0.3 })}---\n${endpointYaml('gs-slow', [{ model: 'gs-slow' }])}`,
    'gs-small.yaml': endpointYaml('gs-small', [{ model: 'gs-slow' }], 'default', { maxRequestBytes: 1000 }),
    'gs-down.yaml': `${graphStormFaulty('gs-down', 'none')}---\n${endpointYaml('gs-down', [{ model: 'gs-down' }])}`,
  }, { settings: { maxResponseBytes: MAX_RESPONSE, bufferedBodyBytes: BUDGET, healthIntervalMs: 600_000 } });
  await h.until((x) => ENDPOINTS.every((e) => ready(x, 'Endpoint', `default/${e}`)), 'every endpoint Ready');
});

afterAll(async () => {
  await h?.stop();
});

const vertexError = (code: number, status: string, message: string): unknown => ({ error: { code, status, message } });

describe('MAX_RESPONSE_BYTES on predict', () => {
  // The request's size picks the transport: up to 32 KiB undici, larger node:http.
  test.each([
    ['declared, undici', 'big', '{"instances": [1]}'],
    ['declared, node:http', 'big', JSON.stringify({ instances: ['y'.repeat(40 * 1024)] })],
    ['chunked, undici', 'big-chunked', '{"instances": [1]}'],
    ['chunked, node:http', 'big-chunked', JSON.stringify({ instances: ['y'.repeat(40 * 1024)] })],
  ])('a model answering more than the limit (%s) is a 502 naming the limit', async (_what, endpoint, body) => {
    const r = await post(h.vertex(endpoint), body);
    expect([r.status, r.json()]).toEqual([502, vertexError(502, 'INTERNAL', `deployed model ${endpoint} answered with more than ${MAX_RESPONSE} bytes`)]);
  });

  test('an answer under the limit comes back whole', async () => {
    const r = await post(h.vertex('fits'), '{"instances": [1]}');
    expect(r.status).toBe(200);
    expectText(r.text, JSON.stringify({ predictions: ['x'.repeat(300_000)], deployedModelId: 'fits', modelDisplayName: 'fits' }));
  });
});

/** A JSON predict body of exactly `bytes` bytes. */
function bodyOf(bytes: number): Buffer {
  const frame = '{"instances": [""]}';
  return Buffer.from(`{"instances": ["${'z'.repeat(bytes - frame.length)}"]}`);
}

/** Fails with a short message (not two copies of a long body) when `actual` is not `expected`. */
function expectText(actual: string, expected: string): void {
  if (actual === expected) return;
  let i = 0;
  while (i < actual.length && actual[i] === expected[i]) i++;
  throw new Error(`texts differ at ${i} (lengths ${actual.length}, ${expected.length}): ${JSON.stringify(actual.slice(i, i + 80))} against ${JSON.stringify(expected.slice(i, i + 80))}`);
}

const holders: { destroy(): void }[] = [];
afterEach(() => {
  for (const call of holders.splice(0)) call.destroy();
});

/**
 * Starts a predict call on `mem` with a 300 KiB body and sends all of it but its last byte: the call
 * holds that much of the body memory (admitted, reading) until `finish` sends the byte. (A body
 * paused with much of it unsent would give the unread part back once the gateway's pace check found
 * it slow, a second or two later: bodyWatch.ts.)
 */
async function holdMemory(): Promise<{ finish(): Promise<{ status: number; text: string }> }> {
  const body = bodyOf(300 * 1024);
  const req = httpRequest(h.vertex('mem'), { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': String(body.length) } });
  holders.push(req);
  const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
  });
  // A test that failed before finishing destroys the call (afterEach): not an unhandled rejection.
  answer.catch(() => undefined);
  req.write(body.subarray(0, body.length - 1));
  // All of it, or all but the unsent byte once the pace check found the body slow.
  await metricLine(h, new RegExp(`^predictgate_body_memory_reserved_bytes (${body.length}|${body.length - 1})$`, 'm'));
  return {
    finish() {
      req.end(body.subarray(body.length - 1));
      return answer;
    },
  };
}

const OVERLOADED = vertexError(503, 'UNAVAILABLE', `the gateway's memory for request and answer bodies (BUFFERED_BODY_BYTES, ${BUDGET} bytes) stayed full for 0.5 s; retry later`);

describe('BUFFERED_BODY_BYTES', () => {
  test('a large request that finds the body memory full for its whole timeout is a 503 overloaded; the call holding it still succeeds', async () => {
    const holder = await holdMemory();
    const refused = await rawRequest(h.vertex('mem'), bodyOf(300 * 1024), { 'content-type': 'application/json' });
    expect([refused.status, refused.headers.connection, refused.body.length < 1000 ? JSON.parse(refused.body.toString()) : `${refused.body.length} bytes`]).toEqual([503, 'close', OVERLOADED]);
    const held = await holder.finish();
    expect(held.status).toBe(200);
    expectText(held.text, JSON.stringify({ predictions: ['z'.repeat(300 * 1024 - '{"instances": [""]}'.length)], deployedModelId: 'mem', modelDisplayName: 'mem' }));
    await metricLine(h, /^(?=[\s\S]*^predictgate_body_memory_reserved_bytes 0$)(?=[\s\S]*^predictgate_body_memory_waiting_calls 0$)/m);
  });

  test('a large answer that finds the body memory full for the call\'s whole timeout is a 503 overloaded', async () => {
    const holder = await holdMemory();
    const refused = await post(h.vertex('fits'), '{"instances": [1]}');
    expect(refused.text.length < 1000 ? [refused.status, refused.json()] : [refused.status, `${refused.text.length} bytes`]).toEqual([503, OVERLOADED]);
    expect((await holder.finish()).status).toBe(200);
    await metricLine(h, /^(?=[\s\S]*^predictgate_body_memory_reserved_bytes 0$)(?=[\s\S]*^predictgate_body_memory_waiting_calls 0$)/m);
    // With the memory free again, the same call goes through.
    const again = await post(h.vertex('fits'), '{"instances": [1]}');
    expect(again.status).toBe(200);
    expectText(again.text, JSON.stringify({ predictions: ['x'.repeat(300_000)], deployedModelId: 'fits', modelDisplayName: 'fits' }));
  });
});

describe('GraphStorm answers its own body for 413, 503 and 504', () => {
  const payload = JSON.stringify({
    version: 'gs-realtime-v0.1',
    gml_task: 'node_classification',
    graph: { nodes: [{ node_type: 'author', node_id: 'a1', features: { feat: [1, 2] } }], edges: [] },
    targets: [{ node_type: 'author', node_id: 'a1' }],
  });
  const graphStormError = (status: number, requestId: string, error: string): unknown => ({ status_code: status, request_uid: requestId, message: '', error, data: {} });

  test('413: a body over the limit, declared or chunked', async () => {
    const big = Buffer.from(JSON.stringify({ ...JSON.parse(payload), padding: 'p'.repeat(2000) }));
    const declared = await rawRequest(h.vertex('gs-small'), big, { 'content-type': 'application/json', 'x-request-id': 'gs-413' });
    expect([declared.status, JSON.parse(declared.body.toString())]).toEqual([413, graphStormError(413, 'gs-413', `request body of ${big.length} bytes is larger than the limit of 1000 bytes`)]);
    const chunked = await rawRequest(h.vertex('gs-small'), big, { 'content-type': 'application/json', 'x-request-id': 'gs-413c' }, true);
    expect([chunked.status, JSON.parse(chunked.body.toString())]).toEqual([413, graphStormError(413, 'gs-413c', 'request body is larger than the limit of 1000 bytes')]);
  });

  test('504: a model that does not answer within timeoutSeconds', async () => {
    const r = await post(h.vertex('gs-slow'), payload, { 'x-request-id': 'gs-504' });
    expect([r.status, r.json()]).toEqual([504, graphStormError(504, 'gs-504', 'deployed model gs-slow did not answer within 0.3 s')]);
  });

  test('503: a model whose replica refuses connections', async () => {
    const port = Number(new URL(h.model('default/gs-down')!.status!.replicaAddresses![0]).port);
    await refuseConnections(port);
    const r = await post(h.vertex('gs-down'), payload, { 'x-request-id': 'gs-503' });
    expect([r.status, r.json()]).toEqual([503, graphStormError(503, 'gs-503', 'deployed model gs-down is unreachable (ECONNREFUSED); no replica accepted a connection')]);
  });
});
