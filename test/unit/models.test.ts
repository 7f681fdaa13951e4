// Tests of the bundled example model servers (src/models) and the faulty test model
// (test/helpers/faultyModel), over real sockets on loopback with free ports.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomFillSync } from 'node:crypto';
import { Agent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseJson } from '../../src/payload/json.js';
import { documentedMetrics, metricNames, promtoolCheck } from '../helpers/metrics.js';
import { MODEL_NAMES, modelOptionsFromEnv, startModelServer, type RunningModelServer } from '../../src/models/index.js';

interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  text: string;
}

/** One HTTP call with node:http (full control over headers, no implicit content type). */
function call(
  port: number,
  method: string,
  path: string,
  body?: string | Uint8Array,
  headers: Record<string, string> = {},
  agent?: Agent,
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const buf = Buffer.concat(chunks);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: buf, text: buf.toString('utf8') });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const json = (r: Reply): unknown => parseJson(r.text, true);

/** The agent's one idle pooled socket, once the agent has put it back in its pool (polled, at most 5 s). */
async function freeSocket(agent: Agent): Promise<Socket> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const free = Object.values(agent.freeSockets).flat();
    if (free.length === 1 && free[0]) return free[0] as Socket;
    if (Date.now() > deadline) throw new Error(`expected one idle socket in the agent, found ${free.length}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
const postJson = (port: number, path: string, body: string): Promise<Reply> =>
  call(port, 'POST', path, body, { 'Content-Type': 'application/json' });

function expectError(r: Reply, status: number, message?: string | RegExp): void {
  expect(r.status).toBe(status);
  expect(r.headers['content-type']).toBe('application/json');
  const doc = JSON.parse(r.text) as { error: unknown };
  expect(Object.keys(doc)).toEqual(['error']);
  expect(typeof doc.error).toBe('string');
  if (typeof message === 'string') expect(doc.error).toBe(message);
  else if (message) expect(doc.error).toMatch(message);
}

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

describe('half-plus-two (TF Serving REST)', () => {
  let srv: RunningModelServer;
  let port: number;
  beforeAll(async () => {
    srv = await startModelServer('half-plus-two', { port: 0 });
    port = srv.port;
  });
  afterAll(() => srv.close());

  const STATUS = {
    model_version_status: [{ version: '1', state: 'AVAILABLE', status: { error_code: 'OK', error_message: '' } }],
  };

  test.each(['', '/versions/1', '/labels/stable'])('GET status %s', async (suffix) => {
    const r = await call(port, 'GET', `/v1/models/half_plus_two${suffix}`);
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('application/json');
    expect(json(r)).toEqual(STATUS);
  });

  test('status misses are 404 with TF messages', async () => {
    expectError(await call(port, 'GET', '/v1/models/half_plus_two/versions/2'), 404,
      'Could not find version 2 of model half_plus_two');
    expectError(await call(port, 'GET', '/v1/models/half_plus_two/labels/canary'), 404,
      'Unrecognized servable version label: canary');
    expectError(await call(port, 'GET', '/v1/models/half'), 404, 'Could not find any versions of model half');
    expectError(await call(port, 'GET', '/v1/models'), 400, 'Missing model name in request.');
  });

  test.each(['', '/versions/1', '/labels/stable'])('GET metadata %s', async (suffix) => {
    const r = await call(port, 'GET', `/v1/models/half_plus_two${suffix}/metadata`);
    expect(r.status).toBe(200);
    const doc = json(r) as {
      model_spec: unknown;
      metadata: { signature_def: { signature_def: Record<string, Record<string, unknown>> } };
    };
    expect(doc.model_spec).toEqual({ name: 'half_plus_two', signature_name: '', version: '1' });
    const defs = doc.metadata.signature_def.signature_def;
    expect(Object.keys(defs).sort()).toEqual(['serving_default', 'tensorflow/serving/classify', 'tensorflow/serving/regress']);
    expect(defs.serving_default).toEqual({
      inputs: {
        x: { dtype: 'DT_FLOAT', tensor_shape: { dim: [{ size: '-1', name: '' }], unknown_rank: false }, name: 'x:0' },
      },
      outputs: {
        y: { dtype: 'DT_FLOAT', tensor_shape: { dim: [{ size: '-1', name: '' }], unknown_rank: false }, name: 'y:0' },
      },
      method_name: 'tensorflow/serving/predict',
    });
    expect(defs['tensorflow/serving/regress'].method_name).toBe('tensorflow/serving/regress');
    expect(defs['tensorflow/serving/classify'].method_name).toBe('tensorflow/serving/classify');
  });

  test('metadata of unknown model or version is 404', async () => {
    expectError(await call(port, 'GET', '/v1/models/half/metadata'), 404, 'Servable not found for request: Latest(half)');
    expectError(await call(port, 'GET', '/v1/models/half_plus_two/versions/7/metadata'), 404,
      'Servable not found for request: Specific(half_plus_two, 7)');
  });

  test.each(['', '/versions/1', '/labels/stable'])('predict row form %s', async (suffix) => {
    const r = await postJson(port, `/v1/models/half_plus_two${suffix}:predict`, '{"instances": [1.0, 2.0, 5.0]}');
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('application/json');
    expect(json(r)).toEqual({ predictions: [2.5, 3, 4.5] });
  });

  test('predict row form: nested lists and named-input objects', async () => {
    let r = await postJson(port, '/v1/models/half_plus_two:predict', '{"instances": [[1, 2], [3, 4]]}');
    expect(json(r)).toEqual({ predictions: [[2.5, 3], [3.5, 4]] });
    r = await postJson(port, '/v1/models/half_plus_two:predict',
      '{"signature_name": "serving_default", "instances": [{"x": 1}, {"x": 3}]}');
    expect(json(r)).toEqual({ predictions: [2.5, 3.5] });
    r = await postJson(port, '/v1/models/half_plus_two:predict', '{"instances": [{"x": [1, 2]}, {"x": [3, 4]}]}');
    expect(json(r)).toEqual({ predictions: [[2.5, 3], [3.5, 4]] });
  });

  test('predict columnar form', async () => {
    let r = await postJson(port, '/v1/models/half_plus_two:predict', '{"inputs": [1, 2, 5]}');
    expect(r.status).toBe(200);
    expect(json(r)).toEqual({ outputs: [2.5, 3, 4.5] });
    r = await postJson(port, '/v1/models/half_plus_two:predict', '{"inputs": {"x": [[1], [2]]}}');
    expect(json(r)).toEqual({ outputs: [[2.5], [3]] });
    r = await postJson(port, '/v1/models/half_plus_two:predict', '{"inputs": 4}');
    expect(json(r)).toEqual({ outputs: 4 });
    expectError(await postJson(port, '/v1/models/half_plus_two:predict', '{"inputs": {"y": [1]}}'), 400,
      "Missing named input: x in 'inputs' object.");
  });

  test('NaN and Infinity tokens round-trip in both forms', async () => {
    let r = await postJson(port, '/v1/models/half_plus_two:predict', '{"instances": [NaN, Infinity, -Infinity, 1]}');
    expect(r.status).toBe(200);
    expect(r.text).toBe('{"predictions":[NaN,Infinity,-Infinity,2.5]}');
    r = await postJson(port, '/v1/models/half_plus_two:predict', '{"inputs": {"x": [[NaN], [0]]}}');
    expect(r.text).toBe('{"outputs":[[NaN],[2]]}');
    expect(json(r)).toEqual({ outputs: [[NaN], [2]] });
  });

  test('predict request errors are 400 with TF messages', async () => {
    const p = (body: string): Promise<Reply> => postJson(port, '/v1/models/half_plus_two:predict', body);
    expectError(await p('{"instances": [1], "inputs": [1]}'), 400,
      /expecting only one of 'inputs' or 'instances' keys to exist/);
    expectError(await p('{"signature_name": "serving_default"}'), 400, "Missing 'inputs' or 'instances' key");
    expectError(await p('{"instances": ["a"]}'), 400,
      'Failed to process element: 0 of \'instances\' list. Error: INVALID_ARGUMENT: JSON Value: "a" Type: String is not of expected type: float');
    expectError(await p('{"inputs": [true]}'), 400, 'JSON Value: true Type: True is not of expected type: float');
    expectError(await p('{"instances": [[1, 2], [3]]}'), 400, /Expecting tensor size: 2 but got: 1/);
    expectError(await p('{"instances": [[[1, 2], [3]]]}'), 400, /Encountered list at unexpected size: 1 at level: 1/);
    expectError(await p('{"instances": [{"x": 1}, 2]}'), 400, 'Expecting object but got list at item 1 of input list');
    expectError(await p('{"instances": [{"z": 1}]}'), 400, /does not have named input: z/);
    expectError(await p('{"instances": 1}'), 400, /Excepting 'instances' to be an list\/array/);
    expectError(await p('{"instances": []}'), 400, /No values in 'instances' array/);
    expectError(await p('{"instances": [1e39]}'), 400, /to float without loss of precision/);
    expectError(await p('{"signature_name": "nope", "instances": [1]}'), 400,
      'Serving signature name: "nope" not found in signature def');
    expectError(await p('{"signature_name": 3, "instances": [1]}'), 400, /'signature_name' key must be a string value/);
    expectError(await p('{"signature_name": "tensorflow/serving/regress", "instances": [1]}'), 400,
      /is not of expected type: string/);
    expectError(await p('{"instances": [1'), 400, /^JSON Parse error: /);
    expectError(await p(''), 400, 'JSON Parse error: The document is empty');
    expectError(await p('[1, 2]'), 400, 'JSON Value: [1,2] Is not object');
  });

  test('a document nested too deeply is a 400 on every verb, at any depth', async () => {
    const deep = (n: number): string => '['.repeat(n) + ']'.repeat(n);
    for (const verb of ['predict', 'classify', 'regress']) {
      for (const body of [`{"instances": ${deep(129)}}`, `{"examples": 1, "x": ${deep(100_000)}}`, `{"context": ${'{"a":'.repeat(20_000)}1${'}'.repeat(20_000)}}`]) {
        expectError(await postJson(port, `/v1/models/half_plus_two:${verb}`, body), 400, 'JSON Parse error: the document nests deeper than 128 levels');
      }
    }
    // 128 levels are read.
    const r = await postJson(port, '/v1/models/half_plus_two:predict', `{"instances": [${'['.repeat(126)}1${']'.repeat(126)}]}`);
    expect([r.status, r.text]).toEqual([200, `{"predictions":[${'['.repeat(126)}2.5${']'.repeat(126)}]}`]);
  });

  test('unknown model or version on predict is 404', async () => {
    expectError(await postJson(port, '/v1/models/half:predict', '{"instances": [1.0, 5.0]}'), 404,
      'Servable not found for request: Latest(half)');
    expectError(await postJson(port, '/v1/models/half_plus_two/versions/2:predict', '{"instances": [1]}'), 404,
      'Servable not found for request: Specific(half_plus_two, 2)');
    expectError(await postJson(port, '/v1/models/half_plus_two/labels/canary:predict', '{"instances": [1]}'), 404,
      'Unrecognized servable version label: canary');
  });

  test('regress needs the regress signature', async () => {
    const url = '/v1/models/half_plus_two:regress';
    let r = await postJson(port, url, '{"signature_name": "tensorflow/serving/regress", "examples": [{"x": 1.0}, {"x": 2.0}]}');
    expect(r.status).toBe(200);
    expect(json(r)).toEqual({ results: [2.5, 3] });
    r = await postJson(port, url,
      '{"signature_name": "tensorflow/serving/regress", "context": {"x": 1}, "examples": [{}, {"x": [3]}, {"x": NaN}]}');
    expect(r.text).toBe('{"results":[2.5,3.5,NaN]}');
    expectError(await postJson(port, url, '{"examples": [{"x": 1.0}]}'), 400,
      'Expected regression signature method_name to be tensorflow/serving/regress. Was: tensorflow/serving/predict');
    expectError(await postJson(port, url, '{"signature_name": "nope", "examples": [{"x": 1.0}]}'), 400,
      'No signature was found with the name: nope');
    expectError(await postJson(port, url, '{"signature_name": "tensorflow/serving/regress", "examples": [{"y": 1}]}'), 400,
      /Feature: x \(data type: float\) is required but could not be found/);
    expectError(await postJson(port, url, '{"signature_name": "tensorflow/serving/regress", "examples": [{"x": "a"}]}'), 400,
      /Data types don't match/);
    expectError(await postJson(port, url, '{"signature_name": "tensorflow/serving/regress", "examples": [{"x": [1, 2]}]}'), 400,
      /Number of float values != expected/);
    expectError(await postJson(port, url, '{"signature_name": "tensorflow/serving/regress"}'), 400,
      /key 'examples' is expected and was not found/);
    expectError(await postJson(port, url, '{"signature_name": "tensorflow/serving/regress", "examples": []}'), 400,
      /'examples' value is an empty array/);
    expectError(await postJson(port, '/v1/models/half:regress', '{"examples": [{"x": 1}]}'), 404,
      'Servable not found for request: Latest(half)');
  });

  test('classify answers one ["", score] pair per example', async () => {
    const url = '/v1/models/half_plus_two/versions/1:classify';
    const r = await postJson(port, url, '{"signature_name": "tensorflow/serving/classify", "examples": [{"x": 1}, {"x": 5}]}');
    expect(r.status).toBe(200);
    expect(json(r)).toEqual({ results: [[['', 2.5]], [['', 4.5]]] });
    expectError(await postJson(port, url, '{"examples": [{"x": 1}]}'), 400,
      'Expected classification signature method_name to be tensorflow/serving/classify. Was: tensorflow/serving/predict');
    expectError(await postJson(port, url, '{"signature_name": "tensorflow/serving/regress", "examples": [{"x": 1}]}'), 400,
      /Was: tensorflow\/serving\/regress$/);
  });

  test('an aborted upload and a large tensor are handled', async () => {
    await new Promise<void>((resolve) => {
      const sock = connect(port, '127.0.0.1', () => {
        sock.write('POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"inst');
        setTimeout(() => {
          sock.destroy();
          resolve();
        }, 20);
      });
      sock.on('error', () => resolve());
    });
    const rows = Array.from({ length: 2000 }, (_, i) => Array.from({ length: 25 }, (_, j) => i + j / 4));
    const r = await postJson(port, '/v1/models/half_plus_two:predict', JSON.stringify({ instances: rows }));
    expect(r.status).toBe(200);
    const out = (json(r) as { predictions: number[][] }).predictions;
    expect(out.length).toBe(2000);
    expect(out[1999][24]).toBe(0.5 * (1999 + 24 / 4) + 2);
  });

  test('wrong methods and paths are JSON errors', async () => {
    expectError(await call(port, 'GET', '/v1/models/half_plus_two:predict'), 400,
      'Malformed request: GET /v1/models/half_plus_two:predict');
    expectError(await postJson(port, '/v1/models/half_plus_two', '{}'), 400, /^Malformed request: POST/);
    expectError(await call(port, 'GET', '/nope'), 404);
  });
});

describe('echo (TorchServe-style, KServe v1 envelope)', () => {
  let srv: RunningModelServer;
  let port: number;
  beforeAll(async () => {
    srv = await startModelServer('echo', { port: 0 });
    port = srv.port;
  });
  afterAll(() => srv.close());

  test('health and model status', async () => {
    let r = await call(port, 'GET', '/ping');
    expect(r.status).toBe(200);
    expect(json(r)).toEqual({ status: 'Healthy' });
    r = await call(port, 'GET', '/v1/models/echo');
    expect(json(r)).toEqual({ name: 'echo', ready: true });
    expectError(await call(port, 'GET', '/nope'), 404);
    expectError(await call(port, 'GET', '/v1/models/echo:predict'), 405);
  });

  test.each(['/v1/models/echo:predict', '/predictions/echo'])('envelope answered at %s', async (path) => {
    const r = await postJson(port, path, ' \n{"instances": [{"data": 1}, {"data": [NaN, "a"]}, {"data": {"b64": "AA=="}}]}');
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.text).toBe('{"predictions":[1,[NaN,"a"],{"b64":"AA=="}]}');
  });

  test('instances wrapped as {"body": ...} are read like TorchServe reads them, when there is no data', async () => {
    const r = await postJson(port, '/v1/models/echo:predict', '{"instances": [{"body": 1}, {"data": 2}, {"data": 3, "body": 4}, {"body": {"b64": "AA=="}}]}');
    expect(r.status).toBe(200);
    expect(r.text).toBe('{"predictions":[1,2,3,{"b64":"AA=="}]}');
  });

  test('data nested too deeply to be written back is a 400, on predict and explain, and the server lives on', async () => {
    const deep = '['.repeat(100_000) + ']'.repeat(100_000);
    for (const path of ['/v1/models/echo:predict', '/v1/models/echo:explain']) {
      expectError(await postJson(port, path, `{"instances": [{"data": ${deep}}]}`), 400, 'the instances nest too deeply to be answered');
    }
    expect((await postJson(port, '/v1/models/echo:predict', '{"instances": [{"data": [[1]]}]}')).text).toBe('{"predictions":[[[1]]]}');
  });

  test('JSON that is not the data envelope comes back byte for byte', async () => {
    for (const body of ['{"instances": [1, 2]}', '{"instances": [{"data": 1}, {"x": 2}]}', '{ "a" : 1 }', '{broken', '[1]']) {
      const r = await call(port, 'POST', '/v1/models/echo:predict', body, { 'Content-Type': 'application/json; charset=utf-8' });
      expect(r.status).toBe(200);
      expect(r.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(r.text).toBe(body);
    }
  });

  test('octet-stream is returned unchanged with its content type', async () => {
    const body = new Uint8Array(4096);
    randomFillSync(body);
    const r = await call(port, 'POST', '/predictions/echo', body, { 'Content-Type': 'application/octet-stream' });
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('application/octet-stream');
    expect(sha(r.body)).toBe(sha(body));
  });

  test('no content type in, no content type out (and the empty body)', async () => {
    let r = await call(port, 'POST', '/v1/models/echo:predict', 'plain words');
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBeUndefined();
    expect(r.text).toBe('plain words');
    r = await call(port, 'POST', '/v1/models/echo:predict', '{"instances": [{"data": 7}]}');
    expect(r.text).toBe('{"predictions":[7]}');
    r = await call(port, 'POST', '/v1/models/echo:predict');
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBeUndefined();
    expect(r.body.length).toBe(0);
  });

  test('5 MB bodies stream back unchanged (binary, JSON, chunked)', async () => {
    const big = new Uint8Array(5 * 1024 * 1024 + 17);
    randomFillSync(big);
    big[0] = 0x00;
    let r = await call(port, 'POST', '/v1/models/echo:predict', big, { 'Content-Type': 'application/octet-stream' });
    expect(r.status).toBe(200);
    expect(r.headers['content-length']).toBe(String(big.length));
    expect(sha(r.body)).toBe(sha(big));

    const bigJson = JSON.stringify({ blob: Buffer.from(big).toString('base64') });
    r = await call(port, 'POST', '/v1/models/echo:predict', bigJson, { 'Content-Type': 'application/json' });
    expect(r.text.length).toBe(bigJson.length);
    expect(r.text === bigJson).toBe(true);

    // Chunked upload (no Content-Length): written piece by piece, echoed piece by piece.
    const chunked = await new Promise<Reply>((resolve, reject) => {
      const req = httpRequest(
        { host: '127.0.0.1', port, method: 'POST', path: '/predictions/echo', headers: { 'Content-Type': 'image/png' } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const body = Buffer.concat(chunks);
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text: '' });
          });
        },
      );
      req.on('error', reject);
      for (let off = 0; off < big.length; off += 256 * 1024) req.write(big.subarray(off, off + 256 * 1024));
      req.end();
    });
    expect(chunked.headers['content-type']).toBe('image/png');
    expect(chunked.headers['transfer-encoding']).toBe('chunked');
    expect(sha(chunked.body)).toBe(sha(big));
  });

  test('passthrough is streamed: the answer starts before the upload ends', async () => {
    const first = Buffer.from('not json, part one;');
    const rest = Buffer.from(' part two');
    const reply = await new Promise<string>((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/predictions/echo' }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => {
          text += c.toString();
          if (text === first.toString()) req.end(rest); // only now finish the upload
        });
        res.on('end', () => resolve(text));
      });
      req.on('error', reject);
      req.write(first);
    });
    expect(reply).toBe('not json, part one; part two');
  });

  test('a JSON body past the envelope limit switches to streaming and stays intact', async () => {
    const huge = `{"instances": [{"data": "${'x'.repeat(17 * 1024 * 1024)}"}]}`;
    const r = await call(port, 'POST', '/v1/models/echo:predict', huge, { 'Content-Type': 'application/json' });
    expect(r.status).toBe(200);
    expect(r.body.length).toBe(Buffer.byteLength(huge));
    expect(r.text === huge).toBe(true);
  });

  test('a client that aborts mid-upload does not hurt the server', async () => {
    await new Promise<void>((resolve) => {
      const sock = connect(port, '127.0.0.1', () => {
        sock.write('POST /predictions/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\npartial');
        setTimeout(() => {
          sock.destroy();
          resolve();
        }, 20);
      });
      sock.on('error', () => resolve());
    });
    expect((await call(port, 'GET', '/ping')).status).toBe(200);
  });
});

describe('model registry and server runner', () => {
  test('names and unknown name', async () => {
    expect(MODEL_NAMES).toEqual(['half-plus-two', 'echo', 'graphstorm', 'tiny-llm']);
    await expect(startModelServer('resnet', { port: 0 })).rejects.toThrow(/half-plus-two, echo, graphstorm, tiny-llm/);
  });

  test('options from the Vertex container contract', () => {
    expect(modelOptionsFromEnv({})).toEqual({ port: 8080, host: '127.0.0.1' });
    expect(
      modelOptionsFromEnv({
        AIP_HTTP_PORT: '9001',
        AIP_HTTP_HOST: '0.0.0.0',
        AIP_PREDICT_ROUTE: '/predict',
        AIP_HEALTH_ROUTE: 'health',
      }),
    ).toEqual({ port: 9001, host: '0.0.0.0', predictRoute: '/predict', healthRoute: '/health' });
    expect(() => modelOptionsFromEnv({ AIP_HTTP_PORT: 'eighty' })).toThrow(/AIP_HTTP_PORT/);
  });

  test('AIP_PREDICT_ROUTE and AIP_HEALTH_ROUTE are served besides the native routes', async () => {
    const logs: Record<string, unknown>[] = [];
    const tf = await startModelServer('half-plus-two', {
      port: 0,
      predictRoute: '/custom/predict',
      healthRoute: '/custom/health',
      log: (o) => logs.push(o),
    });
    const echo = await startModelServer('echo', { port: 0, predictRoute: '/p', healthRoute: '/h' });
    try {
      expect(logs).toEqual([{ msg: 'listening', model: 'half-plus-two', host: '127.0.0.1', port: tf.port }]);
      let r = await postJson(tf.port, '/custom/predict', '{"instances": [2]}');
      expect(json(r)).toEqual({ predictions: [3] });
      r = await call(tf.port, 'GET', '/custom/health');
      expect(r.status).toBe(200);
      expect(r.headers['content-type']).toBe('application/json');
      r = await postJson(tf.port, '/v1/models/half_plus_two:predict', '{"instances": [2]}');
      expect(json(r)).toEqual({ predictions: [3] });
      r = await postJson(echo.port, '/p', '{"instances": [{"data": "z"}]}');
      expect(json(r)).toEqual({ predictions: ['z'] });
      r = await call(echo.port, 'GET', '/h');
      expect(json(r)).toEqual({ status: 'Healthy' });
    } finally {
      await tf.close();
      await echo.close();
    }
  });

  test('GET /metrics counts the calls answered, by route and code, and not itself', async () => {
    const tf = await startModelServer('half-plus-two', { port: 0, predictRoute: '/custom/predict', healthRoute: '/custom/health' });
    try {
      let r = await call(tf.port, 'GET', '/metrics');
      expect(r.status).toBe(200);
      expect(r.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
      expect(r.text).toBe('# HELP predictgate_model_requests_total Calls this model server answered, by route (predict, health, other) and HTTP code.\n# TYPE predictgate_model_requests_total counter\n');
      await postJson(tf.port, '/custom/predict', '{"instances": [2]}');
      await postJson(tf.port, '/v1/models/half_plus_two:predict', '{"instances": [2]}');
      await postJson(tf.port, '/custom/predict', '{"instances": "x"}');
      await call(tf.port, 'GET', '/custom/health');
      await call(tf.port, 'HEAD', '/custom/health');
      await call(tf.port, 'GET', '/nowhere');
      r = await call(tf.port, 'GET', '/metrics');
      expect(r.text.split('\n').filter((l) => l.startsWith('predictgate_model_requests_total'))).toEqual([
        'predictgate_model_requests_total{route="health",code="200"} 2',
        'predictgate_model_requests_total{route="other",code="404"} 1',
        'predictgate_model_requests_total{route="predict",code="200"} 2',
        'predictgate_model_requests_total{route="predict",code="400"} 1',
      ]);
      expect(await promtoolCheck(r.text)).toEqual({ code: 0, output: '' });
      expect(metricNames(r.text)).toEqual(documentedMetrics('Bundled model servers'));
    } finally {
      await tf.close();
    }
  });

  test('keep-alive timeout is advertised; close() closes idle keep-alive sockets at once, while a call in flight is still served', async () => {
    const srv = await startModelServer('echo', { port: 0 });
    const agent = new Agent({ keepAlive: true });
    try {
      const r = await call(srv.port, 'GET', '/ping', undefined, {}, agent);
      expect(r.headers['keep-alive']).toBe('timeout=65');
      const idle = await freeSocket(agent);
      // A call in flight: its body is not all sent yet.
      const body = '{"instances": [{"data": "z"}]}';
      const inFlight = httpRequest({ host: '127.0.0.1', port: srv.port, method: 'POST', path: '/predictions/echo', headers: { 'content-type': 'application/json', 'content-length': String(body.length), connection: 'close' } });
      const answer = new Promise<Reply>((resolve, reject) => {
        inFlight.on('response', (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), text: Buffer.concat(chunks).toString() }));
        });
        inFlight.on('error', reject);
      });
      inFlight.write(body.slice(0, 5));
      await new Promise<void>((resolve) => inFlight.once('socket', (s) => (s.connecting ? s.once('connect', () => resolve()) : resolve())));
      const closing = srv.close();
      // The idle connection goes first; the call in flight is then still answered (close() waits
      // for it, up to its grace, rather than for the idle one to time out).
      if (!idle.destroyed) await once(idle, 'close');
      inFlight.end(body.slice(5));
      expect(json(await answer)).toEqual({ predictions: ['z'] });
      await closing;
    } finally {
      agent.destroy();
    }
  });

  test('a malformed request gets a 400 and the server keeps serving', async () => {
    const srv = await startModelServer('half-plus-two', { port: 0 });
    try {
      const raw = await new Promise<string>((resolve, reject) => {
        const sock = connect(srv.port, '127.0.0.1', () => sock.write('THIS IS NOT HTTP\r\n\r\n'));
        let out = '';
        sock.on('data', (d: Buffer) => (out += d.toString()));
        sock.on('end', () => resolve(out));
        sock.on('error', reject);
      });
      expect(raw).toMatch(/^HTTP\/1\.1 400/);
      const r = await postJson(srv.port, '/v1/models/half_plus_two:predict', '{"instances": [0]}');
      expect(json(r)).toEqual({ predictions: [2] });
    } finally {
      await srv.close();
    }
  });

  test('a port in use is an error', async () => {
    const a = await startModelServer('echo', { port: 0 });
    try {
      await expect(startModelServer('echo', { port: a.port })).rejects.toThrow(/EADDRINUSE/);
    } finally {
      await a.close();
    }
  });
});

describe('faulty model helper (child process)', () => {
  const script = fileURLToPath(new URL('../helpers/faultyModel.js', import.meta.url));
  const children: ChildProcess[] = [];
  afterAll(() => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
  });

  async function startFaulty(env: Record<string, string>): Promise<number> {
    const child = spawn(process.execPath, [script], {
      env: { ...process.env, AIP_HTTP_PORT: '0', ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(child);
    const lines = createInterface({ input: child.stdout! });
    for await (const line of lines) {
      const msg = JSON.parse(line) as { msg: string; port: number };
      expect(Object.keys(msg)).toEqual(['msg', 'port']);
      if (msg.msg === 'listening') return msg.port;
    }
    throw new Error('faulty model exited before listening');
  }
  const predict = (port: number): Promise<Reply> =>
    postJson(port, '/v1/models/m:predict', '{"instances": [1, 2, 3]}');

  test('none behaves, health is 200 (503 with FAULT_UNHEALTHY=1)', async () => {
    const port = await startFaulty({ FAULT: 'none' });
    expect(json(await predict(port))).toEqual({ predictions: [1, 2, 3] });
    expect((await call(port, 'GET', '/health')).status).toBe(200);
    const sick = await startFaulty({ FAULT: 'none', FAULT_UNHEALTHY: '1' });
    expect((await call(sick, 'GET', '/health')).status).toBe(503);
  });

  test('slow answers after FAULT_DELAY_MS: a health check sent after it is answered first', async () => {
    const port = await startFaulty({ FAULT: 'slow', FAULT_DELAY_MS: '3000' });
    const order: string[] = [];
    const slow = predict(port).then((r) => (order.push('predict'), r));
    const health = await call(port, 'GET', '/health');
    order.push('health');
    expect([health.status, json(health)]).toEqual([200, { status: 'healthy' }]);
    expect(json(await slow)).toEqual({ predictions: [1, 2, 3] });
    expect(order).toEqual(['health', 'predict']);
  });

  test('status500, garbage, html500, wrong-count', async () => {
    let r = await predict(await startFaulty({ FAULT: 'status500' }));
    expect(r.status).toBe(500);
    expect(json(r)).toEqual({ error: 'model exploded' });
    r = await predict(await startFaulty({ FAULT: 'garbage' }));
    expect([r.status, r.headers['content-type'], r.text]).toEqual([200, 'application/json', 'not json at all']);
    r = await predict(await startFaulty({ FAULT: 'html500' }));
    expect([r.status, r.headers['content-type'], r.text]).toEqual([500, 'text/html', '<html>oops</html>']);
    r = await predict(await startFaulty({ FAULT: 'wrong-count' }));
    expect(json(r)).toEqual({ predictions: [1] });
  });

  test('reset cuts the connection after headers and part of the body', async () => {
    const port = await startFaulty({ FAULT: 'reset' });
    const outcome = await new Promise<{ status: number; partial: string; error: string }>((resolve) => {
      const req = httpRequest(
        { host: '127.0.0.1', port, method: 'POST', path: '/predict', headers: { 'Content-Type': 'application/json' } },
        (res) => {
          let partial = '';
          res.on('data', (c: Buffer) => (partial += c.toString()));
          res.on('error', (err) => resolve({ status: res.statusCode ?? 0, partial, error: err.message }));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, partial, error: '' }));
        },
      );
      req.on('error', (err) => resolve({ status: 0, partial: '', error: err.message }));
      req.end('{"instances": [1]}');
    });
    expect(outcome.status).toBe(200);
    expect(outcome.partial.length).toBeGreaterThan(0);
    expect(outcome.error).toMatch(/aborted/);
  });
});
