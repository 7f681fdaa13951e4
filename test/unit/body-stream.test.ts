// Reading whole bodies (gateway/bodyStream.ts): a model's answer refused for its size is discarded
// without crashing the process. undici reports the abort of an answer nobody reads as an 'error'
// event; with nobody listening, that used to be an uncaught exception that took the gateway down.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import type { Readable } from 'node:stream';
import { Agent, request } from 'undici';
import { readAll } from '../../src/gateway/bodyStream.js';

let server: Server;
let origin: string;
const agent = new Agent({ connections: 1 });

beforeAll(async () => {
  // Declares 100 000 bytes and sends them in two parts, so a reader can stop in between.
  server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': '100000' });
    res.write(Buffer.alloc(60_000, 1));
    setImmediate(() => res.end(Buffer.alloc(40_000, 2)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await agent.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/**
 * Waits for the stream's 'close', which follows its 'error' if it has one (an unheard error fails
 * the test as an uncaught exception).
 */
const closed = async (stream: Readable): Promise<void> => {
  if (!stream.closed) await once(stream, 'close');
};

test('an undici answer declared over the limit is refused unread and discarded quietly', async () => {
  const answer = await request(origin, { dispatcher: agent });
  await expect(readAll(answer.body, 1000, { overflow: 'destroy' })).rejects.toMatchObject({ code: 'payload_too_large' });
  await closed(answer.body);
  expect(answer.body.destroyed).toBe(true);
});

test('an undici answer that passes the limit while read is cut off and discarded quietly', async () => {
  const answer = await request(origin, { dispatcher: agent });
  await expect(readAll(answer.body, 70_000, { overflow: 'destroy', declared: undefined })).rejects.toMatchObject({ code: 'payload_too_large' });
  await closed(answer.body);
  expect(answer.body.destroyed).toBe(true);
});
