// Strict HTTP/1.1 at the gateway's door: the request target and Host rules of RFC 9112 (absolute-form
// targets routed on their path, the authority replacing Host; one Host, required on HTTP/1.1), and
// the JSON answer to every request Node's parser refuses (its 'clientError'), with a status and a
// message that say what was wrong; and Node's server options (its timeouts). Canned answers are
// written straight to the socket: they always close the connection.
import { STATUS_CODES, maxHeaderSize, type IncomingMessage, type Server, type ServerOptions } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApiError, errorBody, type Dialect } from '../errors.js';
import { dialectOf } from './routes.js';

/**
 * Checks a request's target and Host, and rewrites an absolute-form target
 * (`POST http://host/v1/...`) to its path, its authority becoming the Host (RFC 9112 §3.2.2: the
 * authority wins). Returns the error to answer when the request is malformed.
 */
export function checkRequestHead(req: IncomingMessage): ApiError | undefined {
  const url = req.url ?? '';
  if (!url.startsWith('/')) {
    const m = /^https?:\/\/([^/?#]*)([^#]*)$/i.exec(url);
    if (m === null) return malformed(`the request target ${JSON.stringify(url.slice(0, 200))} is neither a path nor an absolute http URL`);
    const authority = m[1].slice(m[1].lastIndexOf('@') + 1);
    if (authority === '') return malformed('the absolute request target has no host');
    const rest = m[2] === '' ? '/' : m[2];
    req.url = rest.startsWith('?') ? `/${rest}` : rest;
    req.headers.host = authority;
    return undefined;
  }
  const hosts = hostHeaders(req.rawHeaders);
  if (hosts > 1) return malformed(`the request has ${hosts} Host headers; it must have one`);
  if (hosts === 0 && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1) return malformed('an HTTP/1.1 request must have a Host header');
  return undefined;
}

/** How many Host headers `raw` (IncomingMessage.rawHeaders: name, value, ...) has; a scan, where headersDistinct would copy every header. */
function hostHeaders(raw: readonly string[]): number {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i].length === 4 && raw[i].toLowerCase() === 'host') n++;
  return n;
}

function malformed(message: string): ApiError {
  const err = new ApiError('invalid_request', message);
  err.headers = { Connection: 'close' };
  return err;
}

/** Node's parser error codes, as what the client did wrong. */
const PARSE_ERRORS: Record<string, string> = {
  HPE_INVALID_METHOD: 'the request line has an unknown or malformed method',
  HPE_INVALID_URL: 'the request target is malformed',
  HPE_INVALID_VERSION: 'the request line has a malformed HTTP version',
  HPE_INVALID_CONSTANT: 'the request line is malformed',
  HPE_INVALID_HEADER_TOKEN: 'a header name or value has a character HTTP does not allow',
  HPE_LF_EXPECTED: 'a line of the request does not end with CRLF',
  HPE_CR_EXPECTED: 'a line of the request does not end with CRLF',
  HPE_INVALID_CONTENT_LENGTH: 'the Content-Length header is not a number',
  HPE_UNEXPECTED_CONTENT_LENGTH: 'the request has both Transfer-Encoding and Content-Length (or two Content-Lengths)',
  HPE_INVALID_TRANSFER_ENCODING: 'the request has both Transfer-Encoding and Content-Length, or a Transfer-Encoding that does not end in chunked',
  HPE_INVALID_CHUNK_SIZE: 'the chunked body is malformed (a chunk size is not hexadecimal)',
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 'the chunked body has chunk extensions that are too large',
  HPE_STRICT: 'the request breaks HTTP/1.1 syntax',
  HPE_UNEXPECTED_SPACE: 'the request has a space where HTTP does not allow one',
  HPE_INVALID_EOF_STATE: 'the connection ended in the middle of a request',
};

/** What the gateway answers a request that Node's parser refused (or timed out), as bytes to write. */
export interface CannedAnswer {
  status: number;
  text: string;
}

/**
 * The answer to a 'clientError': 408 for a request Node timed out, 431 for headers over Node's
 * limit (414 when the request line alone is), 400 otherwise, each as JSON in the dialect of the
 * path when the request line can be read, with Connection: close.
 */
export function clientErrorAnswer(err: NodeJS.ErrnoException & { rawPacket?: Buffer }, timeoutMessage: string): CannedAnswer {
  const code = err.code ?? 'parse error';
  const line = requestLine(err.rawPacket);
  const dialect: Dialect = line?.path ? dialectOf(line.path) : 'vertex';
  let api: ApiError;
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') api = new ApiError('client_timeout', timeoutMessage);
  else if (code === 'HPE_HEADER_OVERFLOW' && (line === undefined ? /^[A-Za-z]+ \S/.test(err.rawPacket?.subarray(0, 64).toString('latin1') ?? '') : line.length > maxHeaderSize / 2)) api = new ApiError('invalid_request', `the request line (its URL) is too long: with the headers it must fit in ${maxHeaderSize} bytes (Node's --max-http-header-size)`, 414);
  else if (code === 'HPE_HEADER_OVERFLOW') api = new ApiError('invalid_request', `the request line and headers are larger than ${maxHeaderSize} bytes (Node's --max-http-header-size)`, 431);
  else api = new ApiError('invalid_request', `malformed HTTP request: ${PARSE_ERRORS[code] ?? 'it breaks HTTP/1.1 syntax'} (${code})`);
  return canned(api, dialect);
}

/** An error as a whole HTTP/1.1 answer that closes the connection. */
export function canned(api: ApiError, dialect: Dialect, extra = ''): CannedAnswer {
  const status = api.httpStatus;
  const body = errorBody(api, dialect);
  return {
    status,
    text: `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}Connection: close\r\n\r\n${body}`,
  };
}

/** The path of the request line in `raw` and the line's length, when the line is there whole. */
function requestLine(raw: Buffer | undefined): { path: string; length: number } | undefined {
  if (raw === undefined) return undefined;
  const end = raw.indexOf('\r\n');
  if (end < 0) return undefined;
  const parts = raw.subarray(0, end).toString('latin1').split(' ');
  const target = parts[1] ?? '';
  const path = target.startsWith('/') ? target : target.replace(/^https?:\/\/[^/]*/i, '');
  return { path: path.split('?')[0], length: end };
}

/** Idle keep-alive connections are closed after this long (above the 60 s idle timeout of common load balancers). */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;
/** A request must arrive whole (headers and body) within this long; the body's pace is checked long before (bodyWatch.ts). */
export const REQUEST_TIMEOUT_MS = 300_000;

/**
 * Node's server options: its timers are checked every second (or a quarter of the headers timeout,
 * when shorter), so a slow-header client is cut within about a second of HEADERS_TIMEOUT_SECONDS; a
 * request without Host reaches the handler (Node's own answer to it is an empty 400).
 */
export function serverOptions(headersTimeoutMs: number): ServerOptions {
  return {
    requireHostHeader: false,
    headersTimeout: headersTimeoutMs,
    requestTimeout: Math.max(REQUEST_TIMEOUT_MS, headersTimeoutMs),
    connectionsCheckingInterval: Math.max(50, Math.min(1000, headersTimeoutMs / 4)),
  };
}

/** Listens on a port; resolves with the port taken. */
export function listenOn(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

