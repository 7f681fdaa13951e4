// The "Node floor" of the benchmark: a minimal node:http reverse proxy that pipes each request to one
// upstream over a keep-alive http.Agent and pipes the answer back. No parsing, no validation.
// Run as its own process: `PORT=<p> UPSTREAM=127.0.0.1:<q> node dist/test/bench/bareProxy.js`.

import http from 'node:http';
import { fileURLToPath } from 'node:url';

const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'upgrade', 'te', 'trailer'];

function stripHopByHop(h: http.IncomingHttpHeaders): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = { ...h };
  for (const k of HOP_BY_HOP) delete out[k];
  return out;
}

export function startBareProxy(port: number, upstreamHost: string, upstreamPort: number): http.Server {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const server = http.createServer((req, res) => {
    const up = http.request(
      {
        host: upstreamHost,
        port: upstreamPort,
        method: req.method,
        path: req.url,
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
  const [host, upPort] = (process.env.UPSTREAM ?? '').split(':');
  if (!port || !host || !Number(upPort)) {
    process.stderr.write('usage: PORT=<port> UPSTREAM=<host>:<port> node bareProxy.js\n');
    process.exit(2);
  }
  startBareProxy(port, host, Number(upPort));
}
