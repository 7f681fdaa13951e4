// The gateway's HTTP server. Prediction calls (the hot path) are matched by a few string checks
// and served by plain handlers on node:http, and so are the operations routes (/healthz, /readyz,
// /metrics); everything else (the Endpoint resource, local-mode status API, 404/405) goes through an
// Express app with the one error middleware, which is loaded on the first such request: kubelet
// probes and Prometheus scrapes never load it, and its 3.3 MB of heap would make every full
// collection of a busy gateway longer (README "Performance"). The benchmark table in the README is
// why the hot path skips Express routing. Also owns draining on shutdown.
import { STATUS_CODES, createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { randomUUID } from 'node:crypto';
import type { Express, NextFunction, Request, Response } from 'express';
import { ApiError, CATALOG, errorBody, type Dialect } from '../errors.js';
import { destinationById, invalidManifest, pickDestination } from './routing.js';
import { sendError, sendWhole } from './respond.js';
import { handlePredict } from './predict.js';
import { handleRawPredict } from './rawPredict.js';
import { handleExplain } from './explain.js';
import { handleTfServing } from './tfServing.js';
import { handleGraphStorm } from './graphstorm.js';
import type { Call, CallMethod, Handler, HandlerServices } from './call.js';
import { endpointResource } from './endpointResource.js';
import type { Store } from '../store/store.js';

export interface GatewayOptions extends HandlerServices {
  /** Readiness besides draining (local mode: manifests loaded). */
  ready?(): boolean;
  /** Extra non-hot routes (local mode's status API). */
  extend?(app: Express): void;
  /** Serves GET /v1/projects/{p}/locations/{l}/endpoints/{e} (the Vertex Endpoint resource) when given. */
  resources?: Pick<Store, 'getEndpoint' | 'getDeployedModel'>;
}

export interface Gateway {
  server: Server;
  listen(port: number, host: string): Promise<number>;
  /** Stops accepting, lets in-flight calls finish (up to `graceMs`), closes idle connections. */
  drain(graceMs: number): Promise<void>;
  /** Prediction calls started since the gateway began, and those in flight. */
  calls(): { started: number; inFlight: number };
}

type EndpointMethod = Exclude<CallMethod, 'tfserving'>;
const HANDLERS: Record<EndpointMethod, Handler> = { predict: handlePredict, rawPredict: handleRawPredict, explain: handleExplain };

interface Target {
  dialect: Dialect;
  method: EndpointMethod;
  /** Vertex: namespace and endpoint name; GDC: null (chosen by Host). */
  namespace: string | null;
  endpoint: string;
}

const REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

/** The operations routes' JSON type, as Express's res.json() sent it. */
const OPS_JSON = 'application/json; charset=utf-8';

/** A call to the TF Serving surface of one DeployedModel: `/tfserving/{namespace}/{name}` + a TF Serving path. */
interface TfServingTarget {
  dialect: 'tfserving';
  method: 'tfserving';
  namespace: string;
  name: string;
  /** The TF Serving path and query, e.g. `/v1/models/half_plus_two:predict`. */
  path: string;
}

export const TF_SERVING_PREFIX = '/tfserving/';

/** Recognises `/tfserving/{namespace}/{name}/v1/models...` (GET or POST). */
export function matchTfServing(url: string): TfServingTarget | null {
  if (!url.startsWith(TF_SERVING_PREFIX)) return null;
  const m = /^\/tfserving\/([^/?]+)\/([^/?]+)(\/v1\/models(?:[/:?].*)?)$/.exec(url);
  if (!m) return null;
  const namespace = decodePart(m[1]);
  const name = decodePart(m[2]);
  if (namespace === null || name === null) return null;
  return { dialect: 'tfserving', method: 'tfserving', namespace, name, path: m[3] };
}

/** Request header that sends a call to one deployed model of the Endpoint, whatever the traffic split says. */
export const PIN_HEADER = 'x-predictgate-deployed-model-id';



/** Recognises a prediction call's path: Vertex `/v1/projects/P/locations/L/endpoints/E:method` or GDC `/v1/model:method`. */
export function matchPrediction(url: string): Target | null {
  const q = url.indexOf('?');
  const path = q >= 0 ? url.slice(0, q) : url;
  const colon = path.lastIndexOf(':');
  if (colon < 0) return null;
  const verb = path.slice(colon + 1);
  if (verb !== 'predict' && verb !== 'rawPredict' && verb !== 'explain') return null;
  const head = path.slice(0, colon);
  if (head === '/v1/model') return { dialect: 'gdc', method: verb, namespace: null, endpoint: '' };
  const parts = head.split('/');
  // ['', 'v1', 'projects', P, 'locations', L, 'endpoints', E]
  if (parts.length !== 8 || (parts[1] !== 'v1' && parts[1] !== 'v1beta1') || parts[2] !== 'projects' || parts[4] !== 'locations' || parts[6] !== 'endpoints') return null;
  if (!parts[3] || !parts[5] || !parts[7]) return null;
  const namespace = decodePart(parts[3]);
  const endpoint = decodePart(parts[7]);
  if (namespace === null || endpoint === null) return null;
  return { dialect: 'vertex', method: verb, namespace, endpoint };
}

/** A percent-decoded path segment, or null when its escapes are malformed (then no route matches). */
function decodePart(part: string): string | null {
  if (!part.includes('%')) return part;
  try {
    return decodeURIComponent(part);
  } catch {
    return null;
  }
}

export function createGateway(opts: GatewayOptions): Gateway {
  const svc: HandlerServices = opts;
  opts.metrics.watchBodyMemory(() => opts.memory.stats());
  opts.metrics.watchInFlight(() => inFlight);
  const log = opts.logger;
  let draining = false;
  let inFlight = 0;
  let started = 0;
  let idle: (() => void) | null = null;

  /** Endpoint calls (predict, rawPredict, explain): the Endpoint, then the deployed model, then the handler. */
  async function endpointCall(req: IncomingMessage, res: ServerResponse, call: Call, target: Target): Promise<void> {
    const table = opts.routes();
    const route = target.namespace === null ? table.byHost(req.headers.host ?? '') : table.byName(target.namespace, target.endpoint);
    if (!route) throw notFound(target, req.headers.host);
    call.endpoint = `${route.namespace}/${route.name}`;
    if (route.problems.length) throw invalidManifest('Endpoint', route.namespace, route.name, route.problems);
    const pinned = req.headers[PIN_HEADER];
    const dest = typeof pinned === 'string' ? destinationById(route, pinned, PIN_HEADER) : pickDestination(route, opts.random);
    if (!dest) {
      throw new ApiError('no_ready_destination', `endpoint ${route.name} has no Ready deployed model with traffic` +
        (route.allDeployedModelIds.length ? ` (deployed models: ${route.allDeployedModelIds.join(', ')})` : ' (it names no existing DeployedModel)'));
    }
    call.deployedModelId = dest.deployedModelId;
    // predict on a graphstorm model speaks GraphStorm, errors included.
    const graphStorm = target.method === 'predict' && dest.framework === 'graphstorm';
    if (graphStorm) call.dialect = 'graphstorm';
    await (graphStorm ? handleGraphStorm : HANDLERS[target.method])(req, res, call, route, dest, svc);
  }

  /** TF Serving surface calls: the DeployedModel named in the path, then the pass-through. */
  async function modelCall(req: IncomingMessage, res: ServerResponse, call: Call, target: TfServingTarget): Promise<void> {
    const model = opts.routes().model(target.namespace, target.name);
    if (!model) throw new ApiError('endpoint_not_found', `no DeployedModel ${target.name} in namespace ${target.namespace}`);
    call.deployedModelId = model.deployedModelId;
    if (model.problems.length) throw invalidManifest('DeployedModel', target.namespace, target.name, model.problems);
    await handleTfServing(req, res, call, model, target.path, svc);
  }

  async function serveCall(req: IncomingMessage, res: ServerResponse, target: Target | TfServingTarget): Promise<void> {
    const header = req.headers['x-request-id'];
    const call: Call = {
      id: typeof header === 'string' && REQUEST_ID.test(header) ? header : randomUUID(),
      dialect: target.dialect,
      method: target.method,
      endpoint: '-',
      deployedModelId: '-',
      startNs: process.hrtime.bigint(),
      requestBytes: 0,
      lease: opts.memory.lease(),
      cancel: { requested: false },
    };
    // The lease (bodyMemory.ts) ends when both the handler and the response are over ('close'
    // follows 'finish' when the answer was handed over).
    res.once('close', () => {
      // Closed before the answer was handed over: the client left, or the gateway aborted a broken
      // answer (then its headers were out and the model call has failed already). A call still
      // waiting for memory or for the model's answer is cancelled.
      if (!res.writableFinished) {
        call.lease.clientLeft();
        if (!res.headersSent) {
          call.cancel.requested = true;
          call.cancel.onCancel?.();
        }
      }
      call.lease.responseOver(res.writableFinished);
    });
    res.setHeader('X-Request-Id', call.id);
    if (draining) res.shouldKeepAlive = false;
    inFlight++;
    started++;
    let status = 200;
    try {
      if (target.method === 'tfserving') await modelCall(req, res, call, target as TfServingTarget);
      else await endpointCall(req, res, call, target as Target);
      // An answer that could not be delivered (the client left first) counts as 499, not 200.
      status = res.destroyed && !res.writableFinished ? CATALOG.client_closed.http : res.statusCode;
    } catch (err) {
      // A client that left before its answer started (its model call then cancelled) is a 499,
      // whatever the cancelled call failed with; so is a client_closed from the transports, and
      // anything that is not an ApiError on a dead socket (a request body cut off).
      const clientGone = call.cancel.requested || (err instanceof ApiError ? err.code === 'client_closed' : req.socket.destroyed);
      const api = clientGone ? new ApiError('client_closed', 'the client closed the connection before the answer was complete') : sendError(res, err, call.dialect, call.id);
      if (clientGone) res.destroy();
      status = api.httpStatus;
      const level = clientGone ? 'debug' : api.httpStatus >= 500 ? 'warn' : 'info';
      log[level]({ requestId: call.id, endpoint: call.endpoint, deployedModelId: call.deployedModelId, method: call.method, status, code: api.code, err: api.code === 'internal' ? err : undefined }, api.message);
    } finally {
      const seconds = Number(process.hrtime.bigint() - call.startNs) / 1e9;
      opts.metrics.finished({ endpoint: call.endpoint, deployedModel: call.deployedModelId, method: call.method }, status, seconds);
      opts.metrics.bytes(call.method, call.requestBytes, call.responseBytes);
      log.debug({ requestId: call.id, endpoint: call.endpoint, deployedModelId: call.deployedModelId, method: call.method, status, ms: Math.round(seconds * 1000) }, 'call');
      call.lease.handlerOver();
      if (--inFlight === 0 && idle) idle();
    }
  }

  /** The Express side, built when it is first needed. */
  function buildApp(express: typeof import('express')): Express {
    const app = express();
    app.disable('x-powered-by');
    app.set('etag', false);
    // The Vertex Endpoint resource, which the SDKs GET before predicting (not the hot path).
    app.get(/^\/v1(?:beta1)?\/projects\/([^/]+)\/locations\/([^/]+)\/endpoints\/([^/:]+)$/, (req: Request, res: Response) => {
      const params = req.params as unknown as Record<string, string>;
      const [project, location, name] = [params[0], params[1], params[2]];
      const ep = opts.resources?.getEndpoint(`${project}/${name}`);
      if (!ep) throw endpointNotFound(project, name);
      res.json(endpointResource(ep, (key) => opts.resources?.getDeployedModel(key), { project, location }));
    });
    opts.extend?.(app);
    app.use((req: Request) => {
      if (matchPrediction(req.originalUrl) !== null) {
        throw new ApiError('method_not_allowed', `${req.method} is not allowed on ${req.path}; prediction calls use POST`);
      }
      throw new ApiError('route_not_found', `no route for ${req.method} ${req.path}; prediction calls are POST /v1/projects/{project}/locations/{location}/endpoints/{endpoint}:predict or :rawPredict`);
    });
    // The one error middleware of the Express side.
    app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
      // Express's own 4xx errors (a malformed URI, say) are the caller's, not a gateway bug.
      const status = (err as { status?: unknown }).status;
      const known = !(err instanceof ApiError) && typeof status === 'number' && status >= 400 && status < 500
        ? new ApiError('invalid_request', `${(err as Error).message}`, status)
        : err;
      const api = sendError(res, known, req.path.startsWith('/v1/model') ? 'gdc' : 'vertex');
      if (api.code === 'internal') log.error({ err, path: req.path }, 'unhandled error');
    });
    return app;
  }

  let app: Promise<Express> | undefined;
  const appReady = (): Promise<Express> => (app ??= import('express').then((m) => buildApp(m.default)));

  /** The operations routes, served without Express (GET and HEAD, any query). */
  const OPS = new Map<string, (res: ServerResponse) => void | Promise<void>>([
    ['/healthz', (res) => void sendWhole(res, 200, OPS_JSON, JSON.stringify({ status: 'ok' }))],
    ['/readyz', (res) => {
      const ok = !draining && (opts.ready?.() ?? true);
      sendWhole(res, ok ? 200 : 503, OPS_JSON, JSON.stringify({ status: draining ? 'draining' : ok ? 'ready' : 'starting' }));
    }],
    ['/metrics', async (res) => void sendWhole(res, 200, opts.metrics.registry.contentType, await opts.metrics.registry.metrics())],
  ]);

  const server = createServer((req, res) => {
    if (req.method === 'POST' && req.url !== undefined) {
      const target = matchPrediction(req.url);
      if (target !== null) {
        void serveCall(req, res, target);
        return;
      }
    }
    if ((req.method === 'GET' || req.method === 'POST') && req.url?.startsWith(TF_SERVING_PREFIX)) {
      const target = matchTfServing(req.url);
      if (target !== null) {
        void serveCall(req, res, target);
        return;
      }
    }
    if (req.method === 'GET' || req.method === 'HEAD') {
      const url = req.url ?? '';
      const q = url.indexOf('?');
      // As Express matched them: any letter case, one trailing slash allowed.
      let path = (q < 0 ? url : url.slice(0, q)).toLowerCase();
      if (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1);
      const op = OPS.get(path);
      if (op !== undefined) {
        Promise.resolve(op(res)).catch((err: unknown) => {
          sendError(res, err, 'vertex');
          log.error({ err, path: url }, 'operations route failed');
        });
        return;
      }
    }
    appReady().then((a) => a(req, res), (err: unknown) => {
      sendError(res, err, 'vertex');
      log.error({ err }, 'could not load the Express side');
    });
  });
  // Malformed HTTP never reaches a handler: answer it with a JSON error too (Node's default is an empty 400).
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    const body = errorBody(new ApiError('invalid_request', `malformed HTTP request (${err.code ?? 'parse error'})`, status), 'vertex');
    socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  });
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  // A body that stops arriving does not hold a connection and an in-flight slot for ever.
  server.requestTimeout = 300_000;

  return {
    server,
    calls: () => ({ started, inFlight }),
    listen(port, host) {
      return new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          resolve((server.address() as AddressInfo).port);
        });
      });
    },
    async drain(graceMs) {
      draining = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        idle?.();
      }, graceMs);
      // Connections that go idle are closed; a call that arrives on one first is still served.
      for (;;) {
        server.closeIdleConnections();
        if (inFlight === 0 || timedOut) break;
        await new Promise<void>((resolve) => (idle = resolve));
        idle = null;
      }
      clearTimeout(timer);
      server.closeAllConnections();
      await closed;
    },
  };
}

function notFound(target: Target, host: string | undefined): ApiError {
  if (target.namespace === null) {
    return new ApiError('endpoint_not_found', `no endpoint has the FQDN ${JSON.stringify(host ?? '')}; GDC-form calls choose the endpoint by the Host header ({endpoint}.{namespace}.{domain})`);
  }
  return endpointNotFound(target.namespace, target.endpoint);
}

function endpointNotFound(project: string, endpoint: string): ApiError {
  return new ApiError('endpoint_not_found', `endpoint ${endpoint} not found in project ${project}`);
}
