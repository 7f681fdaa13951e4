// The "Node floor" of the benchmark: a minimal node:http reverse proxy that sends each request to the
// upstream of its path prefix (longest match; 404 when none) over a keep-alive http.Agent, piping the
// request and the answer. No parsing, no validation.
// Run as its own process: `PORT=<p> ROUTES=<prefix>=<host>:<port>,... node dist/test/bench/bareProxy.js`
// (e.g. ROUTES=/v1/models/echo=127.0.0.1:9001,/invocations=127.0.0.1:9002), or UPSTREAM=<host>:<port>
// for one upstream behind every path.

import http from 'node:http';
import { fileURLToPath } from 'node:url';

const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'upgrade', 'te', 'trailer'];

export interface BareRoute {
  prefix: string;
  host: string;
  port: number;
}

function stripHopByHop(h: http.IncomingHttpHeaders): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = { ...h };
  for (const k of HOP_BY_HOP) delete out[k];
  return out;
}

/** `prefix=host:port,...` (or a lone `host:port` for prefix `/`); throws on a malformed entry. */
export function parseRoutes(text: string): BareRoute[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((entry) => {
      const eq = entry.lastIndexOf('=');
      const prefix = eq >= 0 ? entry.slice(0, eq) : '/';
      const [host, port] = entry.slice(eq + 1).split(':');
      if (!prefix.startsWith('/') || !host || !Number(port)) throw new Error(`bad route "${entry}"`);
      return { prefix, host, port: Number(port) };
    });
}

export function startBareProxy(port: number, routes: BareRoute[]): http.Server {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const byLength = [...routes].sort((a, b) => b.prefix.length - a.prefix.length);
  const server = http.createServer((req, res) => {
    const url = req.url ?? '/';
    const route = byLength.find((r) => url.startsWith(r.prefix));
    if (!route) {
      req.resume();
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('{"error":"no upstream for this path"}');
      return;
    }
    const up = http.request(
      {
        host: route.host,
        port: route.port,
        method: req.method,
        path: url,
        headers: stripHopByHop(req.headers),
        agent,
      },
      (ures) => {
        res.writeHead(ures.statusCode ?? 502, stripHopByHop(ures.headers));
        ures.pipe(res);
        ures.on('error', () => res.destroy());
      },
    );
    up.on('error', () => {
      if (res.headersSent) {
        res.destroy();
      } else {
        res.writeHead(502, { 'content-type': 'application/json' });
        res.end('{"error":"upstream unavailable"}');
      }
    });
    // A client that goes away mid-call must not leave the upstream call (and its pooled socket) hanging.
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    req.pipe(up);
  });
  server.listen(port, '127.0.0.1');
  return server;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const port = Number(process.env.PORT);
  let routes: BareRoute[] = [];
  try {
    routes = parseRoutes(process.env.ROUTES ?? process.env.UPSTREAM ?? '');
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  }
  if (!port || routes.length === 0) {
    process.stderr.write('usage: PORT=<port> ROUTES=<prefix>=<host>:<port>,... (or UPSTREAM=<host>:<port>) node bareProxy.js\n');
    process.exit(2);
  }
  startBareProxy(port, routes);
}
