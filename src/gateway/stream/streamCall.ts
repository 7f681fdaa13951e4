// One streamed call to a model (streamRawPredict, the OpenAI routes): the body goes out, and the
// answer comes back to the client part by part as the model sends it, through a StreamRelay. The
// status and headers go out the moment the model's do (nothing waits for a first part); the call is
// held to the destination's stream deadline and, once the answer has started, to its idle limit
// between parts. A failure before the answer started is the call's one ordinary error; after it, the
// relay ends the stream (an error event, or the connection's abort) and the call reports StreamCut.
import type { Readable } from 'node:stream';
import { ApiError } from '../../errors.js';
import { upstreamFailure } from '../upstream/index.js';
import type { EndpointCall } from '../call.js';
import { StreamRelay, type RelayMode } from './relay.js';
import { STREAM_ERROR_TRAILER } from '../grpc/hop.js';

/** The model's answer headers a streamed answer passes on; one relayed as it is ('bytes') keeps Content-Length too. */
const PASSED_HEADERS = ['content-type', 'content-encoding', 'content-disposition', 'cache-control'];
const PASSED_HEADERS_WITH_LENGTH = [...PASSED_HEADERS, 'content-length'];

/** A stream the gateway ended with an error after its answer had started: already answered, with this outcome. */
export class StreamCut extends Error {
  constructor(readonly api: ApiError) {
    super(api.message);
  }
}

export interface StreamedRequest {
  /** Default POST. */
  method?: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body: Buffer | (() => Readable);
  /** The prompt's prefix keys (upstream/affinity.ts), for a load-aware pick. */
  prefix?: readonly string[];
  /** How the answer is relayed, from its status and Content-Type. */
  mode(statusCode: number, contentType: string | undefined): RelayMode;
  /** 'sse' answers: sees each whole event; false keeps it from the client. */
  onEvent?(event: Buffer): boolean;
  /** Sees every part of the answer as the model sent it. */
  tap?(chunk: Buffer): void;
}

export function isEventStream(contentType: string | undefined): boolean {
  return contentType !== undefined && contentType.split(';')[0].trim().toLowerCase() === 'text/event-stream';
}

/** Sends the call and relays the answer; resolves once the answer has been handed over whole. */
export async function streamToClient(call: EndpointCall, out: StreamedRequest): Promise<void> {
  const { res, svc, dest } = call;
  let relay: StreamRelay | undefined;
  const sentAt = process.hrtime.bigint();
  const seconds = (): number => Number(process.hrtime.bigint() - sentAt) / 1e9;
  out.headers['x-request-id'] = call.id;
  try {
    await svc.upstream.stream(dest, {
      method: out.method,
      path: out.path,
      headers: out.headers,
      body: out.body,
      timeoutMs: dest.streamTimeoutMs,
      idleTimeoutMs: dest.streamIdleTimeoutMs,
      cancel: call.cancel,
      long: true,
      prefix: out.prefix,
      onAnswered: () => svc.metrics.upstreamDone(dest, seconds()),
    }, (statusCode, headers) => {
      svc.metrics.upstreamHeaders(dest, seconds());
      const contentType = typeof headers['content-type'] === 'string' ? headers['content-type'] : undefined;
      const mode = out.mode(statusCode, contentType);
      res.statusCode = statusCode;
      // The gRPC surface's calls are chunked whatever the form: a cut stream ends with a trailer.
      for (const h of mode === 'bytes' && !call.viaGrpc ? PASSED_HEADERS_WITH_LENGTH : PASSED_HEADERS) {
        const v = headers[h];
        if (v !== undefined) res.setHeader(h, v);
      }
      if (mode === 'httpBody') res.setHeader('content-type', 'application/json');
      if (mode === 'sse') {
        if (headers['cache-control'] === undefined) res.setHeader('cache-control', 'no-cache');
        // A proxy in front of the gateway (nginx, an ingress) passes the events on as they come too.
        res.setHeader('x-accel-buffering', 'no');
      }
      for (const k in dest.answerHeaders) res.setHeader(k, dest.answerHeaders[k]);
      // The request is over for the body memory (a streamed one holds none); the stream's held bytes count from now.
      call.lease.requestSent();
      relay = new StreamRelay(res, { mode, contentType, onEvent: out.onEvent, tap: out.tap, held: (bytes) => call.lease.streamHeld(bytes), explain: (err) => midStreamFailure(err, call), errorTrailer: call.viaGrpc ? STREAM_ERROR_TRAILER : undefined });
      call.stream = relay;
      // A stream: an answer relayed part by part as events, and every streamRawPredict answer.
      if (mode !== 'bytes' || call.method === 'streamRawPredict') {
        svc.metrics.streamStarted(call);
        relay.once('close', () => svc.metrics.streamEnded(call));
      }
      res.flushHeaders();
      return relay;
    });
  } catch (err) {
    if (relay?.endedWith) throw new StreamCut(relay.endedWith);
    throw upstreamFailure(err, dest.deployedModelId, dest.streamTimeoutMs);
  } finally {
    call.stream = undefined;
  }
}

/** What a transport's failure in the middle of a streamed answer means, in the words of the stream limits. */
function midStreamFailure(err: Error, call: EndpointCall): ApiError {
  const { dest } = call;
  const code = (err as { code?: string }).code;
  if (code === 'UPSTREAM_IDLE_TIMEOUT') {
    return new ApiError('upstream_timeout', `deployed model ${dest.deployedModelId} sent nothing for ${dest.streamIdleTimeoutMs / 1000} s in the middle of its streamed answer (streamIdleTimeoutSeconds)`);
  }
  if (code === 'UPSTREAM_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT') {
    return new ApiError('upstream_timeout', `deployed model ${dest.deployedModelId} did not finish its streamed answer within ${dest.streamTimeoutMs / 1000} s (streamTimeoutSeconds)`);
  }
  const mapped = upstreamFailure(err, dest.deployedModelId, dest.streamTimeoutMs);
  if (mapped.code === 'upstream_reset') return new ApiError('upstream_reset', `deployed model ${dest.deployedModelId} closed the connection in the middle of its streamed answer (${code ?? err.message})`);
  return mapped;
}
