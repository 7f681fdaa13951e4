// A misbehaving KServe-v1-style model server for gateway tests, run as its own process:
//   FAULT=<kind> AIP_HTTP_PORT=<port|0> node dist/test/helpers/faultyModel.js
// Owns: the catalog of faults (env FAULT), the health answer (env FAULT_UNHEALTHY), the
// `{"msg":"listening","port":N}` line on stdout that tells the parent which port it bound, a count
// of the predict calls it served and of those it holds (GET /calls: `{"predicts":N,"held":M}`;
// FAULT=hold holds every predict until GET /release answers them all), and SIGUSR2, on which it stops
// listening and closes its connections but keeps running (a replica that refuses connections while
// its process lives: nothing exits, so nothing tells local mode it went).
// A script, not a library: importing it starts a server. Any POST path is predict; GET /health (and AIP_HEALTH_ROUTE, when set) is health.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseJson, stringifyJson } from '../../src/payload/json.js';

const FAULTS = ['none', 'hold', 'slow', 'status500', 'garbage', 'html500', 'wrong-count', 'reset', 'large', 'large-chunked'] as const;
type Fault = (typeof FAULTS)[number];

const fault = (process.env.FAULT ?? 'none') as Fault;
if (!(FAULTS as readonly string[]).includes(fault)) {
  process.stderr.write(`faultyModel: unknown FAULT "${fault}"; one of ${FAULTS.join(', ')}\n`);
  process.exit(2);
}
const delayMs = Number(process.env.FAULT_DELAY_MS ?? 5000);
/** large, large-chunked: about how many bytes the answer has. */
const answerBytes = Number(process.env.FAULT_ANSWER_BYTES ?? 100_000);
const unhealthy = process.env.FAULT_UNHEALTHY === '1';
const port = Number(process.env.AIP_HTTP_PORT ?? 8080);
const healthRoutes = new Set(['/health', process.env.AIP_HEALTH_ROUTE || '/health']);

function send(res: ServerResponse, status: number, contentType: string, body: string): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}
const sendJson = (res: ServerResponse, status: number, value: unknown): void =>
  send(res, status, 'application/json', stringifyJson(value));

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** Well-behaved predict: predictions = instances. */
function echoInstances(body: string, res: ServerResponse): void {
  let doc: unknown;
  try {
    doc = parseJson(body, true);
  } catch (err) {
    sendJson(res, 400, { error: err instanceof Error ? err.message : String(err) });
    return;
  }
  const instances = typeof doc === 'object' && doc !== null ? (doc as Record<string, unknown>).instances : undefined;
  if (!Array.isArray(instances)) {
    sendJson(res, 400, { error: 'instances: expected a list' });
    return;
  }
  sendJson(res, 200, { predictions: instances });
}

/** One prediction per instance: strings that make the answer about `answerBytes` long. */
function largeAnswer(body: string): string {
  const doc = parseJson(body, true) as { instances?: unknown[] };
  const n = Array.isArray(doc.instances) ? Math.max(1, doc.instances.length) : 1;
  return stringifyJson({ predictions: Array.from({ length: n }, () => 'x'.repeat(Math.ceil(answerBytes / n))) });
}

let predicts = 0;
/** FAULT=hold: the calls waiting for GET /release. */
const held = new Set<() => void>();

async function predict(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = await readBody(req);
  predicts++;
  switch (fault) {
    case 'none':
      echoInstances(body, res);
      return;
    case 'hold': {
      const answer = (): void => echoInstances(body, res);
      held.add(answer);
      res.on('close', () => held.delete(answer));
      return;
    }
    case 'slow': {
      const timer = setTimeout(() => echoInstances(body, res), delayMs);
      res.on('close', () => clearTimeout(timer));
      return;
    }
    case 'status500':
      sendJson(res, 500, { error: 'model exploded' });
      return;
    case 'garbage':
      send(res, 200, 'application/json', 'not json at all');
      return;
    case 'html500':
      send(res, 500, 'text/html', '<html>oops</html>');
      return;
    case 'wrong-count':
      sendJson(res, 200, { predictions: [1] });
      return;
    case 'reset': {
      const full = '{"predictions": [1, 2, 3, 4, 5, 6, 7, 8]}';
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(full) });
      res.write(full.slice(0, 17));
      // Let the headers and the partial body reach the client, then cut the connection.
      setTimeout(() => res.socket?.destroy(), 20);
      return;
    }
    case 'large':
      send(res, 200, 'application/json', largeAnswer(body));
      return;
    case 'large-chunked': {
      // No Content-Length: the size shows only as the chunks come.
      const answer = Buffer.from(largeAnswer(body));
      res.writeHead(200, { 'Content-Type': 'application/json' });
      for (let i = 0; i < answer.length; i += 16 * 1024) res.write(answer.subarray(i, i + 16 * 1024));
      res.end();
      return;
    }
  }
}

const server = createServer((req, res) => {
  const path = (req.url ?? '/').split('?')[0];
  if (req.method === 'GET' && healthRoutes.has(path)) {
    req.resume();
    if (unhealthy) sendJson(res, 503, { error: 'model unhealthy' });
    else sendJson(res, 200, { status: 'healthy' });
    return;
  }
  if (req.method === 'POST') {
    predict(req, res).catch((err: unknown) => {
      sendJson(res, 500, { error: err instanceof Error ? err.message : String(err) });
    });
    return;
  }
  req.resume();
  if (req.method === 'GET' && path === '/calls') {
    sendJson(res, 200, { predicts, held: held.size });
    return;
  }
  if (req.method === 'GET' && path === '/release') {
    const released = [...held];
    held.clear();
    for (const answer of released) answer();
    sendJson(res, 200, { released: released.length });
    return;
  }
  sendJson(res, 404, { error: `no route for ${req.method} ${path}` });
});
server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;
server.on('clientError', (_err, socket) => socket.destroy());

let bound = 0;
server.listen(port, '127.0.0.1', () => {
  bound = (server.address() as AddressInfo).port;
  process.stdout.write(`${JSON.stringify({ msg: 'listening', port: bound })}\n`);
});

const stop = (): void => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
// Refuses connections from now on, and stays alive (exits on SIGTERM as before).
process.on('SIGUSR2', () => {
  // Nothing else would keep the process alive once the server is closed.
  setInterval(() => undefined, 1 << 30);
  server.close();
  server.closeAllConnections();
  process.stdout.write(`${JSON.stringify({ msg: 'refusing', port: bound })}\n`);
});
