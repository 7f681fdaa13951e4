// GET /stats/demand on a gateway in-process: the report (models, busy replicas, held count), a read
// with ?heldAfter=N that waits until the gateway holds a call for a model at zero, a malformed
// heldAfter refused with a specific 400, and a waiting read answered at once when the gateway drains
// (its connection does not hold the drain).
import { loadConfig } from '../../src/config.js';
import { silentLogger } from '../../src/log.js';
import { GatewayMetrics } from '../../src/gateway/metrics.js';
import { servicesFromConfig, type HandlerServices } from '../../src/gateway/call.js';
import { createGateway, type Gateway } from '../../src/gateway/server.js';
import { EMPTY_TABLE, until } from '../helpers/rawHttp.js';

let services: HandlerServices;
let gateway: Gateway;
let base: string;

beforeEach(async () => {
  const { config } = loadConfig([], {}, 'gateway');
  services = servicesFromConfig(config, { routes: () => EMPTY_TABLE, metrics: new GatewayMetrics({ defaultMetrics: false }), logger: silentLogger(), random: () => 0.5 });
  gateway = createGateway(services);
  base = `http://127.0.0.1:${await gateway.listen(0, '127.0.0.1')}/stats/demand`;
});

afterEach(async () => {
  await gateway.drain(0);
});

test('a plain read answers at once with the models, the busy replicas and the held count', async () => {
  services.demand.begin('ns/m');
  const res = await fetch(base);
  expect([res.status, await res.json()]).toEqual([200, { models: { 'ns/m': { inFlight: 1, requestsTotal: 1, callSecondsTotal: expect.any(Number), clockSeconds: expect.any(Number) } }, replicas: {}, held: 0 }]);
});

test('?heldAfter=0 waits until a call is held, then answers with held 1', async () => {
  let answered = false;
  const waiting = fetch(`${base}?heldAfter=0`).then(async (r) => ((answered = true), [r.status, ((await r.json()) as { held: number }).held]));
  await until(() => services.demand.waiting === 1, 'the gateway holding the read');
  // A call that arrives without being held, and a plain read, do not answer it.
  services.demand.begin('ns/m');
  expect((await fetch(base)).status).toBe(200);
  expect([answered, services.demand.waiting]).toEqual([false, 1]);
  services.demand.hold('ns/z');
  expect(await waiting).toEqual([200, 1]);
  expect(services.demand.waiting).toBe(0);
});

test.each(['-1', 'abc', '1.5', '9999999999999999'])('?heldAfter=%s is refused with a 400 that says what it takes', async (raw) => {
  const res = await fetch(`${base}?heldAfter=${raw}`);
  expect([res.status, await res.json()]).toEqual([400, { error: { code: 400, status: 'INVALID_ARGUMENT', message: `heldAfter must be a count of held calls (a non-negative integer), got ${JSON.stringify(raw)}` } }]);
});

test('a waiting read is answered when the gateway drains, and the drain does not wait for it', async () => {
  const waiting = fetch(`${base}?heldAfter=0`).then((r) => r.status);
  expect((await fetch(base)).status).toBe(200);
  // A grace far longer than the test's time: the drain ends because the waiting read was answered.
  const drained = gateway.drain(10 * 60_000);
  expect(await waiting).toBe(200);
  await drained;
});
