// Compressed bodies: a gzip request body is inflated before the gateway reads it (held to the
// request limit once inflated, so a zip bomb gets 413), a body that is not gzip gets 400 and an
// unknown coding 415; the answers the gateway makes go gzip-compressed when they are large and the
// client takes gzip. The model is a loopback server that answers one prediction per instance,
// echoing it, and records what it was sent. The body memory's share of an inflated body is shown on
// readRequestBody itself, with a request made of a stream.
import { createServer, request, type IncomingHttpHeaders, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { gunzipSync, gzipSync } from 'node:zlib';
import { BodyMemory } from '../../src/gateway/bodyMemory.js';
import { readRequestBody } from '../../src/gateway/bodyStream.js';
import { oneEndpointTable, startGateway, until, type TestGateway } from '../helpers/rawHttp.js';

let model: Server;
let modelUrl: string;
const sent: { headers: IncomingHttpHeaders; body: string }[] = [];
const gateways: TestGateway[] = [];

beforeAll(async () => {
  model = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      sent.push({ headers: req.headers, body });
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ predictions: (JSON.parse(body) as { instances: unknown[] }).instances }));
    });
  });
  await new Promise<void>((resolve) => model.listen(0, '127.0.0.1', resolve));
  modelUrl = `http://127.0.0.1:${(model.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const g of gateways) await g.gateway.drain(0);
  await new Promise((resolve) => model.close(resolve));
});

async function gateway(flags: string[] = []): Promise<TestGateway> {
  const g = await startGateway(flags, oneEndpointTable(modelUrl));
  gateways.push(g);
  return g;
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  /** The body as it came over the wire (not inflated). */
  raw: Buffer;
}

/** A predict call with exactly these headers and body bytes; the answer as it came. */
function predict(port: number, body: Buffer | string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/projects/default/locations/l/endpoints/e:predict', headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (d: Buffer) => chunks.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, raw: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const json = (a: Answer): unknown => JSON.parse((a.headers['content-encoding'] === 'gzip' ? gunzipSync(a.raw) : a.raw).toString());
const errorOf = (a: Answer): { code: number; message: string; status: string } => (json(a) as { error: { code: number; message: string; status: string } }).error;

describe('gzip request bodies', () => {
  test('are inflated before they are read: the model gets the plain JSON, and the answer is as for the plain body', async () => {
    const g = await gateway();
    const body = JSON.stringify({ instances: [[1, 2], [3, 4]] });
    sent.length = 0;
    const plain = await predict(g.port, body);
    for (const coding of ['gzip', 'x-gzip', 'GZIP', 'identity, gzip']) {
      const zipped = await predict(g.port, gzipSync(body), { 'content-encoding': coding });
      expect({ coding, status: zipped.status, answer: json(zipped) }).toEqual({ coding, status: 200, answer: json(plain) });
    }
    expect(sent.map((s) => [s.body, s.headers['content-encoding']])).toEqual(Array(5).fill([body, undefined]));
  });

  // 16 MiB of one instance's zeros: about 16 KiB sent, the limit 1 MiB.
  const BOMB_TEXT = Buffer.concat([Buffer.from('{"instances": ["'), Buffer.alloc(16 << 20, 0x30), Buffer.from('"]}')]);
  const bomb = gzipSync(BOMB_TEXT);

  test('a body whose gzip trailer says it inflates past the request limit gets 413 before any inflating', async () => {
    const g = await gateway();
    expect(bomb.length).toBeLessThan(1 << 20);
    sent.length = 0;
    const a = await predict(g.port, bomb, { 'content-encoding': 'gzip' });
    expect([a.status, a.headers.connection, errorOf(a)]).toEqual([413, 'close', {
      code: 413, status: 'INVALID_ARGUMENT', message: `request body of ${bomb.length} gzip-compressed bytes inflates to ${BOMB_TEXT.length} bytes, more than the limit of ${1 << 20} bytes`,
    }]);
    expect(sent).toEqual([]);
  });

  test('a body whose trailer understates its size stops inflating at the size it said: 400, and no model call', async () => {
    const g = await gateway();
    const lying = Buffer.from(bomb);
    lying.writeUInt32LE(100, lying.length - 4);
    sent.length = 0;
    const a = await predict(g.port, lying, { 'content-encoding': 'gzip' });
    expect([a.status, errorOf(a).message]).toEqual([400, 'request body inflates to more than the 100 bytes its gzip trailer says (one gzip member is taken, not several)']);
    const short = await predict(g.port, gzipSync('').subarray(0, 12), { 'content-encoding': 'gzip' });
    expect([short.status, errorOf(short).message]).toEqual([400, 'request body of 12 bytes is too short to be gzip data (Content-Encoding: gzip)']);
    expect(sent).toEqual([]);
  });

  test('a body that is not gzip, or is corrupt, gets 400 invalid_encoding and reaches no model', async () => {
    const g = await gateway();
    sent.length = 0;
    const notGzip = await predict(g.port, '{"instances": [1, 2, 3, 4, 5]}', { 'content-encoding': 'gzip' });
    expect([notGzip.status, errorOf(notGzip)]).toEqual([400, { code: 400, status: 'INVALID_ARGUMENT', message: 'request body is not gzip data (Content-Encoding: gzip): it does not start with the gzip magic bytes 1f 8b' }]);
    // The deflate data garbled, the header and trailer intact; then the CRC of other data.
    const zipped = gzipSync(JSON.stringify({ instances: Array.from({ length: 100 }, (_, i) => i) }));
    const garbled = Buffer.from(zipped);
    garbled.fill(0xff, 12, 24);
    const otherCrc = Buffer.from(zipped);
    otherCrc.writeUInt32LE(otherCrc.readUInt32LE(otherCrc.length - 8) ^ 1, otherCrc.length - 8);
    for (const [body, why] of [[garbled, /^invalid /], [otherCrc, /^incorrect data check$/]] as const) {
      const a = await predict(g.port, body, { 'content-encoding': 'gzip' });
      expect(a.status).toBe(400);
      const prefix = 'request body is not valid gzip data (Content-Encoding: gzip): ';
      expect(errorOf(a).message.startsWith(prefix)).toBe(true);
      expect(errorOf(a).message.slice(prefix.length)).toMatch(why);
    }
    expect(sent).toEqual([]);
  });

  test('any other coding, or two, gets 415 with the codings taken, before the body is read', async () => {
    const g = await gateway();
    for (const coding of ['br', 'deflate', 'gzip, gzip', 'x-unknown']) {
      const a = await predict(g.port, '{"instances": [1]}', { 'content-encoding': coding });
      expect([a.status, a.headers['accept-encoding'], a.headers.connection, errorOf(a)]).toEqual([415, 'gzip, identity', 'close', {
        code: 415, status: 'INVALID_ARGUMENT', message: `Content-Encoding ${JSON.stringify(coding)} is not taken here: send the body as it is, or compressed with Content-Encoding: gzip`,
      }]);
    }
  });
});

describe('gzip answers', () => {
  // One instance of 20,000 characters: an answer over the 16 KiB default.
  const LARGE = JSON.stringify({ instances: ['x'.repeat(20_000)] });
  const SMALL = JSON.stringify({ instances: ['x'] });

  test('a large answer goes gzip-compressed to a client that takes gzip, with its compressed length and Vary', async () => {
    const g = await gateway();
    const plain = await predict(g.port, LARGE);
    for (const accept of ['gzip', 'gzip, deflate, br', 'br;q=1, gzip;q=0.5', '*']) {
      const a = await predict(g.port, LARGE, { 'accept-encoding': accept });
      expect({ accept, status: a.status, encoding: a.headers['content-encoding'], vary: a.headers.vary, length: Number(a.headers['content-length']) })
        .toEqual({ accept, status: 200, encoding: 'gzip', vary: 'Accept-Encoding', length: a.raw.length });
      expect(a.raw.length).toBeLessThan(plain.raw.length / 10);
      expect(json(a)).toEqual(json(plain));
      expect(a.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    }
    expect([plain.headers['content-encoding'], plain.headers.vary]).toEqual([undefined, 'Accept-Encoding']);
  });

  test('a small answer, a client that refuses gzip, and RESPONSE_GZIP_MIN_BYTES=0 get the answer as it is', async () => {
    const g = await gateway();
    const off = await gateway(['--response-gzip-min-bytes', '0']);
    const small = await predict(g.port, SMALL, { 'accept-encoding': 'gzip' });
    const refused = await predict(g.port, LARGE, { 'accept-encoding': 'gzip;q=0, identity' });
    const never = await predict(off.port, LARGE, { 'accept-encoding': 'gzip' });
    for (const a of [small, refused, never]) {
      expect([a.status, a.headers['content-encoding'], Number(a.headers['content-length'])]).toEqual([200, undefined, a.raw.length]);
    }
    expect([small.headers.vary, refused.headers.vary, never.headers.vary]).toEqual([undefined, 'Accept-Encoding', undefined]);
    expect(json(never)).toEqual(json(refused));
  });

  test('error answers are never compressed', async () => {
    // Every answer of a byte or more would be, were it one the gateway compresses.
    const g = await gateway(['--response-gzip-min-bytes', '1']);
    const a = await predict(g.port, `{"instances": "${'x'.repeat(20_000)}"}`, { 'accept-encoding': 'gzip' });
    expect([a.status, a.headers['content-encoding'], errorOf(a).status]).toEqual([400, undefined, 'INVALID_ARGUMENT']);
    const ok = await predict(g.port, '{"instances": [1]}', { 'accept-encoding': 'gzip' });
    expect([ok.status, ok.headers['content-encoding']]).toEqual([200, 'gzip']);
  });
});

describe('the body memory of a gzip body', () => {
  /** A request of these bytes, sent with Content-Encoding: gzip and its Content-Length. */
  const gzipRequest = (bytes: Buffer): IncomingMessage => {
    const req = new PassThrough() as unknown as IncomingMessage;
    req.headers = { 'content-encoding': 'gzip', 'content-length': String(bytes.length) };
    (req as unknown as PassThrough).end(bytes);
    return req;
  };
  // 600 KiB inflated, a few hundred bytes sent.
  const text = Buffer.from(JSON.stringify({ instances: ['y'.repeat(600 * 1024)] }));
  const zipped = gzipSync(text);

  test('counts the compressed and the inflated bytes, the inflated ones admitted as a large body', async () => {
    const memory = new BodyMemory(1 << 20);
    const lease = memory.lease();
    const body = await readRequestBody(gzipRequest(zipped), 1 << 20, lease, 1000);
    expect(body.equals(text)).toBe(true);
    expect(memory.stats()).toEqual({ reservedBytes: zipped.length + text.length, waiting: 0 });
    lease.requestSent();
    expect(memory.stats()).toEqual({ reservedBytes: 0, waiting: 0 });
    // A small one is counted at once, compressed and inflated bytes both.
    const small = Buffer.from('{"instances": [1, 2, 3]}');
    const smallZipped = gzipSync(small);
    const smallLease = memory.lease();
    expect((await readRequestBody(gzipRequest(smallZipped), 1 << 20, smallLease, 1000)).equals(small)).toBe(true);
    expect(memory.stats()).toEqual({ reservedBytes: smallZipped.length + small.length, waiting: 0 });
    smallLease.requestSent();
  });

  test('waits for room when the budget is held by other bodies, and is refused overloaded past its wait', async () => {
    const memory = new BodyMemory(1 << 20);
    const holder = memory.lease();
    await holder.admitRequest(800 * 1024, 1000);
    const lease = memory.lease();
    const reading = readRequestBody(gzipRequest(zipped), 1 << 20, lease, 60_000);
    await until(() => memory.stats().waiting === 1, 'the inflated body waiting for room');
    expect(memory.stats()).toEqual({ reservedBytes: 800 * 1024 + zipped.length, waiting: 1 });
    holder.requestSent();
    expect((await reading).equals(text)).toBe(true);
    expect(memory.stats()).toEqual({ reservedBytes: zipped.length + text.length, waiting: 0 });

    const late = memory.lease();
    const refused = readRequestBody(gzipRequest(zipped), 1 << 20, late, 50);
    await expect(refused).rejects.toMatchObject({ code: 'overloaded' });
    expect(memory.stats().waiting).toBe(0);
  });
});
