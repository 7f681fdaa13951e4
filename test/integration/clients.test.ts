// The two real Vertex AI clients against the gateway in local mode (in-process, sample manifests):
// the Node client library (@google-cloud/aiplatform, REST fallback over plain HTTP on loopback with
// a fixed token) and the gcloud CLI (env-only, isolated config, loopback-only traffic). Both must
// read our answers and our google.rpc.Status errors like they read Vertex's.
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { helpers, v1, type protos } from '@google-cloud/aiplatform';
import { ROOT, post, ready, startLocal, type LocalHarness } from '../helpers/local.js';
import { GCLOUD, GCLOUD_TIMEOUT_MS, gcloudWithToken, type GcloudResult } from '../helpers/gcloud.js';

type IValue = protos.google.protobuf.IValue;
type ClientOptions = NonNullable<ConstructorParameters<typeof v1.PredictionServiceClient>[0]>;

const PROJECT = 'default';
const REGION = 'local';
const TOKEN = 'test-token';
/** google.rpc.Code values, as the Node client reports them in `err.code`. */
const INVALID_ARGUMENT = 3;
const NOT_FOUND = 5;

let h: LocalHarness;

interface RpcStatus {
  code: number;
  message: string;
  status: string;
}

/**
 * The gateway's own google.rpc.Status for `body` (the exact bytes a client puts on the wire), posted
 * directly; the clients must report this code and message.
 */
async function gatewayError(endpointName: string, body: unknown, status: string): Promise<RpcStatus> {
  const r = await post(h.vertex(endpointName), JSON.stringify(body));
  const { error } = r.json() as { error: RpcStatus };
  expect(error).toMatchObject({ code: r.status, status });
  expect(error.message).toEqual(expect.any(String));
  return error;
}

beforeAll(async () => {
  const sample = (name: string): string => readFileSync(join(ROOT, 'crds/samples', name), 'utf8');
  h = await startLocal({ 'half-plus-two.yaml': sample('half-plus-two.yaml'), 'echo.yaml': sample('echo.yaml') });
  await h.until(
    (x) => ready(x, 'Endpoint', 'default/half-plus-two') && ready(x, 'Endpoint', 'default/echo'),
    'sample endpoints half-plus-two and echo ready',
  );
}, 60_000);

afterAll(async () => {
  await h?.stop();
});

/** A protobuf Value (as the Node client decodes it) back to plain JSON. */
function toJs(v: IValue): unknown {
  if (v.structValue) return Object.fromEntries(Object.entries(v.structValue.fields ?? {}).map(([k, x]) => [k, toJs(x)]));
  if (v.listValue) return (v.listValue.values ?? []).map(toJs);
  if (v.nullValue !== undefined && v.nullValue !== null) return null;
  if (v.numberValue !== undefined && v.numberValue !== null) return v.numberValue;
  if (v.stringValue !== undefined && v.stringValue !== null) return v.stringValue;
  if (v.boolValue !== undefined && v.boolValue !== null) return v.boolValue;
  throw new Error(`unexpected Value ${JSON.stringify(v)}`);
}

/** Plain JSON to a protobuf Value (helpers.toValue handles primitives too; its type says object). */
const value = (x: unknown): IValue => helpers.toValue(x as object) as IValue;

describe('Node client (@google-cloud/aiplatform, REST fallback)', () => {
  let client: InstanceType<typeof v1.PredictionServiceClient>;
  const endpoint = (name: string): string => client.projectLocationEndpointPath(PROJECT, REGION, name);

  beforeAll(() => {
    // gax's fallback transport calls auth.fetch(url, init); getRequestHeaders only needs to exist.
    // A fixed token, so no credential lookup and no traffic beyond loopback.
    const auth = {
      async getRequestHeaders(): Promise<Headers> {
        return new Headers({ authorization: `Bearer ${TOKEN}` });
      },
      fetch(url: string, init: RequestInit & { headers: Headers }): Promise<Response> {
        init.headers.set('authorization', `Bearer ${TOKEN}`);
        return fetch(url, init);
      },
    };
    client = new v1.PredictionServiceClient({
      apiEndpoint: '127.0.0.1',
      port: Number(new URL(h.base).port),
      protocol: 'http',
      fallback: true,
      auth: auth as unknown as ClientOptions['auth'],
    });
  });

  afterAll(async () => {
    await client?.close();
  });

  test('predict on the TensorFlow sample answers x/2 + 2 and the deployed model ids', async () => {
    const [resp] = await client.predict({ endpoint: endpoint('half-plus-two'), instances: [1.0, 2.0, 5.0].map(value) });
    expect((resp.predictions ?? []).map(toJs)).toEqual([2.5, 3, 4.5]);
    expect(resp.deployedModelId).toBe('half-plus-two');
    expect(resp.modelDisplayName).toBe('half-plus-two');
    expect(resp.modelVersionId).toBe('1');
  });

  test('predict on the pytorch echo sample answers mixed instances and parameters back', async () => {
    // No list directly inside a list: google-gax 5.0.8's REST transcoding (deepCopyWithoutMatchedFields)
    // turns such a list into an object {"0": ..., "1": ...} before it leaves the client.
    const instances = [1, 'x', true, null, { b: { c: 'd' } }, { data: [1, 2.5, 'y'] }, { data: 7 }];
    const [resp] = await client.predict({
      endpoint: endpoint('echo'),
      instances: instances.map(value),
      parameters: value({ k: 1 }),
    });
    // Unwrapped instances are wrapped as {"data": ...} for pytorch; the echo model answers each data.
    expect((resp.predictions ?? []).map(toJs)).toEqual([1, 'x', true, null, { b: { c: 'd' } }, [1, 2.5, 'y'], 7]);
    expect(resp.deployedModelId).toBe('echo');
    expect(resp.modelDisplayName).toBe('echo');
    expect(resp.modelVersionId).toBe('1');
  });

  test('instances of different kinds for a TensorFlow model are INVALID_ARGUMENT with the gateway message', async () => {
    // The client sends {"instances":[1,"a"],"labels":{}}.
    const expected = await gatewayError('half-plus-two', { instances: [1, 'a'], labels: {} }, 'INVALID_ARGUMENT');
    expect(expected).toMatchObject({ code: 400, message: expect.stringContaining('instances[1]') });
    await expect(client.predict({ endpoint: endpoint('half-plus-two'), instances: [1, 'a'].map(value) }))
      .rejects.toMatchObject({ code: INVALID_ARGUMENT, message: expected.message });
  });

  test('an empty instances list is INVALID_ARGUMENT (the client leaves the empty field out)', async () => {
    // proto3 JSON drops an empty repeated field: the client sends {"labels":{}}.
    const expected = await gatewayError('half-plus-two', { labels: {} }, 'INVALID_ARGUMENT');
    expect(expected).toMatchObject({ code: 400, message: expect.stringContaining('instances') });
    await expect(client.predict({ endpoint: endpoint('half-plus-two'), instances: [] }))
      .rejects.toMatchObject({ code: INVALID_ARGUMENT, message: expected.message });
  });

  test('an unknown endpoint is NOT_FOUND', async () => {
    const expected = await gatewayError('no-such-endpoint', { instances: [1], labels: {} }, 'NOT_FOUND');
    expect(expected).toMatchObject({ code: 404, message: expect.stringContaining('no-such-endpoint') });
    await expect(client.predict({ endpoint: endpoint('no-such-endpoint'), instances: [value(1)] }))
      .rejects.toMatchObject({ code: NOT_FOUND, message: expected.message });
  });

  test('rawPredict: the client\'s HttpBody ({"httpBody": {contentType, data}} with $alt=json) reaches the model as raw bytes and comes back wrapped', async () => {
    // The echo model returns any body that is not its KServe envelope unchanged, with its content type.
    const bytes = Buffer.from([0, 1, 2, 254, 255, 10, 13]);
    const [binary] = await client.rawPredict({ endpoint: endpoint('echo'), httpBody: { contentType: 'application/octet-stream', data: bytes } });
    expect(binary.contentType).toBe('application/octet-stream');
    expect(Buffer.from(binary.data as Uint8Array)).toEqual(bytes);
    const csv = 'a,b\n1,2\n';
    const [text] = await client.rawPredict({ endpoint: endpoint('echo'), httpBody: { contentType: 'text/csv', data: Buffer.from(csv) } });
    expect(text.contentType).toMatch(/^text\/csv/);
    expect(Buffer.from(text.data as Uint8Array).toString()).toBe(csv);
    // A JSON body to a TensorFlow model: its answer comes back as the HttpBody's bytes.
    const [tf] = await client.rawPredict({ endpoint: endpoint('half-plus-two'), httpBody: { contentType: 'application/json', data: Buffer.from('{"instances": [1.0, 2.0]}') } });
    expect(tf.contentType).toBe('application/json');
    expect(JSON.parse(Buffer.from(tf.data as Uint8Array).toString())).toEqual({ predictions: [2.5, 3] });
  });

  test('rawPredict errors reach the client as google.rpc.Status: an unknown endpoint, a model error', async () => {
    await expect(client.rawPredict({ endpoint: endpoint('no-such-endpoint'), httpBody: { contentType: 'application/json', data: Buffer.from('{}') } }))
      .rejects.toMatchObject({ code: NOT_FOUND });
    // TF Serving answers a malformed body with 400 {"error": ...}; the message is passed on.
    await expect(client.rawPredict({ endpoint: endpoint('half-plus-two'), httpBody: { contentType: 'application/json', data: Buffer.from('{"instances": "x"}') } }))
      .rejects.toMatchObject({ code: INVALID_ARGUMENT, message: expect.stringContaining("Excepting 'instances' to be an list/array") });
  });
});

describe('rawPredict in the HttpBody form, checked by the gateway', () => {
  const url = (): string => `${h.vertex('echo', 'rawPredict')}?$alt=json%3Benum-encoding=int`;
  test.each([
    ['not JSON', 'nope', 400, /^invalid JSON/],
    ['no httpBody', '{"body": {}}', 400, /^httpBody: required/],
    ['httpBody not an object', '{"httpBody": "x"}', 400, /^httpBody: expected an object, got string$/],
    ['data not base64', '{"httpBody": {"data": "***"}}', 400, /^httpBody\.data: expected a base64 string, got a string that is not base64$/],
    ['contentType not a string', '{"httpBody": {"contentType": 5, "data": ""}}', 400, /^httpBody\.contentType: expected a string, got number$/],
  ])('%s is a 400 with the field named', async (_what, body, status, message) => {
    const r = await post(url(), body);
    expect(r.status).toBe(status);
    expect((r.json() as { error: { message: string; status: string } }).error).toMatchObject({ status: 'INVALID_ARGUMENT', message: expect.stringMatching(message) });
  });

  test('an empty HttpBody sends an empty body and answers the model\'s, wrapped', async () => {
    const r = await post(url(), '{"httpBody": {}}');
    expect(r.status).toBe(200);
    expect(r.json()).toEqual({ contentType: expect.any(String), data: '' });
  });
});

if (!GCLOUD) console.warn('clients.test: gcloud is not on PATH; skipping the gcloud CLI tests');
const gtest = GCLOUD ? test : test.skip;

describe('gcloud CLI (gcloud ai endpoints)', () => {
  /** gcloud with a fixed token, our gateway as the aiplatform API (test/helpers/gcloud.ts). */
  const { folder, run: gcloud } = gcloudWithToken(TOKEN, () => h.base, PROJECT);

  async function predict(endpointName: string, body: unknown, file: string): Promise<GcloudResult> {
    const path = join(folder(), file);
    await writeFile(path, JSON.stringify(body));
    return gcloud(['ai', 'endpoints', 'predict', endpointName, `--region=${REGION}`, `--json-request=${path}`, '--format=json']);
  }

  gtest('predict --format=json prints the predictions and the deployed model ids', async () => {
    const r = await predict('half-plus-two', { instances: [1.0, 2.0, 5.0] }, 'ok.json');
    expect(r).toMatchObject({ code: 0 });
    expect(JSON.parse(r.stdout)).toEqual({
      predictions: [2.5, 3, 4.5],
      deployedModelId: 'half-plus-two',
      modelDisplayName: 'half-plus-two',
      modelVersionId: '1',
    });
  }, 2 * GCLOUD_TIMEOUT_MS);

  gtest('explain --format=json prints the explanations, and --deployed-model-id picks the model', async () => {
    const path = join(folder(), 'explain.json');
    await writeFile(path, JSON.stringify({ instances: [1.5] }));
    const r = await gcloud(['ai', 'endpoints', 'explain', 'echo', `--region=${REGION}`, `--json-request=${path}`, '--deployed-model-id=echo', '--format=json']);
    expect(r).toMatchObject({ code: 0 });
    expect(JSON.parse(r.stdout)).toMatchObject({
      explanations: [{ attributions: [{ featureAttributions: { data: 1 }, instanceOutputValue: 1.5 }] }],
      deployedModelId: 'echo',
    });
    const unknown = await gcloud(['ai', 'endpoints', 'explain', 'echo', `--region=${REGION}`, `--json-request=${path}`, '--deployed-model-id=nope']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('INVALID_ARGUMENT');
    expect(unknown.stderr).toContain('deployedModelId: endpoint echo has no deployed model "nope"; its deployed models: echo');
  }, 3 * GCLOUD_TIMEOUT_MS);

  gtest('raw-predict on the echo sample prints the body unchanged', async () => {
    const body = '{"anything": [1,2]}';
    const r = await gcloud(['ai', 'endpoints', 'raw-predict', 'echo', `--region=${REGION}`, `--request=${body}`, '--http-headers=Content-Type=application/json']);
    expect(r).toMatchObject({ code: 0, stdout: body });
  }, 2 * GCLOUD_TIMEOUT_MS);

  gtest('an empty instances list exits 1 with INVALID_ARGUMENT and the gateway message', async () => {
    // gcloud drops the empty list too: it sends {}.
    const expected = await gatewayError('half-plus-two', {}, 'INVALID_ARGUMENT');
    expect(expected.message).toContain('instances');
    const r = await predict('half-plus-two', { instances: [] }, 'empty.json');
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(`ERROR: (gcloud.ai.endpoints.predict) INVALID_ARGUMENT: ${expected.message}\n`);
  }, 2 * GCLOUD_TIMEOUT_MS);

  gtest('instances of different kinds exit 1 with INVALID_ARGUMENT and the gateway message', async () => {
    const expected = await gatewayError('half-plus-two', { instances: [1, 'a'] }, 'INVALID_ARGUMENT');
    expect(expected.message).toContain('instances[1]');
    const r = await predict('half-plus-two', { instances: [1, 'a'] }, 'mixed.json');
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(`ERROR: (gcloud.ai.endpoints.predict) INVALID_ARGUMENT: ${expected.message}\n`);
  }, 2 * GCLOUD_TIMEOUT_MS);

  gtest('an unknown endpoint exits 1 with NOT_FOUND and the gateway message', async () => {
    const expected = await gatewayError('no-such-endpoint', { instances: [1.0] }, 'NOT_FOUND');
    expect(expected.message).toContain('no-such-endpoint');
    const r = await predict('no-such-endpoint', { instances: [1.0] }, 'unknown.json');
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    // gcloud appends a hint about the access token to NOT_FOUND, so no newline right after the message.
    expect(r.stderr).toContain(`ERROR: (gcloud.ai.endpoints.predict) NOT_FOUND: ${expected.message}`);
  }, 2 * GCLOUD_TIMEOUT_MS);
});
