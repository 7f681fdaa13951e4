// The real Vertex clients with real Kubernetes tokens: the cluster gateway on the test apiserver with
// PREDICT_AUTH=kubernetes, a real model process behind it, and the chart's own predictgate-predictor
// rules (rendered by helm under a name of the suite's) bound in the suite's namespace to one
// ServiceAccount. gcloud (--access-token-file), the Node client (@google-cloud/aiplatform) and the
// Python SDK each call with a `kubectl create token` token of it and succeed, with one of an unbound
// ServiceAccount report PERMISSION_DENIED (the SDK: Forbidden) with the gateway's message naming the
// user, and with a token the cluster never issued report UNAUTHENTICATED (the SDK: Unauthorized when
// its token comes from a file it can read again; a bare fixed token makes its transport's refresh on
// a 401 fail with RefreshError instead). The Node client over gRPC (GRPC_PORT), its token as the
// call's authorization metadata, gets the same three answers as statuses. Traffic stays on loopback.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { helpers, v1, type protos } from '@google-cloud/aiplatform';
import { freePort } from '../../src/workload/ports.js';
import { ROOT } from '../helpers/local.js';
import { startBundledModel, stopAll, type PredictgateProcess } from '../helpers/procs.js';
import { GCLOUD, GCLOUD_TIMEOUT_MS, gcloud, type GcloudSetup } from '../helpers/gcloud.js';
import { ensurePythonEnv, raised, runSdk, succeeded } from '../helpers/python.js';
import {
  applyCrds, clients, deleteNamespace, inNamespace, kubectl, kubectlOk, newNamespace, runTool, setAvailable, startClusterGateway, startController, waitFor,
  type ClusterProcess, type Clients,
} from '../helpers/cluster.js';

type IValue = protos.google.protobuf.IValue;
type ClientOptions = NonNullable<ConstructorParameters<typeof v1.PredictionServiceClient>[0]>;

const LOCATION = 'us-central1';
const ENDPOINT = 'half-plus-two';
/** google.rpc.Code values, as the Node client reports them in `err.code`. */
const PERMISSION_DENIED = 7;
const UNAUTHENTICATED = 16;
/** A well-formed bearer token no cluster issued. */
const GARBAGE = 'not.a-token_the-cluster.issued';
const SDK_CALL_MS = 40_000;

let c: Clients;
let ns: string;
let role: string;
let controller: ClusterProcess;
let gateway: ClusterProcess;
let grpcPort = 0;
const models: PredictgateProcess[] = [];
let python = '';
/** `kubectl create token` tokens: of the bound ServiceAccount, and of one bound to nothing. */
const tokens = { permitted: '', unbound: '' };

const api = (): string => `http://127.0.0.1:${gateway.port}`;

/** The gate's decisions so far, by result, from the gateway's /metrics (read as the test's admin, in system:masters). */
async function decisions(): Promise<Record<'allowed' | 'denied' | 'unauthenticated' | 'unavailable' | 'throttled', number>> {
  const res = await fetch(`${api()}/metrics`, { headers: { authorization: `Bearer ${c.kc.getCurrentUser()?.token}` } });
  if (res.status !== 200) throw new Error(`GET /metrics as the admin: ${res.status} ${await res.text()}`);
  const text = await res.text();
  const count = (result: string): number => Number(new RegExp(`^predictgate_auth_decisions_total\\{result="${result}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? NaN);
  return { allowed: count('allowed'), denied: count('denied'), unauthenticated: count('unauthenticated'), unavailable: count('unavailable'), throttled: count('throttled') };
}
/** The gateway's refusal of the unbound ServiceAccount, for a verb on a resource of the Endpoint. */
const refusal = (verb: string, resource: string): string =>
  `endpoints.prediction.predictgate.dev "${ENDPOINT}" is forbidden: User "system:serviceaccount:${ns}:stranger" cannot ${verb} resource "${resource}" in API group "prediction.predictgate.dev" in the namespace "${ns}"`;

beforeAll(async () => {
  c = clients();
  await applyCrds();
  ns = await newNamespace(c, 'auth-clients');
  // The chart's callers' role, under a name of this suite's (the chart suite installs the real one).
  role = `predictor-${randomBytes(3).toString('hex')}`;
  const helm = process.env.PREDICTGATE_TEST_HELM;
  if (!helm) throw new Error('PREDICTGATE_TEST_HELM is not set: run under jest\'s global setup (npm test)');
  const rendered = await runTool(helm, ['template', 'pg', join(ROOT, 'charts/predictgate'), '--show-only', 'templates/caller-rbac.yaml', '--set', `auth.predictorRole.name=${role}`, '--set', 'auth.predictorRole.aggregateToEdit=false', '--set', 'auth.predictorRole.aggregateToAdmin=false', '--set', 'auth.metricsReaderRole.create=false']);
  if (rendered.code !== 0) throw new Error(`helm template failed: ${rendered.stderr}`);
  await kubectlOk(['apply', '-f', '-'], { input: rendered.stdout });
  for (const sa of ['caller', 'stranger']) await kubectlOk(['create', 'serviceaccount', sa, '-n', ns]);
  await kubectlOk(['create', 'rolebinding', 'callers', '-n', ns, `--clusterrole=${role}`, `--serviceaccount=${ns}:caller`]);
  tokens.permitted = (await kubectlOk(['create', 'token', 'caller', '-n', ns])).trim();
  tokens.unbound = (await kubectlOk(['create', 'token', 'stranger', '-n', ns])).trim();

  const port = await startBundledModel('half-plus-two', { AIP_DEPLOYED_MODEL_ID: ENDPOINT }, models);
  controller = await startController([ns]);
  grpcPort = await freePort();
  gateway = await startClusterGateway([ns], { PREDICT_AUTH: 'kubernetes', GRPC_PORT: String(grpcPort), UPSTREAM_RESOLVE: `half-plus-two.${ns}.svc:8080=127.0.0.1:${port}` });
  await kubectlOk(['apply', '-f', '-'], { input: inNamespace(readFileSync(join(ROOT, 'crds/samples/half-plus-two.yaml'), 'utf8'), ns) });
  await waitFor(async () => (await c.apps.readNamespacedDeployment({ name: ENDPOINT, namespace: ns })).metadata?.name, 'the Deployment of half-plus-two');
  await setAvailable(c, ns, ENDPOINT, 1);
  await kubectlOk(['wait', '--for=condition=EndpointReady', '--timeout=30s', '-n', ns, `endpoints.prediction.predictgate.dev/${ENDPOINT}`]);
  // The gateway has seen it Ready: a permitted call answers.
  await waitFor(async () => {
    const res = await fetch(`${api()}/v1/projects/${ns}/locations/${LOCATION}/endpoints/${ENDPOINT}:predict`, { method: 'POST', headers: { authorization: `Bearer ${tokens.permitted}`, 'content-type': 'application/json' }, body: '{"instances": [1]}' });
    return res.status === 200;
  }, 'a permitted call answered');
  python = await ensurePythonEnv((line) => console.log(`cluster-auth-clients: ${line}`));
}, 16 * 60_000);

afterAll(async () => {
  await gateway?.stop();
  await controller?.stop();
  await stopAll(models);
  if (role) await kubectl(['delete', 'clusterrole', role, '--ignore-not-found']);
  if (ns) await deleteNamespace(c, ns);
});

/** Plain JSON to a protobuf Value, and back (the Node client's Struct form). */
const value = (x: unknown): IValue => helpers.toValue(x as object) as IValue;
const numberOf = (v: IValue): number | null | undefined => v.numberValue;

describe('Node client (@google-cloud/aiplatform, REST fallback) with a bearer token', () => {
  const made: InstanceType<typeof v1.PredictionServiceClient>[] = [];

  /** A client sending `token` on every call: no credential lookup, no traffic beyond loopback. */
  function client(token: string): InstanceType<typeof v1.PredictionServiceClient> {
    const auth = {
      async getRequestHeaders(): Promise<Headers> {
        return new Headers({ authorization: `Bearer ${token}` });
      },
      fetch(url: string, init: RequestInit & { headers: Headers }): Promise<Response> {
        init.headers.set('authorization', `Bearer ${token}`);
        return fetch(url, init);
      },
    };
    const cl = new v1.PredictionServiceClient({ apiEndpoint: '127.0.0.1', port: gateway.port, protocol: 'http', fallback: true, auth: auth as unknown as ClientOptions['auth'] });
    made.push(cl);
    return cl;
  }

  afterAll(async () => {
    for (const cl of made) await cl.close();
  });

  const predict = (token: string) => {
    const cl = client(token);
    return cl.predict({ endpoint: cl.projectLocationEndpointPath(ns, LOCATION, ENDPOINT), instances: [1.0, 2.0, 5.0].map(value) });
  };

  test('a permitted ServiceAccount\'s token: the predictions', async () => {
    const [resp] = await predict(tokens.permitted);
    expect((resp.predictions ?? []).map(numberOf)).toEqual([2.5, 3, 4.5]);
    expect(resp.deployedModelId).toBe(ENDPOINT);
  });

  test('an unbound ServiceAccount\'s token: PERMISSION_DENIED (7) with the gateway\'s message naming the user', async () => {
    await expect(predict(tokens.unbound)).rejects.toMatchObject({ code: PERMISSION_DENIED, message: expect.stringContaining(refusal('create', 'endpoints/predict')) });
  });

  test('a token the cluster never issued: UNAUTHENTICATED (16)', async () => {
    await expect(predict(GARBAGE)).rejects.toMatchObject({ code: UNAUTHENTICATED, message: expect.stringContaining("the bearer token was not accepted by the cluster's TokenReview") });
  });
});

describe('Node client over gRPC (GRPC_PORT) with the token as authorization metadata', () => {
  /** No credential lookup: the channel is plaintext, and the token goes with each call. */
  const noAuth = { getUniverseDomain: async (): Promise<string> => 'googleapis.com', getClient: async (): Promise<object> => ({}) };
  let cl: InstanceType<typeof v1.PredictionServiceClient>;
  beforeAll(() => {
    cl = new v1.PredictionServiceClient({ apiEndpoint: '127.0.0.1', port: grpcPort, sslCreds: grpc.credentials.createInsecure(), auth: noAuth as unknown as ClientOptions['auth'] });
  });
  afterAll(() => cl.close());

  const predict = (token: string) =>
    cl.predict({ endpoint: cl.projectLocationEndpointPath(ns, LOCATION, ENDPOINT), instances: [1.0, 2.0, 5.0].map(value) }, { otherArgs: { headers: { authorization: `Bearer ${token}` } } });

  test('a permitted ServiceAccount\'s token: the predictions', async () => {
    const [resp] = await predict(tokens.permitted);
    expect([(resp.predictions ?? []).map(numberOf), resp.deployedModelId]).toEqual([[2.5, 3, 4.5], ENDPOINT]);
  });

  test('an unbound ServiceAccount\'s token: PERMISSION_DENIED with the gateway\'s message; an unknown token: UNAUTHENTICATED', async () => {
    await expect(predict(tokens.unbound)).rejects.toMatchObject({ code: grpc.status.PERMISSION_DENIED, details: expect.stringContaining(refusal('create', 'endpoints/predict')) });
    await expect(predict(GARBAGE)).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED, details: expect.stringContaining("the bearer token was not accepted by the cluster's TokenReview") });
  });
});

if (!GCLOUD) console.warn('cluster-auth-clients.test: gcloud is not on PATH; skipping the gcloud CLI tests');
const gtest = GCLOUD ? test : test.skip;

describe('gcloud CLI (gcloud ai endpoints predict --access-token-file)', () => {
  let cfg = '';
  let setup: GcloudSetup;

  beforeAll(async () => {
    if (!GCLOUD) return;
    cfg = await mkdtemp(join(tmpdir(), 'predictgate-gcloud-'));
    setup = { config: cfg, api: api(), project: ns };
    await writeFile(join(cfg, 'request.json'), JSON.stringify({ instances: [1.0, 2.0, 5.0] }));
    for (const [name, token] of [['permitted', tokens.permitted], ['unbound', tokens.unbound], ['garbage', GARBAGE]]) await writeFile(join(cfg, name), `${token}\n`, { mode: 0o600 });
  });

  afterAll(async () => {
    if (cfg) await rm(cfg, { recursive: true, force: true });
  });

  const predict = (tokenFile: string) =>
    gcloud(setup, ['ai', 'endpoints', 'predict', ENDPOINT, `--region=${LOCATION}`, `--json-request=${join(cfg, 'request.json')}`, `--access-token-file=${join(cfg, tokenFile)}`, '--format=json']);

  gtest('a permitted ServiceAccount\'s token: the predictions', async () => {
    const r = await predict('permitted');
    expect({ code: r.code, stderr: r.code ? r.stderr : '' }).toEqual({ code: 0, stderr: '' });
    expect(JSON.parse(r.stdout)).toMatchObject({ predictions: [2.5, 3, 4.5], deployedModelId: ENDPOINT });
  }, 2 * GCLOUD_TIMEOUT_MS);

  gtest('an unbound ServiceAccount\'s token: exits 1 with PERMISSION_DENIED and the gateway\'s message', async () => {
    const r = await predict('unbound');
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(`ERROR: (gcloud.ai.endpoints.predict) PERMISSION_DENIED: ${refusal('create', 'endpoints/predict')}`);
  }, 2 * GCLOUD_TIMEOUT_MS);

  gtest('a token the cluster never issued: exits 1 with UNAUTHENTICATED', async () => {
    const r = await predict('garbage');
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('ERROR: (gcloud.ai.endpoints.predict) UNAUTHENTICATED: the bearer token was not accepted by the cluster\'s TokenReview');
  }, 2 * GCLOUD_TIMEOUT_MS);
});

describe('Vertex AI Python SDK (google-cloud-aiplatform, REST transport) with a bearer token', () => {
  // Endpoint.predict reads the Endpoint resource first (get on endpoints), then predicts.
  const predict = (token: string) =>
    runSdk(python, { op: 'predict', api_endpoint: api(), project: ns, location: LOCATION, endpoint: ENDPOINT, instances: [1.0, 2.0, 5.0], token }, {}, SDK_CALL_MS);

  test('a permitted ServiceAccount\'s token: the predictions', async () => {
    expect(succeeded(await predict(tokens.permitted))).toMatchObject({ ok: true, predictions: [2.5, 3, 4.5], deployed_model_id: ENDPOINT });
  }, SDK_CALL_MS + 10_000);

  test('an unbound ServiceAccount\'s token: Forbidden (403) reading the Endpoint, with the gateway\'s message', async () => {
    // REST errors are raised by HTTP status: 403 (PERMISSION_DENIED) is google.api_core.exceptions.Forbidden.
    const r = raised(await predict(tokens.unbound));
    expect(r).toMatchObject({ ok: false, exception: 'google.api_core.exceptions.Forbidden', code: 403 });
    expect(r.message).toMatch(/^GET http:\/\/127\.0\.0\.1:\d+\/v1\/projects\/[^/]+\/locations\/us-central1\/endpoints\/half-plus-two\?\S*: /);
    expect((r.message as string).endsWith(`: ${refusal('get', 'endpoints')}`)).toBe(true);
  }, SDK_CALL_MS + 10_000);

  test('a token the cluster never issued: the 401 makes google-auth refresh the fixed token, which it cannot (RefreshError)', async () => {
    // The REST transport's AuthorizedSession answers a 401 by refreshing the credentials; a bare
    // token has nothing to refresh with, so the SDK raises that rather than the gateway's message.
    const before = await decisions();
    const r = raised(await predict(GARBAGE));
    expect(r).toMatchObject({ ok: false, exception: 'google.auth.exceptions.RefreshError', message: expect.stringContaining('The credentials do not contain the necessary fields need to refresh the access token') });
    // The gateway had refused the call: 401, the cluster did not accept the token.
    expect((await decisions()).unauthenticated).toBeGreaterThan(before.unauthenticated);
  }, SDK_CALL_MS + 10_000);

  test('the same token from a token file (as a pod reads its projected token): Unauthorized (401, UNAUTHENTICATED) with the gateway\'s message', async () => {
    // Refreshing re-reads the file; after its retries google-auth hands the 401 to the SDK, which
    // raises it by HTTP status: 401 (UNAUTHENTICATED) is google.api_core.exceptions.Unauthorized.
    const dir = await mkdtemp(join(tmpdir(), 'predictgate-sdk-token-'));
    try {
      await writeFile(join(dir, 'token'), `${GARBAGE}\n`, { mode: 0o600 });
      const r = raised(await runSdk(python, { op: 'predict', api_endpoint: api(), project: ns, location: LOCATION, endpoint: ENDPOINT, instances: [1.0, 2.0, 5.0], token_file: join(dir, 'token') }, {}, SDK_CALL_MS));
      expect(r).toMatchObject({ ok: false, exception: 'google.api_core.exceptions.Unauthorized', code: 401 });
      expect(r.message).toContain(': the bearer token was not accepted by the cluster\'s TokenReview');
      await writeFile(join(dir, 'token'), `${tokens.permitted}\n`, { mode: 0o600 });
      const ok = succeeded(await runSdk(python, { op: 'predict', api_endpoint: api(), project: ns, location: LOCATION, endpoint: ENDPOINT, instances: [1.0, 2.0, 5.0], token_file: join(dir, 'token') }, {}, SDK_CALL_MS));
      expect(ok).toMatchObject({ ok: true, predictions: [2.5, 3, 4.5] });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 2 * SDK_CALL_MS + 10_000);
});

test('every refusal was the cluster\'s answer: denied and unauthenticated counted, no review failed', async () => {
  const d = await decisions();
  // Each client made its refused calls (gcloud and the SDK may retry, so at least one each).
  expect(d.denied).toBeGreaterThanOrEqual(GCLOUD ? 4 : 3);
  expect(d.unauthenticated).toBeGreaterThanOrEqual(GCLOUD ? 4 : 3);
  expect({ unavailable: d.unavailable, throttled: d.throttled }).toEqual({ unavailable: 0, throttled: 0 });
});
