// Connection limits as a flood of idle clients meets them: past MAX_CONNECTIONS (200 here) and
// MAX_CONNECTIONS_PER_CLIENT each new connection reads a JSON 503 and is closed, the gateway keeps
// serving once connections free up, and the probe listener answers /healthz and /readyz throughout
// (and nothing else). The default limit follows the soft open-files limit.
import { defaultMaxConnections, FALLBACK_MAX_CONNECTIONS } from '../../src/gateway/connections.js';
import { PROBE_MAX_CONNECTIONS } from '../../src/gateway/probes.js';
import { exchangeRaw, parseAnswer, rawClient, startGateway, until, type RawClient, type TestGateway } from '../helpers/rawHttp.js';

const LIMIT = 200;
let g: TestGateway;
let probePort: number;
const held: RawClient[] = [];

beforeAll(async () => {
  g = await startGateway(['--max-connections', String(LIMIT), '--max-connections-per-client', '0', '--headers-timeout-seconds', '60']);
  probePort = await g.gateway.listenProbes(0, '127.0.0.1');
});
afterEach(() => {
  for (const c of held.splice(0)) c.socket.destroy();
});
afterAll(() => g.gateway.drain(0));

const GET = (path: string): string => `GET ${path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n`;

/** Opens `n` connections and waits until the gateway counts `open` of them. */
async function hold(n: number, open: number, localAddress?: string): Promise<void> {
  for (let i = 0; i < n; i++) held.push(await rawClient(g.port, localAddress));
  await until(async () => (await g.metric('predictgate_connections_open')) === open, `${open} connections open`);
}

test('past MAX_CONNECTIONS a new connection reads a JSON 503 and is closed; probes keep answering; freed room is served again', async () => {
  await hold(LIMIT, LIMIT);
  const extra = await Promise.all(Array.from({ length: 50 }, () => exchangeRaw(g.port, GET('/healthz'))));
  const answers = extra.map((t) => {
    const a = parseAnswer(t);
    return [a.statusLine, a.headers.connection, a.headers['retry-after'], a.body];
  });
  expect(answers).toEqual(Array(50).fill([
    'HTTP/1.1 503 Service Unavailable', 'close', '1',
    JSON.stringify({ error: { code: 503, message: `the gateway has ${LIMIT} connections open, its limit (MAX_CONNECTIONS); retry later`, status: 'UNAVAILABLE' } }),
  ]));
  expect(await g.metric('predictgate_connections_refused_total', '{limit="total"}')).toBe(50);
  // The probe listener answers all the while, and only probes.
  for (const path of ['/healthz', '/readyz']) {
    const a = parseAnswer(await exchangeRaw(probePort, GET(path)));
    expect([a.status, a.body]).toEqual([200, path === '/healthz' ? '{"status":"ok"}' : '{"status":"ready"}']);
  }
  const metrics = parseAnswer(await exchangeRaw(probePort, GET('/metrics')));
  expect([metrics.status, JSON.parse(metrics.body)]).toEqual([404, { error: { code: 404, message: 'the probe port serves GET /healthz and /readyz only, not GET /metrics', status: 'NOT_FOUND' } }]);
  // Ten clients leave: ten new connections are served.
  for (const c of held.splice(0, 10)) c.socket.destroy();
  await until(async () => (await g.metric('predictgate_connections_open')) === LIMIT - 10, 'ten connections closed');
  const served = await Promise.all(Array.from({ length: 10 }, () => exchangeRaw(g.port, GET('/healthz'))));
  expect(served.map((t) => parseAnswer(t).status)).toEqual(Array(10).fill(200));
});

test('the probe listener has a connection limit of its own', async () => {
  const probes: RawClient[] = [];
  for (let i = 0; i < PROBE_MAX_CONNECTIONS; i++) probes.push(await rawClient(probePort));
  held.push(...probes);
  // Its connections are all taken: the next one is refused the same way.
  const a = parseAnswer(await exchangeRaw(probePort, GET('/healthz')));
  expect([a.status, JSON.parse(a.body).error.message]).toEqual([503, `the gateway has ${PROBE_MAX_CONNECTIONS} connections open, its limit (the probe listener's own limit); retry later`]);
  // The main port is not concerned.
  expect(parseAnswer(await exchangeRaw(g.port, GET('/healthz'))).status).toBe(200);
});

describe('MAX_CONNECTIONS_PER_CLIENT', () => {
  let one: TestGateway;
  beforeAll(async () => {
    one = await startGateway(['--max-connections', '100', '--max-connections-per-client', '5']);
  });
  afterAll(() => one.gateway.drain(0));

  test('past it a client\'s new connection reads a JSON 503; another address is still served', async () => {
    for (let i = 0; i < 5; i++) held.push(await rawClient(one.port));
    await until(async () => (await one.metric('predictgate_connections_open')) === 5, 'five connections open');
    const a = parseAnswer(await exchangeRaw(one.port, GET('/healthz')));
    expect([a.status, a.headers.connection, JSON.parse(a.body)]).toEqual([503, 'close', {
      error: { code: 503, message: 'the address 127.0.0.1 has 5 connections open to the gateway, its limit per client (MAX_CONNECTIONS_PER_CLIENT); reuse them or retry later', status: 'UNAVAILABLE' },
    }]);
    expect(await one.metric('predictgate_connections_refused_total', '{limit="per_client"}')).toBe(1);
    const other = await rawClient(one.port, '127.0.0.2');
    other.socket.write(GET('/healthz'));
    expect(parseAnswer((await other.closed).text).status).toBe(200);
  });
});

test('the default limit is half of what the soft open-files limit leaves after 256 descriptors', () => {
  const limits = (soft: string): string => `Limit                     Soft Limit           Hard Limit           Units     \nMax cpu time              unlimited            unlimited            seconds   \nMax open files            ${soft}                1048576              files     \n`;
  expect(defaultMaxConnections(limits('20000'))).toBe(9872);
  expect(defaultMaxConnections(limits('1024'))).toBe(384);
  expect(defaultMaxConnections(limits('100'))).toBe(16);
  expect(defaultMaxConnections('no such line')).toBe(FALLBACK_MAX_CONNECTIONS);
  expect(defaultMaxConnections(undefined)).toBe(FALLBACK_MAX_CONNECTIONS);
});
