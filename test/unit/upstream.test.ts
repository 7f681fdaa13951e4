// The upstream pool against real sockets: retry once on another replica only when the connection
// was refused (for buffered and streamed bodies), and the mapping of failures to the catalog.
import { createServer, request, type Server, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { UpstreamPool, upstreamFailure } from '../../src/gateway/upstream.js';
import { BodyView, readAll } from '../../src/gateway/bodyStream.js';
import { Readable } from 'node:stream';
import { freePort } from '../../src/workload/ports.js';
import { ApiError } from '../../src/errors.js';

let live: Server;
let liveUrl: string;
let deadUrl: string;
let hits = 0;
const pool = new UpstreamPool({ keepAliveMs: 1000, connections: 8 });

beforeAll(async () => {
  live = createServer((req, res) => {
    hits++;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => res.end(Buffer.concat(chunks)));
  });
  await new Promise<void>((r) => live.listen(0, '127.0.0.1', r));
  liveUrl = `http://127.0.0.1:${(live.address() as AddressInfo).port}`;
  deadUrl = `http://127.0.0.1:${await freePort()}`;
});

afterAll(async () => {
  await pool.close();
  live.closeAllConnections();
  await new Promise((r) => live.close(r));
});

async function text(p: ReturnType<UpstreamPool['send']>): Promise<string> {
  const a = await p;
  return Buffer.from(await new Response(a.body as unknown as ReadableStream).arrayBuffer()).toString();
}

test('a refused connection is retried on the next replica (buffered body)', async () => {
  hits = 0;
  // Two calls: round robin starts once on each replica, so one of them hits the dead one first.
  for (let i = 0; i < 2; i++) {
    expect(await text(pool.send([deadUrl, liveUrl], { path: '/p', headers: {}, body: Buffer.from('hello'), timeoutMs: 2000 }))).toBe('hello');
  }
  expect(hits).toBe(2);
});

test('a refused connection is retried with a fresh view of a streamed body', async () => {
  const body = await new Promise<string>((resolve, reject) => {
    const gw = createServer((req: IncomingMessage, res) => {
      text(pool.send([deadUrl, liveUrl], { path: '/p', headers: {}, body: () => new BodyView(req, 1 << 20), timeoutMs: 2000 }))
        .then((t) => res.end(t), reject);
    });
    gw.listen(0, '127.0.0.1', () => {
      const port = (gw.address() as AddressInfo).port;
      // Twice, so that one of the two calls starts on the dead replica.
      const one = (): Promise<string> => new Promise((res2) => {
        const r = request({ port, host: '127.0.0.1', method: 'POST', path: '/' }, (resp) => {
          const cs: Buffer[] = [];
          resp.on('data', (c: Buffer) => cs.push(c));
          resp.on('end', () => res2(Buffer.concat(cs).toString()));
        });
        r.write('streamed ');
        r.end('body');
      });
      Promise.all([one(), one()]).then(([a, b]) => {
        gw.close();
        resolve(a === b ? a : `${a} != ${b}`);
      }, reject);
    });
  });
  expect(body).toBe('streamed body');
});

test('every replica refusing maps to model_unreachable (503); a timeout to upstream_timeout (504)', async () => {
  const err = await pool.send([deadUrl, deadUrl], { path: '/p', headers: {}, body: Buffer.from('x'), timeoutMs: 1000 }).catch((e: unknown) => e);
  const api = upstreamFailure(err, 'm', 1000) as ApiError;
  expect(api).toBeInstanceOf(ApiError);
  expect(api.code).toBe('model_unreachable');
  expect(api.httpStatus).toBe(503);
  expect(api.message).toBe('deployed model m is unreachable (ECONNREFUSED); no replica accepted a connection');
  const timeout = upstreamFailure(Object.assign(new Error('t'), { code: 'UND_ERR_HEADERS_TIMEOUT' }), 'm', 1500) as ApiError;
  expect([timeout.code, timeout.httpStatus, timeout.message]).toEqual(['upstream_timeout', 504, 'deployed model m did not answer within 1.5 s']);
});

test('a body that exceeds the limit while streaming fails the view with 413', async () => {
  const err = await new Promise<unknown>((resolve) => {
    const gw = createServer((req, res) => {
      const view = new BodyView(req, 10);
      view.on('error', (e) => {
        resolve(e);
        res.end();
      });
      view.resume();
    });
    gw.listen(0, '127.0.0.1', () => {
      const r = request({ port: (gw.address() as AddressInfo).port, host: '127.0.0.1', method: 'POST', path: '/' }, (resp) => {
        resp.resume();
        resp.on('end', () => gw.close());
      });
      r.on('error', () => gw.close());
      r.end('x'.repeat(100));
    });
  });
  expect(err).toBeInstanceOf(ApiError);
  expect((err as ApiError).httpStatus).toBe(413);
});

test('an answer that declares more than the limit is refused unread and cut off (its connection is not left busy)', async () => {
  const answer = Readable.from([Buffer.alloc(10)]);
  await expect(readAll(answer, 100, { overflow: 'destroy', declared: 1000 })).rejects.toMatchObject({ code: 'payload_too_large' });
  expect(answer.destroyed).toBe(true);
  // A client's request is not drained here: the 413 closes its connection.
  const request = Readable.from([Buffer.alloc(10)]);
  await expect(readAll(request, 100, { declared: 1000 })).rejects.toMatchObject({ code: 'payload_too_large' });
  expect(request.destroyed).toBe(false);
});
