// The instrumented streaming model of `npm run bench:llm`: an OpenAI-shaped server (POST
// /v1/chat/completions answers server-sent events: a role chunk at once, then one token event every
// PROBE_EVENT_INTERVAL_MS, 20 by default, until max_tokens, then a finish chunk and [DONE]) that
// records, per X-Request-Id, the moment its answer closed before it was finished (the client, or a
// proxy in between, went away): process.hrtime.bigint(), CLOCK_MONOTONIC, which the load generator
// reads too, so the two processes' times compare. GET /bench/closes gives them ({id: ns as a
// string}) and forgets them; GET /health answers 200. Run as a process: AIP_HTTP_PORT=<p> node
// dist/test/bench/sseProbe.js (local mode runs it as a DeployedModel's command).

import http from 'node:http';
import { fileURLToPath } from 'node:url';

interface ProbeOptions {
  port: number;
  intervalMs: number;
}

export function startSseProbe(o: ProbeOptions): http.Server {
  let closes = new Map<string, bigint>();
  let unnamed = 0;
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'GET' && path === '/health') {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
      return;
    }
    if (req.method === 'GET' && path === '/bench/closes') {
      req.resume();
      const doc = JSON.stringify({ closes: Object.fromEntries([...closes].map(([k, v]) => [k, v.toString()])), unnamed });
      closes = new Map();
      unnamed = 0;
      res.writeHead(200, { 'content-type': 'application/json' }).end(doc);
      return;
    }
    if (req.method !== 'POST' || path !== '/v1/chat/completions') {
      req.resume();
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"no such route"}}');
      return;
    }
    const idHeader = req.headers['x-request-id'];
    const id = typeof idHeader === 'string' ? idHeader : undefined;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let maxTokens = 16;
      try {
        const b = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { max_tokens?: unknown };
        if (typeof b.max_tokens === 'number' && b.max_tokens >= 1) maxTokens = Math.floor(b.max_tokens);
      } catch {
        /* the defaults */
      }
      let timer: NodeJS.Timeout | undefined;
      res.on('close', () => {
        clearTimeout(timer);
        if (res.writableFinished) return;
        const at = process.hrtime.bigint();
        if (id === undefined) unnamed++;
        else closes.set(id, at);
      });
      const chunk = (delta: Record<string, string>, finish: string | null): string =>
        `data: ${JSON.stringify({ id: 'chatcmpl-probe', object: 'chat.completion.chunk', created: 0, model: 'sse-probe', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write(chunk({ role: 'assistant', content: '' }, null));
      let made = 0;
      const tick = (): void => {
        if (res.destroyed) return;
        res.write(chunk({ content: made === 0 ? 'tok' : ' tok' }, null));
        if (++made < maxTokens) timer = setTimeout(tick, o.intervalMs);
        else res.end(`${chunk({}, 'length')}data: [DONE]\n\n`);
      };
      timer = setTimeout(tick, o.intervalMs);
    });
  });
  server.keepAliveTimeout = 65_000;
  server.listen(o.port, '127.0.0.1');
  return server;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const port = Number(process.env.AIP_HTTP_PORT ?? process.env.PORT);
  if (!port) {
    process.stderr.write('usage: AIP_HTTP_PORT=<port> [PROBE_EVENT_INTERVAL_MS=20] node sseProbe.js\n');
    process.exit(2);
  }
  startSseProbe({ port, intervalMs: Number(process.env.PROBE_EVENT_INTERVAL_MS ?? 20) });
  process.on('SIGTERM', () => process.exit(0));
}
