// In-process gateways over a fixed routing table, and raw TCP clients that write exact bytes and read
// exactly what comes back (status line, headers, JSON body), for the tests of the gateway's door:
// malformed HTTP, timeouts, connection limits, lingering close.
import { connect, type Socket } from 'node:net';
import { loadConfig } from '../../src/config.js';
import { silentLogger } from '../../src/log.js';
import { GatewayMetrics } from '../../src/gateway/metrics.js';
import { servicesFromConfig } from '../../src/gateway/call.js';
import { createGateway, type Gateway } from '../../src/gateway/server.js';
import type { Route, RouteDestination, RoutingTable } from '../../src/gateway/routing.js';

export const EMPTY_TABLE: RoutingTable = { byName: () => undefined, byHost: () => undefined, model: () => undefined, healthTargets: () => [], loadTargets: () => [] };

/** One Endpoint, default/e, with one deployed model m (a custom container, predict at /predict) at `upstream`. */
export function oneEndpointTable(upstream: string): RoutingTable {
  const dest = {
    deployedModelId: 'm', modelKey: 'default/m', weight: 100, framework: 'custom', predictRoute: '/predict', explainRoute: null,
    upstreams: [upstream], healthRoute: '/health', concurrency: undefined, autoscaled: false, responseFields: Buffer.from('"deployedModelId":"m"'), answerHeaders: {}, openai: undefined, loadAware: false, timeoutMs: 60_000, maxRequestBytes: 1 << 20, streamTimeoutMs: 1_800_000, streamIdleTimeoutMs: 60_000,
  } as RouteDestination;
  const route = {
    namespace: 'default', name: 'e', fqdn: 'e.default.example', destinations: [dest], totalWeight: 100, allDeployedModelIds: ['m'], unresolved: [],
    readyById: new Map([['m', dest]]), notReady: new Map(), problems: [], timeoutMs: 60_000, maxRequestBytes: 1 << 20, streamTimeoutMs: 1_800_000, streamIdleTimeoutMs: 60_000,
  } as Route;
  return { byName: (ns, name) => (ns === 'default' && name === 'e' ? route : undefined), byHost: () => undefined, model: () => undefined, healthTargets: () => [], loadTargets: () => [] };
}
/** One Endpoint, default/e, with one deployed model m at a port nobody listens on. */
export const ONE_ENDPOINT_TABLE: RoutingTable = oneEndpointTable('http://127.0.0.1:9');

export interface TestGateway {
  gateway: Gateway;
  port: number;
  metrics: GatewayMetrics;
  /** A metric's value from the registry (in process: the main port may be at its limit). */
  metric(name: string, labels?: string): Promise<number | undefined>;
}

/** A gateway in this process on a free loopback port, with settings from `flags` (its command line). */
export async function startGateway(flags: string[] = [], table: RoutingTable = EMPTY_TABLE): Promise<TestGateway> {
  const { config } = loadConfig(flags, {}, 'gateway');
  const metrics = new GatewayMetrics({ defaultMetrics: false });
  const gateway = createGateway(servicesFromConfig(config, { routes: () => table, metrics, logger: silentLogger(), random: () => 0.5 }));
  const port = await gateway.listen(0, '127.0.0.1');
  return {
    gateway,
    port,
    metrics,
    async metric(name, labels = '') {
      const text = await metrics.registry.getSingleMetricAsString(name);
      const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
      return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
    },
  };
}

/** A raw connection: what it has read, whether it closed, and how it ended. */
export interface RawClient {
  socket: Socket;
  text(): string;
  /** Resolves once the server closed the connection (or it was reset): the bytes read and the error, if any. */
  closed: Promise<{ text: string; error: string | undefined }>;
  /** Resolves once `pred` holds for the text read so far. */
  waitFor(pred: (text: string) => boolean, what: string, ms?: number): Promise<string>;
}

/** Opens a connection to `port` (from `localAddress` when given), resolved once connected. */
export function rawClient(port: number, localAddress?: string): Promise<RawClient> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', localAddress });
    let text = '';
    let error: string | undefined;
    const waiters = new Set<() => void>();
    const closed = new Promise<{ text: string; error: string | undefined }>((done) => socket.on('close', () => {
      for (const w of waiters) w();
      done({ text, error });
    }));
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      for (const w of waiters) w();
    });
    socket.on('error', (err: NodeJS.ErrnoException) => (error = err.code ?? err.message));
    const client: RawClient = {
      socket,
      text: () => text,
      closed,
      waitFor(pred, what, ms = 10_000) {
        return new Promise((ok, fail) => {
          const check = (): void => {
            if (pred(text)) {
              waiters.delete(check);
              clearTimeout(timer);
              ok(text);
            } else if (socket.destroyed) {
              waiters.delete(check);
              clearTimeout(timer);
              fail(new Error(`the connection closed before ${what}; read ${JSON.stringify(text.slice(0, 300))}`));
            }
          };
          const timer = setTimeout(() => {
            waiters.delete(check);
            fail(new Error(`timed out waiting for ${what}; read ${JSON.stringify(text.slice(0, 300))}`));
          }, ms);
          waiters.add(check);
          check();
        });
      },
    };
    socket.once('connect', () => resolve(client));
    socket.once('error', reject);
  });
}

/** Writes `request`, and resolves with all the server sent once it closed the connection. */
export async function exchangeRaw(port: number, request: string | Buffer): Promise<string> {
  const c = await rawClient(port);
  c.socket.write(request);
  return (await c.closed).text;
}

/** An HTTP answer read from raw text: status line, headers (lower-cased names), body. */
export interface RawAnswer {
  statusLine: string;
  status: number;
  headers: Record<string, string>;
  body: string;
}

export function parseAnswer(text: string): RawAnswer {
  const end = text.indexOf('\r\n\r\n');
  if (end < 0) throw new Error(`no complete HTTP answer in ${JSON.stringify(text.slice(0, 300))}`);
  const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const l of lines) {
    const i = l.indexOf(':');
    headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  const length = Number(headers['content-length'] ?? '0');
  return { statusLine, status: Number(statusLine.split(' ')[1]), headers, body: text.slice(end + 4, end + 4 + length) };
}

/** Resolves once `pred` holds, checking on each turn of the event loop; fails after `ms`. */
export async function until(pred: () => boolean | Promise<boolean>, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * The backlog of a model held back by a reader that does not read (test/helpers/streamModel.ts's
 * /calls), once it is settled: more than nothing, and the same between two looks.
 */
export async function heldBacklog(read: () => Promise<{ backlog: number }>): Promise<number> {
  let last = -1;
  await until(async () => {
    const { backlog } = await read();
    const settled = backlog > 0 && backlog === last;
    last = backlog;
    return settled;
  }, 'the model held back');
  return last;
}
