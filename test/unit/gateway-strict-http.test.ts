// Strict HTTP at the gateway's door, as a raw client meets it: every refusal is JSON in the path's
// dialect with Connection: close (a request without Host, two Hosts, framing conflicts, bad
// chunked encoding, bad header characters, a bad method, a huge URL or headers), absolute-form
// targets are routed on their path with the authority as Host, headers must arrive within
// HEADERS_TIMEOUT_SECONDS, and a client still sending a body too large reads its 413 (lingering close).
import { ONE_ENDPOINT_TABLE, exchangeRaw, parseAnswer, rawClient, startGateway, until, type TestGateway } from '../helpers/rawHttp.js';

let g: TestGateway;
beforeAll(async () => {
  g = await startGateway(['--headers-timeout-seconds', '1'], ONE_ENDPOINT_TABLE);
});
afterAll(() => g.gateway.drain(0));

const vertex = (code: number, status: string, message: string): unknown => ({ error: { code, status, message } });
const PREDICT = '/v1/projects/default/locations/l/endpoints/e:predict';

/** Sends raw bytes and reads the one answer, which must close the connection. */
async function refused(request: string): Promise<{ statusLine: string; json: unknown; connection: string | undefined }> {
  const a = parseAnswer(await exchangeRaw(g.port, request));
  expect(a.headers['content-type']).toMatch(/^application\/json/);
  return { statusLine: a.statusLine, json: JSON.parse(a.body), connection: a.headers.connection };
}

describe('requests Node parses but HTTP/1.1 forbids', () => {
  test('an HTTP/1.1 request without Host is a JSON 400 (HTTP/1.0 needs none)', async () => {
    expect(await refused('GET /healthz HTTP/1.1\r\n\r\n')).toEqual({ statusLine: 'HTTP/1.1 400 Bad Request', json: vertex(400, 'INVALID_ARGUMENT', 'an HTTP/1.1 request must have a Host header'), connection: 'close' });
    const old = parseAnswer(await exchangeRaw(g.port, 'GET /healthz HTTP/1.0\r\n\r\n'));
    expect([old.status, old.body]).toEqual([200, '{"status":"ok"}']);
  });

  test('two Host headers are a JSON 400', async () => {
    expect(await refused('GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n')).toEqual({ statusLine: 'HTTP/1.1 400 Bad Request', json: vertex(400, 'INVALID_ARGUMENT', 'the request has 2 Host headers; it must have one'), connection: 'close' });
  });

  test('a POST without Host, in the GDC dialect, closes even with its body unread', async () => {
    expect(await refused('POST /v1/model:predict HTTP/1.1\r\nContent-Length: 5\r\n\r\n{"a":')).toEqual({ statusLine: 'HTTP/1.1 400 Bad Request', json: { error: 'an HTTP/1.1 request must have a Host header' }, connection: 'close' });
  });
});

describe('absolute-form request targets (RFC 9112 §3.2.2)', () => {
  test('are routed on their path', async () => {
    const a = parseAnswer(await exchangeRaw(g.port, 'GET http://gw.example/healthz HTTP/1.1\r\nHost: gw.example\r\nConnection: close\r\n\r\n'));
    expect([a.status, a.body]).toEqual([200, '{"status":"ok"}']);
    const nope = parseAnswer(await exchangeRaw(g.port, 'POST http://gw.example/v1/projects/p/locations/l/endpoints/nope:predict HTTP/1.1\r\nHost: gw.example\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}'));
    expect([nope.status, JSON.parse(nope.body)]).toEqual([404, vertex(404, 'NOT_FOUND', 'endpoint nope not found in project p')]);
  });

  test('their authority, not the Host header, chooses the Endpoint of a GDC-form call', async () => {
    const a = parseAnswer(await exchangeRaw(g.port, 'POST HTTP://e.default.example:8080/v1/model:predict?x=1 HTTP/1.1\r\nHost: other.example\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}'));
    expect([a.status, JSON.parse(a.body)]).toEqual([404, { error: 'no endpoint has the FQDN "e.default.example:8080"; calls on this route choose the endpoint by the Host header ({endpoint}.{namespace}.{domain})' }]);
  });

  test('a target that is neither a path nor an http URL is a JSON 400', async () => {
    expect(await refused('GET ftp://x/healthz HTTP/1.1\r\nHost: x\r\n\r\n')).toEqual({ statusLine: 'HTTP/1.1 400 Bad Request', json: vertex(400, 'INVALID_ARGUMENT', 'the request target "ftp://x/healthz" is neither a path nor an absolute http URL'), connection: 'close' });
  });
});

describe('requests Node\'s parser refuses get a JSON answer and a closed connection', () => {
  test.each([
    ['Transfer-Encoding with Content-Length', `POST ${PREDICT} HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`, 'HTTP/1.1 400 Bad Request',
      vertex(400, 'INVALID_ARGUMENT', 'malformed HTTP request: the request has both Transfer-Encoding and Content-Length, or a Transfer-Encoding that does not end in chunked (HPE_INVALID_TRANSFER_ENCODING)')],
    ['a bad chunk size in a body being read', `POST ${PREDICT} HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"ins\r\nzz\r\n`, 'HTTP/1.1 400 Bad Request',
      vertex(400, 'INVALID_ARGUMENT', 'malformed HTTP request: the chunked body is malformed (a chunk size is not hexadecimal) (HPE_INVALID_CHUNK_SIZE)')],
    ['a control character in a header value', 'GET /healthz HTTP/1.1\r\nHost: a\r\nX-A: b\x01c\r\n\r\n', 'HTTP/1.1 400 Bad Request',
      vertex(400, 'INVALID_ARGUMENT', 'malformed HTTP request: a header name or value has a character HTTP does not allow (HPE_INVALID_HEADER_TOKEN)')],
    ['a bad method, on a GDC path', 'G(T /v1/model:predict HTTP/1.1\r\nHost: a\r\n\r\n', 'HTTP/1.1 400 Bad Request',
      { error: 'malformed HTTP request: the request line has an unknown or malformed method (HPE_INVALID_METHOD)' }],
    ['a URL over the header limit, on the TF Serving surface', `GET /tfserving/default/m/v1/models/${'a'.repeat(20_000)} HTTP/1.1\r\nHost: a\r\n\r\n`, 'HTTP/1.1 414 URI Too Long',
      { error: 'the request line (its URL) is too long: with the headers it must fit in 16384 bytes (Node\'s --max-http-header-size)' }],
    ['headers over the limit', `GET /healthz HTTP/1.1\r\nHost: a\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 'HTTP/1.1 431 Request Header Fields Too Large',
      vertex(431, 'FAILED_PRECONDITION', 'the request line and headers are larger than 16384 bytes (Node\'s --max-http-header-size)')],
  ])('%s', async (_what, request, statusLine, json) => {
    expect(await refused(request)).toEqual({ statusLine, json, connection: 'close' });
    // No call is left behind (one whose body broke ends once its connection closed).
    await until(() => g.gateway.calls().inFlight === 0, 'no call in flight');
  });
});

describe('HEADERS_TIMEOUT_SECONDS (1 s here)', () => {
  test('headers that stop arriving get a JSON 408 and the connection is closed', async () => {
    const c = await rawClient(g.port);
    c.socket.write('GET /healthz HTTP/1.1\r\nHost: a\r\n');
    const { text, error } = await c.closed;
    const a = parseAnswer(text);
    expect([a.statusLine, a.headers.connection, JSON.parse(a.body), error]).toEqual([
      'HTTP/1.1 408 Request Timeout', 'close', vertex(408, 'DEADLINE_EXCEEDED', 'the request\'s headers did not arrive within 1 s (HEADERS_TIMEOUT_SECONDS)'), undefined,
    ]);
  });

  test('a connection that sends nothing is closed without an answer; an idle keep-alive connection is not cut', async () => {
    const kept = await rawClient(g.port);
    kept.socket.write('GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n');
    await kept.waitFor((t) => t.endsWith('{"status":"ok"}'), 'the first answer');
    // Opened after the first answer: once it is closed for sending nothing, `kept` has been idle
    // longer than the headers timeout too.
    const silent = await rawClient(g.port);
    expect(await silent.closed).toEqual({ text: '', error: undefined });
    kept.socket.write('GET /readyz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n');
    const { text } = await kept.closed;
    expect(text.split('HTTP/1.1 200 OK').length).toBe(3);
  });
});

describe('lingering close', () => {
  test('a client still writing a body over the limit reads its 413 (the body is read and dropped meanwhile)', async () => {
    const c = await rawClient(g.port);
    const size = 12 * 1024 * 1024;
    c.socket.write(`POST ${PREDICT} HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`);
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let writeError: string | undefined;
    for (let sent = 0; sent < size && !c.socket.destroyed; sent += chunk.length) {
      if (!c.socket.write(chunk)) await new Promise<void>((resolve) => c.socket.once('drain', resolve).once('close', resolve));
    }
    c.socket.once('error', (err: NodeJS.ErrnoException) => (writeError = err.code));
    const { text, error } = await c.closed;
    const a = parseAnswer(text);
    expect([a.status, a.headers.connection, JSON.parse(a.body), error, writeError]).toEqual([
      413, 'close', vertex(413, 'INVALID_ARGUMENT', `request body of ${size} bytes is larger than the limit of ${1 << 20} bytes`), undefined, undefined,
    ]);
  });

  test('past LINGER_MAX_BYTES the connection is dropped, the 413 already sent', async () => {
    const c = await rawClient(g.port);
    c.socket.write(`POST ${PREDICT} HTTP/1.1\r\nHost: a\r\nContent-Length: ${1 << 30}\r\n\r\n`);
    const chunk = Buffer.alloc(256 * 1024, 0x20);
    const pump = async (): Promise<void> => {
      while (!c.socket.destroyed) {
        if (!c.socket.write(chunk)) await new Promise<void>((resolve) => c.socket.once('drain', resolve).once('close', resolve));
      }
    };
    void pump();
    await c.waitFor((t) => t.includes('\r\n\r\n'), 'the 413\'s head');
    expect(c.text()).toMatch(/^HTTP\/1\.1 413 Payload Too Large\r\n/);
    await c.closed;
    expect(c.socket.destroyed).toBe(true);
  });
});
