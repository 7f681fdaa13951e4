// The gateway's answer to a request Node gives up on (its 'clientError'), on a connection with a
// call of its own still under way: the request timeout of a body that stops arriving.
import { connect, type Socket } from 'node:net';
import { loadConfig } from '../../src/config.js';
import { silentLogger } from '../../src/log.js';
import { GatewayMetrics } from '../../src/gateway/metrics.js';
import { servicesFromConfig } from '../../src/gateway/call.js';
import { createGateway, type Gateway } from '../../src/gateway/server.js';
import type { Route, RouteDestination, RoutingTable } from '../../src/gateway/routing.js';

const dest = {
  deployedModelId: 'm', modelKey: 'default/m', weight: 100, framework: 'custom', predictRoute: '/predict', explainRoute: null,
  upstreams: ['http://127.0.0.1:9'], healthRoute: '/health', concurrency: undefined, responseFields: Buffer.from(''), answerHeaders: {}, timeoutMs: 60_000, maxRequestBytes: 1 << 20,
} as RouteDestination;
const route = {
  namespace: 'default', name: 'e', fqdn: 'e.default.example', destinations: [dest], totalWeight: 100, allDeployedModelIds: ['m'], unresolved: [],
  readyById: new Map([['m', dest]]), problems: [], timeoutMs: 60_000, maxRequestBytes: 1 << 20,
} as Route;
const table: RoutingTable = { byName: (ns, name) => (ns === 'default' && name === 'e' ? route : undefined), byHost: () => undefined, model: () => undefined, healthTargets: () => [] };

let gateway: Gateway;
let port: number;

beforeAll(async () => {
  const { config } = loadConfig([], {});
  gateway = createGateway(servicesFromConfig(config, { routes: () => table, metrics: new GatewayMetrics({ defaultMetrics: false }), logger: silentLogger(), random: () => 0.5 }));
  port = await gateway.listen(0, '127.0.0.1');
});

afterAll(() => gateway.drain(0));

/** Resolves once `pred` holds, checking on each turn of the event loop, or fails after `ms`. */
async function until(pred: () => boolean, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

test('a call whose body stops arriving gets a JSON 408 when Node times its request out', async () => {
  const accepted = new Promise<Socket>((resolve) => gateway.server.once('connection', resolve));
  const client = connect(port, '127.0.0.1');
  let text = '';
  client.on('data', (d: Buffer) => (text += d.toString()));
  client.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => client.on('close', () => resolve()));
  client.write('POST /v1/projects/default/locations/l/endpoints/e:predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"instances"');
  const socket = await accepted;
  await until(() => gateway.calls().inFlight === 1, 'the call to be in flight');
  // What Node emits when server.requestTimeout passes before the request is complete.
  gateway.server.emit('clientError', Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }), socket);
  // The client reads the answer, then leaves.
  await until(() => text.includes('}'), 'the answer');
  client.end();
  await closed;
  expect(text).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
  expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toEqual({ error: { code: 408, status: 'DEADLINE_EXCEEDED', message: 'the request did not arrive whole within 300 s' } });
  await until(() => gateway.calls().inFlight === 0, 'the call to end');
});
