// Server-sent events as they pass through the gateway: cutting a model's byte stream into whole
// events (an event ends at an empty line; lines end in LF, CRLF or CR, as the HTML standard says),
// reading an event's data, and writing the error event that ends a stream the gateway had to cut.
// Pure: no sockets, no clocks.
import { ApiError, openAiError } from '../../errors.js';

const LF = 0x0a;
const CR = 0x0d;

/** The longest event the gateway holds while it waits for the event's end. */
export const MAX_EVENT_BYTES = 1024 * 1024;

/**
 * Cuts a byte stream into whole events. `push` returns the events a chunk completes (each with its
 * terminating empty line, as sent); bytes of an event not yet ended are kept for the next chunk.
 */
export class SseFramer {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Bytes of the current line so far (0 at a line's start). */
  private lineBytes = 0;
  /** The previous byte was a CR (a following LF belongs to the same line end). */
  private afterCr = false;

  constructor(private readonly maxEventBytes = MAX_EVENT_BYTES) {}

  /** The bytes of the unfinished event held now. */
  get held(): number {
    return this.pendingBytes;
  }

  push(chunk: Buffer): Buffer[] {
    const events: Buffer[] = [];
    let start = 0;
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i];
      if (c === LF && this.afterCr) {
        this.afterCr = false;
        // The LF of a CRLF: the line ended at the CR. An event that ended there ends after this LF.
        continue;
      }
      this.afterCr = c === CR;
      if (c !== LF && c !== CR) {
        this.lineBytes++;
        continue;
      }
      if (this.lineBytes > 0) {
        this.lineBytes = 0;
        continue;
      }
      // An empty line: the event ends here (with the LF of a CRLF, when it follows).
      let end = i + 1;
      if (c === CR && chunk[end] === LF) {
        end++;
        i++;
        this.afterCr = false;
      }
      events.push(this.take(chunk.subarray(start, end)));
      start = end;
    }
    if (start < chunk.length) this.keep(chunk.subarray(start));
    return events;
  }

  /** What is left unfinished when the stream ends (forwarded as the model sent it), then nothing. */
  rest(): Buffer | undefined {
    if (this.pendingBytes === 0) return undefined;
    const out = Buffer.concat(this.pending, this.pendingBytes);
    this.pending = [];
    this.pendingBytes = 0;
    return out;
  }

  private take(tail: Buffer): Buffer {
    if (this.pendingBytes === 0) return tail;
    const out = Buffer.concat([...this.pending, tail], this.pendingBytes + tail.length);
    this.pending = [];
    this.pendingBytes = 0;
    return out;
  }

  private keep(part: Buffer): void {
    if (this.pendingBytes + part.length > this.maxEventBytes) {
      throw new ApiError('bad_upstream_response', `the model sent a server-sent event longer than ${this.maxEventBytes} bytes`);
    }
    this.pending.push(part);
    this.pendingBytes += part.length;
  }
}

/** An event's fields that the gateway reads: its type (`event:`), and its `data:` lines joined with LF. */
export interface SseEvent {
  event: string | undefined;
  data: string | undefined;
}

const DATA_PREFIX = Buffer.from('data: ');

/** Reads one whole event (as SseFramer cut it). Comments and other fields are skipped. */
export function readEvent(bytes: Buffer): SseEvent {
  // What model servers send: one `data: ...` line and its LF LF; read without splitting lines.
  const n = bytes.length;
  if (n > 8 && bytes[n - 1] === LF && bytes[n - 2] === LF && bytes.indexOf(LF) === n - 2 && bytes.indexOf(CR) < 0 && bytes.subarray(0, 6).equals(DATA_PREFIX)) {
    return { event: undefined, data: bytes.toString('utf8', 6, n - 2) };
  }
  const text = bytes.toString('utf8');
  let event: string | undefined;
  let data: string | undefined;
  for (const line of text.split(/\r\n|\r|\n/)) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (name === 'data') data = data === undefined ? value : `${data}\n${value}`;
    else if (name === 'event') event = value;
  }
  return { event, data };
}

/**
 * The event that ends a stream the gateway cut (the model failed, went quiet, passed its deadline,
 * or the gateway is shutting down): `event: error` with OpenAI's error object as data, which both
 * openai SDKs raise as an APIError rather than take the stream for complete.
 */
export function errorEvent(err: ApiError): Buffer {
  return Buffer.from(`event: error\ndata: ${JSON.stringify(openAiError(err))}\n\n`);
}
