// Writing answers: whole bodies, JSON successes and the one place where an error becomes a
// response (the Express error middleware and the fast path both call sendError). A response
// already under way is never "fixed" with a second body: its connection is aborted instead. A
// large answer goes gzip-compressed to a client that takes gzip.
import type { ServerResponse } from 'node:http';
import { promisify } from 'node:util';
import { constants, gzip as zlibGzip } from 'node:zlib';
import Negotiator from 'negotiator';
import { ApiError, errorBody, toApiError, type Dialect, type ErrorCode } from '../errors.js';

/** Errors answered before the request body was read. */
const CLOSES: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['payload_too_large', 'unsupported_encoding', 'overloaded', 'model_busy', 'model_starting', 'unauthenticated', 'permission_denied', 'auth_throttled', 'auth_unavailable']);

/** Answers up to this size are joined before writing. */
const SMALL_JSON_BYTES = 16 * 1024;

/**
 * Which answers go gzip-compressed (RESPONSE_GZIP_MIN_BYTES): those of at least `minBytes` to a
 * client whose Accept-Encoding takes gzip; 0: none.
 */
export interface AnswerCompression {
  minBytes: number;
}

/**
 * Sends a JSON body, given whole or as parts written in order (one writev, no copy; parts adding up
 * to 16 KiB or less are joined into one buffer first), gzip-compressed when `compression` says so;
 * returns its length before compression, once it is written (at once unless it is compressed).
 */
export function sendJson(res: ServerResponse, status: number, body: Buffer | string | Buffer[], headers?: Record<string, string>, compression?: AnswerCompression): number | Promise<number> {
  if (!Array.isArray(body)) return sendWhole(res, status, 'application/json', body, headers, compression);
  let length = 0;
  for (const part of body) length += part.length;
  if (compressed(res, length, compression)) return sendGzipped(res, status, 'application/json', Buffer.concat(body, length), length, headers).then(() => length);
  // A small answer costs less as one copied buffer than as several writes through the stream.
  if (length <= SMALL_JSON_BYTES) return sendWhole(res, status, 'application/json', Buffer.concat(body, length), headers);
  writeHead(res, status, 'application/json', length, headers);
  res.cork();
  for (let i = 0; i < body.length - 1; i++) res.write(body[i]);
  res.end(body[body.length - 1]);
  res.uncork();
  return length;
}

/**
 * Sends one body of a given type with its length (a HEAD request gets the headers only),
 * gzip-compressed when `compression` says so; returns its length before compression, once it is
 * written (at once unless it is compressed).
 */
export function sendWhole(res: ServerResponse, status: number, contentType: string, body: Buffer | string, headers?: Record<string, string>, compression?: AnswerCompression): number | Promise<number> {
  const length = typeof body === 'string' ? Buffer.byteLength(body) : body.length;
  if (compressed(res, length, compression)) return sendGzipped(res, status, contentType, body, length, headers).then(() => length);
  writeHead(res, status, contentType, length, headers);
  res.end(body);
  return length;
}

/**
 * Whether an answer of `length` bytes goes gzip-compressed: it is large enough, and the client's
 * Accept-Encoding takes gzip (as negotiated by RFC 9110's rules: q-values, `*`). Such an answer
 * says `Vary: Accept-Encoding` either way, as its form depended on it.
 */
function compressed(res: ServerResponse, length: number, compression: AnswerCompression | undefined): boolean {
  if (!compression || compression.minBytes <= 0 || length < compression.minBytes || res.destroyed) return false;
  res.setHeader('Vary', 'Accept-Encoding');
  return new Negotiator(res.req).encoding(['gzip']) === 'gzip';
}

const gzip = promisify(zlibGzip);

/**
 * Sends an answer gzip-compressed, with its compressed length: zlib works on the libuv thread pool
 * at its fastest level (a JSON answer of floats shrinks about 3x), in output chunks of up to the
 * answer's size (each chunk is a trip to the pool), and the answer is written once whole. Settles
 * once it is written, or found unwanted (the client gone, or answered meanwhile by a drain's
 * deadline); the call lasts until then (its handler awaits it), so a drain waits for it and its
 * status is the one sent.
 */
async function sendGzipped(res: ServerResponse, status: number, contentType: string, body: Buffer | string, length: number, headers?: Record<string, string>): Promise<void> {
  const zipped = await gzip(body, { level: constants.Z_BEST_SPEED, chunkSize: Math.max(16 * 1024, Math.min(length, 1 << 20)) });
  if (res.destroyed || res.headersSent) return;
  res.setHeader('Content-Encoding', 'gzip');
  writeHead(res, status, contentType, zipped.length, headers);
  res.end(zipped);
}

/** Status and headers of an answer of known length (the extra headers after the type). */
function writeHead(res: ServerResponse, status: number, contentType: string, length: number, headers?: Record<string, string>): void {
  res.statusCode = status;
  res.setHeader('Content-Type', contentType);
  if (headers) for (const k in headers) res.setHeader(k, headers[k]);
  res.setHeader('Content-Length', length);
}

/**
 * Sends exactly one error answer in the route's dialect, or aborts the connection if the answer
 * has already started. Returns the ApiError that was sent (for logs and metrics).
 */
export function sendError(res: ServerResponse, err: unknown, dialect: Dialect, requestId?: string): ApiError {
  const api = toApiError(err);
  if (res.headersSent) {
    res.destroy(err instanceof Error ? err : undefined);
    return api;
  }
  for (const name of res.getHeaderNames()) {
    if (!name.startsWith('x-') && name !== 'connection') res.removeHeader(name);
  }
  // The request body may be unread (too large, held back while memory was full, or from a caller the
  // gate refused): close rather than let Node read and drop it to keep the connection; a client
  // still sending it gets to read the answer first (linger).
  if (CLOSES.has(api.code)) {
    res.setHeader('Connection', 'close');
    if (!res.req.complete) {
      lingeringAnswer(res, api.httpStatus, errorBody(api, dialect, requestId), api.headers);
      return api;
    }
  }
  sendJson(res, api.httpStatus, errorBody(api, dialect, requestId), api.headers);
  return api;
}

/** How long, and for how many bytes, a request body is read and dropped after an answer that closes its connection. */
export const LINGER_MS = 5000;
export const LINGER_MAX_BYTES = 16 * 1024 * 1024;

/**
 * Sends a whole answer while the client may still be sending its request body, and closes the
 * connection once the body has ended, reading and dropping it meanwhile (like nginx's lingering
 * close): closing with the body unread would make the kernel reset the connection, and a client
 * still writing would lose the answer. The body is read for at most LINGER_MS and LINGER_MAX_BYTES;
 * past either the connection is dropped.
 */
function lingeringAnswer(res: ServerResponse, status: number, body: string, headers?: Record<string, string>): void {
  const req = res.req;
  writeHead(res, status, 'application/json', Buffer.byteLength(body), headers);
  // The whole answer goes out now; the response ends (and Node closes the connection) with the body.
  res.write(body);
  let bytes = 0;
  const over = (): void => {
    clearTimeout(timer);
    req.off('data', onData);
    req.off('end', ended);
  };
  const ended = (): void => {
    over();
    res.end();
  };
  const onData = (chunk: Buffer): void => {
    bytes += chunk.length;
    if (bytes > LINGER_MAX_BYTES) {
      over();
      res.destroy();
    }
  };
  const timer = setTimeout(() => {
    over();
    res.destroy();
  }, LINGER_MS).unref();
  res.once('close', over);
  req.on('data', onData);
  req.on('end', ended);
  if (req.readableEnded) ended();
  else req.resume();
}
