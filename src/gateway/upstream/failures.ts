// How a failed model call reads: which transport errors mean that nothing reached the model (so
// the call may go to another replica), and the catalog error each failure becomes.
import { ApiError } from '../../errors.js';
import { CLIENT_ABORTED } from './transport.js';
import type { Outcome } from './balancer.js';

// Errors that only happen while connecting (EHOSTUNREACH and the like can also hit an established
// socket after the body went out, so they are not here: such a call is never re-sent).
const CONNECT_FAILURES = new Set(['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EADDRNOTAVAIL']);
const UNREACHABLE = new Set([...CONNECT_FAILURES, 'EHOSTUNREACH', 'ENETUNREACH']);
const TIMEOUTS = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UPSTREAM_TIMEOUT']);

function errorCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : undefined;
}

/** Whether the call failed before any of it reached the model (the connection was never made). */
export function isConnectFailure(err: unknown): boolean {
  return CONNECT_FAILURES.has(errorCode(err) ?? '');
}

/** The replica's connection was refused or broke (not a slow answer): it may be gone. */
const CONNECTION_LOSSES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']);

export function isConnectionLoss(err: unknown): boolean {
  return CONNECTION_LOSSES.has(errorCode(err) ?? '');
}

const REPLICA_FAILURES = new Set([...UNREACHABLE, ...TIMEOUTS, 'UPSTREAM_IDLE_TIMEOUT', 'ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);

/**
 * What a failed attempt says about its replica, for outlier detection: connect failures, resets
 * and timeouts are the replica's; the client leaving, a body over its limit and anything the
 * gateway itself refused are not.
 */
export function outcomeOf(err: unknown): Outcome {
  if (err instanceof ApiError) return 'neutral';
  return REPLICA_FAILURES.has(errorCode(err) ?? '') ? 'failure' : 'neutral';
}

/** Maps a transport failure (after any retry) to the catalog. */
export function upstreamFailure(err: unknown, modelId: string, timeoutMs: number): ApiError {
  if (err instanceof ApiError) return err;
  const code = errorCode(err);
  if (code === 'ERR_STREAM_PREMATURE_CLOSE' || code === CLIENT_ABORTED) {
    // The client left (its request broke off, the call was cancelled, or the response we streamed into closed first).
    return new ApiError('client_closed', `the client closed the connection while deployed model ${modelId} was answering`);
  }
  if (code === 'UPSTREAM_IDLE_TIMEOUT') {
    const idleMs = (err as { idleMs?: number }).idleMs ?? timeoutMs;
    return new ApiError('upstream_timeout', `deployed model ${modelId} stopped sending its answer for ${idleMs / 1000} s`);
  }
  if (TIMEOUTS.has(code ?? '')) {
    return new ApiError('upstream_timeout', `deployed model ${modelId} did not answer within ${timeoutMs / 1000} s`);
  }
  if (UNREACHABLE.has(code ?? '')) {
    return new ApiError('model_unreachable', `deployed model ${modelId} is unreachable (${code}); no replica accepted a connection`);
  }
  return new ApiError('upstream_reset', `deployed model ${modelId} closed the connection before answering (${code ?? (err instanceof Error ? err.message : 'error')})`);
}
