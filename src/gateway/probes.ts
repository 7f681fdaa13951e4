// The probe listener (PROBE_PORT): a second HTTP server in the gateway's process that serves only
// GET/HEAD /healthz and /readyz, with a connection limit of its own (PROBE_MAX_CONNECTIONS), so the
// kubelet's probes are answered while the main port is at its connection limit or busy with
// hostile clients. Nothing else is served there: not the prediction routes, not /metrics.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { ApiError } from '../errors.js';
import type { Logger } from '../log.js';
import { sendError } from './respond.js';
import { ConnectionLimit } from './connections.js';
import { clientErrorAnswer, serverOptions } from './strictHttp.js';

/** Most connections the probe listener keeps open at once. */
export const PROBE_MAX_CONNECTIONS = 32;

export interface ProbeServerOptions {
  /** The main server's own answers to the probes (server.ts), so both ports answer alike. */
  answer: Record<'healthz' | 'readyz', (res: ServerResponse) => void | Promise<void>>;
  headersTimeoutMs: number;
  logger: Logger;
}

export function createProbeServer(opts: ProbeServerOptions): { server: Server; close(): Promise<void> } {
  const connections = new ConnectionLimit({ total: PROBE_MAX_CONNECTIONS, perClient: 0, totalName: 'the probe listener\'s own limit', perClientName: '' });
  const server = createServer(serverOptions(opts.headersTimeoutMs), (req, res) => {
    if (connections.isRefused(req.socket)) return void req.resume();
    const path = (req.url ?? '').split('?')[0].toLowerCase().replace(/(.)\/$/, '$1');
    const probe = path === '/healthz' || path === '/readyz';
    if (!probe) return void sendError(res, new ApiError('route_not_found', `the probe port serves GET /healthz and /readyz only, not ${req.method} ${path}`), 'vertex');
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      const err = new ApiError('method_not_allowed', `${req.method} is not allowed on ${path}; it takes GET or HEAD`);
      err.headers = { Allow: 'GET, HEAD' };
      return void sendError(res, err, 'vertex');
    }
    void opts.answer[path === '/healthz' ? 'healthz' : 'readyz'](res);
  });
  connections.attach(server);
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (connections.isRefused(socket) || err.code === 'ECONNRESET' || !socket.writable || (err.code === 'ERR_HTTP_REQUEST_TIMEOUT' && socket.bytesRead === 0)) return void socket.destroy();
    socket.end(clientErrorAnswer(err, `the request's headers did not arrive within ${opts.headersTimeoutMs / 1000} s (HEADERS_TIMEOUT_SECONDS)`).text);
  });
  server.on('error', (err: Error) => {
    if (server.listening) opts.logger.error({ err }, 'the probe listener could not accept a connection');
  });
  return {
    server,
    close: () => new Promise((resolve) => {
      if (!server.listening) return resolve();
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}
