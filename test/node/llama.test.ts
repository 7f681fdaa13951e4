// A real model server as a pod: llama.cpp's llama-server with SmolLM2-135M-Instruct, in the image the
// node tier builds offline (test/cluster/images.ts), as the container of a DeployedModel that says it
// speaks the OpenAI API, behind the chart's gateway. Through the gateway's NodePort, with a caller's
// token: the official openai npm client lists the model, gets a whole and a streamed chat completion
// (greedy decoding: the same words), and Vertex's :predict reaches the same pod (llama-server speaks
// Vertex AI's container contract: AIP_HTTP_PORT and AIP_PREDICT_ROUTE, which the controller sets).
import OpenAI from 'openai';
import { INSTALL, nodeShell, origin, pods, predictorToken, removeRelease, settled, type NodeShell } from '../helpers/rollout.js';
import { waitFor } from '../helpers/cluster.js';
import { LLAMA_IMAGE_MODEL, llamaImageRef } from '../cluster/images.js';
import { ensureLlamaServer, llamaArgs } from '../helpers/llama.js';
import { deployedModelYaml, endpointYaml } from '../helpers/local.js';

const NS = 'predictgate-llama';
const NAME = 'smollm2';
const CALLER = 'llama-caller';
const CHAT = { model: NAME, messages: [{ role: 'user' as const, content: 'Say hi' }], temperature: 0, max_tokens: 8 };

let shell: NodeShell;
let client: OpenAI;
let token = '';

/** The namespace, the DeployedModel (its image named as the node holds it) and an Endpoint sending it all calls. */
function manifests(image: string): string {
  const model = deployedModelYaml({ name: NAME, namespace: NS, image: image.replace(/^docker\.io\/library\//, ''), args: llamaArgs(NAME), predictRoute: '/predict', healthRoute: '/health', openai: { basePath: '/v1', servedModelName: NAME } });
  return `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${NS}}\n---\n${model}---\n${endpointYaml(NAME, [{ model: NAME }], NS)}`;
}

beforeAll(async () => {
  shell = nodeShell();
  const image = llamaImageRef(await ensureLlamaServer());
  await shell.ok(INSTALL);
  await shell.ok('kubectl apply -f -', manifests(image));
  token = await predictorToken(shell, NS, CALLER);
  await shell.ok(`kubectl wait -n ${NS} --for=condition=Ready deployedmodels.prediction.predictgate.dev/${NAME} --timeout=5m`);
  await shell.ok(`kubectl wait -n ${NS} --for=condition=EndpointReady endpoints.prediction.predictgate.dev/${NAME} --timeout=2m`);
  await settled(shell, 'predictgate-system', 'app.kubernetes.io/component=gateway', 2, 'two ready gateway pods');
  client = new OpenAI({ baseURL: `${origin()}/v1/projects/${NS}/locations/us-central1/endpoints/${NAME}`, apiKey: token, maxRetries: 0, timeout: 120_000 });
  // Just after EndpointReady a gateway replica may not have seen the model turn Ready yet (503).
  await waitFor(async () => ((await client.models.list().then(() => true, () => false)) ? true : undefined), 'both gateways routing to the model', 30_000, 250);
}, 900_000);

afterAll(async () => {
  if (!shell) return;
  try {
    await removeRelease(shell, NS);
  } finally {
    shell.close();
  }
}, 300_000);

let whole: OpenAI.Chat.ChatCompletion;

test('the model pod runs the llama-server image, serving the SmolLM2 GGUF the image holds', async () => {
  const [pod] = await pods(shell, NS, `prediction.predictgate.dev/deployed-model=${NAME}`);
  expect(pod.spec?.containers[0].image).toMatch(/^llama-server:/);
  expect(pod.status?.containerStatuses?.[0]).toMatchObject({ ready: true, restartCount: 0 });
  const models = await client.models.list();
  expect(models.data.map((m) => m.id)).toContain(NAME);
  // llama-server's own list says what it loaded: SmolLM2-135M's parameters, quantised Q4_1.
  const [model] = models.data as unknown as { id: string; meta: { n_params: number; ftype: string } }[];
  expect(model.meta.ftype).toBe(LLAMA_IMAGE_MODEL.match(/\.(Q\d_\d)\.gguf$/)?.[1]);
  expect(Math.round(model.meta.n_params / 1e6)).toBe(135);
}, 60_000);

test('a whole chat completion, then a streamed one with the same words, through the NodePort', async () => {
  whole = await client.chat.completions.create(CHAT);
  expect(whole).toMatchObject({ object: 'chat.completion', choices: [{ message: { role: 'assistant', content: expect.stringMatching(/\S/) } }] });
  expect(whole.usage!.completion_tokens).toBeGreaterThan(0);
  const stream = await client.chat.completions.create({ ...CHAT, stream: true, stream_options: { include_usage: true } });
  const chunks: OpenAI.Chat.ChatCompletionChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  expect(chunks.filter((c) => (c.choices[0]?.delta?.content ?? '') !== '').length).toBeGreaterThanOrEqual(2);
  expect(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('')).toBe(whole.choices[0].message.content);
  expect(chunks[chunks.length - 1].usage).toMatchObject({ completion_tokens: whole.usage!.completion_tokens });
}, 240_000);

test(':predict through the NodePort reaches the same pod\'s Vertex route', async () => {
  const res = await fetch(`${origin()}/v1/projects/${NS}/locations/us-central1/endpoints/${NAME}:predict`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ instances: [{ '@requestFormat': 'chatCompletions', ...CHAT }] }),
  });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { predictions: OpenAI.Chat.ChatCompletion[]; deployedModelId: string };
  expect(body.deployedModelId).toBe(NAME);
  expect(body.predictions[0]).toMatchObject({ object: 'chat.completion', choices: [{ message: { content: whole.choices[0].message.content } }] });
}, 240_000);
