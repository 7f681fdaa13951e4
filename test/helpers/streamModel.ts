// A streaming model server for the gateway's stream tests, run as its own process (local mode starts
// it from a manifest): `AIP_HTTP_PORT=<port|0> node dist/test/helpers/streamModel.js`.
// Any POST streams OpenAI chat.completion.chunk events as server-sent events, scripted by the JSON
// body it gets (extra fields the gateway forwards untouched):
//   "events": N         events with text to send (default 3), each `tok<i>`;
//   "then": what follows them: "end" (default: the usage chunk when stream_options.include_usage,
//           then `data: [DONE]`), "hold" (nothing more until GET /release, then as "end"), "reset"
//           (the connection is destroyed), "stall" (nothing more, ever), "fail503" (before anything:
//           a 503 with an OpenAI error body);
//   "contentType": the answer's type (default text/event-stream; others get the same bytes);
//   "pad": characters added to each event's text (default 0), for large streams;
//   "stream": false answers one chat.completion JSON with usage instead.
// GET /calls: `{"started":N,"finished":N,"clientClosed":N,"backlog":B}` (clientClosed: streams whose
// connection closed before they ended; backlog: bytes written by open streams that their sockets have
// not taken yet, i.e. held back by TCP); GET /release: ends every held stream; GET /health, GET /v1/models.
// Prints `{"msg":"listening","port":N}` on stdout once it listens. A script, not a library.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

const counts = { started: 0, finished: 0, clientClosed: 0 };
const held = new Set<() => void>();
const open = new Set<ServerResponse>();

interface Script {
  events: number;
  then: 'end' | 'hold' | 'reset' | 'stall' | 'fail503';
  contentType: string;
  stream: boolean;
  usage: boolean;
  pad: number;
  model: string;
}

function scriptOf(text: string): Script {
  let doc: Record<string, unknown> = {};
  try {
    doc = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // Not JSON: the defaults.
  }
  const options = doc.stream_options as { include_usage?: boolean } | undefined;
  return {
    events: typeof doc.events === 'number' ? doc.events : 3,
    then: (typeof doc.then === 'string' ? doc.then : 'end') as Script['then'],
    contentType: typeof doc.contentType === 'string' ? doc.contentType : 'text/event-stream',
    stream: doc.stream !== false,
    usage: options?.include_usage === true,
    pad: typeof doc.pad === 'number' ? doc.pad : 0,
    model: typeof doc.model === 'string' ? doc.model : 'stream-model',
  };
}

const chunk = (model: string, content: string | null, finish: string | null, usage?: unknown): string =>
  `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model, choices: usage ? [] : [{ index: 0, delta: content === null ? {} : { content }, finish_reason: finish }], ...(usage ? { usage } : {}) })}\n\n`;

function stream(res: ServerResponse, s: Script): void {
  counts.started++;
  let over = false;
  open.add(res);
  res.once('close', () => {
    open.delete(res);
    if (!over) counts.clientClosed++;
  });
  if (s.then === 'fail503') {
    over = true;
    const body = JSON.stringify({ error: { message: 'the model is overloaded', type: 'server_error', code: 503 } });
    res.writeHead(503, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
    return;
  }
  if (!s.stream) {
    over = true;
    const body = JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion', created: 1, model: s.model, choices: [{ index: 0, message: { role: 'assistant', content: 'tok0' }, finish_reason: 'stop' }], usage: { prompt_tokens: 7, completion_tokens: s.events, total_tokens: 7 + s.events } });
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
    counts.finished++;
    return;
  }
  res.writeHead(200, { 'Content-Type': s.contentType, 'Cache-Control': 'no-cache' });
  res.flushHeaders();
  const pad = 'x'.repeat(s.pad);
  for (let i = 0; i < s.events; i++) res.write(chunk(s.model, `tok${i}${pad}`, null));
  const end = (): void => {
    if (res.destroyed) return;
    res.write(chunk(s.model, null, 'stop'));
    if (s.usage) res.write(chunk(s.model, null, null, { prompt_tokens: 7, completion_tokens: s.events, total_tokens: 7 + s.events }));
    over = true;
    counts.finished++;
    res.end('data: [DONE]\n\n');
  };
  if (s.then === 'end') end();
  else if (s.then === 'hold') held.add(end);
  else if (s.then === 'reset') {
    over = true;
    // Written first, so the events before it reach the gateway before the reset does.
    res.write('', () => res.socket?.resetAndDestroy());
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}

function json(res: ServerResponse, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

const server = createServer((req, res) => {
  const path = (req.url ?? '/').split('?')[0];
  if (req.method === 'POST') {
    readBody(req).then((text) => stream(res, scriptOf(text)), () => res.destroy());
    return;
  }
  req.resume();
  if (path === '/calls') return json(res, { ...counts, backlog: [...open].reduce((n, r) => n + r.writableLength, 0) });
  if (path === '/release') {
    const n = held.size;
    for (const end of held) end();
    held.clear();
    return json(res, { released: n });
  }
  if (path === '/v1/models') return json(res, { object: 'list', data: [{ id: 'stream-model', object: 'model', created: 1, owned_by: 'test' }] });
  json(res, { status: 'ok' });
});
server.keepAliveTimeout = 65_000;
server.listen(Number(process.env.AIP_HTTP_PORT ?? 8080), '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ msg: 'listening', port: (server.address() as AddressInfo).port })}\n`);
});
