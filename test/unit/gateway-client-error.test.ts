// The gateway's answer to a request Node gives up on (its 'clientError'), on a connection with a
// call of its own still under way: the request timeout of a body that stops arriving.
import { connect, type Socket } from 'node:net';
import type { Gateway } from '../../src/gateway/server.js';
import { ONE_ENDPOINT_TABLE, startGateway, until } from '../helpers/rawHttp.js';

let gateway: Gateway;
let port: number;

beforeAll(async () => {
  ({ gateway, port } = await startGateway([], ONE_ENDPOINT_TABLE));
});

afterAll(() => gateway.drain(0));

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
