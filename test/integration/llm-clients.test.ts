// The real clients of a generative model against the gateway in local mode (in-process), serving
// crds/samples/tiny-llm.yaml as it ships (the bundled tiny-llm server, 20 ms between tokens): the
// openai npm SDK and the openai PyPI SDK on the Endpoint's OpenAI-compatible routes (chat/completions,
// completions, models; whole and streamed; the gateway's refusals), gcloud's `ai endpoints
// stream-raw-predict`, the Node Vertex client's streamRawPredict over REST (HttpBody elements of a
// JSON array) and curl -N on the event stream. tiny-llm is deterministic: for "Say hi" and max_tokens
// N it makes the first N words of "You said: Say hi You said: ..." (finish_reason length), so every
// answer is known but its id and created time; those are checked for form.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { v1 } from '@google-cloud/aiplatform';
import { ROOT, ready, startLocal, type LocalHarness } from '../helpers/local.js';
import { GCLOUD, GCLOUD_TIMEOUT_MS, gcloudWithToken } from '../helpers/gcloud.js';
import { PYTHON_DIR, ensurePythonEnv, sdkBaseEnv } from '../helpers/python.js';

type ClientOptions = NonNullable<ConstructorParameters<typeof v1.PredictionServiceClient>[0]>;

const PROJECT = 'default';
const REGION = 'local';
const ENDPOINT = 'tiny-llm';
const TOKEN = 'test-token';
const SAY_HI = [{ role: 'user' as const, content: 'Say hi' }];
/** tiny-llm's tokens for "Say hi": "You said: " and the message, cycled. */
const TOKENS = ['You', ' said:', ' Say', ' hi', ' You'];
/** A chat body with "stream": true, as the raw clients send it (to tiny-llm's predict route, /v1/chat/completions). */
const STREAM_BODY = JSON.stringify({ messages: SAY_HI, stream: true, max_tokens: 5 });

/** Not known in advance: checked for form only. */
const CHAT_ID = expect.stringMatching(/^chatcmpl-\d+$/);
const CMPL_ID = expect.stringMatching(/^cmpl-\d+$/);
const CREATED = expect.any(Number);

let h: LocalHarness;
let baseURL = '';

beforeAll(async () => {
  h = await startLocal({ 'tiny-llm.yaml': readFileSync(join(ROOT, 'crds/samples/tiny-llm.yaml'), 'utf8') });
  baseURL = `${h.base}/v1/projects/${PROJECT}/locations/${REGION}/endpoints/${ENDPOINT}`;
  await h.until((x) => ready(x, 'Endpoint', `default/${ENDPOINT}`), 'sample endpoint tiny-llm ready');
}, 60_000);

afterAll(async () => {
  await h?.stop();
});

/** One streamed chat chunk as tiny-llm writes it (`extra`: keys the request's stream_options add). */
function chatChunk(delta: Record<string, unknown>, finish: string | null, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { id: CHAT_ID, object: 'chat.completion.chunk', created: CREATED, model: 'tiny-llm', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...extra };
}

/** The chunks of a streamed chat answer of `tokens`, ended by max_tokens. */
function chatChunks(tokens: readonly string[], extra: Record<string, unknown> = {}): Record<string, unknown>[] {
  return [
    chatChunk({ role: 'assistant', content: '' }, null, extra),
    ...tokens.map((t) => chatChunk({ content: t }, null, extra)),
    chatChunk({}, 'length', extra),
  ];
}

/**
 * The events of a text/event-stream body, each as its `data:` value (JSON parsed, `[DONE]` as it
 * is). Every event must be exactly one `data: ...` line followed by an empty line.
 */
function sseData(text: string): unknown[] {
  expect(text.endsWith('\n\n')).toBe(true);
  return text.slice(0, -2).split('\n\n').map((event) => {
    expect(event).toMatch(/^data: [^\n]*$/);
    const data = event.slice('data: '.length);
    return data === '[DONE]' ? data : JSON.parse(data);
  });
}

/** One id for every chunk of a stream. */
function oneId(chunks: readonly unknown[]): void {
  const ids = new Set(chunks.filter((c) => typeof c === 'object').map((c) => (c as { id: string }).id));
  expect(ids.size).toBe(1);
}

describe('openai npm SDK (7.59.0) on the Endpoint\'s OpenAI-compatible routes', () => {
  // No retries: a gateway 5xx or a dropped connection shows as it is, not hidden by a second try.
  const client = (): OpenAI => new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0 });

  test('chat.completions.create: the whole answer, its content and usage', async () => {
    const r = await client().chat.completions.create({ model: 'tiny-llm', messages: SAY_HI, max_tokens: 5 });
    expect(r).toEqual({
      id: CHAT_ID,
      object: 'chat.completion',
      created: CREATED,
      model: 'tiny-llm',
      choices: [{ index: 0, message: { role: 'assistant', content: 'You said: Say hi You' }, logprobs: null, finish_reason: 'length' }],
      usage: { prompt_tokens: 2, completion_tokens: 5, total_tokens: 7 },
    });
  });

  test('chat.completions.create with stream: true: every token as a delta, then finish_reason length', async () => {
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const c of await client().chat.completions.create({ model: 'tiny-llm', messages: SAY_HI, max_tokens: 5, stream: true })) chunks.push(c);
    const deltas = chunks.map((c) => c.choices[0]?.delta.content).filter((t) => t !== undefined && t !== '');
    expect(deltas).toEqual(TOKENS);
    expect(chunks[chunks.length - 1].choices).toEqual([{ index: 0, delta: {}, logprobs: null, finish_reason: 'length' }]);
    // The gateway asked tiny-llm for the usage (to count tokens) and kept the usage chunk from the
    // client, which did not ask; `usage: null` on each chunk is the trace of the request it changed.
    expect(chunks).toEqual(chatChunks(TOKENS, { usage: null }));
    oneId(chunks);
  });

  test('stream_options.include_usage asked for by the client: the usage chunk reaches it', async () => {
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    const stream = await client().chat.completions.create({ model: 'tiny-llm', messages: SAY_HI, max_tokens: 5, stream: true, stream_options: { include_usage: true } });
    for await (const c of stream) chunks.push(c);
    expect(chunks).toEqual([
      ...chatChunks(TOKENS, { usage: null }),
      { id: CHAT_ID, object: 'chat.completion.chunk', created: CREATED, model: 'tiny-llm', choices: [], usage: { prompt_tokens: 2, completion_tokens: 5, total_tokens: 7 } },
    ]);
    oneId(chunks);
  });

  test('completions.create, whole and streamed', async () => {
    const whole = await client().completions.create({ model: 'tiny-llm', prompt: 'Say hi', max_tokens: 5 });
    expect(whole).toEqual({
      id: CMPL_ID,
      object: 'text_completion',
      created: CREATED,
      model: 'tiny-llm',
      choices: [{ index: 0, text: 'You said: Say hi You', logprobs: null, finish_reason: 'length' }],
      usage: { prompt_tokens: 2, completion_tokens: 5, total_tokens: 7 },
    });
    const chunks: OpenAI.Completions.Completion[] = [];
    for await (const c of await client().completions.create({ model: 'tiny-llm', prompt: 'Say hi', max_tokens: 5, stream: true })) chunks.push(c);
    const piece = (text: string, finish: string | null): Record<string, unknown> =>
      ({ id: CMPL_ID, object: 'text_completion', created: CREATED, model: 'tiny-llm', choices: [{ index: 0, text, logprobs: null, finish_reason: finish }], usage: null });
    expect(chunks).toEqual([...TOKENS.map((t) => piece(t, null)), piece('', 'length')]);
    oneId(chunks);
  });

  test('models.list: the tiny-llm server\'s own list, forwarded', async () => {
    const page = await client().models.list();
    expect(page.data).toEqual([{ id: 'tiny-llm', object: 'model', created: CREATED, owned_by: 'predictgate' }]);
  });

  test.each([
    ['no messages', [], 'messages: expected at least one message, got an empty list', 'messages'],
    ['a message without a role', [{ content: 'Say hi' }], 'messages[0].role: expected a string, got nothing', 'messages[0].role'],
  ])('%s: the gateway refuses it, the SDK raises BadRequestError (400) with the field named', async (_what, messages, message, param) => {
    const err: unknown = await client().chat.completions.create({ model: 'tiny-llm', messages: messages as OpenAI.Chat.Completions.ChatCompletionMessageParam[] }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err).toMatchObject({
      status: 400,
      message: `400 ${message}`,
      type: 'invalid_request_error',
      code: 'invalid_payload',
      param,
      error: { message, type: 'invalid_request_error', param, code: 'invalid_payload' },
    });
  });

  test('an unknown endpoint: NotFoundError (404) naming it', async () => {
    const other = new OpenAI({ baseURL: `${h.base}/v1/projects/${PROJECT}/locations/${REGION}/endpoints/no-such-endpoint`, apiKey: 'unused', maxRetries: 0 });
    const err: unknown = await other.chat.completions.create({ model: 'tiny-llm', messages: SAY_HI }).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err).toMatchObject({ status: 404, message: '404 endpoint no-such-endpoint not found in project default', code: 'endpoint_not_found', type: 'not_found_error' });
  });
});

describe('openai PyPI SDK (3.57.0, test/python/openai_client.py)', () => {
  let python = '';

  beforeAll(async () => {
    python = await ensurePythonEnv((line) => console.log(`llm-clients: ${line}`));
  }, 16 * 60_000);

  /** openai_client.py BASE_URL to its end, its one JSON line back. */
  function runClient(): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      execFile(python, [join(PYTHON_DIR, 'openai_client.py'), baseURL], { env: sdkBaseEnv(), timeout: 40_000, encoding: 'utf8' }, (err, stdout, stderr) => {
        const last = stdout.trim().split('\n').pop() ?? '';
        try {
          resolve(JSON.parse(last) as Record<string, unknown>);
        } catch {
          reject(new Error(`openai_client.py ended (${err ? (err.code ?? err.signal) : 0}) without a JSON line; stdout:\n${stdout}\nstderr:\n${stderr}`));
        }
      });
    });
  }

  test('chat completion whole and streamed, and a refused body as BadRequestError', async () => {
    const r = await runClient();
    const chunk = (role: string | null, content: string | null, finish: string | null): Record<string, unknown> =>
      ({ object: 'chat.completion.chunk', role, content, finish_reason: finish, usage: null });
    expect(r).toEqual({
      ok: true,
      sdk: '3.57.0',
      whole: {
        object: 'chat.completion',
        model: 'tiny-llm',
        content: 'You said: Say hi You',
        role: 'assistant',
        finish_reason: 'length',
        usage: { prompt_tokens: 2, completion_tokens: 5, total_tokens: 7, completion_tokens_details: null, prompt_tokens_details: null },
      },
      stream: {
        chunks: [chunk('assistant', '', null), ...TOKENS.map((t) => chunk(null, t, null)), chunk(null, null, 'length')],
        text: 'You said: Say hi You',
      },
      refused: {
        raised: 'BadRequestError',
        status: 400,
        message: 'Error code: 400 - messages: expected at least one message, got an empty list',
        code: 'invalid_payload',
        type: 'invalid_request_error',
      },
    });
  }, 60_000);
});

if (!GCLOUD) console.warn('llm-clients.test: gcloud is not on PATH; skipping the gcloud stream-raw-predict test');
const gtest = GCLOUD ? test : test.skip;

describe('gcloud ai endpoints stream-raw-predict', () => {
  const gcloud = gcloudWithToken(TOKEN, () => h.base, PROJECT);

  gtest('a chat body with stream true: every token\'s chunk and [DONE], exit 0', async () => {
    const r = await gcloud.run([
      'ai', 'endpoints', 'stream-raw-predict', ENDPOINT, `--region=${REGION}`, `--request=${STREAM_BODY}`, '--http-headers=Content-Type=application/json',
    ]);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(`Using endpoint [${h.base}/]`);
    // gcloud writes each line of the answer without its line end and drops the empty ones, so the
    // events come out joined: `data: {...}data: {...}...data: [DONE]`.
    expect(r.stdout.startsWith('data: ')).toBe(true);
    const events = r.stdout.slice('data: '.length).split('data: ').map((d) => (d === '[DONE]' ? d : JSON.parse(d) as unknown));
    // streamRawPredict forwards the body as it is: no usage asked for, no `usage` key in the chunks.
    expect(events).toEqual([...chatChunks(TOKENS), '[DONE]']);
    oneId(events);
  }, 2 * GCLOUD_TIMEOUT_MS);
});

describe('Node client (@google-cloud/aiplatform) streamRawPredict over REST', () => {
  let client: InstanceType<typeof v1.PredictionServiceClient>;

  beforeAll(() => {
    // As clients.test.ts: gax's fallback transport calls auth.fetch(url, init); a fixed token.
    const auth = {
      async getRequestHeaders(): Promise<Headers> {
        return new Headers({ authorization: `Bearer ${TOKEN}` });
      },
      fetch(url: string, init: RequestInit & { headers: Headers }): Promise<Response> {
        init.headers.set('authorization', `Bearer ${TOKEN}`);
        return fetch(url, init);
      },
    };
    client = new v1.PredictionServiceClient({ apiEndpoint: '127.0.0.1', port: Number(new URL(h.base).port), protocol: 'http', fallback: true, auth: auth as unknown as ClientOptions['auth'] });
  });

  afterAll(async () => {
    await client?.close();
  });

  test('an HttpBody with a chat body (stream true): HttpBody messages whose data joins into the event stream', async () => {
    const stream = client.streamRawPredict({
      endpoint: client.projectLocationEndpointPath(PROJECT, REGION, ENDPOINT),
      httpBody: { contentType: 'application/json', data: Buffer.from(STREAM_BODY) },
    });
    const messages = await new Promise<{ contentType?: string | null; data?: Uint8Array | string | null }[]>((resolve, reject) => {
      const got: { contentType?: string | null; data?: Uint8Array | string | null }[] = [];
      stream.on('data', (m: { contentType?: string | null; data?: Uint8Array | string | null }) => got.push(m));
      stream.once('error', reject);
      stream.once('end', () => resolve(got));
    });
    expect(messages.length).toBeGreaterThan(0);
    for (const m of messages) expect(m.contentType).toBe('text/event-stream');
    const text = Buffer.concat(messages.map((m) => Buffer.from(m.data as Uint8Array))).toString('utf8');
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    const events = sseData(text);
    expect(events).toEqual([...chatChunks(TOKENS), '[DONE]']);
    oneId(events);
  });
});

describe('the OpenAI routes at the root, the Endpoint chosen by Host (curl)', () => {
  const HOST = `${ENDPOINT}.default.predictgate.internal`;
  const root = (path: string, args: string[], host = HOST): Promise<{ status: number; type: string; body: string }> =>
    new Promise((resolve, reject) => {
      execFile('curl', ['-sN', `${h.base}${path}`, '-H', `Host: ${host}`, ...args, '-w', '\n%{http_code} %{content_type}'], { timeout: 20_000, encoding: 'utf8' }, (err, stdout, stderr) => {
        if (err) return reject(new Error(`curl failed (${err.code ?? err.signal}): ${stderr}`));
        const at = stdout.lastIndexOf('\n');
        const [status, type] = stdout.slice(at + 1).split(' ');
        resolve({ status: Number(status), type, body: stdout.slice(0, at) });
      });
    });
  const post = (path: string, body: unknown, host?: string, extra: string[] = []) => root(path, ['-X', 'POST', '-H', 'Content-Type: application/json', ...extra, '-d', JSON.stringify(body)], host);

  test('POST /v1/chat/completions, streamed and whole, and the pinning header', async () => {
    const streamed = await post('/v1/chat/completions', { messages: SAY_HI, stream: true, max_tokens: 3 });
    expect([streamed.status, streamed.type]).toEqual([200, 'text/event-stream']);
    expect(sseData(streamed.body)).toEqual([...chatChunks(TOKENS.slice(0, 3), { usage: null }), '[DONE]']);
    const whole = await post('/v1/chat/completions', { messages: SAY_HI, max_tokens: 2 }, HOST, ['-H', 'x-vertex-ai-deployed-model-id: tiny-llm']);
    expect([whole.status, whole.type]).toEqual([200, 'application/json']);
    expect(JSON.parse(whole.body)).toMatchObject({ object: 'chat.completion', choices: [{ message: { role: 'assistant', content: 'You said:' }, finish_reason: 'length' }] });
  });

  test('POST /v1/completions and GET /v1/models', async () => {
    const cmpl = await post('/v1/completions', { prompt: 'Say hi', max_tokens: 2 });
    expect([cmpl.status, JSON.parse(cmpl.body)]).toMatchObject([200, { id: CMPL_ID, object: 'text_completion', choices: [{ text: 'You said:', finish_reason: 'length' }] }]);
    const models = await root('/v1/models', []);
    expect([models.status, JSON.parse(models.body)]).toEqual([200, { object: 'list', data: [{ id: 'tiny-llm', object: 'model', created: CREATED, owned_by: 'predictgate' }] }]);
  });

  test('a Host that names no Endpoint: 404 in OpenAI\'s shape, naming it', async () => {
    const res = await post('/v1/chat/completions', { messages: SAY_HI }, 'nope.default.predictgate.internal');
    expect([res.status, res.type]).toEqual([404, 'application/json']);
    expect(JSON.parse(res.body)).toMatchObject({ error: { message: 'no endpoint has the FQDN "nope.default.predictgate.internal"; calls on this route choose the endpoint by the Host header ({endpoint}.{namespace}.{domain})', code: 'endpoint_not_found', type: 'not_found_error' } });
  });
});

describe('curl -N on chat/completions', () => {
  test('stream true, max_tokens 3: the exact event stream, as it comes', async () => {
    const out = await new Promise<string>((resolve, reject) => {
      execFile('curl', [
        '-sN', '-X', 'POST', `${baseURL}/chat/completions`, '-H', 'Content-Type: application/json',
        '-d', JSON.stringify({ messages: SAY_HI, stream: true, max_tokens: 3 }),
        '-w', '\n%{http_code} %{content_type}',
      ], { timeout: 20_000, encoding: 'utf8' }, (err, stdout, stderr) => (err ? reject(new Error(`curl failed (${err.code ?? err.signal}): ${stderr}`)) : resolve(stdout)));
    });
    const at = out.lastIndexOf('\n');
    expect(out.slice(at + 1)).toBe('200 text/event-stream');
    const body = out.slice(0, at);
    const events = sseData(body);
    expect(events).toEqual([...chatChunks(TOKENS.slice(0, 3), { usage: null }), '[DONE]']);
    oneId(events);
    // Nothing but the events (no usage chunk, no comments): six events, each one `data:` line.
    expect(body.split('\n')).toEqual([...Array.from({ length: 6 }, () => [expect.stringMatching(/^data: /), '']).flat(), '']);
  });
});
