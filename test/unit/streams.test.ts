// The pure parts of streamed answers: cutting server-sent events out of a byte stream however it is
// split, reading an event, the error event, the OpenAI request checks and rewrites, the OpenAI error
// dialect, and the streaming routes of the route table.
import { SseFramer, readEvent, errorEvent, MAX_EVENT_BYTES } from '../../src/gateway/stream/sse.js';
import { prepareOpenAi, usageOf, chunkContent, readChunk } from '../../src/payload/openai.js';
import { ApiError, errorBody } from '../../src/errors.js';
import { compileRoutes, routeTable } from '../../src/gateway/routes.js';
import { openAiTargetOf } from '../../src/gateway/routing.js';

const STREAM = 'data: {"a":1}\n\n: a comment\ndata: two\ndata: lines\n\nevent: x\r\ndata: crlf\r\n\r\ndata: cr\r\rdata: [DONE]\n\n';

/** The events of `text` fed to a framer in pieces of `size` bytes. */
function frame(text: string, size: number): string[] {
  const f = new SseFramer();
  const bytes = Buffer.from(text);
  const out: string[] = [];
  for (let i = 0; i < bytes.length; i += size) out.push(...f.push(bytes.subarray(i, i + size)).map((e) => e.toString()));
  const rest = f.rest();
  if (rest) out.push(rest.toString());
  return out;
}

test.each([1, 2, 3, 7, 1000])('events are cut at empty lines, whatever the pieces (%i bytes)', (size) => {
  const events = frame(STREAM, size);
  // Every byte goes out, in order, once.
  expect(events.join('')).toBe(STREAM);
  expect(events.map((e) => readEvent(Buffer.from(e)).data).filter((d) => d !== undefined)).toEqual(['{"a":1}', 'two\nlines', 'crlf', 'cr', '[DONE]']);
});

test('an event read: its type and data lines; comments skipped', () => {
  expect(readEvent(Buffer.from('event: error\ndata: {"x":1}\n\n'))).toEqual({ event: 'error', data: '{"x":1}' });
  expect(readEvent(Buffer.from(': keep-alive\n\n'))).toEqual({ event: undefined, data: undefined });
  expect(readEvent(Buffer.from('data\n\n'))).toEqual({ event: undefined, data: '' });
});

test('an unfinished event is kept for the end of the stream, and refused past MAX_EVENT_BYTES', () => {
  const f = new SseFramer(8);
  expect(f.push(Buffer.from('data: 1'))).toEqual([]);
  expect(f.held).toBe(7);
  expect(f.rest()?.toString()).toBe('data: 1');
  expect(() => f.push(Buffer.from('data: 123'))).toThrow('the model sent a server-sent event longer than 8 bytes');
  expect(MAX_EVENT_BYTES).toBe(1024 * 1024);
});

test('the error event carries OpenAI\'s error object', () => {
  const err = new ApiError('upstream_reset', 'deployed model m closed the connection');
  expect(errorEvent(err).toString()).toBe('event: error\ndata: {"error":{"message":"deployed model m closed the connection","type":"server_error","param":null,"code":"upstream_reset"}}\n\n');
  expect(JSON.parse(errorBody(new ApiError('model_busy', 'busy'), 'openai'))).toEqual({ error: { message: 'busy', type: 'rate_limit_error', param: null, code: 'model_busy' } });
  expect(JSON.parse(errorBody(new ApiError('unauthenticated', 'no token'), 'openai')).error.type).toBe('authentication_error');
});

const chat = (doc: unknown): Buffer => Buffer.from(JSON.stringify(doc));
const messages = [{ role: 'user', content: 'hi' }];

test('a body that needs no change goes on as the client sent it', () => {
  const raw = Buffer.from(' {"messages": [{"role": "user", "content": "hi"}], "stream": false} ');
  const r = prepareOpenAi(raw, 'chatCompletions', 64, undefined);
  expect(r.body).toBe(raw);
  expect(r).toMatchObject({ stream: false, injectedUsage: false });
  expect(prepareOpenAi(chat({ messages, stream: true, stream_options: { include_usage: true } }), 'chatCompletions', 64, undefined).injectedUsage).toBe(false);
});

test('a stream asks for usage; servedModelName replaces model; other keys stay as sent', () => {
  const r = prepareOpenAi(Buffer.from('{"model":"x","messages":[{"role":"user","content":"hi"}],"stream":true,"__proto__":{"p":1},"stream_options":{"o":2}}'), 'chatCompletions', 64, 'served');
  expect(r.injectedUsage).toBe(true);
  const doc = JSON.parse(r.body.toString()) as Record<string, unknown>;
  expect(Object.keys(doc)).toEqual(['model', 'messages', 'stream', '__proto__', 'stream_options']);
  expect(doc).toMatchObject({ model: 'served', stream_options: { o: 2, include_usage: true } });
  expect(Object.getPrototypeOf({ ...doc })).toBe(Object.prototype);
});

test.each([
  ['', 'chatCompletions', 'the body is empty; expected a JSON object (an OpenAI chat completion request)'],
  ['[1]', 'chatCompletions', 'body: expected a JSON object, got list'],
  ['"text"', 'chatCompletions', 'expected a JSON object (an OpenAI chat completion request), got string'],
  ['{"messages": [], "model": 3}', 'chatCompletions', 'model: expected a string, got number'],
  ['{"messages": []}', 'chatCompletions', 'messages: expected at least one message, got an empty list'],
  ['{}', 'chatCompletions', 'messages: required (a list of {"role": string, "content": ...})'],
  ['{"messages": {"role": "user"}}', 'chatCompletions', 'messages: expected a list, got an object'],
  ['{"messages": [{"role": "user"}, 5]}', 'chatCompletions', 'messages[1]: expected an object {"role": string, "content": ...}, got number'],
  ['{"messages": [{"role": 1}]}', 'chatCompletions', 'messages[0].role: expected a string, got number'],
  ['{"messages": [{"role": "user"}], "stream": "yes"}', 'chatCompletions', 'stream: expected a boolean, got string'],
  ['{"messages": [{"role": "user"}], "stream_options": {}}', 'chatCompletions', 'stream_options: only allowed when stream is true'],
  ['{"messages": [{"role": "user"}], "stream": true, "stream_options": []}', 'chatCompletions', 'stream_options: expected an object, got a list'],
  ['{"messages": [{"role": "user"}], "stream": true, "stream_options": {"include_usage": 1}}', 'chatCompletions', 'stream_options.include_usage: expected a boolean, got number'],
  ['{}', 'completions', 'prompt: required (a string, a list of strings, or token ids)'],
  ['{"prompt": []}', 'completions', 'prompt: expected a string or a non-empty list, got an empty list'],
  ['{"prompt": ["a", {"b": 1}]}', 'completions', 'prompt[1]: expected a string, a token id or a list of token ids, got an object'],
] as const)('%s (%s) is refused: %s', (body, kind, message) => {
  expect(() => prepareOpenAi(Buffer.from(body), kind, 64, undefined)).toThrow(message);
});

test('completions take a string, strings, token ids or lists of them', () => {
  for (const prompt of ['a', ['a', 'b'], [1, 2], [[1], [2, 3]]]) expect(prepareOpenAi(chat({ prompt }), 'completions', 64, undefined).stream).toBe(false);
});

test('usage and chunk contents', () => {
  expect(usageOf({ usage: { prompt_tokens: 3, completion_tokens: 4 } })).toEqual({ promptTokens: 3, completionTokens: 4 });
  expect(usageOf({ usage: null })).toBeUndefined();
  expect(usageOf({ usage: { prompt_tokens: -1, completion_tokens: 4 } })).toBeUndefined();
  expect(chunkContent({ choices: [{ delta: { content: 'x' } }] })).toEqual({ text: true, usageOnly: false });
  expect(chunkContent({ choices: [{ delta: { role: 'assistant', content: '' } }] })).toEqual({ text: false, usageOnly: false });
  expect(chunkContent({ choices: [{ text: 'y' }] })).toEqual({ text: true, usageOnly: false });
  expect(chunkContent({ choices: [], usage: { prompt_tokens: 1, completion_tokens: 1 } })).toEqual({ text: false, usageOnly: true });
});

test.each([
  ['a token', '{"choices":[{"index":0,"delta":{"content":"Hi"}}],"usage":null}', { text: true, usage: undefined, usageOnly: false }],
  ['a token, spaced as Python writes JSON', '{"choices": [{"delta": {"content": " there"}}]}', { text: true, usage: undefined, usageOnly: false }],
  ['the role chunk (empty content)', '{"choices":[{"delta":{"role":"assistant","content":""}}]}', { text: false, usage: undefined, usageOnly: false }],
  ['a completion token', '{"choices":[{"index":0,"text":"x"}]}', { text: true, usage: undefined, usageOnly: false }],
  ['the usage chunk', '{"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":5,"total_tokens":7}}', { text: false, usage: { promptTokens: 2, completionTokens: 5 }, usageOnly: true }],
  ['a last token with its usage', '{"choices":[{"delta":{"content":"!"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}', { text: true, usage: { promptTokens: 1, completionTokens: 1 }, usageOnly: false }],
  ['not JSON', '"usage":{ oops', { text: false, usage: undefined, usageOnly: false }],
])('a streamed chunk read: %s', (_what, data, expected) => {
  expect(readChunk(data)).toEqual(expected);
});

test('a model\'s OpenAI routes from its manifest', () => {
  expect(openAiTargetOf(undefined)).toBeUndefined();
  expect(openAiTargetOf({})).toEqual({ chatCompletions: '/v1/chat/completions', completions: '/v1/completions', models: '/v1/models', metricsRoute: '/metrics', servedModelName: undefined });
  expect(openAiTargetOf({ basePath: '/openai/v1', routes: ['chatCompletions'], servedModelName: 'm', metricsRoute: '/stats' })).toEqual({ chatCompletions: '/openai/v1/chat/completions', completions: null, models: '/openai/v1/models', metricsRoute: '/stats', servedModelName: 'm' });
});

const routes = compileRoutes(routeTable({ statusApi: false }));

test.each([
  ['POST', '/v1/projects/p/locations/l/endpoints/e:streamRawPredict', 'streamRawPredict', 'vertex'],
  ['POST', '/v1beta1/projects/p/locations/l/endpoints/e:streamRawPredict?$alt=json', 'streamRawPredict', 'vertex'],
  ['POST', '/v1/model:streamRawPredict', 'streamRawPredict', 'gdc'],
  ['POST', '/v1/projects/p/locations/l/endpoints/e/chat/completions', 'chatCompletions', 'openai'],
  ['POST', '/v1beta1/projects/p/locations/l/endpoints/e/completions', 'completions', 'openai'],
  ['GET', '/v1/projects/p/locations/l/endpoints/e/models', 'models', 'openai'],
])('%s %s is %s', (method, url, verb, dialect) => {
  const m = routes.match(method, url);
  expect(m.found && { verb: m.spec.serve.kind === 'endpointCall' && m.spec.serve.verb, dialect: m.spec.dialect }).toEqual({ verb, dialect });
});

test('another method on an OpenAI route is a 405 in the OpenAI dialect', () => {
  expect(routes.match('GET', '/v1/projects/p/locations/l/endpoints/e/chat/completions')).toMatchObject({ found: false, allowed: ['POST'], dialect: 'openai' });
  expect(routes.match('POST', '/v1/projects/p/locations/l/endpoints/e/models')).toMatchObject({ found: false, allowed: ['GET'], dialect: 'openai' });
});
