// Registry and runner of the bundled example model servers (`predictgate model <name>`).
// Owns: the list of model names, starting one model on a plain node:http server (keep-alive and
// header timeouts, custom predict/health routes of the Vertex custom-container contract, error
// containment, graceful close, a count of the calls it answered on GET /metrics) and reading that
// contract from the environment. A model may add its own metrics to that exposition (tiny-llm's vLLM ones).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { ECHO_HEALTH_PATH, ECHO_PREDICT_PATH, handleEcho } from './echo.js';
import { HALF_PLUS_TWO_MODEL_NAME, handleHalfPlusTwo } from './halfPlusTwo.js';
import { GML_TASKS, type GmlTask } from '../api/types.js';
import { GRAPHSTORM_INVOCATIONS_PATH, GRAPHSTORM_PING_PATH, graphStormHandler, graphStormTaskFromEnv } from './graphstorm.js';
import { TINY_LLM_SETTINGS, tinyLlmApp, tinyLlmOptionsFromEnv, type TinyLlmOptions } from './tinyLlm.js';

export const MODEL_NAMES = ['half-plus-two', 'echo', 'graphstorm', 'tiny-llm'] as const;
export type ModelName = (typeof MODEL_NAMES)[number];

export interface ModelServerOptions {
  /** 0 picks a free port; the port actually bound is reported by RunningModelServer.port. */
  port: number;
  /** Interface to bind; default 127.0.0.1. */
  host?: string;
  /** Extra path (AIP_PREDICT_ROUTE) that serves the model's predict. */
  predictRoute?: string;
  /** Extra path (AIP_HEALTH_ROUTE) that answers 200 JSON once the model is ready. */
  healthRoute?: string;
  log?: (obj: Record<string, unknown>) => void;
  /** The graphstorm model's task (GRAPHSTORM_TASK); default node_classification. */
  graphStormTask?: GmlTask;
  /** The tiny-llm model's settings (TINY_LLM_*). */
  tinyLlm?: TinyLlmOptions;
}

export interface RunningModelServer {
  port: number;
  close(): Promise<void>;
}

interface ModelApp {
  /** Native predict path (POST) that AIP_PREDICT_ROUTE maps to. */
  predictPath: string;
  /** Native health/status path (GET) that AIP_HEALTH_ROUTE maps to. */
  healthPath: string;
  handle(req: IncomingMessage, res: ServerResponse): void;
  /** The model's own metrics, appended to the runner's exposition on GET /metrics. */
  metrics?(): string;
}

const MODELS: Record<ModelName, (opts: ModelServerOptions) => ModelApp> = {
  'half-plus-two': () => ({
    predictPath: `/v1/models/${HALF_PLUS_TWO_MODEL_NAME}:predict`,
    healthPath: `/v1/models/${HALF_PLUS_TWO_MODEL_NAME}`,
    handle: handleHalfPlusTwo,
  }),
  echo: () => ({ predictPath: ECHO_PREDICT_PATH, healthPath: ECHO_HEALTH_PATH, handle: handleEcho }),
  graphstorm: (opts) => ({ predictPath: GRAPHSTORM_INVOCATIONS_PATH, healthPath: GRAPHSTORM_PING_PATH, handle: graphStormHandler(opts.graphStormTask ?? 'node_classification') }),
  'tiny-llm': (opts) => tinyLlmApp(opts.tinyLlm),
};

/** Longer than the gateway's pooled idle timeout, so the gateway always closes idle sockets first. */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;
export const HEADERS_TIMEOUT_MS = 66_000;
/** How long close() lets in-flight requests finish before cutting their connections. */
const CLOSE_GRACE_MS = 3_000;

function isModelName(name: string): name is ModelName {
  return (MODEL_NAMES as readonly string[]).includes(name);
}

/** Starts model `name`; resolves once it listens. Throws on an unknown name or a bind failure. */
export async function startModelServer(name: string, opts: ModelServerOptions): Promise<RunningModelServer> {
  if (!isModelName(name)) {
    throw new Error(`unknown model "${name}"; valid names: ${MODEL_NAMES.join(', ')}`);
  }
  const app = MODELS[name](opts);
  const log = opts.log ?? (() => {});
  const counts = new RequestCounts();
  const server = createServer((req, res) => {
    if (req.method === 'GET' && (req.url ?? '/').split('?')[0] === METRICS_PATH && opts.predictRoute !== METRICS_PATH && opts.healthRoute !== METRICS_PATH) {
      req.resume();
      const text = counts.exposition() + (app.metrics?.() ?? '');
      res.writeHead(200, { 'Content-Type': METRICS_CONTENT_TYPE, 'Content-Length': Buffer.byteLength(text) });
      res.end(text);
      return;
    }
    res.once('finish', () => counts.add(routeOf(app, req), res.statusCode));
    dispatch(app, opts, log, req, res);
  });
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  server.headersTimeout = HEADERS_TIMEOUT_MS;
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const [status, reason] =
      err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? ['408', 'Request Timeout']
        : err.code === 'HPE_HEADER_OVERFLOW'
          ? ['431', 'Request Header Fields Too Large']
          : ['400', 'Bad Request'];
    const body = JSON.stringify({ error: `${reason.toLowerCase()}: ${err.code ?? err.message}` });
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });

  await listen(server, opts.port, opts.host ?? '127.0.0.1');
  const port = (server.address() as AddressInfo).port;
  log({ msg: 'listening', model: name, host: opts.host ?? '127.0.0.1', port });
  return { port, close: () => closeServer(server) };
}

/** Where a bundled model server counts its calls, in the Prometheus text format (version 0.0.4). */
export const METRICS_PATH = '/metrics';
const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** What a call was, for the count: its model's predict, its health check, or anything else. */
type CountedRoute = 'predict' | 'health' | 'other';

/** The route a call took, once dispatch() has mapped AIP_PREDICT_ROUTE and AIP_HEALTH_ROUTE onto the model's own paths. */
function routeOf(app: ModelApp, req: IncomingMessage): CountedRoute {
  const path = (req.url ?? '/').split('?')[0];
  if (path === app.predictPath && req.method === 'POST') return 'predict';
  if (path === app.healthPath && (req.method === 'GET' || req.method === 'HEAD')) return 'health';
  return 'other';
}

/**
 * predictgate_model_requests_total{route, code}: the calls this process answered whole (an answer
 * cut off by its connection closing is not counted). One process's count, from its start: which
 * replica served how many calls, read from each pod.
 */
class RequestCounts {
  private readonly counts = new Map<string, number>();

  add(route: CountedRoute, code: number): void {
    const key = `route="${route}",code="${code}"`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  exposition(): string {
    const lines = [
      '# HELP predictgate_model_requests_total Calls this model server answered, by route (predict, health, other) and HTTP code.',
      '# TYPE predictgate_model_requests_total counter',
    ];
    for (const [labels, n] of [...this.counts].sort(([a], [b]) => a.localeCompare(b))) lines.push(`predictgate_model_requests_total{${labels}} ${n}`);
    return `${lines.join('\n')}\n`;
  }
}

function dispatch(
  app: ModelApp,
  opts: ModelServerOptions,
  log: (obj: Record<string, unknown>) => void,
  req: IncomingMessage,
  res: ServerResponse,
): void {
  try {
    const path = (req.url ?? '/').split('?')[0];
    const method = req.method ?? 'GET';
    if (opts.healthRoute !== undefined && path === opts.healthRoute && (method === 'GET' || method === 'HEAD')) {
      req.url = app.healthPath;
      req.method = 'GET';
    } else if (opts.predictRoute !== undefined && path === opts.predictRoute && method === 'POST') {
      req.url = app.predictPath;
    }
    app.handle(req, res);
  } catch (err) {
    // Handlers are written not to throw; this keeps a bug from taking the process down.
    log({ msg: 'handler error', err: err instanceof Error ? err.message : String(err) });
    if (!res.headersSent) {
      res.writeHead(500, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ error: 'internal error' }));
    } else {
      res.destroy();
    }
  }
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

/** Stops accepting, closes idle keep-alive sockets now and busy ones after a short grace. */
function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) {
      resolve();
      return;
    }
    const grace = setTimeout(() => server.closeAllConnections(), CLOSE_GRACE_MS);
    server.close(() => {
      clearTimeout(grace);
      resolve();
    });
    server.closeIdleConnections();
  });
}

/** The part of the Vertex custom-container contract that a bundled model reads (its --help is written from it). */
export const MODEL_SETTINGS: readonly { env: string; default: string; help: string }[] = [
  { env: 'AIP_HTTP_PORT', default: '8080', help: 'Port the model listens on (0 picks a free one).' },
  { env: 'AIP_HTTP_HOST', default: '127.0.0.1, or 0.0.0.0 in a Kubernetes pod', help: 'Address the model listens on.' },
  { env: 'AIP_PREDICT_ROUTE', default: 'none', help: "A path that serves the model's predict (POST) besides its own." },
  { env: 'AIP_HEALTH_ROUTE', default: 'none', help: 'A path that answers 200 once the model is ready (GET) besides its own.' },
  { env: 'GRAPHSTORM_TASK', default: 'node_classification', help: `The graphstorm model's task: ${GML_TASKS.join(' or ')}.` },
  ...TINY_LLM_SETTINGS,
];

/**
 * Server options from the Vertex custom-container contract: AIP_HTTP_PORT (default 8080),
 * AIP_PREDICT_ROUTE, AIP_HEALTH_ROUTE (and GRAPHSTORM_TASK for the graphstorm model, TINY_LLM_* for tiny-llm). The bind address is AIP_HTTP_HOST when set; otherwise 0.0.0.0
 * in a Kubernetes pod (KUBERNETES_SERVICE_HOST is set there, and the model's Service must reach it)
 * and 127.0.0.1 anywhere else (local mode runs models as child processes on loopback).
 */
export function modelOptionsFromEnv(env: NodeJS.ProcessEnv): ModelServerOptions {
  const rawPort = env.AIP_HTTP_PORT?.trim();
  const port = rawPort === undefined || rawPort === '' ? 8080 : Number(rawPort);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`AIP_HTTP_PORT must be a port number (0-65535), got "${rawPort}"`);
  }
  const route = (value: string | undefined): string | undefined => {
    const v = value?.trim();
    if (v === undefined || v === '') return undefined;
    return v.startsWith('/') ? v : `/${v}`;
  };
  const opts: ModelServerOptions = { port, host: env.AIP_HTTP_HOST?.trim() || (env.KUBERNETES_SERVICE_HOST ? '0.0.0.0' : '127.0.0.1') };
  const predictRoute = route(env.AIP_PREDICT_ROUTE);
  const healthRoute = route(env.AIP_HEALTH_ROUTE);
  if (predictRoute !== undefined) opts.predictRoute = predictRoute;
  if (healthRoute !== undefined) opts.healthRoute = healthRoute;
  if (env.GRAPHSTORM_TASK !== undefined) opts.graphStormTask = graphStormTaskFromEnv(env);
  const tinyLlm = tinyLlmOptionsFromEnv(env);
  if (Object.keys(tinyLlm).length > 0) opts.tinyLlm = tinyLlm;
  return opts;
}
