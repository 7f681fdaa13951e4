// The gateway's HTTP server: each request is matched in the route table (routes.ts) and handed to
// what serves it: prediction calls to the call lifecycle (lifecycle.ts, then resolve.ts), the
// operations routes to plain handlers, the management routes to the Express side (management.ts,
// loaded on first use); 404 and 405 are answered from the table. With --auth kubernetes, /metrics
// and the management routes pass the gate first (prediction calls pass it in resolve.ts); the
// probes stay open. Also owns malformed HTTP (answers from strictHttp.ts), the server's timeouts,
// its connection limits (connections.ts), the probe listener (probes.ts), the gRPC surface's port
// (grpc/, whose calls come back into this server by its hop) and draining on shutdown.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Request, Response } from 'express';
import { ApiError, type Dialect } from '../errors.js';
import type { Store } from '../store/store.js';
import { sendError, sendWhole } from './respond.js';
import type { HandlerServices } from './call.js';
import { Calls } from './lifecycle.js';
import { HELD_WAIT_MS } from './demand.js';
import { endpointNotFound, serveEndpointCall, serveModelCall } from './resolve.js';
import { compileRoutes, DEMAND_PATH, routeTable, type Match, type Serve } from './routes.js';
import { buildManagementApp, type ManagementHandlers, type ServeManaged } from './management.js';
import { endpointResource } from './endpointResource.js';
import { readAccess, urlAccess, type Access } from './auth/access.js';
import { Refusal } from './auth/gate.js';
import { ConnectionLimit } from './connections.js';
import { checkRequestHead, clientErrorAnswer, listenOn, serverOptions, KEEP_ALIVE_TIMEOUT_MS, REQUEST_TIMEOUT_MS } from './strictHttp.js';
import { createProbeServer } from './probes.js';
import type { GrpcSurface } from './grpc/server.js';
import type { Hop } from './grpc/hop.js';


export interface GatewayOptions extends HandlerServices {
  /** Readiness besides draining (local mode: manifests loaded; cluster: caches synced). */
  ready?(): boolean;
  /** Serves GET /v1/projects/{p}/locations/{l}/endpoints/{e} (the Vertex Endpoint resource) when given. */
  resources?: Pick<Store, 'getEndpoint' | 'getDeployedModel'>;
  /** Local mode's status API (`/apis/prediction.predictgate.dev/v1/...`), when given. */
  statusApi?: ManagementHandlers;
}

export interface Gateway {
  server: Server;
  listen(port: number, host: string): Promise<number>;
  /** Starts the probe listener (/healthz and /readyz only, connections of its own: probes.ts). */
  listenProbes(port: number, host: string): Promise<number>;
  /** Starts the gRPC surface (grpc/server.ts) on its own port; its calls are made through this server. */
  listenGrpc(port: number, host: string, maxRequestBytes: number): Promise<number>;
  /**
   * Shuts down without losing a call: every answer from now on carries Connection: close (so each
   * connection ends after its next answer, and no client writes a request into a connection the
   * gateway then closes), connections idle for a second are closed, and new ones are still served
   * the same way. Once no connection is left, or after `graceMs`, the calls whose answers have not
   * started are answered 503 shutting_down and every connection is closed.
   */
  drain(graceMs: number): Promise<void>;
  /** Prediction calls started since the gateway began, and those in flight. */
  calls(): { started: number; inFlight: number };
}

/** The operations routes' JSON type, as Express's res.json() sent it. */
const OPS_JSON = 'application/json; charset=utf-8';

export function createGateway(opts: GatewayOptions): Gateway {
  const log = opts.logger;
  const calls = new Calls(opts);
  opts.metrics.watchBodyMemory(() => opts.memory.stats());
  opts.metrics.watchInFlight(() => calls.inFlight);
  const specs = routeTable({ statusApi: opts.statusApi !== undefined });
  const router = compileRoutes(specs);
  const management = managementSide(opts);
  const operations: Record<Extract<Serve, { kind: 'operation' }>['name'], (res: ServerResponse, req?: IncomingMessage) => void | Promise<void>> = {
    healthz: (res) => void sendWhole(res, 200, OPS_JSON, JSON.stringify({ status: 'ok' })),
    readyz: (res) => {
      const ok = !calls.draining && (opts.ready?.() ?? true);
      sendWhole(res, ok ? 200 : 503, OPS_JSON, JSON.stringify({ status: calls.draining ? 'draining' : ok ? 'ready' : 'starting' }));
    },
    metrics: async (res) => void sendWhole(res, 200, opts.metrics.registry.contentType, await opts.metrics.registry.metrics()),
    demand: async (res, req) => {
      const after = heldAfterOf(req?.url ?? '');
      if (after !== undefined) await opts.demand.waitForHeld(after, HELD_WAIT_MS, res);
      if (!res.destroyed) sendWhole(res, 200, OPS_JSON, JSON.stringify(opts.demand.report()));
    },
  };

  /** The gRPC surface, once listening (listenGrpc), and its hop into this server. */
  let grpc: GrpcSurface | undefined;
  let hop: Hop | undefined;
  const viaGrpc = (req: IncomingMessage): boolean => hop !== undefined && hop.owns(req.socket);

  function serve(req: IncomingMessage, res: ServerResponse, m: Extract<Match, { found: true }>): void {
    const { spec, params } = m;
    const s = spec.serve;
    switch (s.kind) {
      case 'endpointCall':
        void calls.run(req, res, { params, dialect: spec.dialect, method: s.verb, viaGrpc: viaGrpc(req), serve: (call) => serveEndpointCall(call, s.verb, s.byHost) });
        return;
      case 'modelCall':
        void calls.run(req, res, { params, dialect: spec.dialect, method: 'tfserving', viaGrpc: viaGrpc(req), serve: serveModelCall });
        return;
      case 'operation': {
        const operate = (): void => void Promise.resolve().then(() => operations[s.name](res, req)).catch((err: unknown) => {
          sendError(res, err, spec.dialect);
          log.error({ err, path: m.path }, 'operations route failed');
        });
        // The scrape and the demand read are the cluster's to ask for (RBAC nonResourceURLs); probes are anyone's.
        if ((s.name === 'metrics' || s.name === 'demand') && opts.gate.enabled) return guarded(req, res, urlAccess(s.name === 'metrics' ? '/metrics' : DEMAND_PATH), spec.dialect, operate);
        return operate();
      }
      case 'management': {
        const handler = management.handlers[s.name];
        if (!handler) return notFound(req, res, m.path, spec.dialect);
        const serveIt = (): void => void management.load().then((serveManaged) => serveManaged(req, res, handler, params), (err: unknown) => {
          sendError(res, err, spec.dialect);
          log.error({ err }, 'could not load the Express side');
        });
        if (!opts.gate.enabled) return serveIt();
        return guarded(req, res, managementAccess(s.name, params), spec.dialect, serveIt);
      }
    }
  }

  /** Serves a route once the gate let its caller in for `access`; else answers the refusal. */
  function guarded(req: IncomingMessage, res: ServerResponse, access: Access, dialect: Dialect, serveIt: () => void): void {
    // A refusal may come at once (thrown) or later (rejected): both are answered.
    new Promise((resolve) => resolve(opts.gate.check(req, access))).then(serveIt, (err: unknown) => {
      const api = sendError(res, err, dialect);
      log.info({ path: req.url, user: err instanceof Refusal ? err.user : undefined, status: api.httpStatus, code: api.code }, api.message);
    });
  }

  const limits = opts.clients;
  const connections = new ConnectionLimit({ total: limits.maxConnections, perClient: limits.maxConnectionsPerClient, totalName: 'MAX_CONNECTIONS', perClientName: 'MAX_CONNECTIONS_PER_CLIENT' });
  opts.metrics.watchConnections(() => connections.stats);
  const server = createServer(serverOptions(limits.headersTimeoutMs), (req, res) => {
    const socket = req.socket;
    // A refused connection's refusal is its only answer.
    if (connections.isRefused(socket)) return void req.resume();
    let state = open.get(socket);
    if (state === undefined) open.set(socket, (state = { open: 0, last: res, onIdle: undefined, idleSince: 0 }));
    state.open++;
    state.last = res;
    res.once('close', responseOver);
    // Draining: the client learns that this connection ends with this answer.
    if (calls.draining) res.setHeader('Connection', 'close');
    const bad = checkRequestHead(req);
    const m = router.match(req.method ?? '', req.url ?? '');
    if (bad) return void sendError(res, bad, m.found ? m.spec.dialect : m.dialect);
    if (m.found) return serve(req, res, m);
    if (m.malformed) {
      sendError(res, new ApiError('invalid_request', `the path ${m.path} has a malformed percent-escape`), m.dialect);
      return;
    }
    if (m.allowed.length) {
      const err = new ApiError('method_not_allowed', `${req.method} is not allowed on ${m.path}; it takes ${m.allowed.join(' or ')}`);
      err.headers = { Allow: m.allowed.join(', ') };
      sendError(res, err, m.dialect);
      return;
    }
    notFound(req, res, m.path, m.dialect);
  });
  connections.attach(server);
  // Malformed HTTP never reaches a handler: answer it with a JSON error too (Node's default is an empty 400).
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (connections.isRefused(socket) || err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const timedOut = err.code === 'ERR_HTTP_REQUEST_TIMEOUT';
    // A connection that never sent a byte has no request to answer: it is closed.
    if (timedOut && socket.bytesRead === 0) return void socket.destroy();
    const state = open.get(socket);
    const inHeaders = state === undefined || state.open === 0;
    const timeoutMessage = inHeaders
      ? `the request's headers did not arrive within ${limits.headersTimeoutMs / 1000} s (HEADERS_TIMEOUT_SECONDS)`
      : `the request did not arrive whole within ${REQUEST_TIMEOUT_MS / 1000} s`;
    const { text } = clientErrorAnswer(err, timeoutMessage);
    const answer = (): void => {
      if (!socket.writable) return void socket.destroy();
      socket.end(text);
    };
    if (inHeaders) return answer();
    // The request in flight broke off in its body (or timed out there): unless its answer has
    // started, this is its answer.
    const last = state.last;
    if (state.open === 1 && last !== undefined && !last.req.complete) return last.headersSent ? void socket.destroy() : answer();
    // A later request (pipelined) broke: the requests before it are answered first.
    state.onIdle = answer;
  });
  // A failed accept (out of descriptors despite the limits) is logged; it must not end the process.
  server.on('error', (err: NodeJS.ErrnoException) => {
    if (server.listening) log.error({ err }, 'the gateway could not accept a connection');
  });
  // Every connection, for the drain: it closes the idle ones and waits for the others to end.
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    open.set(socket, { open: 0, last: undefined, onIdle: undefined, idleSince: performance.now() });
    socket.once('close', () => sockets.delete(socket));
  });
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;

  const probes = createProbeServer({ answer: operations, headersTimeoutMs: limits.headersTimeoutMs, logger: log });

  return {
    server,
    calls: () => ({ started: calls.started, inFlight: calls.inFlight }),
    listen: (port, host) => listenOn(server, port, host),
    listenProbes: (port, host) => listenOn(probes.server, port, host),
    async listenGrpc(port, host, maxRequestBytes) {
      // Loaded on first use: a gateway without GRPC_PORT never loads grpc-js.
      const [{ Hop: HopClass }, { GrpcSurface: Surface }] = await Promise.all([import('./grpc/hop.js'), import('./grpc/server.js')]);
      hop = await HopClass.open(server);
      // A Value's protobuf form can take twice the bytes of its JSON: the REST side holds the JSON to maxRequestBytes.
      grpc = new Surface({ hop, connections, memory: opts.memory, maxReceiveBytes: 2 * maxRequestBytes, maxAnswerBytes: opts.maxResponseBytes, maxJsonDepth: opts.maxJsonDepth, registry: opts.metrics.registry, logger: log });
      return grpc.listen(port, host);
    },
    async drain(graceMs) {
      // gRPC: no new connection or call; those under way are REST calls on the hop, drained below.
      grpc?.drain();
      calls.startDraining();
      // A demand read waiting for a held call is answered now: its connection must not hold the drain.
      opts.demand.release();
      const deadline = performance.now() + graceMs;
      for (;;) {
        const now = performance.now();
        for (const socket of sockets) {
          const state = open.get(socket);
          if (state !== undefined && state.open === 0 && now - state.idleSince >= DRAIN_IDLE_CLOSE_MS) socket.destroy();
        }
        if (sockets.size === 0 || now >= deadline) break;
        await new Promise((resolve) => setTimeout(resolve, Math.min(DRAIN_POLL_MS, deadline - now)));
      }
      // Time is up: the calls not yet answered get their 503 (given a moment to go out), then every
      // connection is closed.
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      await Promise.race([calls.abandon(), new Promise((resolve) => setTimeout(resolve, DRAIN_LAST_ANSWERS_MS).unref())]);
      server.closeAllConnections();
      await Promise.all([closed, probes.close(), grpc?.close()]);
    },
  };
}

/** `?heldAfter=N` of a demand read: wait until more than N calls were held; absent: answer at once. */
function heldAfterOf(url: string): number | undefined {
  const q = url.indexOf('?');
  if (q < 0) return undefined;
  const raw = new URLSearchParams(url.slice(q + 1)).get('heldAfter');
  if (raw === null) return undefined;
  if (!/^\d{1,15}$/.test(raw)) throw new ApiError('invalid_request', `heldAfter must be a count of held calls (a non-negative integer), got ${JSON.stringify(raw.slice(0, 40))}`);
  return Number(raw);
}

/** While draining: a connection idle this long is closed (its client is not about to send on it). */
const DRAIN_IDLE_CLOSE_MS = 1000;
const DRAIN_POLL_MS = 100;
/** At the drain's end: how long the last 503 answers get to go out before the connections close. */
const DRAIN_LAST_ANSWERS_MS = 1000;

/**
 * Responses not yet over, per connection: malformed HTTP on a connection with some is answered once
 * they are over (an answer now would land inside theirs). `last` is the newest response.
 */
interface SocketResponses {
  open: number;
  last: ServerResponse | undefined;
  onIdle: (() => void) | undefined;
  /** performance.now() when the last response ended (or the connection opened). */
  idleSince: number;
}

const open = new WeakMap<Socket, SocketResponses>();

/** A response's 'close' (one listener for all): the connection has one fewer response open. */
function responseOver(this: ServerResponse): void {
  const state = open.get(this.req.socket);
  if (state === undefined || --state.open !== 0) return;
  state.idleSince = performance.now();
  state.onIdle?.();
}

/** What a management route asks of its caller: to read the Endpoint, or the status objects listed or named. */
function managementAccess(name: Extract<Serve, { kind: 'management' }>['name'], params: Record<string, string>): Access {
  if (name === 'endpointResource') return readAccess('endpoints', params.project, params.endpoint);
  return readAccess(params.plural, params.namespace ?? '', name === 'statusObject' ? params.name : '');
}

/** The 404 of a path no route serves. */
function notFound(req: IncomingMessage, res: ServerResponse, path: string, dialect: Dialect): void {
  sendError(res, new ApiError('route_not_found', `no route for ${req.method} ${path}; prediction calls are POST /v1/projects/{project}/locations/{location}/endpoints/{endpoint}:predict or :rawPredict`), dialect);
}

/** The management routes' handlers from the gateway's options, and the Express side they run on, built on first use. */
function managementSide(opts: GatewayOptions): { handlers: ManagementHandlers; load(): Promise<ServeManaged> } {
  const handlers: ManagementHandlers = { ...opts.statusApi };
  const resources = opts.resources;
  if (resources) {
    handlers.endpointResource = (req: Request, res: Response) => {
      const { project, location, endpoint } = req.params as Record<string, string>;
      const ep = resources.getEndpoint(`${project}/${endpoint}`);
      if (!ep) throw endpointNotFound(project, endpoint);
      res.json(endpointResource(ep, (key) => resources.getDeployedModel(key), { project, location }));
    };
  }
  let app: Promise<ServeManaged> | undefined;
  return { handlers, load: () => (app ??= import('express').then((m) => buildManagementApp(m.default, opts.logger))) };
}
