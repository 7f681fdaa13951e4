// Tests of the bundled tiny-llm model (src/models/tinyLlm.ts) through the model runner, over real
// sockets on loopback: the OpenAI routes, whole and streamed answers, stop strings, request checks,
// the FIFO of generations beyond maxRunning, clients leaving mid-generation, and its vLLM metrics.
import { request as httpRequest, type ClientRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import { once } from 'node:events';
import { documentedMetrics, metricNames, promtoolCheck, seriesValue } from '../helpers/metrics.js';
import { commandHelp } from '../../src/help.js';
import { modelOptionsFromEnv, startModelServer, type RunningModelServer } from '../../src/models/index.js';
import type { TinyLlmOptions } from '../../src/models/tinyLlm.js';

interface Reply { status: number; headers: IncomingHttpHeaders; text: string }

const NOW = 1_700_000_000_000;
const CREATED = NOW / 1000;
const L = 'model_name="tiny-llm"';

const servers: RunningModelServer[] = [];
async function start(tinyLlm: TinyLlmOptions = {}): Promise<number> {
  const srv = await startModelServer('tiny-llm', { port: 0, tinyLlm: { tokenIntervalMs: 0, now: () => NOW, ...tinyLlm } });
  servers.push(srv);
  return srv.port;
}
afterAll(() => Promise.all(servers.map((s) => s.close())));

/** Sends one call; `res` is handed over as soon as its headers are in. */
function send(port: number, method: string, path: string, body?: string): { req: ClientRequest; res: Promise<IncomingMessage> } {
  const req = httpRequest({ host: '127.0.0.1', port, method, path, headers: body === undefined ? {} : { 'content-type': 'application/json' } });
  const res = once(req, 'response').then(([r]) => r as IncomingMessage);
  req.on('error', () => undefined); // a reset after the answer (a 413, a client leaving); `res` rejects on one before it
  req.end(body);
  return { req, res };
}

async function call(port: number, method: string, path: string, body?: string): Promise<Reply> {
  const res = await send(port, method, path, body).res;
  let text = '';
  for await (const c of res) text += (c as Buffer).toString();
  return { status: res.statusCode ?? 0, headers: res.headers, text };
}
const post = (port: number, path: string, body: unknown): Promise<Reply> => call(port, 'POST', path, typeof body === 'string' ? body : JSON.stringify(body));
const chat = (port: number, body: Record<string, unknown>): Promise<Reply> => post(port, '/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'Say hi' }], ...body });

/** The JSON of each `data:` event of a streamed answer, `[DONE]` as the string. */
function events(text: string): unknown[] {
  expect(text.endsWith('\n\n')).toBe(true);
  return text.slice(0, -2).split('\n\n').map((e) => {
    expect(e.startsWith('data: ')).toBe(true);
    return e === 'data: [DONE]' ? '[DONE]' : JSON.parse(e.slice(6));
  });
}

/** Re-reads /metrics (one round trip after another) until `done` holds for it; at most 3 s. */
async function metricsUntil(port: number, done: (text: string) => boolean): Promise<string> {
  const deadline = Date.now() + 3000;
  for (;;) {
    const { text } = await call(port, 'GET', '/metrics');
    if (done(text)) return text;
    if (Date.now() > deadline) throw new Error(`metrics never got there:\n${text}`);
  }
}
const value = (text: string, series: string): number => seriesValue(text, series);

describe('tiny-llm routes and answers', () => {
  let port: number;
  beforeAll(async () => (port = await start()));

  test('health, the model list, 404 and 405 in OpenAI shape', async () => {
    expect(await call(port, 'GET', '/health')).toMatchObject({ status: 200, text: '{"status":"ok"}' });
    expect(JSON.parse((await call(port, 'GET', '/v1/models')).text)).toEqual({ object: 'list', data: [{ id: 'tiny-llm', object: 'model', created: CREATED, owned_by: 'predictgate' }] });
    const nf = await call(port, 'GET', '/v1/nothing');
    expect([nf.status, JSON.parse(nf.text)]).toEqual([404, { error: { message: 'no route for GET /v1/nothing', type: 'invalid_request_error', param: null, code: null } }]);
    const na = await call(port, 'GET', '/v1/chat/completions');
    expect([na.status, na.headers.allow, JSON.parse(na.text).error.message]).toEqual([405, 'POST', 'method GET is not allowed on /v1/chat/completions; use POST']);
    expect((await call(port, 'POST', '/v1/models', '{}')).status).toBe(405);
  });

  test('a whole chat answer: "You said: <text>" cycled to max_tokens, the model echoed', async () => {
    const r = await chat(port, { max_tokens: 5 });
    expect([r.status, r.headers['content-type']]).toEqual([200, 'application/json']);
    const doc = JSON.parse(r.text);
    expect(doc.id).toMatch(/^chatcmpl-\d+$/);
    expect({ ...doc, id: 'x' }).toEqual({
      id: 'x', object: 'chat.completion', created: CREATED, model: 'm',
      choices: [{ index: 0, message: { role: 'assistant', content: 'You said: Say hi You' }, logprobs: null, finish_reason: 'length' }],
      usage: { prompt_tokens: 2, completion_tokens: 5, total_tokens: 7 },
    });
    // The last user message is the source; every word of every message is a prompt token; parts are read.
    const multi = JSON.parse((await chat(port, { max_completion_tokens: 4, messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: [{ type: 'text', text: 'a b' }] }, { role: 'assistant', content: 'c' }] })).text);
    expect([multi.choices[0].message.content, multi.usage]).toEqual(['You said: a b', { prompt_tokens: 5, completion_tokens: 4, total_tokens: 9 }]);
    expect(JSON.parse((await chat(port, { max_tokens: undefined })).text).usage.completion_tokens).toBe(16);
  });

  test('a whole completion answer', async () => {
    const r = await post(port, '/v1/completions', { model: 'any', prompt: ['Once upon'], max_tokens: 3 });
    const doc = JSON.parse(r.text);
    expect(doc.id).toMatch(/^cmpl-\d+$/);
    expect({ ...doc, id: 'x' }).toEqual({
      id: 'x', object: 'text_completion', created: CREATED, model: 'any',
      choices: [{ index: 0, text: 'You said: Once', logprobs: null, finish_reason: 'length' }],
      usage: { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 },
    });
  });

  test('a stop string ends the text before it with finish_reason stop', async () => {
    let doc = JSON.parse((await chat(port, { max_tokens: 20, stop: ['hi', ' said'] })).text);
    expect([doc.choices[0].message.content, doc.choices[0].finish_reason, doc.usage.completion_tokens]).toEqual(['You', 'stop', 2]);
    doc = JSON.parse((await chat(port, { max_tokens: 20, stop: 'ay h' })).text);
    expect([doc.choices[0].message.content, doc.choices[0].finish_reason, doc.usage.completion_tokens]).toEqual(['You said: S', 'stop', 4]);
    doc = JSON.parse((await post(port, '/v1/completions', { prompt: 'x', max_tokens: 2, stop: 'x' })).text);
    expect([doc.choices[0].text, doc.choices[0].finish_reason]).toEqual(['You said:', 'length']);
  });

  test('a streamed chat answer, event by event, with and without usage', async () => {
    const r = await chat(port, { max_tokens: 3, stream: true });
    expect([r.status, r.headers['content-type'], r.headers['cache-control']]).toEqual([200, 'text/event-stream', 'no-cache']);
    const evs = events(r.text) as Record<string, unknown>[];
    const head = { object: 'chat.completion.chunk', created: CREATED, model: 'm' };
    const choice = (delta: unknown, finish: string | null): unknown => [{ index: 0, delta, logprobs: null, finish_reason: finish }];
    expect(evs.map((e) => (typeof e === 'string' ? e : { ...e, id: 'x' }))).toEqual([
      { id: 'x', ...head, choices: choice({ role: 'assistant', content: '' }, null) },
      { id: 'x', ...head, choices: choice({ content: 'You' }, null) },
      { id: 'x', ...head, choices: choice({ content: ' said:' }, null) },
      { id: 'x', ...head, choices: choice({ content: ' Say' }, null) },
      { id: 'x', ...head, choices: choice({}, 'length') },
      '[DONE]',
    ]);
    expect(new Set(evs.slice(0, -1).map((e) => (e as { id: string }).id)).size).toBe(1);
    const u = events((await chat(port, { max_tokens: 2, stream: true, stream_options: { include_usage: true }, stop: 'said' })).text) as Record<string, unknown>[];
    expect(u.map((e) => (typeof e === 'string' ? e : [e.choices, e.usage]))).toEqual([
      [choice({ role: 'assistant', content: '' }, null), null],
      [choice({ content: 'You' }, null), null],
      [choice({ content: ' ' }, null), null],
      [choice({}, 'stop'), null],
      [[], { prompt_tokens: 2, completion_tokens: 2, total_tokens: 4 }],
      '[DONE]',
    ]);
  });

  test('a streamed completion answer', async () => {
    const evs = events((await post(port, '/v1/completions', { prompt: 'go', max_tokens: 2, stream: true, stream_options: { include_usage: true } })).text) as Record<string, unknown>[];
    expect(evs.map((e) => (typeof e === 'string' ? e : [e.object, e.choices, e.usage]))).toEqual([
      ['text_completion', [{ index: 0, text: 'You', logprobs: null, finish_reason: null }], null],
      ['text_completion', [{ index: 0, text: ' said:', logprobs: null, finish_reason: null }], null],
      ['text_completion', [{ index: 0, text: '', logprobs: null, finish_reason: 'length' }], null],
      ['text_completion', [], { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 }],
      '[DONE]',
    ]);
  });

  test.each([
    ['{"messages": [', null, /^the body is not valid JSON: /],
    ['[1]', null, 'the body must be a JSON object, got [1]'],
    ['{}', 'messages', 'messages: required, expected a non-empty array of {role, content}'],
    ['{"messages": "hi"}', 'messages', 'messages: expected a non-empty array of {role, content}, got "hi"'],
    ['{"messages": []}', 'messages', 'messages: expected a non-empty array of {role, content}, got []'],
    ['{"messages": [3]}', 'messages', 'messages[0]: expected an object {role, content}, got 3'],
    ['{"messages": [{"content": "x"}]}', 'messages', 'messages[0].role: expected a string, got nothing'],
    ['{"messages": [{"role": "user"}]}', 'messages', 'messages[0].content: expected a string or an array of {"type": "text", "text": string}, got nothing'],
    ['{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}', 'messages', 'messages[0].content[0]: expected {"type": "text", "text": string}, got {"type":"image_url"}'],
    ['{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}', 'max_tokens', 'max_tokens: expected an integer from 1 to 4096, got 0'],
    ['{"messages": [{"role": "user", "content": "x"}], "max_tokens": 4097}', 'max_tokens', 'max_tokens: expected an integer from 1 to 4096, got 4097'],
    ['{"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 1.5}', 'max_completion_tokens', 'max_completion_tokens: expected an integer from 1 to 4096, got 1.5'],
    ['{"messages": [{"role": "user", "content": "x"}], "n": 2}', 'n', 'n: only 1 is supported, got 2'],
    ['{"messages": [{"role": "user", "content": "x"}], "stream": "yes"}', 'stream', 'stream: expected a boolean, got "yes"'],
    ['{"messages": [{"role": "user", "content": "x"}], "stop": [1]}', 'stop', 'stop: expected a string or an array of strings, got [1]'],
    ['{"messages": [{"role": "user", "content": "x"}], "model": 7}', 'model', 'model: expected a string, got 7'],
    ['{"prompt": ["a", "b"]}', 'prompt', 'prompt: only one prompt is supported, got 2', '/v1/completions'],
    ['{"prompt": [1]}', 'prompt', 'prompt: expected a string or an array of one string, got [1]', '/v1/completions'],
  ])('400 for %s', async (body, param, message, path = '/v1/chat/completions') => {
    const r = await post(port, path, body);
    expect(r.status).toBe(400);
    const doc = JSON.parse(r.text);
    expect(doc).toEqual({ error: { message: expect.anything(), type: 'invalid_request_error', param, code: null } });
    if (typeof message === 'string') expect(doc.error.message).toBe(message);
    else expect(doc.error.message).toMatch(message);
  });

  test('a body over 1 MiB is a 413', async () => {
    const r = await post(port, '/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(1024 * 1024) }] }));
    expect([r.status, JSON.parse(r.text).error.message]).toEqual([413, 'the body is larger than 1048576 bytes']);
  });
});

describe('tiny-llm scheduling and metrics', () => {
  test('generations beyond maxRunning wait; clients that leave are aborted, queued or running', async () => {
    const port = await start({ maxRunning: 2, tokenIntervalMs: 60_000 });
    const body = JSON.stringify({ messages: [{ role: 'user', content: 'one two three' }], max_tokens: 100, stream: true });
    const calls = [0, 1, 2].map(() => send(port, 'POST', '/v1/chat/completions', body));
    await Promise.all(calls.map((c) => c.res)); // headers are flushed once the generation is queued
    const text = (await call(port, 'GET', '/metrics')).text;
    expect([`vllm:num_requests_running{${L}}`, `vllm:num_requests_waiting{${L}}`, `vllm:prompt_tokens_total{${L}}`].map((s) => value(text, s))).toEqual([2, 1, 6]);
    expect(value(text, `vllm:kv_cache_usage_perc{${L}}`)).toBeCloseTo(6 / 8192);
    for (const c of calls) c.req.destroy();
    const after = await metricsUntil(port, (t) => value(t, `vllm:request_success_total{${L},finished_reason="abort"}`) === 3);
    expect([`vllm:num_requests_running{${L}}`, `vllm:num_requests_waiting{${L}}`, `vllm:kv_cache_usage_perc{${L}}`, `vllm:generation_tokens_total{${L}}`].map((s) => value(after, s))).toEqual([0, 0, 0, 0]);
  });

  test('a client that leaves mid-stream stops its generation at once', async () => {
    const port = await start({ maxRunning: 1, tokenIntervalMs: 1 });
    const { req, res } = send(port, 'POST', '/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: 'go on' }], max_tokens: 4096, stream: true }));
    let seen = '';
    for await (const c of await res) {
      seen += (c as Buffer).toString();
      if (seen.split('\n\n').length > 4) break; // the role chunk and three tokens
    }
    req.destroy();
    const text = await metricsUntil(port, (t) => value(t, `vllm:request_success_total{${L},finished_reason="abort"}`) === 1);
    expect(value(text, `vllm:num_requests_running{${L}}`)).toBe(0);
    const made = value(text, `vllm:generation_tokens_total{${L}}`);
    expect(made).toBeGreaterThanOrEqual(3);
    expect(made).toBeLessThan(4096);
    // The slot is free: the next generation runs and finishes.
    expect(JSON.parse((await chat(port, { max_tokens: 2 })).text).choices[0].finish_reason).toBe('length');
    expect(value((await call(port, 'GET', '/metrics')).text, `vllm:generation_tokens_total{${L}}`)).toBe(made + 2);
  });

  test('/metrics has the runner counts and the vLLM metrics, as documented, lint-clean but for the colons', async () => {
    const port = await start({ modelName: 'my "llm"' });
    await chat(port, { max_tokens: 3 });
    await chat(port, { max_tokens: 3, stop: 'said' });
    const { text } = await call(port, 'GET', '/metrics');
    const l = 'model_name="my \\"llm\\""';
    expect([`vllm:prompt_tokens_total{${l}}`, `vllm:generation_tokens_total{${l}}`, `vllm:request_success_total{${l},finished_reason="length"}`, `vllm:request_success_total{${l},finished_reason="stop"}`].map((s) => value(text, s))).toEqual([4, 5, 1, 1]);
    expect(value(text, 'predictgate_model_requests_total{route="predict",code="200"}')).toBe(2);
    expect(metricNames(text)).toEqual([...documentedMetrics('Bundled model servers'), ...documentedMetrics('tiny-llm')].sort());
    // promtool's only complaint is the ':' of vLLM's names (a style lint, reserved for recording rules).
    const vllm = metricNames(text).filter((n) => n.startsWith('vllm:'));
    const lint = await promtoolCheck(text);
    expect([lint.code, lint.output.trim().split('\n').sort()]).toEqual([3, vllm.map((n) => `${n} metric names should not contain ':'`).sort()]);
    expect(await promtoolCheck(text.replaceAll('vllm:', 'vllm_'))).toEqual({ code: 0, output: '' });
  });

  test('settings come from TINY_LLM_* and are listed in predictgate model --help', () => {
    expect(modelOptionsFromEnv({ TINY_LLM_TOKEN_INTERVAL_MS: '0', TINY_LLM_MAX_RUNNING: '8', TINY_LLM_MODEL_NAME: 'llama' }).tinyLlm).toEqual({ tokenIntervalMs: 0, maxRunning: 8, modelName: 'llama' });
    expect(() => modelOptionsFromEnv({ TINY_LLM_TOKEN_INTERVAL_MS: '-1' })).toThrow('TINY_LLM_TOKEN_INTERVAL_MS must be an integer of 0 or more, got "-1"');
    expect(() => modelOptionsFromEnv({ TINY_LLM_MAX_RUNNING: '0' })).toThrow('TINY_LLM_MAX_RUNNING must be an integer of 1 or more, got "0"');
    expect(() => modelOptionsFromEnv({ TINY_LLM_MODEL_NAME: ' ' })).toThrow(/TINY_LLM_MODEL_NAME/);
    const help = commandHelp('model');
    expect(help).toMatch(/tiny-llm/);
    for (const env of ['TINY_LLM_TOKEN_INTERVAL_MS (default 20)', 'TINY_LLM_MAX_RUNNING (default 4)', 'TINY_LLM_MODEL_NAME (default tiny-llm)']) expect(help).toContain(`  ${env}\n`);
  });
});
