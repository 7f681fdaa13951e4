// The writable a streamed call's answer goes into on its way to the client (the transports pipe the
// model's answer into it): it writes each part to the client as it comes, holds the model back
// through TCP while the client reads slowly (a write the client's socket does not take at once
// waits for its 'drain' before the next part is taken), and ends a stream the gateway has to cut
// in the form's own way, never as an answer that looks complete:
//  - 'sse' (text/event-stream): parts go out as whole events; a cut stream ends with an `event:
//    error` carrying OpenAI's error object, then the answer's clean end;
//  - 'httpBody' (the client libraries' `$alt=json`): each part becomes one google.api.HttpBody of a
//    JSON array; a cut stream aborts the client connection (the Node client takes an error element
//    for an empty HttpBody and a closed array for success: an abort is the one failure it sees);
//  - 'bytes' (anything else): parts as they come; a cut stream aborts the client connection.
// A call of the gRPC surface (`errorTrailer`) ends a cut stream, whatever its form, with a trailer
// carrying the error, which the surface turns into the call's status (grpc/hop.ts).
import type { ServerResponse } from 'node:http';
import { Writable } from 'node:stream';
import { ApiError } from '../../errors.js';
import { SseFramer, errorEvent } from './sse.js';

export type RelayMode = 'sse' | 'httpBody' | 'bytes';

/** What a cut stream can be asked to do from outside (the drain, when its time runs out). */
export interface CuttableStream {
  /** Ends the stream now with `err` (an error event, or the connection's abort). */
  cut(err: ApiError): void;
}

export interface RelayOptions {
  mode: RelayMode;
  /** 'httpBody': the model's Content-Type, given with each part. */
  contentType?: string;
  /** 'sse': sees every whole event before it goes out; false keeps it from the client. */
  onEvent?(event: Buffer): boolean;
  /** Sees every part as the model sent it, before it is relayed. */
  tap?(chunk: Buffer): void;
  /** Told the bytes the relay holds now (an unfinished event, and what the client's socket has not taken), as they change. */
  held?(bytes: number): void;
  /** How a transport's failure reads as an error of the catalog (upstreamFailure, with the call's model and deadline). */
  explain(err: Error): ApiError;
  /** A cut stream ends cleanly with this trailer, the error's percent-encoded JSON `{status, message}` (calls of the gRPC surface). */
  errorTrailer?: string;
}

/** Most bytes taken from the model and not yet handed to the client's socket (besides one event being completed). */
const RELAY_HIGH_WATER_BYTES = 16 * 1024;

export class StreamRelay extends Writable implements CuttableStream {
  /** The error the stream was ended with, when the gateway cut it with an error event ('sse') or trailer. */
  endedWith: ApiError | undefined;
  private readonly framer: SseFramer | undefined;
  private parts = 0;
  /** A part's callback, waiting for the client's socket to drain. */
  private waiting: (() => void) | undefined;

  constructor(private readonly res: ServerResponse, private readonly opts: RelayOptions) {
    super({ highWaterMark: RELAY_HIGH_WATER_BYTES });
    this.framer = opts.mode === 'sse' ? new SseFramer() : undefined;
    res.on('drain', () => {
      this.report();
      this.resume();
    });
    // The client left: the relay closes unfinished, which ends the model's call (followAnswer).
    res.once('close', () => {
      this.resume();
      if (!res.writableFinished) this.destroy();
    });
    // Gone already (the client left while the model worked): no 'close' is to come.
    if (res.destroyed) this.destroy();
  }

  /** The bytes held now: an unfinished event, and what the client's socket has not taken. */
  private report(): void {
    this.opts.held?.((this.framer?.held ?? 0) + this.res.writableLength);
  }

  cut(err: ApiError): void {
    this.destroy(err);
  }

  private resume(): void {
    const cb = this.waiting;
    this.waiting = undefined;
    cb?.();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, cb: (err?: Error | null) => void): void {
    let ok = true;
    try {
      // Each event is its own write: with the events of a chunk corked into one, a reader that
      // stopped reading was never resumed on Node 24 (no 'drain' came; the slow-reader test hangs).
      for (const part of this.outgoing(chunk)) ok = this.res.write(part) && ok;
    } catch (err) {
      // A part the relay cannot pass on (an event past MAX_EVENT_BYTES) cuts the stream.
      this.destroy(err as Error);
      return;
    }
    this.report();
    if (ok || this.res.destroyed) cb();
    else this.waiting = () => cb();
  }

  override _final(cb: (err?: Error | null) => void): void {
    const rest = this.framer?.rest();
    if (rest) this.res.write(rest);
    if (this.opts.mode === 'httpBody') this.res.write(this.parts === 0 ? '[]' : ']');
    this.res.end();
    cb();
  }

  /**
   * Closing: with an error (the model failed or went quiet, the deadline passed, the drain ran out),
   * the client's answer is ended in the mode's way. No error is passed on: the call's outcome is
   * `endedWith` (or, for 'bytes', the transport's own failure).
   */
  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    const { res } = this;
    if (err && !res.destroyed && !res.writableEnded) {
      const api = err instanceof ApiError ? err : this.opts.explain(err);
      const trailer = this.opts.errorTrailer;
      if (trailer !== undefined) {
        this.endedWith = api;
        res.addTrailers({ [trailer]: encodeURIComponent(JSON.stringify({ status: api.rpcStatus, message: api.message })) });
        res.end();
      } else if (this.opts.mode !== 'sse') res.destroy(err);
      else {
        this.endedWith = api;
        res.end(errorEvent(api));
      }
    }
    this.resume();
    cb(null);
  }

  /** The parts a chunk from the model becomes. */
  private outgoing(chunk: Buffer): Buffer[] {
    this.opts.tap?.(chunk);
    switch (this.opts.mode) {
      case 'bytes':
        return [chunk];
      case 'sse': {
        const events = (this.framer as SseFramer).push(chunk);
        const onEvent = this.opts.onEvent;
        return onEvent ? events.filter((e) => onEvent(e)) : events;
      }
      case 'httpBody': {
        const element = JSON.stringify({ contentType: this.opts.contentType ?? '', data: chunk.toString('base64') });
        return [Buffer.from(`${this.parts++ === 0 ? '[' : ','}${element}`)];
      }
    }
  }
}
