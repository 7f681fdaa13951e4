// The upstream pool against real sockets: retry once on another replica only when the connection
// was refused (for buffered and streamed bodies, whichever place the dead replica has), a dead
// replica taken out of rotation, real timeouts on both transports, and the mapping of failures to
// the catalog.
import { createServer, request, type Server, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { UpstreamPool, upstreamFailure, type UpstreamRequest, type UpstreamTarget } from '../../src/gateway/upstream/index.js';
import { BodyView, readAll } from '../../src/gateway/bodyStream.js';
import { Readable, Writable } from 'node:stream';
import { EventEmitter, once } from 'node:events';
import { freePort } from '../../src/workload/ports.js';
import { ApiError } from '../../src/errors.js';
import { BodyMemory } from '../../src/gateway/bodyMemory.js';

let live: Server;
let liveUrl: string;
let deadUrl: string;
let hits = 0;
// The balancer's random source 0 makes its first pick the first address (when none is busy), and
// ejection is off, so that the dead replica stays first (the test below turns it on).
const pool = new UpstreamPool({ keepAliveMs: 1000, connections: 8, balancer: { random: () => 0, consecutiveFailures: 0 } });

/** The request body picks the transport: up to 32 KiB undici, larger node:http. */
const TRANSPORTS = [
  ['undici', Buffer.from('{}')],
  ['node:http', Buffer.alloc(64 * 1024, 'x')],
] as const;

/** Starts a server on a free loopback port; returns its base URL. */
async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Closes a pool, then a server and its connections. */
async function shut(server: Server, p: UpstreamPool): Promise<void> {
  await p.close();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
}

beforeAll(async () => {
  live = createServer((req, res) => {
    hits++;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => res.end(Buffer.concat(chunks)));
  });
  liveUrl = await listen(live);
  deadUrl = `http://127.0.0.1:${await freePort()}`;
});

afterAll(() => shut(live, pool));

async function text(p: ReturnType<UpstreamPool['fetch']>): Promise<string> {
  return (await p).body.toString();
}

/** A call whose answer is read whole under a 1 MiB limit. */
function fetchAll(p: UpstreamPool, upstreams: string[], req: UpstreamRequest): ReturnType<UpstreamPool['fetch']> {
  return p.fetch(target(...upstreams), req, { limit: 1 << 20 });
}

/** A model with these replicas. */
function target(...upstreams: string[]): UpstreamTarget {
  return { upstreams };
}

test.each(TRANSPORTS)('%s: a refused connection is retried on the other replica, whichever place the dead one has', async (_name, body) => {
  hits = 0;
  const retries = pool.balancer.stats.retriesTotal;
  // First pick dead (retried), then first pick live (not retried).
  for (const upstreams of [[deadUrl, liveUrl], [liveUrl, deadUrl]]) {
    const answer = await fetchAll(pool, upstreams, { path: '/p', headers: {}, body, timeoutMs: 2000 });
    expect([answer.statusCode, answer.upstream, answer.body.equals(body)]).toEqual([200, liveUrl, true]);
  }
  expect([hits, pool.balancer.stats.retriesTotal - retries]).toEqual([2, 1]);
});

test.each(TRANSPORTS)('%s: after five refused connections in a row the dead replica is out of rotation: calls go to the live one without a retry', async (_name, body) => {
  const ejecting = new UpstreamPool({ keepAliveMs: 1000, connections: 8, balancer: { random: () => 0 } });
  try {
    const upstreams = [deadUrl, liveUrl];
    const call = () => fetchAll(ejecting, upstreams, { path: '/p', headers: {}, body, timeoutMs: 2000 });
    for (let i = 0; i < 5; i++) expect((await call()).upstream).toBe(liveUrl);
    expect([ejecting.balancer.stats.retriesTotal, ejecting.balancer.stats.ejectionsTotal, ejecting.balancer.isEjected(deadUrl)]).toEqual([5, 1, true]);
    for (let i = 0; i < 5; i++) expect((await call()).upstream).toBe(liveUrl);
    expect(ejecting.balancer.stats.retriesTotal).toBe(5);
  } finally {
    await ejecting.close();
  }
});

test('a refused connection is retried with a fresh view of a streamed body', async () => {
  const body = await new Promise<string>((resolve, reject) => {
    const gw = createServer((req: IncomingMessage, res) => {
      text(fetchAll(pool, [deadUrl, liveUrl], { path: '/p', headers: {}, body: () => new BodyView(req, 1 << 20), timeoutMs: 2000 }))
        .then((t) => res.end(t), reject);
    });
    gw.listen(0, '127.0.0.1', () => {
      const port = (gw.address() as AddressInfo).port;
      // Twice: the first pick is the dead replica both times.
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
  const err = await fetchAll(pool, [deadUrl, deadUrl], { path: '/p', headers: {}, body: Buffer.from('x'), timeoutMs: 1000 }).catch((e: unknown) => e);
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

describe('an answer read whole (fetch), on both transports', () => {
  /** Emits an answer's path once the server has handed it to the OS whole. */
  const sent = new EventEmitter();
  /** Large enough to be read into a pooled buffer (256 KiB and more). */
  const LARGE_ANSWER = Buffer.alloc(300 * 1024, 'l');
  let server: Server;
  let url: string;
  let connections = 0;
  const fetchPool = new UpstreamPool({ keepAliveMs: 1000, connections: 4 });

  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      // Says when an answer has been handed to the OS whole.
      res.once('finish', () => sent.emit(req.url ?? ''));
      req.on('end', () => {
        if (req.url === '/declared') {
          res.setHeader('content-length', 5000);
          res.end(Buffer.alloc(5000, 'a'));
        } else if (req.url === '/large') {
          res.setHeader('content-length', LARGE_ANSWER.length);
          res.end(LARGE_ANSWER);
        } else if (req.url === '/ping') {
          res.end('pong');
        } else if (req.url === '/chunked') {
          for (let i = 0; i < 5; i++) res.write(Buffer.alloc(1000, 'b'));
          res.end();
        } else if (req.url === '/hints') {
          // An interim answer first (103 Early Hints), then the answer.
          res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
          res.setHeader('content-type', 'text/plain');
          res.end('after hints');
        } else {
          res.setHeader('content-type', 'text/plain');
          res.end('fine');
        }
      });
    });
    server.on('connection', () => connections++);
    url = await listen(server);
  });

  afterAll(() => shut(server, fetchPool));

  const call = (path: string, body: Buffer, reading: Parameters<UpstreamPool['fetch']>[2]) =>
    fetchPool.fetch(target(url), { path, headers: {}, body, timeoutMs: 2000 }, reading);
  /** A call to the server on a connection of its own: once it is back, this process has read what was already sent to it. */
  const roundTrip = async (): Promise<void> => {
    expect(await (await fetch(`${url}/ping`)).text()).toBe('pong');
  };

  test.each(TRANSPORTS)('%s: status and headers go to onHead before the body; the body comes whole', async (_name, body) => {
    const seen: unknown[] = [];
    const answer = await call('/ok', body, { limit: 100, onHead: (status, headers) => void seen.push(status, headers['content-type']) });
    expect(seen).toEqual([200, 'text/plain']);
    expect([answer.statusCode, answer.body.toString(), answer.upstream]).toEqual([200, 'fine', url]);
  });

  test.each(TRANSPORTS)('%s: past the limit, declared or not, the call fails with payload_too_large and the connection is cut', async (_name, body) => {
    for (const path of ['/declared', '/chunked']) {
      const before = connections;
      await expect(call(path, body, { limit: 4000 })).rejects.toMatchObject({ code: 'payload_too_large' });
      // The cut connection is not reused: the next call opens a new one.
      await expect(call('/ok', body, { limit: 100 })).resolves.toMatchObject({ statusCode: 200 });
      expect(connections).toBeGreaterThan(before);
    }
  });

  test.each(TRANSPORTS)('%s: a promise from onHead holds the reading until it settles; a rejection ends the call with it', async (_name, body) => {
    let release!: () => void;
    const events: string[] = [];
    const whole = once(sent, '/declared');
    const held = call('/declared', body, {
      limit: 10_000,
      onHead: () => {
        events.push('head');
        return new Promise<void>((r) => (release = () => {
          events.push('released');
          r();
        }));
      },
    }).then((a) => {
      events.push('answer');
      return a;
    }, (err: unknown) => {
      events.push('failed');
      throw err;
    });
    await until(() => events.length > 0, 'the answer\'s head');
    // The model has handed its whole answer to the OS, and a round trip on another connection later
    // the call still waits for the promise.
    await whole;
    await roundTrip();
    expect(events).toEqual(['head']);
    release();
    expect((await held).body.length).toBe(5000);
    expect(events).toEqual(['head', 'released', 'answer']);

    const refused = Object.assign(new Error('no room'), { code: 'TEST_REFUSED' });
    await expect(call('/declared', body, { limit: 10_000, onHead: () => Promise.reject(refused) })).rejects.toBe(refused);
    await expect(call('/declared', body, { limit: 10_000, onHead: () => { throw refused; } })).rejects.toBe(refused);
  });

  test.each(TRANSPORTS)('%s: a held reading takes its pooled buffer only once the hold is over', async (_name, body) => {
    /** A real body memory that says which buffers its leases take from the pool. */
    class Watched extends BodyMemory {
      readonly taken: number[] = [];
      override take(size: number): Buffer {
        this.taken.push(size);
        return super.take(size);
      }
    }
    const memory = new Watched(4 << 20);
    const lease = memory.lease();
    let release!: () => void;
    let heads = 0;
    const whole = once(sent, '/large');
    const held = call('/large', body, { limit: 1 << 20, lease, onHead: () => (heads++, new Promise<void>((r) => (release = r))) });
    await until(() => heads > 0, 'the answer\'s head');
    await whole;
    await roundTrip();
    expect([memory.taken, memory.stats().reservedBytes]).toEqual([[], 0]);
    release();
    const answer = await held;
    expect(answer.body.equals(LARGE_ANSWER)).toBe(true);
    expect([memory.taken, memory.stats().reservedBytes]).toEqual([[LARGE_ANSWER.length], LARGE_ANSWER.length]);
    lease.handlerOver();
    lease.responseOver(true);
    expect(memory.stats().reservedBytes).toBe(0);
  });

  test.each(TRANSPORTS)('%s: an interim answer (103 Early Hints) is not the answer', async (_name, body) => {
    const heads: number[] = [];
    const answer = await call('/hints', body, { limit: 100, onHead: (status) => void heads.push(status) });
    expect(heads).toEqual([200]);
    expect([answer.statusCode, answer.body.toString()]).toEqual([200, 'after hints']);
  });
});

/** Resolves once `check` holds, re-checked on each turn of the event loop; fails after 10 s. */
async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

describe('an answer streamed into a writable (stream), on both transports', () => {
  const BIG = 2 * 1024 * 1024;
  let server: Server;
  let url: string;
  const streamPool = new UpstreamPool({ keepAliveMs: 1000, connections: 4 });
  /** Set when the server's endless answer ends: by the connection closing under it. */
  let endlessCut: Promise<boolean> = Promise.resolve(false);

  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (req.url === '/endless') {
          // Writes until the connection goes (more than any socket buffer holds).
          endlessCut = new Promise((resolve) => res.once('close', () => resolve(!res.writableFinished)));
          const more = (): void => {
            while (!res.destroyed && res.write(Buffer.alloc(64 * 1024))) {
              // keep writing until the socket pushes back
            }
            if (!res.destroyed) res.once('drain', more);
          };
          more();
        } else if (req.url === '/hints') {
          res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
          res.end('after hints');
        } else if (req.url === '/slow') {
          setTimeout(() => res.end('late'), 50);
        } else if (req.url === '/big') {
          res.setHeader('content-type', 'application/octet-stream');
          let sent = 0;
          const more = (): void => {
            while (sent < BIG) {
              const chunk = Buffer.alloc(64 * 1024, sent / (64 * 1024));
              sent += chunk.length;
              if (!res.write(chunk)) return void res.once('drain', more);
            }
            res.end();
          };
          more();
        } else {
          // Headers and a first chunk, then the connection dies.
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.write('partial');
          setImmediate(() => res.socket?.destroy());
        }
      });
    });
    url = await listen(server);
  });

  afterAll(() => shut(server, streamPool));

  /** A writable that takes a chunk every turn of the event loop, so the model's side must wait for it. */
  function slowSink(): { sink: Writable; received: () => Buffer } {
    const chunks: Buffer[] = [];
    const sink = new Writable({
      highWaterMark: 16 * 1024,
      write(chunk: Buffer, _enc, done) {
        chunks.push(chunk);
        setImmediate(done);
      },
    });
    // Destroyed with an error, a writable emits it (a ServerResponse, the gateway's, is handled by its server).
    sink.on('error', () => undefined);
    return { sink, received: () => Buffer.concat(chunks) };
  }

  const stream = (path: string, body: Buffer, open: Parameters<UpstreamPool['stream']>[2], onAnswered?: () => void) =>
    streamPool.stream(target(url), { path, headers: {}, body, timeoutMs: 5000, onAnswered }, open);

  test.each(TRANSPORTS)('%s: a large answer reaches a slow writable whole and in order, with its status and headers', async (_name, body) => {
    const { sink, received } = slowSink();
    let head: unknown[] = [];
    await stream('/big', body, (status, headers, upstream) => {
      head = [status, headers['content-type'], upstream];
      return sink;
    });
    expect(head).toEqual([200, 'application/octet-stream', url]);
    const got = received();
    expect(got.length).toBe(BIG);
    for (let i = 0; i < BIG / (64 * 1024); i++) expect(got[i * 64 * 1024]).toBe(i);
    expect(sink.writableFinished).toBe(true);
  });

  test.each(TRANSPORTS)('%s: a writable closed first (the client left) fails the call as a premature close and cuts the answer off', async (_name, body) => {
    const { sink } = slowSink();
    let opened = false;
    const call = stream('/endless', body, () => {
      opened = true;
      setImmediate(() => sink.destroy());
      return sink;
    });
    await expect(call).rejects.toMatchObject({ code: 'ERR_STREAM_PREMATURE_CLOSE' });
    expect(opened).toBe(true);
    expect(await endlessCut).toBe(true);
  });

  test.each(TRANSPORTS)('%s: onAnswered says once when the model\'s last byte is in, before the writable is ended', async (_name, body) => {
    const { sink, received } = slowSink();
    const seen: [boolean, boolean][] = [];
    await stream('/big', body, () => sink, () => seen.push([sink.writableEnded, sink.writableFinished]));
    expect(seen).toEqual([[false, false]]);
    expect(received().length).toBe(BIG);
  });

  test.each(TRANSPORTS)('%s: a model that dies mid-answer destroys the writable with its error', async (_name, body) => {
    const { sink } = slowSink();
    let answered = 0;
    const err = await stream('/dies', body, () => sink, () => answered++).catch((e: unknown) => e);
    expect(answered).toBe(0); // the answer never came whole
    expect(err).toBeInstanceOf(Error);
    expect((err as NodeJS.ErrnoException).code).not.toBe('ERR_STREAM_PREMATURE_CLOSE');
    expect(upstreamFailure(err, 'm', 5000).code).toBe('upstream_reset');
    expect(sink.destroyed).toBe(true);
    expect(sink.writableFinished).toBe(false);
  });

  test.each(TRANSPORTS)('%s: a writable closed before the model answered (the client left) fails the call at once', async (_name, body) => {
    const { sink } = slowSink();
    sink.destroy();
    await expect(stream('/slow', body, () => sink)).rejects.toMatchObject({ code: 'ERR_STREAM_PREMATURE_CLOSE' });
  });

  test.each(TRANSPORTS)('%s: an interim answer (103 Early Hints) is not opened', async (_name, body) => {
    const { sink, received } = slowSink();
    const opened: number[] = [];
    await stream('/hints', body, (status) => {
      opened.push(status);
      return sink;
    });
    expect(opened).toEqual([200]);
    expect(received().toString()).toBe('after hints');
  });
});

describe('a call cancelled because its client left, on both transports', () => {
  let server: Server;
  let url: string;
  const cancelPool = new UpstreamPool({ keepAliveMs: 1000, connections: 4 });
  /** Each call that reaches the model gets the promise of its connection closing. */
  const arrived: Array<(model: { closed: Promise<void> }) => void> = [];
  /** Calls that reached the model. */
  let reached = 0;

  beforeAll(async () => {
    // The model reads the body and never answers: only the gateway's cancellation ends the call.
    server = createServer((req) => {
      reached++;
      req.resume();
      const closed = new Promise<void>((resolve) => req.socket.once('close', () => resolve()));
      arrived.shift()?.({ closed });
    });
    url = await listen(server);
  });

  afterAll(() => shut(server, cancelPool));

  /** A call the model receives, cancelled once it is there: its error, after the model's connection closed. */
  async function cancelledInFlight(body: Buffer): Promise<unknown> {
    const atModel = new Promise<{ closed: Promise<void> }>((resolve) => arrived.push(resolve));
    const cancel: { requested: boolean; onCancel?: () => void } = { requested: false };
    const outcome = cancelPool.fetch(target(url), { path: '/wait', headers: {}, body, timeoutMs: 60_000, cancel }, { limit: 1 << 20 }).catch((e: unknown) => e);
    const model = await atModel;
    cancel.requested = true;
    cancel.onCancel?.();
    const err = await outcome;
    await model.closed;
    return err;
  }

  test.each(TRANSPORTS)('%s: cancelled in flight, the call fails as client_closed and the model connection closes', async (_name, body) => {
    const err = await cancelledInFlight(body);
    expect(upstreamFailure(err, 'm', 60_000)).toMatchObject({ code: 'client_closed', message: 'the client closed the connection while deployed model m was answering' });
  });

  test.each(TRANSPORTS)('%s: cancelled before it was sent, the call never reaches the model', async (_name, body) => {
    const before = reached;
    const cancel = { requested: true };
    const err = await cancelPool.fetch(target(url), { path: '/wait', headers: {}, body, timeoutMs: 60_000, cancel }, { limit: 1 << 20 }).catch((e: unknown) => e);
    expect(upstreamFailure(err, 'm', 60_000).code).toBe('client_closed');
    // A call sent after it does reach the model, and it alone: the refused one was never sent.
    await cancelledInFlight(body);
    expect(reached - before).toBe(1);
  });
});

describe('real timeouts, on both transports', () => {
  let server: Server;
  let url: string;
  const timeoutPool = new UpstreamPool({ keepAliveMs: 1000, connections: 4 });
  const TIMEOUT_MS = 300;

  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        // /never: no answer at all; /stall: the headers and a first part, then nothing;
        // /trickle: a byte every 20 ms of an answer that would take 2000 s; /steady: ten bytes 50 ms apart.
        if (req.url === '/stall') {
          res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '100' });
          res.write('partial');
        } else if (req.url === '/trickle' || req.url === '/steady') {
          const steady = req.url === '/steady';
          res.writeHead(200, { 'content-type': 'text/plain', 'content-length': steady ? '10' : '100000' });
          let sent = 0;
          const timer = setInterval(() => {
            if (res.destroyed || (steady && sent === 10)) {
              clearInterval(timer);
              res.end();
              return;
            }
            res.write(steady ? 'abcdefghij'[sent] : 'x');
            sent++;
          }, steady ? 50 : 20);
          res.on('close', () => clearInterval(timer));
        }
      });
    });
    url = await listen(server);
  });
  afterAll(() => shut(server, timeoutPool));

  const request = (path: string, body: Buffer): UpstreamRequest => ({ path, headers: {}, body, timeoutMs: TIMEOUT_MS });
  /** A writable that takes everything; `error` events are expected (a destroyed answer). */
  const sink = (): Writable => new Writable({ write: (_c, _e, done) => done() }).on('error', () => undefined);
  const TIMED_OUT = { code: 'upstream_timeout', httpStatus: 504, message: 'deployed model m did not answer within 0.3 s' };

  test.each(TRANSPORTS)('%s: a model that sends no answer within the timeout fails the call as upstream_timeout, read whole or streamed', async (_name, body) => {
    const whole = await timeoutPool.fetch(target(url), request('/never', body), { limit: 1000 }).catch((e: unknown) => e);
    expect(upstreamFailure(whole, 'm', TIMEOUT_MS)).toMatchObject(TIMED_OUT);
    let opened = false;
    const streamed = await timeoutPool.stream(target(url), request('/never', body), () => ((opened = true), sink())).catch((e: unknown) => e);
    expect(upstreamFailure(streamed, 'm', TIMEOUT_MS)).toMatchObject(TIMED_OUT);
    expect(opened).toBe(false);
  });

  test.each(TRANSPORTS)('%s: a model that stops between body chunks fails the call as upstream_timeout; a streamed answer already opened is destroyed', async (_name, body) => {
    const whole = await timeoutPool.fetch(target(url), request('/stall', body), { limit: 1000 }).catch((e: unknown) => e);
    expect(upstreamFailure(whole, 'm', TIMEOUT_MS)).toMatchObject(TIMED_OUT);
    const out = sink();
    const streamed = await timeoutPool.stream(target(url), request('/stall', body), () => out).catch((e: unknown) => e);
    expect(upstreamFailure(streamed, 'm', TIMEOUT_MS)).toMatchObject(TIMED_OUT);
    expect([out.destroyed, out.writableFinished]).toEqual([true, false]);
  });

  /**
   * How a call ended and how long it took, or a failure of its own when it runs past `boundMs`: a
   * deadline that became an idle timeout would let a trickled answer run for its 2000 s.
   */
  async function bounded(call: Promise<unknown>, boundMs: number): Promise<{ outcome: unknown; ms: number }> {
    const t0 = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const guard = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`the call still ran after ${boundMs} ms: its deadline does not cover the whole answer`)), boundMs)));
    try {
      const outcome = await Promise.race([call.then(() => 'answered', (e: unknown) => e), guard]);
      return { outcome, ms: performance.now() - t0 };
    } finally {
      clearTimeout(timer);
    }
  }

  // The deadline covers the whole answer: a byte every 20 ms would keep an idle timeout of 300 ms
  // happy for the 2000 s this answer would take. Each call must end at its deadline, not long after.
  test.each(TRANSPORTS)('%s: a model that trickles its answer past the deadline fails the call as upstream_timeout at the deadline, read whole or streamed', async (_name, body) => {
    const BOUND_MS = 10 * TIMEOUT_MS;
    const whole = await bounded(timeoutPool.fetch(target(url), request('/trickle', body), { limit: 1 << 20 }), BOUND_MS);
    expect(upstreamFailure(whole.outcome, 'm', TIMEOUT_MS)).toMatchObject(TIMED_OUT);
    const out = sink();
    const streamed = await bounded(timeoutPool.stream(target(url), request('/trickle', body), () => out), BOUND_MS);
    expect(upstreamFailure(streamed.outcome, 'm', TIMEOUT_MS)).toMatchObject(TIMED_OUT);
    expect([out.destroyed, out.writableFinished]).toEqual([true, false]);
    // Ended by the deadline: not before it, and not by a guard many deadlines later.
    for (const { ms } of [whole, streamed]) expect({ ms, atDeadline: ms >= TIMEOUT_MS - 5 && ms < BOUND_MS }).toEqual({ ms, atDeadline: true });
  });

  test.each(TRANSPORTS)('%s: a streamed answer that pauses longer than the idle timeout fails well before the deadline, and its writable is destroyed', async (_name, body) => {
    const out = sink();
    const streamed = await timeoutPool.stream(target(url), { ...request('/stall', body), timeoutMs: 600_000, idleTimeoutMs: 100 }, () => out).catch((e: unknown) => e);
    expect(upstreamFailure(streamed, 'm', 600_000)).toMatchObject({ code: 'upstream_timeout', httpStatus: 504, message: 'deployed model m stopped sending its answer for 0.1 s' });
    expect([out.destroyed, out.writableFinished]).toEqual([true, false]);
  });

  test.each(TRANSPORTS)('%s: a streamed answer that keeps coming within the idle timeout is not cut by it', async (_name, body) => {
    const chunks: Buffer[] = [];
    const out = new Writable({ write: (c: Buffer, _e, done) => (chunks.push(c), done()) });
    await timeoutPool.stream(target(url), { ...request('/steady', body), timeoutMs: 60_000, idleTimeoutMs: 200 }, () => out);
    expect(Buffer.concat(chunks).toString()).toBe('abcdefghij');
  });
});
