// Writing answers: whole bodies, JSON successes and the one place where an error becomes a
// response (the Express error middleware and the fast path both call sendError). A response
// already under way is never "fixed" with a second body: its connection is aborted instead.
import type { ServerResponse } from 'node:http';
import { ApiError, errorBody, toApiError, type Dialect, type ErrorCode } from '../errors.js';

/** Errors answered before the request body was read. */
const CLOSES: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['payload_too_large', 'overloaded', 'model_busy', 'model_starting', 'unauthenticated', 'permission_denied', 'auth_throttled', 'auth_unavailable']);

/** Answers up to this size are joined before writing. */
const SMALL_JSON_BYTES = 16 * 1024;

/**
 * Sends a JSON body, given whole or as parts written in order (one writev, no copy; parts adding up
 * to 16 KiB or less are joined into one buffer first); returns its length.
 */
export function sendJson(res: ServerResponse, status: number, body: Buffer | string | Buffer[], headers?: Record<string, string>): number {
  if (!Array.isArray(body)) return sendWhole(res, status, 'application/json', body, headers);
  let length = 0;
  for (const part of body) length += part.length;
  // A small answer costs less as one copied buffer than as several writes through the stream.
  if (length <= SMALL_JSON_BYTES) return sendWhole(res, status, 'application/json', Buffer.concat(body, length), headers);
  writeHead(res, status, 'application/json', length, headers);
  res.cork();
  for (let i = 0; i < body.length - 1; i++) res.write(body[i]);
  res.end(body[body.length - 1]);
  res.uncork();
  return length;
}

/** Sends one body of a given type with its length (a HEAD request gets the headers only); returns the length. */
export function sendWhole(res: ServerResponse, status: number, contentType: string, body: Buffer | string, headers?: Record<string, string>): number {
  const length = typeof body === 'string' ? Buffer.byteLength(body) : body.length;
  writeHead(res, status, contentType, length, headers);
  res.end(body);
  return length;
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
