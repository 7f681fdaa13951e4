// Streamed answers through local mode, against a scripted streaming model process
// (test/helpers/streamModel.ts): the OpenAI routes and streamRawPredict pass events on as the model
// sends them (the first one while the model still holds the rest), a client that leaves closes the
// model's call, a failure before the first byte is one JSON error and after it an `event: error`
// then a clean end, a stream that goes quiet meets its idle limit, a slow reader holds the model
// back through TCP, and a drain lets a stream run to its deadline and then ends it with an error event.
import { join } from 'node:path';
import { connect } from 'node:net';
import { startLocal, ready, deployedModelYaml, endpointYaml, ROOT, type LocalHarness } from '../helpers/local.js';
import { heldBacklog, until } from '../helpers/rawHttp.js';

const STREAM_MODEL = join(ROOT, 'dist/test/helpers/streamModel.js');

const modelYaml = (name: string, opts: { openai?: boolean; serving?: Record<string, number> } = {}): string =>
  deployedModelYaml({ name, command: ['node', STREAM_MODEL], predictRoute: '/v1/chat/completions', openai: opts.openai === false ? undefined : { basePath: '/v1' }, serving: opts.serving });

let h: LocalHarness;

beforeAll(async () => {
  h = await startLocal({
    'models.yaml': [
      modelYaml('sm'),
      modelYaml('plain', { openai: false }),
      endpointYaml('llm', [{ model: 'sm' }]),
      endpointYaml('plain', [{ model: 'plain' }]),
      endpointYaml('quiet', [{ model: 'sm' }], 'default', { streamIdleTimeoutSeconds: 1 }),
    ].join('---\n'),
  });
  await h.until((x) => ['llm', 'plain', 'quiet'].every((e) => ready(x, 'Endpoint', `default/${e}`)), 'the endpoints Ready');
});

afterAll(async () => {
  await h?.stop();
});

const openaiUrl = (endpoint: string, route: string): string => h.url(`/v1/projects/default/locations/local/endpoints/${endpoint}/${route}`);
const modelAddress = (): string => h.model('default/sm')?.status?.replicaAddresses?.[0] as string;
interface ModelCalls { started: number; finished: number; clientClosed: number; backlog: number }
const modelCalls = async (): Promise<ModelCalls> => (await fetch(`${modelAddress()}/calls`)).json() as Promise<ModelCalls>;
const chat = (script: Record<string, unknown>): string => JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true, ...script });

/** Reads a streamed body as it comes: `next(pred)` resolves once the text so far satisfies `pred`. */
function reader(res: Response): { text: () => string; until: (pred: (t: string) => boolean) => Promise<string>; rest: () => Promise<string> } {
  const r = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = '';
  const more = async (): Promise<boolean> => {
    const { done, value } = await r.read();
    if (value) text += decoder.decode(value, { stream: true });
    return !done;
  };
  return {
    text: () => text,
    async until(pred) {
      while (!pred(text)) if (!(await more())) throw new Error(`the stream ended before the expected text; got ${JSON.stringify(text)}`);
      return text;
    },
    async rest() {
      while (await more());
      return text;
    },
  };
}

/** The data of each event of an SSE text. */
const events = (text: string): string[] => text.split('\n\n').filter((e) => e !== '').map((e) => e.replace(/^event: \w+\n/, '').replace(/^data: /, ''));

test('chat/completions streams event by event; the usage the gateway asked for is counted and kept from the client', async () => {
  const res = await fetch(openaiUrl('llm', 'chat/completions'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat({ events: 3 }) });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('text/event-stream');
  expect(res.headers.get('x-accel-buffering')).toBe('no');
  expect(res.headers.get('x-vertex-ai-deployed-model-id')).toBe('sm');
  const data = events(await reader(res).rest());
  expect(data.map((d) => (d === '[DONE]' ? d : (JSON.parse(d) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content ?? 'end'))).toEqual(['tok0', 'tok1', 'tok2', 'end', '[DONE]']);
  const metrics = await (await fetch(h.url('/metrics'))).text();
  expect(metrics).toMatch(/^predictgate_completion_tokens_total\{endpoint_namespace="default",endpoint="llm",deployed_model_namespace="default",deployed_model="sm"\} 3$/m);
  expect(metrics).toMatch(/^predictgate_prompt_tokens_total\{endpoint_namespace="default",endpoint="llm",deployed_model_namespace="default",deployed_model="sm"\} 7$/m);
  expect(metrics).toMatch(/^predictgate_time_to_first_token_seconds_count\{[^}]*endpoint="llm"[^}]*\} 1$/m);
  expect(metrics).toMatch(/^predictgate_time_per_output_token_seconds_count\{[^}]*endpoint="llm"[^}]*\} 2$/m);
});

test('a client that asked for usage gets the usage event', async () => {
  const res = await fetch(openaiUrl('llm', 'chat/completions'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat({ events: 1, stream_options: { include_usage: true } }) });
  const data = events(await reader(res).rest());
  expect(JSON.parse(data[data.length - 2])).toMatchObject({ choices: [], usage: { prompt_tokens: 7, completion_tokens: 1 } });
});

test('the first event reaches the client while the model still holds the rest', async () => {
  const res = await fetch(openaiUrl('llm', 'chat/completions'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat({ events: 1, then: 'hold' }) });
  const r = reader(res);
  await r.until((t) => t.includes('tok0'));
  expect(r.text()).not.toContain('[DONE]');
  await fetch(`${modelAddress()}/release`);
  expect(await r.rest()).toMatch(/data: \[DONE\]\n\n$/);
});

test('a client that leaves mid-stream closes the model\'s call', async () => {
  const before = (await modelCalls()).clientClosed;
  const abort = new AbortController();
  const res = await fetch(openaiUrl('llm', 'chat/completions'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat({ events: 1, then: 'hold' }), signal: abort.signal });
  await reader(res).until((t) => t.includes('tok0'));
  abort.abort();
  await until(async () => (await modelCalls()).clientClosed === before + 1, 'the model to see its connection close');
  await until(async () => /^predictgate_streams_in_flight\{[^}]*endpoint="llm"[^}]*\} 0$/m.test(await (await fetch(h.url('/metrics'))).text()), 'no stream in flight');
});

test('a model failing before the first byte is one answer: its own error, with its status', async () => {
  const res = await fetch(openaiUrl('llm', 'chat/completions'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat({ then: 'fail503' }) });
  expect(res.status).toBe(503);
  expect(await res.json()).toEqual({ error: { message: 'the model is overloaded', type: 'server_error', code: 503 } });
});

test('the gateway\'s own refusals are OpenAI error objects', async () => {
  const bad = await fetch(openaiUrl('llm', 'chat/completions'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages: [{ content: 'x' }] }) });
  expect(bad.status).toBe(400);
  expect(await bad.json()).toEqual({ error: { message: 'messages[0].role: expected a string, got nothing', type: 'invalid_request_error', param: 'messages[0].role', code: 'invalid_payload' } });
  const plain = await fetch(openaiUrl('plain', 'chat/completions'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat({}) });
  expect(plain.status).toBe(400);
  expect(await plain.json()).toMatchObject({ error: { code: 'openai_unsupported', message: 'deployed model plain does not serve the OpenAI API (its modelSpec has no openai)' } });
  const missing = await fetch(openaiUrl('nope', 'models'));
  expect(missing.status).toBe(404);
  expect(await missing.json()).toMatchObject({ error: { type: 'not_found_error', code: 'endpoint_not_found' } });
});

test('a model that resets mid-stream: the events it sent, then an error event, then a clean end', async () => {
  const res = await fetch(openaiUrl('llm', 'chat/completions'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat({ events: 2, then: 'reset' }) });
  const data = events(await reader(res).rest());
  expect(data.slice(0, 2).map((d) => (JSON.parse(d) as { choices: { delta: { content: string } }[] }).choices[0].delta.content)).toEqual(['tok0', 'tok1']);
  expect(JSON.parse(data[2])).toEqual({ error: { message: expect.stringMatching(/^deployed model sm closed the connection in the middle of its streamed answer/), type: 'server_error', param: null, code: 'upstream_reset' } });
  expect(data).toHaveLength(3);
});

test('a stream that goes quiet longer than streamIdleTimeoutSeconds ends with an error event', async () => {
  const res = await fetch(openaiUrl('quiet', 'chat/completions'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat({ events: 1, then: 'stall' }) });
  const data = events(await reader(res).rest());
  expect(JSON.parse(data[1])).toMatchObject({ error: { code: 'upstream_timeout', message: 'deployed model sm sent nothing for 1 s in the middle of its streamed answer (streamIdleTimeoutSeconds)' } });
});

test('a stream that is not server-sent events is aborted when the model fails mid-answer', async () => {
  const res = await fetch(h.vertex('llm', 'streamRawPredict'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ events: 2, then: 'reset', contentType: 'application/x-ndjson' }) });
  expect(res.headers.get('content-type')).toBe('application/x-ndjson');
  const r = reader(res);
  await expect(r.rest()).rejects.toThrow();
  expect(r.text()).toContain('tok1');
});

test('streamRawPredict passes the model\'s events through untouched', async () => {
  const res = await fetch(h.vertex('llm', 'streamRawPredict'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ events: 2 }) });
  expect(res.status).toBe(200);
  const text = await reader(res).rest();
  expect(events(text)).toHaveLength(4);
  expect(text).toMatch(/^data: \{"id":"chatcmpl-1".*"content":"tok0"/);
});

test('streamRawPredict in the client libraries\' form answers a JSON array of HttpBody', async () => {
  const body = { httpBody: { contentType: 'application/json', data: Buffer.from(JSON.stringify({ events: 2 })).toString('base64') } };
  const res = await fetch(`${h.vertex('llm', 'streamRawPredict')}?$alt=json%3Benum-encoding=int`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.headers.get('content-type')).toBe('application/json');
  const parts = (await res.json()) as { contentType: string; data: string }[];
  expect(parts.every((p) => p.contentType === 'text/event-stream')).toBe(true);
  const text = parts.map((p) => Buffer.from(p.data, 'base64').toString('utf8')).join('');
  expect(events(text)).toHaveLength(4);
});

test('a reader that does not read holds the model back through TCP, the bytes held counted in the body memory; it gets every byte once it reads', async () => {
  // 64 MiB of events (1,024 of 64 KiB) to a client that reads nothing: the gateway stops reading
  // from the model once its 16 KiB and the sockets' buffers are full, so most of the stream waits
  // at the model, unsent.
  const EVENTS = 1024;
  const socket = connect(Number(new URL(h.base).port), '127.0.0.1');
  const body = chat({ events: EVENTS, pad: 64 * 1024, then: 'end' });
  socket.write(`POST /v1/projects/default/locations/local/endpoints/llm/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  socket.pause();
  try {
    const last = await heldBacklog(() => modelCalls());
    const total = EVENTS * (64 * 1024 + 150);
    expect(last).toBeGreaterThan(total / 2);
    // What the gateway holds of it meanwhile is counted in the body memory, and is a few events at most.
    const reserved = async (): Promise<number> => Number(/^predictgate_body_memory_reserved_bytes (\d+)$/m.exec(await (await fetch(h.url('/metrics'))).text())?.[1]);
    const held = await reserved();
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThanOrEqual(512 * 1024);
    // The client reads now: every event arrives, in order, then the end.
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.resume();
    await new Promise((resolve) => socket.once('end', resolve));
    const text = Buffer.concat(chunks).toString('utf8');
    expect((text.match(/"content":"tok\d+x/g) ?? []).length).toBe(EVENTS);
    // The chunked answer's last chunk, then its end.
    expect(text.endsWith('data: [DONE]\n\n\r\n0\r\n\r\n')).toBe(true);
    await until(async () => (await reserved()) === 0, 'the stream\'s bytes given back to the body memory');
  } finally {
    socket.destroy();
  }
});

describe('a drain', () => {
  let d: LocalHarness;
  beforeAll(async () => {
    d = await startLocal({ 'm.yaml': [modelYaml('sm'), endpointYaml('llm', [{ model: 'sm' }])].join('---\n') }, { settings: { drainSeconds: 1 } });
    await d.until((x) => ready(x, 'Endpoint', 'default/llm'), 'the endpoint Ready');
  });

  test('lets a stream run to its deadline, then ends it with an error event and no reset', async () => {
    const res = await fetch(d.url('/v1/projects/default/locations/local/endpoints/llm/chat/completions'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat({ events: 1, then: 'hold' }) });
    const r = reader(res);
    await r.until((t) => t.includes('tok0'));
    const stopped = d.stop();
    const data = events(await r.rest());
    await stopped;
    expect(JSON.parse(data[data.length - 1])).toMatchObject({ error: { code: 'shutting_down', type: 'server_error' } });
  });
});
