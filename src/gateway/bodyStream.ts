// Bodies under a byte limit: reading a whole body (a predict request, admitted by the call's body
// memory lease and read into a pooled buffer when large, or a model's answer: WholeBody, which the
// undici transport feeds chunk by chunk), and a detachable stream view of a body (rawPredict) that
// enforces the limit while streaming and can be handed to a second upstream attempt if the first
// one never read from it. A request body sent gzip-compressed is inflated, held to the same limit.
import { Readable } from 'node:stream';
import type { IncomingMessage } from 'node:http';
import { promisify } from 'node:util';
import { gunzip, gunzipSync } from 'node:zlib';
import { ApiError } from '../errors.js';
import type { BodyLease } from './bodyMemory.js';

export function tooLarge(limit: number, got?: number): ApiError {
  return new ApiError('payload_too_large', `request body${got !== undefined ? ` of ${got} bytes` : ''} is larger than the limit of ${limit} bytes`);
}

/** The Content-Length of a message, when it has a valid one. */
export function declaredLength(headers: { 'content-length'?: string | string[] }): number | undefined {
  const cl = headers['content-length'];
  if (typeof cl !== 'string' || !/^\d+$/.test(cl)) return undefined;
  return Number(cl);
}

/** The 413 a body gets when its Content-Length already says it is over the limit; undefined when it is not. */
export function overDeclared(limit: number, declared: number | undefined): ApiError | undefined {
  return declared !== undefined && declared > limit ? tooLarge(limit, declared) : undefined;
}

/** A message's Content-Length (undefined without one); throws 413 when it already says the body is too large. */
export function checkDeclaredLength(req: IncomingMessage, limit: number): number | undefined {
  const n = declaredLength(req.headers);
  const refused = overDeclared(limit, n);
  if (refused) throw refused;
  return n;
}

const inflate = promisify(gunzip);

/**
 * Whether a request body comes gzip-compressed: its Content-Encoding is gzip (or x-gzip), or none
 * (or identity). Any other coding, or more than one, is refused with 415 and the codings taken.
 */
function gzipped(req: IncomingMessage): boolean {
  const header = req.headers['content-encoding'];
  if (header === undefined) return false;
  const codings = header.split(',').map((c) => c.trim().toLowerCase()).filter((c) => c !== '' && c !== 'identity');
  if (codings.length === 0) return false;
  if (codings.length === 1 && (codings[0] === 'gzip' || codings[0] === 'x-gzip')) return true;
  const err = new ApiError('unsupported_encoding', `Content-Encoding ${JSON.stringify(header)} is not taken here: send the body as it is, or compressed with Content-Encoding: gzip`);
  err.headers = { 'Accept-Encoding': 'gzip, identity' };
  throw err;
}

/** The shortest gzip data: a 10-byte header, an empty deflate block, an 8-byte trailer. */
const GZIP_MIN_BYTES = 20;

/**
 * The size a gzip body says it inflates to: its trailer's ISIZE (RFC 1952), which for one gzip
 * member below 4 GiB is its size, checked by zlib at the end.
 */
function trailerSize(raw: Buffer): number {
  if (raw.length < GZIP_MIN_BYTES) throw new ApiError('invalid_encoding', `request body of ${raw.length} bytes is too short to be gzip data (Content-Encoding: gzip)`);
  if (raw[0] !== 0x1f || raw[1] !== 0x8b) throw new ApiError('invalid_encoding', 'request body is not gzip data (Content-Encoding: gzip): it does not start with the gzip magic bytes 1f 8b');
  return raw.readUInt32LE(raw.length - 4);
}

/**
 * Bodies that say they inflate to at most this many bytes are inflated on the serving thread (tens
 * of microseconds), larger ones on the thread pool: for a small body the hop to the pool and back
 * costs more than the inflating.
 */
const INFLATE_INLINE_BYTES = 64 * 1024;

/**
 * Inflates a gzip body that says it inflates to `size` bytes: inflation stops as soon as it would
 * pass them, so a body whose trailer lies holds no more than it said. A large body is inflated on
 * the libuv thread pool, not on the thread that serves calls.
 */
async function inflateBody(raw: Buffer, size: number): Promise<Buffer> {
  // One output buffer of the size said (zlib's default of 16 KiB takes a trip to the pool per chunk).
  const opts = { maxOutputLength: Math.max(1, size), chunkSize: Math.max(64, size) };
  try {
    return size <= INFLATE_INLINE_BYTES ? gunzipSync(raw, opts) : await inflate(raw, opts);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
      throw new ApiError('invalid_encoding', `request body inflates to more than the ${size} bytes its gzip trailer says (one gzip member is taken, not several)`);
    }
    throw new ApiError('invalid_encoding', `request body is not valid gzip data (Content-Encoding: gzip): ${(err as Error).message}`);
  }
}

/**
 * Reads a client's whole request body for a call: refused at once when Content-Length is over the
 * limit (or its Content-Encoding is not taken), then admitted by the call's body memory lease (it
 * may wait there, up to `waitMs`), then read. A gzip body is then refused when its trailer says it
 * inflates past the limit (a zip bomb, before any inflating), else its inflated size is admitted
 * as a body of that size (the compressed bytes still held and counted), and it is inflated.
 */
export async function readRequestBody(req: IncomingMessage, limit: number, lease: BodyLease, waitMs: number): Promise<Buffer> {
  const compressed = gzipped(req);
  const declared = checkDeclaredLength(req, limit);
  await lease.admitRequest(declared, waitMs);
  const raw = await readAll(req, limit, { lease, declared });
  if (!compressed) return raw;
  const size = trailerSize(raw);
  if (size > limit) throw new ApiError('payload_too_large', `request body of ${raw.length} gzip-compressed bytes inflates to ${size} bytes, more than the limit of ${limit} bytes`);
  await lease.admitInflated(size, waitMs);
  return inflateBody(raw, size);
}

/** The reader of each client request now being read (readAll, a BodyView): told when its call is cut. */
const readers = new WeakMap<Readable, (err: Error) => void>();

/**
 * Ends the reading of a client's request with `err` (its call was cut: bodyWatch.ts); the request
 * is left paused. True when a reader was told.
 */
export function cutBody(req: IncomingMessage, err: Error): boolean {
  const reader = readers.get(req);
  req.pause();
  if (reader === undefined) return false;
  reader(err);
  return true;
}

/**
 * Destroys a stream nobody reads any more. Its 'error' is expected then and must not crash the
 * process: undici reports the abort of an unread answer as one, with nobody listening.
 */
export function discard(stream: Readable): void {
  stream.on('error', () => undefined);
  stream.destroy();
}

export interface ReadOptions {
  /** Past the limit, a client's request is drained (so its 413 can be read); a model's answer is destroyed. */
  overflow?: 'drain' | 'destroy';
  /** Counts the bytes as they arrive and, with `declared`, reads into a pooled buffer. */
  lease?: BodyLease;
  /** The body's Content-Length, when known. */
  declared?: number;
}

/**
 * A body being read whole under a byte limit, chunk by chunk (readAll below, and the undici
 * transport's buffered answers). With a lease and a known length, a large body is read into a
 * pooled buffer instead of being concatenated; the lease reserves the bytes as they come.
 */
export class WholeBody {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  /** Bytes copied into `into`; any more than it holds are kept in `chunks`. */
  private copied = 0;
  private readonly into: Buffer | undefined;

  constructor(private readonly limit: number, private readonly lease?: BodyLease, declared?: number) {
    this.into = lease && declared !== undefined ? lease.bufferFor(declared) : undefined;
  }

  /** Takes a chunk; false, taking nothing, when it would pass the limit. */
  add(chunk: Buffer): boolean {
    if (this.size + chunk.length > this.limit) return false;
    const into = this.into;
    if (into && this.chunks.length === 0 && this.copied + chunk.length <= into.length) this.copied += chunk.copy(into, this.copied);
    else this.chunks.push(chunk);
    this.size += chunk.length;
    this.lease?.cover(this.size);
    return true;
  }

  /** The body read so far, as one Buffer. */
  result(): Buffer {
    const { chunks, into, size } = this;
    if (!into) return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
    // More than declared cannot happen over HTTP/1.1; if it did, the tail is joined on.
    return chunks.length === 0 ? into.subarray(0, this.copied) : Buffer.concat([into.subarray(0, this.copied), ...chunks], size);
  }
}

/**
 * Reads a whole stream (a request, or a model's answer) into one Buffer (a WholeBody), failing as
 * soon as it passes `limit` bytes.
 */
export function readAll(req: Readable, limit: number, opts: ReadOptions = {}): Promise<Buffer> {
  const { overflow = 'drain', lease } = opts;
  const declared = opts.declared ?? ('headers' in req ? declaredLength((req as IncomingMessage).headers) : undefined);
  const refused = overDeclared(limit, declared);
  if (refused) {
    // Refused unread: a model's answer is cut off (its connection is not left busy); a client's
    // request is left to the 413's Connection: close.
    if (overflow === 'destroy') discard(req);
    return Promise.reject(refused);
  }
  const body = new WholeBody(limit, lease, declared);
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      if (body.add(chunk)) return;
      cleanup();
      // A client's request is drained so its 413 can be read; a model's answer is cut off.
      if (overflow === 'destroy') discard(req);
      else req.resume();
      reject(tooLarge(limit));
    };
    const onEnd = (): void => {
      cleanup();
      resolve(body.result());
    };
    const onError = (err: Error): void => {
      cleanup();
      reject(err);
    };
    const onAborted = (): void => {
      cleanup();
      reject(Object.assign(new Error('the connection closed before the whole body arrived'), { code: 'ECONNRESET' }));
    };
    const cleanup = (): void => {
      if (readers.get(req) === onError) readers.delete(req);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onAborted);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onAborted);
    readers.set(req, onError);
  });
}

/**
 * A readable view over an incoming request. Destroying the view (as an HTTP client does when a
 * connection fails) detaches it without destroying the request, so that a view that never read
 * anything can be replaced by a new one for a retry. Past `limit` bytes the view errors with 413.
 */
export class BodyView extends Readable {
  bytes = 0;
  private attached = false;

  constructor(private readonly src: IncomingMessage, private readonly limit: number) {
    super({ highWaterMark: 64 * 1024 });
  }

  private readonly onData = (chunk: Buffer): void => {
    this.bytes += chunk.length;
    if (this.bytes > this.limit) {
      this.detach();
      this.destroy(tooLarge(this.limit));
      return;
    }
    if (!this.push(chunk)) this.src.pause();
  };

  private readonly onEnd = (): void => {
    this.detach();
    this.push(null);
  };

  private readonly onError = (err: Error): void => {
    this.detach();
    this.destroy(err);
  };

  override _read(): void {
    if (!this.attached) {
      this.attached = true;
      this.src.on('data', this.onData);
      this.src.on('end', this.onEnd);
      this.src.on('error', this.onError);
      readers.set(this.src, this.onError);
      if (this.src.readableEnded) this.onEnd();
    }
    this.src.resume();
  }

  private detach(): void {
    if (!this.attached) return;
    this.attached = false;
    if (readers.get(this.src) === this.onError) readers.delete(this.src);
    this.src.off('data', this.onData);
    this.src.off('end', this.onEnd);
    this.src.off('error', this.onError);
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.detach();
    this.src.pause();
    cb(err);
  }
}
