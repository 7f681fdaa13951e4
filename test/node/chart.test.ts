// The product on real pods: the chart installed with `helm install --wait` from the image built
// from the Dockerfile, the samples applied unchanged and served by real model pods, with Ready and
// EndpointReady from real Deployment status; predict, rawPredict and the GDC Host form through the
// gateway's NodePort and a port-forward, each with the token of a ServiceAccount bound to
// predictgate-predictor (the gateway checks its callers: no token is a 401, a namespace editor may call
// through the edit role's aggregation, and the kubelet's probes stay open); generative serving of the
// tiny-llm sample's pod through the NodePort (the openai npm SDK's streamed chat completion arriving
// chunk by chunk over time, a whole one with usage and the model list, curl -N on streamRawPredict,
// a 401 without a token on the OpenAI-compatible routes), the Node Vertex client over gRPC at each
// gateway pod (Predict, StreamRawPredict part by part, UNAUTHENTICATED without a token) and each
// gateway pod reading the model pod's load (its /metrics) with its heap sized from its memory limit; a DeployedModel change rolls its pods, autoscaling makes a
// working HPA, deletion removes the pods; helm upgrade and uninstall; clean JSON logs everywhere;
// and a crashed cluster leaves nothing on the machine once the next start has put it away.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { helpers, v1, type protos } from '@google-cloud/aiplatform';
import OpenAI from 'openai';
import { parseAllDocuments } from 'yaml';
import { ROOT } from '../helpers/local.js';
import { waitFor, type Run } from '../helpers/cluster.js';
import { seriesValue } from '../helpers/metrics.js';
import { quantityBytes } from '../bench/runtime.js';
import { NODE_NET } from '../cluster/nodeConfig.js';
import { killNodeProcesses, leftovers } from '../cluster/machine.js';
import { NODE_STATE_FILE, stopLeftoverNode, type NodeClusterInfo } from '../cluster/node.js';
import { SUITE_STEPS, UNINSTALL, WALKTHROUGH_CALLER, WALKTHROUGH_NODE_PORT } from './walkthrough.js';

const RELEASE_NS = 'predictgate-system';
let helmHome: string;
let env: NodeJS.ProcessEnv;

function nodeEnv(): NodeJS.ProcessEnv {
  const kubeconfig = process.env.PREDICTGATE_NODE_KUBECONFIG;
  const helm = process.env.PREDICTGATE_TEST_HELM;
  if (!kubeconfig || !helm) throw new Error('PREDICTGATE_NODE_KUBECONFIG is not set: the node suites run under the node tier\'s global setup (npm test, npm run test:node)');
  return {
    KUBECONFIG: kubeconfig,
    PATH: `${dirname(helm)}:${process.env.PATH}`,
    HELM_CACHE_HOME: join(helmHome, 'cache'),
    HELM_CONFIG_HOME: join(helmHome, 'config'),
    HELM_DATA_HOME: join(helmHome, 'data'),
  };
}

/** A shell command from the repository root on the node cluster, as a user would type it. */
function sh(command: string): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', command], { cwd: ROOT, env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d));
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
  });
}

async function shOk(command: string): Promise<string> {
  const r = await sh(command);
  if (r.code !== 0) throw new Error(`${command} failed (${r.code}): ${r.stderr || r.stdout}`);
  return r.stdout;
}

async function kubectlJson<T>(args: string): Promise<T> {
  return JSON.parse(await shOk(`kubectl ${args} -o json`)) as T;
}

interface Pod {
  metadata: { name: string; namespace: string; deletionTimestamp?: string; labels?: Record<string, string>; ownerReferences?: { kind: string; name: string }[] };
  spec: { serviceAccountName: string; securityContext?: { runAsNonRoot?: boolean; runAsUser?: number }; containers: { name: string; securityContext?: { readOnlyRootFilesystem?: boolean; runAsNonRoot?: boolean }; lifecycle?: unknown; ports?: { name?: string; containerPort: number }[] }[] };
  status: { phase: string; podIP?: string; containerStatuses?: { ready: boolean; restartCount: number; image: string }[] };
}

async function pods(selector: string, ns: string): Promise<Pod[]> {
  return (await kubectlJson<{ items: Pod[] }>(`get pods -n ${ns} -l '${selector}'`)).items;
}

async function predict(base: string, endpoint: string, body: unknown, verb = 'predict', headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  const res = await fetch(`${base}/v1/projects/default/locations/us-central1/endpoints/${endpoint}:${verb}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.text() };
}

const gatewayBase = (): string => `http://${NODE_NET.nodeIp}:${WALKTHROUGH_NODE_PORT}`;

let callerToken = '';

/** The Authorization header of the walkthrough's caller (its ServiceAccount is made by the walkthrough). */
async function asCaller(): Promise<Record<string, string>> {
  if (!callerToken) callerToken = (await shOk(`kubectl create token ${WALKTHROUGH_CALLER}`)).trim();
  return { authorization: `Bearer ${callerToken}` };
}

beforeAll(async () => {
  helmHome = mkdtempSync(join(tmpdir(), 'predictgate-helm-'));
  env = nodeEnv();
}, 30_000);

// The release goes in the last tests; the cluster itself is the node tier's global teardown's.
afterAll(() => rmSync(helmHome, { recursive: true, force: true }));

test('the README walkthrough: helm install --wait, a sample applied, predict through the NodePort', async () => {
  for (const step of SUITE_STEPS) {
    if (step.output === undefined) {
      await shOk(step.command);
      continue;
    }
    // As the README says: just after EndpointReady, a gateway replica may not have seen the model
    // turn Ready yet (503 UNAVAILABLE). Every answer is kept; the last must be the README's.
    const answers: string[] = [];
    await waitFor(async () => {
      answers.push((await shOk(step.command)).trim());
      return answers[answers.length - 1] === step.output || undefined;
    }, `the README's answer to ${step.command}`, 20_000, 250);
    expect(answers[answers.length - 1]).toBe(step.output);
    expect(answers.slice(0, -1).every((a) => a.includes('"status":"UNAVAILABLE"'))).toBe(true);
  }
}, 600_000);

test('the node holds the imported images under the names pods ask for', async () => {
  const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  const node = await kubectlJson<{ status: { images: { names: string[] }[] } }>(`get node ${NODE_NET.nodeName}`);
  const names = node.status.images.flatMap((i) => i.names);
  expect(names).toEqual(expect.arrayContaining([`docker.io/library/predictgate:${version}`, 'registry.k8s.io/pause:3.10', expect.stringMatching(/^docker\.io\/library\/llama-server:/)]));
}, 30_000);

test('controller and gateway run as pods under their own ServiceAccounts, non-root, read-only, with a preStop pause; one controller holds the Lease', async () => {
  const controller = await pods('app.kubernetes.io/component=controller', RELEASE_NS);
  // The gateway's HPA (minimum 2) takes over its replica count just after the install.
  const gateway = await waitFor(async () => {
    const ps = await pods('app.kubernetes.io/component=gateway', RELEASE_NS);
    return ps.length === 2 && ps.every((p) => p.status.containerStatuses?.every((c) => c.ready)) ? ps : undefined;
  }, 'two ready gateway pods', 120_000, 500);
  expect(controller).toHaveLength(2);
  for (const p of [...controller, ...gateway]) {
    expect(p.status.phase).toBe('Running');
    expect(p.status.containerStatuses?.every((c) => c.ready && c.image.endsWith(`predictgate:${JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version}`))).toBe(true);
    expect(p.spec.securityContext).toMatchObject({ runAsNonRoot: true });
    expect(p.spec.containers[0].securityContext).toMatchObject({ readOnlyRootFilesystem: true });
  }
  expect(new Set(controller.map((p) => p.spec.serviceAccountName))).toEqual(new Set(['predictgate-controller']));
  expect(new Set(gateway.map((p) => p.spec.serviceAccountName))).toEqual(new Set(['predictgate-gateway']));
  expect(gateway[0].spec.containers[0].lifecycle).toMatchObject({ preStop: expect.anything() });
  const lease = await kubectlJson<{ spec: { holderIdentity?: string } }>(`get lease predictgate-controller -n ${RELEASE_NS}`);
  // The holder is POD_UUID: the pod's name and a random part of its own.
  expect(controller.map((p) => p.metadata.name)).toContain(lease.spec.holderIdentity?.replace(/_[0-9a-f-]{36}$/, ''));
}, 60_000);

test('every sample, applied unchanged, becomes real model pods and answers through the gateway', async () => {
  await shOk('kubectl apply -f crds/samples/');
  const samples = readdirSync(join(ROOT, 'crds/samples')).filter((f) => f.endsWith('.yaml'));
  expect(samples.length).toBeGreaterThanOrEqual(5);
  await shOk('kubectl wait --for=condition=Ready deployedmodels.prediction.predictgate.dev --all --timeout=5m');
  await shOk('kubectl wait --for=condition=EndpointReady endpoints.prediction.predictgate.dev --all --timeout=2m');
  // Ready comes from the real Deployment: its pods are running and ready.
  const dms = await kubectlJson<{ items: { metadata: { name: string } }[] }>('get deployedmodels.prediction.predictgate.dev');
  for (const dm of dms.items) {
    const ps = await pods(`app.kubernetes.io/component=model-server,app.kubernetes.io/name=${dm.metadata.name}`, 'default');
    expect({ model: dm.metadata.name, ready: ps.some((p) => p.status.containerStatuses?.every((c) => c.ready)) }).toEqual({ model: dm.metadata.name, ready: true });
  }
  expect(await predict(gatewayBase(), 'echo', { instances: [{ data: 'hello' }] }, 'predict', await asCaller())).toEqual({ status: 200, body: '{"predictions":["hello"],"deployedModelId":"echo","modelDisplayName":"echo","modelVersionId":"1"}' });
}, 600_000);

// tiny-llm (crds/samples/tiny-llm.yaml) as it ships: it writes the role chunk at once, then one
// token every TINY_LLM_TOKEN_INTERVAL_MS (the sample sets none: 20 ms), and for "Say hi" and
// max_tokens N the first N words of "You said: Say hi You said: ..." (finish_reason length).
const TINY_LLM_TOKEN_INTERVAL_MS = 20;
const SAY_HI = [{ role: 'user' as const, content: 'Say hi' }];
const tinyLlmTokens = (n: number): string[] => Array.from({ length: n }, (_, i) => (i === 0 ? '' : ' ') + ['You', 'said:', 'Say', 'hi'][i % 4]);
const tinyLlmBase = (base: string): string => `${base}/v1/projects/default/locations/us-central1/endpoints/tiny-llm`;

/** One streamed chat chunk of tiny-llm's (`extra`: keys the request's stream_options add). */
function chatChunk(delta: Record<string, unknown>, finish: string | null, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { id: expect.stringMatching(/^chatcmpl-\d+$/), object: 'chat.completion.chunk', created: expect.any(Number), model: 'tiny-llm', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...extra };
}

/** The chunks of a streamed chat answer of `tokens`, ended by max_tokens. */
const chatChunks = (tokens: readonly string[], extra: Record<string, unknown> = {}): Record<string, unknown>[] => [
  chatChunk({ role: 'assistant', content: '' }, null, extra),
  ...tokens.map((t) => chatChunk({ content: t }, null, extra)),
  chatChunk({}, 'length', extra),
];

/** The ready gateway pods, each with its own address (the machine routes to the pods' network). */
async function gatewayAddresses(): Promise<{ pod: string; url: string }[]> {
  return (await pods('app.kubernetes.io/component=gateway', RELEASE_NS))
    .filter((p) => p.metadata.deletionTimestamp === undefined && p.status.podIP && p.status.containerStatuses?.every((c) => c.ready))
    .map((p) => ({ pod: p.metadata.name, url: `http://${p.status.podIP}:${p.spec.containers[0].ports!.find((port) => port.name === 'http')!.containerPort}` }));
}

test('generative serving from the tiny-llm pod through the NodePort: the openai SDK\'s stream arrives token by token, a whole answer with usage, the model list; curl -N on streamRawPredict; no token is a 401', async () => {
  expect(readFileSync(join(ROOT, 'crds/samples/tiny-llm.yaml'), 'utf8')).not.toContain('TINY_LLM_TOKEN_INTERVAL_MS');
  const auth = await asCaller();
  // EndpointReady came before each gateway replica may have seen tiny-llm Ready (503 UNAVAILABLE
  // until then): each one, at its own address, lists the model before the calls through the NodePort.
  const gateways = await gatewayAddresses();
  expect(gateways).toHaveLength(2);
  for (const g of gateways) {
    await waitFor(async () => ((await fetch(`${tinyLlmBase(g.url)}/models`, { headers: auth })).status === 200 ? true : undefined), `tiny-llm served by gateway pod ${g.pod}`, 30_000, 250);
  }

  // The official SDK, as a user points it at the Endpoint: the caller's token as its API key (the
  // SDK sends Authorization: Bearer). No retries: a gateway 5xx shows as it is.
  const client = new OpenAI({ baseURL: tinyLlmBase(gatewayBase()), apiKey: auth.authorization.slice('Bearer '.length), maxRetries: 0 });
  const maxTokens = 10;
  const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
  const arrivals: number[] = [];
  const stream = await client.chat.completions.create({ model: 'tiny-llm', messages: SAY_HI, max_tokens: maxTokens, stream: true });
  for await (const c of stream) {
    arrivals.push(performance.now());
    chunks.push(c);
  }
  const ended = performance.now();
  // The role chunk, one per token, the finish; `usage: null` on each is the gateway's asking for the usage.
  expect(chunks).toEqual(chatChunks(tinyLlmTokens(maxTokens), { usage: null }));
  // Streamed, not gathered: tiny-llm spends at least maxTokens intervals between its first chunk
  // and its last, and the client saw them apart (half of that, for any scheduling on the way).
  const spread = { firstBeforeLast: arrivals[arrivals.length - 1] - arrivals[0], firstBeforeEnd: ended - arrivals[0] };
  process.stderr.write(`[chart] streamed chat completion: ${chunks.length} chunks, the first ${spread.firstBeforeLast.toFixed(0)} ms before the last, ${spread.firstBeforeEnd.toFixed(0)} ms before the end\n`);
  expect({ spread, atLeast: spread.firstBeforeLast >= (maxTokens / 2) * TINY_LLM_TOKEN_INTERVAL_MS }).toEqual({ spread, atLeast: true });

  const whole = await client.chat.completions.create({ model: 'tiny-llm', messages: SAY_HI, max_tokens: 5 });
  expect(whole).toEqual({
    id: expect.stringMatching(/^chatcmpl-\d+$/),
    object: 'chat.completion',
    created: expect.any(Number),
    model: 'tiny-llm',
    choices: [{ index: 0, message: { role: 'assistant', content: 'You said: Say hi You' }, logprobs: null, finish_reason: 'length' }],
    usage: { prompt_tokens: 2, completion_tokens: 5, total_tokens: 7 },
  });
  expect((await client.models.list()).data).toEqual([{ id: 'tiny-llm', object: 'model', created: expect.any(Number), owned_by: 'predictgate' }]);

  // streamRawPredict with curl -N, as a user types it: the model's event stream as it comes.
  const out = await shOk(`curl -sN -X POST ${tinyLlmBase(gatewayBase())}:streamRawPredict -H "Authorization: Bearer $(kubectl create token ${WALKTHROUGH_CALLER})" -H 'Content-Type: application/json' -d '{"messages": [{"role": "user", "content": "Say hi"}], "stream": true, "max_tokens": 3}' -w '\\n%{http_code} %{content_type}'`);
  const at = out.lastIndexOf('\n');
  expect(out.slice(at + 1)).toMatch(/^200 text\/event-stream/);
  const body = out.slice(0, at);
  expect(body.endsWith('data: [DONE]\n\n')).toBe(true);
  const events = body.slice(0, -2).split('\n\n');
  for (const e of events) expect(e).toMatch(/^data: [^\n]*$/);
  const data = events.map((e) => e.slice('data: '.length)).map((d) => (d === '[DONE]' ? d : (JSON.parse(d) as unknown)));
  // The body goes to the model as it is: no usage asked for, no `usage` key in the chunks.
  expect(data).toEqual([...chatChunks(tinyLlmTokens(3)), '[DONE]']);

  // The gate is on the OpenAI-compatible routes too: no token, or one the cluster does not know, is a 401 in OpenAI's form.
  const none = await fetch(`${tinyLlmBase(gatewayBase())}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'tiny-llm', messages: SAY_HI }) });
  expect({ status: none.status, challenge: none.headers.get('www-authenticate'), body: await none.json() }).toEqual({
    status: 401,
    challenge: 'Bearer realm="predictgate"',
    body: { error: { message: expect.any(String), type: 'authentication_error', param: null, code: 'unauthenticated' } },
  });
  const listed = await fetch(`${tinyLlmBase(gatewayBase())}/models`);
  expect(listed.status).toBe(401);
  const stranger = new OpenAI({ baseURL: tinyLlmBase(gatewayBase()), apiKey: 'not-a-token-of-this-cluster', maxRetries: 0 });
  const err: unknown = await stranger.chat.completions.create({ model: 'tiny-llm', messages: SAY_HI, stream: true }).then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
  expect(err).toMatchObject({ status: 401, code: 'unauthenticated' });
}, 120_000);

test('the Node client over gRPC at each gateway pod\'s grpc port: Predict from a model pod, StreamRawPredict from tiny-llm part by part, UNAUTHENTICATED without a token', async () => {
  const auth = await asCaller();
  const noAuth = { getUniverseDomain: async (): Promise<string> => 'googleapis.com', getClient: async (): Promise<object> => ({}) };
  const grpcPods = (await pods('app.kubernetes.io/component=gateway', RELEASE_NS))
    .filter((p) => p.metadata.deletionTimestamp === undefined && p.status.podIP && p.status.containerStatuses?.every((c) => c.ready))
    .map((p) => ({ pod: p.metadata.name, ip: p.status.podIP!, port: p.spec.containers[0].ports!.find((port) => port.name === 'grpc')!.containerPort }));
  expect(grpcPods).toHaveLength(2);
  const endpoint = (name: string): string => `projects/default/locations/us-central1/endpoints/${name}`;
  const value = (x: unknown): protos.google.protobuf.IValue => helpers.toValue(x as object) as protos.google.protobuf.IValue;
  const withToken = { otherArgs: { headers: auth } };
  for (const g of grpcPods) {
    const client = new v1.PredictionServiceClient({ apiEndpoint: g.ip, port: g.port, sslCreds: grpc.credentials.createInsecure(), auth: noAuth as unknown as NonNullable<ConstructorParameters<typeof v1.PredictionServiceClient>[0]>['auth'] });
    try {
      const [answer] = await client.predict({ endpoint: endpoint('half-plus-two'), instances: [1, 5].map(value) }, withToken);
      expect({ pod: g.pod, model: answer.deployedModelId, predictions: answer.predictions?.map((p) => p.numberValue) }).toEqual({ pod: g.pod, model: 'half-plus-two', predictions: [2.5, 4.5] });

      const body = Buffer.from(JSON.stringify({ messages: SAY_HI, stream: true, max_tokens: 3 }));
      const parts: { contentType: string; data: Buffer }[] = [];
      for await (const part of client.streamRawPredict({ endpoint: endpoint('tiny-llm'), httpBody: { contentType: 'application/json', data: body } }, withToken)) {
        parts.push({ contentType: part.contentType ?? '', data: Buffer.from(part.data as Uint8Array) });
      }
      // tiny-llm writes its events 20 ms apart: each comes as a part of its own.
      expect(parts.length).toBeGreaterThanOrEqual(4);
      expect(new Set(parts.map((p) => p.contentType))).toEqual(new Set(['text/event-stream']));
      const events = Buffer.concat(parts.map((p) => p.data)).toString('utf8').split('\n\n').filter((e) => e !== '');
      expect(events.map((e) => e.slice('data: '.length)).map((d) => (d === '[DONE]' ? d : (JSON.parse(d) as unknown)))).toEqual([...chatChunks(tinyLlmTokens(3)), '[DONE]']);

      await expect(client.predict({ endpoint: endpoint('half-plus-two'), instances: [value(1)] })).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    } finally {
      await client.close();
    }
  }
}, 120_000);

test('each gateway pod reads the tiny-llm pod\'s load (vLLM\'s metrics): reports counted, no scrape failed', async () => {
  // The load counters have no model label: tiny-llm is the one sample whose model speaks the
  // OpenAI API (modelSpec.openai), so every load report is one of its replica's.
  const docs = readdirSync(join(ROOT, 'crds/samples')).filter((f) => f.endsWith('.yaml')).flatMap((f) => parseAllDocuments(readFileSync(join(ROOT, 'crds/samples', f), 'utf8')).map((d) => d.toJS() as { kind?: string; metadata?: { name: string }; spec?: { modelSpec?: { openai?: unknown } } }));
  expect(docs.filter((d) => d?.kind === 'DeployedModel' && d.spec?.modelSpec?.openai).map((d) => d.metadata?.name)).toEqual(['tiny-llm']);
  // The gateway's /metrics is on its main port and wants get on /metrics: a scraper bound to the
  // chart's predictgate-metrics-reader, allowed before its first scrape (a 403 would be logged).
  await shOk('kubectl create serviceaccount scraper && kubectl create clusterrolebinding default-scraper --clusterrole=predictgate-metrics-reader --serviceaccount=default:scraper');
  try {
    await waitFor(async () => ((await shOk('kubectl auth can-i get /metrics --as=system:serviceaccount:default:scraper')).trim() === 'yes' ? true : undefined), 'the scraper\'s binding in force', 30_000, 250);
    const headers = { authorization: `Bearer ${(await shOk('kubectl create token scraper')).trim()}` };
    const gateways = await gatewayAddresses();
    expect(gateways).toHaveLength(2);
    for (const g of gateways) {
      // Each gateway reads every replica of a model at least every 10 s (every 250 ms after a call).
      const counts = await waitFor(async () => {
        const res = await fetch(`${g.url}/metrics`, { headers });
        if (res.status !== 200) throw new Error(`GET /metrics of gateway pod ${g.pod}: ${res.status} ${await res.text()}`);
        const text = await res.text();
        const c = { pod: g.pod, reports: seriesValue(text, 'predictgate_upstream_load_reports_total', g.pod), failed: seriesValue(text, 'predictgate_upstream_load_scrapes_failed_total', g.pod), heapLimit: seriesValue(text, 'predictgate_heap_limit_bytes', g.pod) };
        return c.reports > 0 ? c : undefined;
      }, `a load report of tiny-llm in gateway pod ${g.pod}`, 30_000, 500);
      expect(counts).toEqual({ pod: g.pod, reports: expect.any(Number), failed: 0, heapLimit: expect.any(Number) });
      // The image's Node sized the heap from the pod's memory limit, as the chart's heapPercent asks
      // (the old generation; the young generation comes on top).
      const limit = quantityBytes((await shOk(`kubectl -n ${RELEASE_NS} get pod ${g.pod} -o jsonpath='{.spec.containers[0].resources.limits.memory}'`)).trim());
      const percent = Number(/--max-old-space-size-percentage=(\d+)/.exec((await shOk(`kubectl -n ${RELEASE_NS} get pod ${g.pod} -o jsonpath='{.spec.containers[0].env[?(@.name=="NODE_OPTIONS")].value}'`)))![1]);
      const oldSpace = Math.floor((Math.floor(limit / 1048576) * percent) / 100) * 1048576;
      expect(counts.heapLimit - oldSpace).toBeGreaterThanOrEqual(0);
      expect(counts.heapLimit - oldSpace).toBeLessThan(64 * 1048576);
    }
  } finally {
    await sh('kubectl delete clusterrolebinding default-scraper; kubectl delete serviceaccount scraper');
  }
}, 90_000);

test('the gateway checks its callers through the NodePort: no token 401, the caller 200, a namespace editor 200 through edit\'s aggregation; the probes stay open', async () => {
  const gateways = await pods('app.kubernetes.io/component=gateway', RELEASE_NS);
  const none = await fetch(`${gatewayBase()}/v1/projects/default/locations/us-central1/endpoints/half-plus-two:predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"instances": [1]}' });
  expect({ status: none.status, challenge: none.headers.get('www-authenticate'), error: ((await none.json()) as { error: { status: string } }).error.status }).toEqual({ status: 401, challenge: 'Bearer realm="predictgate"', error: 'UNAUTHENTICATED' });
  expect(await predict(gatewayBase(), 'half-plus-two', { instances: [1] }, 'predict', await asCaller())).toEqual({ status: 200, body: '{"predictions":[2.5],"deployedModelId":"half-plus-two","modelDisplayName":"half-plus-two","modelVersionId":"1"}' });
  // kube-controller-manager aggregated predictgate-predictor into edit: an editor of default may call.
  await shOk('kubectl create serviceaccount editor && kubectl create rolebinding editor-edits --clusterrole=edit --serviceaccount=default:editor');
  try {
    expect((await shOk('kubectl auth can-i create endpoints.prediction.predictgate.dev/half-plus-two --subresource=predict --as=system:serviceaccount:default:editor')).trim()).toBe('yes');
    const editor = (await shOk('kubectl create token editor')).trim();
    expect((await predict(gatewayBase(), 'half-plus-two', { instances: [1] }, 'predict', { authorization: `Bearer ${editor}` })).status).toBe(200);
  } finally {
    await sh('kubectl delete rolebinding editor-edits; kubectl delete serviceaccount editor');
  }
  // The probes need no token: through the Service, and the kubelet's, which kept every gateway pod
  // Ready throughout, with no restart.
  for (const path of ['/healthz', '/readyz']) expect({ path, status: (await fetch(`${gatewayBase()}${path}`)).status }).toEqual({ path, status: 200 });
  const now = await pods('app.kubernetes.io/component=gateway', RELEASE_NS);
  expect(now.map((p) => p.metadata.name).sort()).toEqual(gateways.map((p) => p.metadata.name).sort());
  for (const p of now) expect({ pod: p.metadata.name, ready: p.status.containerStatuses?.map((c) => [c.ready, c.restartCount]) }).toEqual({ pod: p.metadata.name, ready: [[true, 0]] });
}, 60_000);

test('rawPredict and the GDC Host form answer from model pods through the NodePort', async () => {
  const raw = await predict(gatewayBase(), 'half-plus-two', { instances: [1, 2] }, 'rawPredict', await asCaller());
  expect(raw.status).toBe(200);
  expect(JSON.parse(raw.body)).toEqual({ predictions: [2.5, 3] });
  // fetch sets Host itself; curl sends the one given.
  const gdc = await shOk(`curl -s -w '\\n%{http_code}' -X POST ${gatewayBase()}/v1/model:predict -H 'Host: half-plus-two.default.predictgate.internal' -H "Authorization: Bearer $(kubectl create token ${WALKTHROUGH_CALLER})" -H 'Content-Type: application/json' -d '{"instances": [5]}'`);
  const [body, status] = gdc.trim().split('\n');
  expect({ status, body: JSON.parse(body) }).toMatchObject({ status: '200', body: { predictions: [4.5], deployedModelId: 'half-plus-two' } });
}, 60_000);

test('predict through kubectl port-forward to the gateway Service', async () => {
  const pf = spawn('kubectl', ['-n', RELEASE_NS, 'port-forward', 'svc/predictgate-gateway', ':80'], { env: { ...process.env, ...env } });
  try {
    const port = await new Promise<number>((resolve, reject) => {
      let out = '';
      pf.stdout.on('data', (d: Buffer) => {
        out += d;
        const m = /Forwarding from 127\.0\.0\.1:(\d+)/.exec(out);
        if (m) resolve(Number(m[1]));
      });
      pf.on('exit', (code) => reject(new Error(`kubectl port-forward exited with ${code}`)));
    });
    expect(await predict(`http://127.0.0.1:${port}`, 'half-plus-two', { instances: [1.0, 2.0, 5.0] }, 'predict', await asCaller())).toEqual({
      status: 200,
      body: '{"predictions":[2.5,3,4.5],"deployedModelId":"half-plus-two","modelDisplayName":"half-plus-two","modelVersionId":"1"}',
    });
  } finally {
    pf.kill();
  }
}, 60_000);

test('a DeployedModel change rolls its pods; autoscaling makes a working HPA', async () => {
  const before = (await pods('app.kubernetes.io/component=model-server,app.kubernetes.io/name=half-plus-two', 'default')).map((p) => p.metadata.name);
  await shOk(`kubectl patch deployedmodels.prediction.predictgate.dev half-plus-two --type merge -p '{"spec":{"modelSpec":{"containerSpec":{"env":[{"name":"ROLL","value":"1"}]}}}}'`);
  await waitFor(async () => {
    const now = await pods('app.kubernetes.io/component=model-server,app.kubernetes.io/name=half-plus-two', 'default');
    return now.length > 0 && now.every((p) => !before.includes(p.metadata.name) && p.status.containerStatuses?.every((c) => c.ready)) ? now : undefined;
  }, 'the rolled pods of half-plus-two', 180_000, 500);
  await shOk('kubectl wait --for=condition=Ready deployedmodels.prediction.predictgate.dev/half-plus-two --timeout=2m');
  expect((await predict(gatewayBase(), 'half-plus-two', { instances: [1] }, 'predict', await asCaller())).status).toBe(200);

  await shOk(`kubectl patch deployedmodels.prediction.predictgate.dev half-plus-two --type merge -p '{"spec":{"dedicatedResources":{"maxReplicaCount":3}}}'`);
  const hpa = await waitFor(async () => {
    const r = await sh('kubectl get hpa half-plus-two -o json');
    if (r.code !== 0) return undefined;
    const h = JSON.parse(r.stdout) as { spec: { minReplicas: number; maxReplicas: number }; status: { currentReplicas?: number; conditions?: { type: string; status: string }[] } };
    // kube-controller-manager's HPA controller has looked at it.
    return h.status.conditions?.some((c) => c.type === 'AbleToScale' && c.status === 'True') ? h : undefined;
  }, 'the HPA of half-plus-two, reconciled by the HPA controller', 120_000, 500);
  expect(hpa.spec).toMatchObject({ minReplicas: 1, maxReplicas: 3 });
  expect(hpa.status.currentReplicas).toBe(1);
}, 400_000);

test('deleting a DeployedModel removes its pods', async () => {
  await shOk('kubectl delete deployedmodels.prediction.predictgate.dev echo --wait');
  await waitFor(async () => ((await pods('app.kubernetes.io/component=model-server,app.kubernetes.io/name=echo', 'default')).length === 0 ? true : undefined), 'the pods of echo to go', 120_000, 500);
}, 180_000);

test('every component logs clean JSON, with no permission error', async () => {
  const all = await kubectlJson<{ items: Pod[] }>('get pods -A');
  const ours = all.items.filter((p) => p.metadata.namespace === RELEASE_NS || p.metadata.namespace === 'default');
  expect(ours.length).toBeGreaterThanOrEqual(8);
  for (const p of ours) {
    const text = await shOk(`kubectl logs -n ${p.metadata.namespace} ${p.metadata.name} --all-containers`);
    const lines = text.split('\n').filter(Boolean);
    const bad = lines.filter((l) => {
      try {
        JSON.parse(l);
        return /\b403\b|forbidden/i.test(l);
      } catch {
        return true;
      }
    });
    expect({ pod: p.metadata.name, bad }).toEqual({ pod: p.metadata.name, bad: [] });
  }
}, 120_000);

test('helm upgrade to a changed value rolls the gateway; helm uninstall removes the release', async () => {
  const before = (await pods('app.kubernetes.io/component=gateway', RELEASE_NS)).map((p) => p.metadata.name);
  await shOk(`helm upgrade predictgate charts/predictgate -n ${RELEASE_NS} --reuse-values --set logLevel=debug --wait`);
  // helm's --wait waits for the new pods to be ready, not for the old ones' preStop pause and drain:
  // those still run, terminating. The pods serving are the running ones not terminating.
  const running = (await pods('app.kubernetes.io/component=gateway', RELEASE_NS)).filter((p) => p.status.phase === 'Running' && p.metadata.deletionTimestamp === undefined).map((p) => p.metadata.name);
  expect(running.length).toBeGreaterThan(0);
  expect(running.filter((name) => before.includes(name))).toEqual([]);
  expect((await predict(gatewayBase(), 'half-plus-two', { instances: [1] }, 'predict', await asCaller())).status).toBe(200);
  await shOk(UNINSTALL);
  await waitFor(async () => ((await pods('app.kubernetes.io/name=predictgate', RELEASE_NS)).length === 0 ? true : undefined), 'the release\'s pods to go', 120_000, 500);
}, 400_000);

// Last: it ends the cluster. A crash (every process of the node and of its control plane killed at
// once, nothing put away) is cleaned up by what the next start runs first, from the record on disk.
test('a crashed node cluster is put away by the next start, and nothing of it is left on the machine', async () => {
  const info = JSON.parse(readFileSync(NODE_STATE_FILE, 'utf8')) as NodeClusterInfo;
  await killNodeProcesses();
  for (const pid of [info.controlPlane.pids.apiserver, info.controlPlane.pids.etcd]) process.kill(pid, 'SIGKILL');
  const leftBehind = leftovers(info.machine);
  expect(leftBehind).toEqual(expect.arrayContaining([`network namespace ${NODE_NET.netns}`, `interface ${NODE_NET.hostIf}`, expect.stringMatching(/^mount /), expect.stringMatching(/^cgroup /)]));
  await stopLeftoverNode();
  expect(leftovers(info.machine)).toEqual([]);
  expect(existsSync(NODE_STATE_FILE)).toBe(false);
}, 120_000);
