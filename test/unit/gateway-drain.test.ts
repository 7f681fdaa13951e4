// Draining answers every request with Connection: close, so that no client writes its next request
// into a connection the gateway is about to close: a call in flight whose answer has not started
// when the drain begins, a request that comes afterwards on a keep-alive connection opened before,
// and a request on a connection opened while draining. The model is a loopback server that holds
// the calls whose body asks for it until the test lets them go.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { oneEndpointTable, parseAnswer, rawClient, startGateway, until, type TestGateway } from '../helpers/rawHttp.js';

let model: Server;
const held: ServerResponse[] = [];
let g: TestGateway;

beforeAll(async () => {
  model = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      if (body.includes('"hold"')) held.push(res);
      else res.end('{"predictions":[1]}');
    });
  });
  await new Promise<void>((resolve) => model.listen(0, '127.0.0.1', resolve));
  g = await startGateway([], oneEndpointTable(`http://127.0.0.1:${(model.address() as AddressInfo).port}`));
});
afterAll(async () => {
  for (const res of held.splice(0)) res.end('{"predictions":[]}');
  await g.gateway.drain(0);
  await new Promise((resolve) => model.close(resolve));
});

const PREDICT = (body: string): string => `POST /v1/projects/default/locations/l/endpoints/e:predict HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
/** The n-th complete answer in `text` (0-based), once there. */
const nth = (text: string, n: number): string | undefined => {
  const parts = text.split(/(?=HTTP\/1\.1 )/);
  const part = parts[n];
  return part && part.includes('\r\n\r\n') && parseAnswer(part).body.length === Number(parseAnswer(part).headers['content-length'] ?? 0) ? part : undefined;
};

test('draining: an answer in flight, the next request on an open connection and a request on a new connection all carry Connection: close, and their connections end', async () => {
  // Before the drain: a call held by the model, and a keep-alive connection that was answered once.
  const inFlight = await rawClient(g.port);
  inFlight.socket.write(PREDICT('{"instances": ["hold"]}'));
  await until(() => held.length === 1, 'the call held by the model');
  const open = await rawClient(g.port);
  open.socket.write(PREDICT('{"instances": [1]}'));
  const first = parseAnswer(await open.waitFor((t) => nth(t, 0) !== undefined, 'the first answer'));
  expect([first.status, first.headers.connection]).toEqual([200, 'keep-alive']);

  const drained = g.gateway.drain(30_000);
  // The next request on the connection opened before, and one on a new connection.
  open.socket.write(PREDICT('{"instances": [2]}'));
  const fresh = await rawClient(g.port);
  fresh.socket.write(PREDICT('{"instances": [3]}'));
  const second = parseAnswer(nth((await open.closed).text, 1) ?? '');
  const third = parseAnswer((await fresh.closed).text);
  expect([second.status, second.headers.connection, third.status, third.headers.connection]).toEqual([200, 'close', 200, 'close']);

  // The held call is answered now: with Connection: close, and its connection ends.
  held.shift()!.end('{"predictions":[0]}');
  const answer = parseAnswer((await inFlight.closed).text);
  expect([answer.status, answer.headers.connection, JSON.parse(answer.body)]).toEqual([200, 'close', { predictions: [0], deployedModelId: 'm' }]);
  await drained;
});
