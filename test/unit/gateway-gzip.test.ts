// Compressed bodies: a gzip request body is inflated before the gateway reads it (held to the
// request limit once inflated, so a zip bomb gets 413), a body that is not gzip gets 400 and an
// unknown coding 415; the answers the gateway makes go gzip-compressed when they are large and the
// client takes gzip. The model is a loopback server that answers one prediction per instance,
// echoing it, and records what it was sent.
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync, gzipSync } from 'node:zlib';
import { oneEndpointTable, startGateway, type TestGateway } from '../helpers/rawHttp.js';

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

  test('a body that inflates past the request limit gets 413 once it passes it, whatever its sent size', async () => {
    const g = await gateway();
    // 16 MiB of one instance's zeros: about 16 KiB sent, the limit 1 MiB.
    const bomb = gzipSync(Buffer.concat([Buffer.from('{"instances": ["'), Buffer.alloc(16 << 20, 0x30), Buffer.from('"]}')]));
    expect(bomb.length).toBeLessThan(1 << 20);
    sent.length = 0;
    const a = await predict(g.port, bomb, { 'content-encoding': 'gzip' });
    expect([a.status, a.headers.connection, errorOf(a)]).toEqual([413, 'close', {
      code: 413, status: 'INVALID_ARGUMENT', message: `request body of ${bomb.length} gzip-compressed bytes decompresses to more than the limit of ${1 << 20} bytes`,
    }]);
    expect(sent).toEqual([]);
  });

  test('a body that is not gzip, or is cut short, gets 400 invalid_encoding and reaches no model', async () => {
    const g = await gateway();
    sent.length = 0;
    const notGzip = await predict(g.port, '{"instances": [1]}', { 'content-encoding': 'gzip' });
    const zipped = gzipSync('{"instances": [1]}');
    const cut = await predict(g.port, zipped.subarray(0, zipped.length - 6), { 'content-encoding': 'gzip' });
    expect([notGzip.status, errorOf(notGzip).message]).toEqual([400, 'request body is not valid gzip data (Content-Encoding: gzip): incorrect header check']);
    expect([cut.status, errorOf(cut).message]).toEqual([400, 'request body is not valid gzip data (Content-Encoding: gzip): unexpected end of file']);
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
    const g = await gateway();
    const a = await predict(g.port, `{"instances": "${'x'.repeat(20_000)}"}`, { 'accept-encoding': 'gzip' });
    expect([a.status, a.headers['content-encoding'], errorOf(a).status]).toEqual([400, undefined, 'INVALID_ARGUMENT']);
  });
});
