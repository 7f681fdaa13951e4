// Real Python peers against the gateway in local mode (in-process): the Vertex AI Python SDK
// (google-cloud-aiplatform, REST transport, api_endpoint on the gateway, a fixed token) calling
// Endpoint.predict and Endpoint.raw_predict, and KServe's own model server (a kserve.Model,
// test/python/kserve_model.py) as the V1-protocol upstream of a tensorflow DeployedModel. The venv
// comes from test/helpers/python.ts (made once per machine). No traffic leaves loopback: raw_predict,
// whose URL the SDK hard-codes as https://{location}-aiplatform.googleapis.com, reaches the gateway
// through a CONNECT proxy on loopback that terminates TLS with a certificate made for the test.
import { spawn } from 'node:child_process';
import { createServer as createHttpServer, type Server } from 'node:http';
import { connect as netConnect, type AddressInfo } from 'node:net';
import { TLSSocket, createSecureContext } from 'node:tls';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { ROOT, deployedModelYaml, endpointYaml, post, ready, startLocal, type LocalHarness } from '../helpers/local.js';
import { KSERVE_MODEL, ensurePythonEnv, raised, runSdk as runPython, succeeded, type SdkResult } from '../helpers/python.js';
import { listenAddress } from '../helpers/procs.js';
import { descendants } from '../bench/procfs.js';
import { freePort } from '../../src/workload/ports.js';

const PROJECT = 'default';
/** The SDK checks the location against Vertex's regions; the gateway accepts any. */
const LOCATION = 'us-central1';
/** Where the SDK sends raw_predict, whatever api_endpoint says. */
const RAW_PREDICT_HOST = `${LOCATION}-aiplatform.googleapis.com`;
/** One SDK run is killed after this (then its output is the test's error). */
const SDK_CALL_MS = 40_000;
/** A test makes at most two SDK runs (and a gateway call): it outlasts both, so runSdk's error is the one reported. */
const SDK_TEST_MS = 2 * SDK_CALL_MS + 20_000;

let python = '';

beforeAll(async () => {
  python = await ensurePythonEnv((line) => console.log(`python-peers: ${line}`));
}, 16 * 60_000);

/** The gateway's own google.rpc.Status for `body`, posted directly; the SDK must report its message. */
async function gatewayError(h: LocalHarness, endpointName: string, body: unknown): Promise<{ code: number; message: string; status: string }> {
  const r = await post(h.vertex(endpointName), JSON.stringify(body));
  const { error } = r.json() as { error: { code: number; message: string; status: string } };
  expect(error).toMatchObject({ code: r.status, message: expect.any(String) });
  return error;
}

/**
 * A CONNECT proxy on loopback that accepts tunnels to `host`:443 only, terminates TLS there with
 * `cert`/`key`, and pipes the plain bytes to the gateway. `targets` lists every CONNECT it was asked for.
 */
interface TlsFront {
  url: string;
  targets: string[];
  close(): Promise<void>;
}

async function startTlsFront(host: string, cert: Buffer, key: Buffer, gatewayPort: number): Promise<TlsFront> {
  const secureContext = createSecureContext({ cert, key });
  const targets: string[] = [];
  const server: Server = createHttpServer((_req, res) => {
    res.writeHead(405).end();
  });
  server.on('connect', (req, socket, head: Buffer) => {
    targets.push(req.url ?? '');
    if (req.url !== `${host}:443`) {
      socket.end('HTTP/1.1 403 Forbidden\r\n\r\n');
      return;
    }
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length) socket.unshift(head);
    const secure = new TLSSocket(socket, { isServer: true, secureContext });
    const upstream = netConnect(gatewayPort, '127.0.0.1');
    secure.pipe(upstream).pipe(secure);
    secure.on('error', () => upstream.destroy());
    upstream.on('error', () => secure.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    targets,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/** Runs test/python/vertex_sdk_client.py with `cmd`, with the venv's python. */
const runSdk = (cmd: Record<string, unknown>, env: NodeJS.ProcessEnv = {}): Promise<SdkResult> => runPython(python, cmd, env, SDK_CALL_MS);

describe('Vertex AI Python SDK (google-cloud-aiplatform, REST transport)', () => {
  let h: LocalHarness;
  let front: TlsFront;
  let certDir = '';
  let caBundle = '';

  const sdk = (op: string, endpoint: string, extra: Record<string, unknown> = {}): Promise<SdkResult> =>
    runSdk(
      { op, api_endpoint: h.base, project: PROJECT, location: LOCATION, endpoint, ...extra },
      { HTTPS_PROXY: front.url, https_proxy: front.url, REQUESTS_CA_BUNDLE: caBundle },
    );

  beforeAll(async () => {
    const sample = (name: string): string => readFileSync(join(ROOT, 'crds/samples', name), 'utf8');
    h = await startLocal({ 'half-plus-two.yaml': sample('half-plus-two.yaml'), 'echo.yaml': sample('echo.yaml') });
    certDir = await mkdtemp(join(tmpdir(), 'predictgate-tls-'));
    caBundle = join(certDir, 'cert.pem');
    const made = await runSdk({ op: 'tls_cert', hosts: [RAW_PREDICT_HOST], cert: caBundle, key: join(certDir, 'key.pem') });
    expect(made).toMatchObject({ ok: true });
    front = await startTlsFront(RAW_PREDICT_HOST, await readFile(caBundle), await readFile(join(certDir, 'key.pem')), h.mode.port);
    await h.until((x) => ready(x, 'Endpoint', 'default/half-plus-two') && ready(x, 'Endpoint', 'default/echo'), 'sample endpoints half-plus-two and echo ready');
  }, 60_000);

  afterAll(async () => {
    await front?.close();
    await h?.stop();
    if (certDir) await rm(certDir, { recursive: true, force: true });
  });

  test('Endpoint: the SDK reads the Endpoint resource (name, traffic split, deployed models)', async () => {
    // The SDK GETs /v1/projects/P/locations/L/endpoints/E before its first call.
    const r = succeeded(await sdk('endpoint', 'half-plus-two'));
    expect(r).toEqual({
      ok: true,
      resource_name: `projects/${PROJECT}/locations/${LOCATION}/endpoints/half-plus-two`,
      display_name: 'half-plus-two',
      traffic_split: { 'half-plus-two': 100 },
      dedicated_endpoint_enabled: false,
      deployed_models: [{ id: 'half-plus-two', display_name: 'half-plus-two', model: '', model_version_id: '1' }],
    });
  }, SDK_TEST_MS);

  test('Endpoint.predict answers x/2 + 2 with the deployed model id and version', async () => {
    const r = succeeded(await sdk('predict', 'half-plus-two', { instances: [1.0, 2.0, 5.0] }));
    expect(r).toMatchObject({ ok: true, predictions: [2.5, 3, 4.5], deployed_model_id: 'half-plus-two', model_version_id: '1' });
  }, SDK_TEST_MS);

  test('Endpoint.predict with instances of different kinds raises BadRequest (400) with the gateway message', async () => {
    // REST errors are raised by HTTP status: 400 (INVALID_ARGUMENT) is google.api_core.exceptions.BadRequest.
    const expected = await gatewayError(h, 'half-plus-two', { instances: [1, 'a'] });
    expect(expected).toMatchObject({ code: 400, status: 'INVALID_ARGUMENT', message: expect.stringContaining('instances[1]') });
    const r = raised(await sdk('predict', 'half-plus-two', { instances: [1, 'a'] }));
    expect(r).toMatchObject({ ok: false, exception: 'google.api_core.exceptions.BadRequest', code: 400 });
    expect(r.message).toMatch(/^POST http:\/\/127\.0\.0\.1:\d+\/v1\/projects\/default\/locations\/us-central1\/endpoints\/half-plus-two:predict\?\S*: /);
    expect((r.message as string).endsWith(`: ${expected.message}`)).toBe(true);
  }, SDK_TEST_MS);

  test('an unknown endpoint raises NotFound (404) with the gateway message', async () => {
    const r = raised(await sdk('predict', 'no-such-endpoint', { instances: [1.0] }));
    expect(r).toMatchObject({ ok: false, exception: 'google.api_core.exceptions.NotFound', code: 404 });
    expect(r.message).toContain('endpoint no-such-endpoint not found in project default');
  }, SDK_TEST_MS);

  test('Endpoint.raw_predict: the JSON body reaches the model and its answer comes back as it is', async () => {
    const r = succeeded(await sdk('raw_predict', 'half-plus-two', { body: '{"instances": [1.0, 5.0]}', headers: { 'Content-Type': 'application/json' } }));
    expect(r).toMatchObject({
      ok: true,
      status: 200,
      url: `https://${RAW_PREDICT_HOST}/v1/projects/${PROJECT}/locations/${LOCATION}/endpoints/half-plus-two:rawPredict`,
      content_type: 'application/json',
      headers: expect.objectContaining({ 'x-vertex-ai-endpoint-id': 'half-plus-two', 'x-vertex-ai-deployed-model-id': 'half-plus-two' }),
    });
    expect(JSON.parse(r.body as string)).toEqual({ predictions: [2.5, 4.5] });
    // The SDK's https call went through the test's proxy, to the Vertex host name only.
    expect(new Set(front.targets)).toEqual(new Set([`${RAW_PREDICT_HOST}:443`]));
  }, SDK_TEST_MS);

  test('Endpoint.raw_predict: any bytes and content type, and the model\'s error status, pass unchanged', async () => {
    const csv = succeeded(await sdk('raw_predict', 'echo', { body: 'a,b\n1,2\n', headers: { 'Content-Type': 'text/csv' } }));
    expect(csv).toMatchObject({ ok: true, status: 200, body: 'a,b\n1,2\n', content_type: expect.stringMatching(/^text\/csv/) });
    // raw_predict returns the requests.Response: TF Serving's own 400 and body, not an exception.
    const bad = succeeded(await sdk('raw_predict', 'half-plus-two', { body: '{"instances": "x"}', headers: { 'Content-Type': 'application/json' } }));
    expect(bad).toMatchObject({ ok: true, status: 400 });
    expect(JSON.parse(bad.body as string)).toEqual({ error: expect.stringContaining("Excepting 'instances' to be an list/array") });
  }, SDK_TEST_MS);

  test('Endpoint.predict(use_raw_predict=True) reads the deployed model from the rawPredict answer headers', async () => {
    // The SDK reads X-Vertex-AI-Deployed-Model-Id, X-Vertex-AI-Model (required) and X-Vertex-AI-Model-Version-Id.
    const r = succeeded(await sdk('predict_via_raw', 'half-plus-two', { instances: [1.0, 2.0] }));
    expect(r).toMatchObject({ ok: true, predictions: [2.5, 3], deployed_model_id: 'half-plus-two', model_version_id: '1' });
  }, SDK_TEST_MS);
});

describe('KServe model server (kserve.Model, V1 protocol) on its own', () => {
  test('one process on 127.0.0.1:AIP_HTTP_PORT, ready on GET /v1/models/NAME, exits 0 on SIGTERM', async () => {
    const port = await freePort();
    const child = spawn(python, [KSERVE_MODEL, '--model_name', 'solo'], { env: { ...process.env, AIP_HTTP_PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    const lines: string[] = [];
    let stopped = false;
    try {
      // uvicorn says when it listens (on stderr, through KServe's logging).
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`kserve_model.py did not start within 30 s:\n${lines.join('\n')}`)), 30_000);
        for (const stream of [child.stdout, child.stderr]) {
          createInterface({ input: stream }).on('line', (line) => {
            lines.push(line);
            if (line.includes(`Uvicorn running on http://127.0.0.1:${port}`)) {
              clearTimeout(timer);
              resolve();
            }
          });
        }
        void exited.then(({ code, signal }) => {
          clearTimeout(timer);
          reject(new Error(`kserve_model.py exited (${code ?? signal}) before listening:\n${lines.join('\n')}`));
        });
      });
      expect(listenAddress(port)).toBe('127.0.0.1');
      expect(descendants(child.pid!)).toEqual([]);
      const health = await fetch(`http://127.0.0.1:${port}/v1/models/solo`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ name: 'solo', ready: true });
      const r = await post(`http://127.0.0.1:${port}/v1/models/solo:predict`, '{"instances": [1, [2, 3]]}');
      expect(r.json()).toEqual({ predictions: [2.5, [3, 3.5]] });
      child.kill('SIGTERM');
      stopped = true;
      // A server that ignores SIGTERM is killed (and fails the check) rather than outliving the test.
      const kill = setTimeout(() => child.kill('SIGKILL'), 20_000);
      try {
        expect(await exited).toEqual({ code: 0, signal: null });
      } finally {
        clearTimeout(kill);
      }
    } finally {
      // Whatever failed above, the server does not outlive the test.
      if (!stopped || child.exitCode === null) child.kill('SIGKILL');
      await exited;
    }
  }, 60_000);
});

describe('KServe model server as the upstream of a tensorflow DeployedModel', () => {
  const NAME = 'kserve-half-plus-two';
  let h: LocalHarness;

  beforeAll(async () => {
    const model = deployedModelYaml({
      name: NAME,
      framework: 'tensorflow',
      command: [python, KSERVE_MODEL, '--model_name', NAME],
      predictRoute: `/v1/models/${NAME}:predict`,
      healthRoute: `/v1/models/${NAME}`,
    });
    h = await startLocal({ 'kserve.yaml': `${model}---\n${endpointYaml(NAME, [{ model: NAME }])}` });
    await h.until((x) => ready(x, 'Endpoint', `default/${NAME}`), `endpoint ${NAME} ready (KServe started)`, 45_000);
  }, 60_000);

  afterAll(async () => {
    await h?.stop();
  });

  test('predict: row-form instances go to KServe and its predictions come back with the deployed model ids', async () => {
    const r = await post(h.vertex(NAME), JSON.stringify({ instances: [[1.0, 2.0], [3.0, 4.5]] }));
    expect(r.status).toBe(200);
    expect(r.json()).toEqual({ predictions: [[2.5, 3], [3.5, 4.25]], deployedModelId: NAME, modelDisplayName: NAME });
    expect(r.headers.get('x-vertex-ai-deployed-model-id')).toBe(NAME);
  });

  test('KServe\'s InvalidInput (400 {"error": ...}) is passed on as INVALID_ARGUMENT with its message', async () => {
    // A string tensor is valid for TF Serving, so the gateway forwards it; the model refuses it.
    const r = await post(h.vertex(NAME), '{"instances": ["a"]}');
    expect(r.status).toBe(400);
    expect(r.json()).toEqual({ error: { code: 400, status: 'INVALID_ARGUMENT', message: "instances[0]: expected a number or a list of numbers, got str 'a'" } });
  });

  test('an exception in the model (KServe\'s 500 {"error": "TypeError : ..."}) is passed on as INTERNAL with its message', async () => {
    const r = await post(h.vertex(NAME), '{"instances": [{"x": 1.0}]}');
    expect(r.status).toBe(500);
    expect(r.json()).toEqual({ error: { code: 500, status: 'INTERNAL', message: "TypeError : unsupported operand type(s) for /: 'dict' and 'int'" } });
  });

  test('the Vertex SDK\'s Endpoint.predict through the gateway to KServe, and KServe\'s InvalidInput as BadRequest', async () => {
    const call = (instances: unknown[]): Promise<SdkResult> =>
      runSdk({ op: 'predict', api_endpoint: h.base, project: PROJECT, location: LOCATION, endpoint: NAME, instances });
    expect(succeeded(await call([1.0, 3.0]))).toMatchObject({ ok: true, predictions: [2.5, 3.5], deployed_model_id: NAME });
    const bad = raised(await call(['a']));
    expect(bad).toMatchObject({ ok: false, exception: 'google.api_core.exceptions.BadRequest', code: 400 });
    expect((bad.message as string).endsWith(": instances[0]: expected a number or a list of numbers, got str 'a'")).toBe(true);
  }, SDK_TEST_MS);

  test('rawPredict passes KServe\'s own answers, error included, unchanged', async () => {
    const ok = await post(h.vertex(NAME, 'rawPredict'), '{"instances": [4]}');
    expect(ok.status).toBe(200);
    expect(ok.json()).toEqual({ predictions: [4] });
    const bad = await post(h.vertex(NAME, 'rawPredict'), '{"instances": [true]}');
    expect(bad.status).toBe(400);
    expect(bad.json()).toEqual({ error: 'instances[0]: expected a number or a list of numbers, got bool True' });
  });
});
