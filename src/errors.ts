// The error catalog: every way a call can fail, with its HTTP status and google.rpc status name, and
// how each API dialect renders it. Handlers throw ApiError; one responder (gateway/respond.ts) turns
// it into exactly one response. Nothing else formats errors.

/** google.rpc.Code names used on the wire (what gcloud and the client libraries print). */
export type RpcStatus =
  | 'INVALID_ARGUMENT' | 'NOT_FOUND' | 'UNAVAILABLE' | 'DEADLINE_EXCEEDED' | 'INTERNAL'
  | 'UNIMPLEMENTED' | 'UNAUTHENTICATED' | 'PERMISSION_DENIED' | 'RESOURCE_EXHAUSTED'
  | 'FAILED_PRECONDITION' | 'ABORTED' | 'CANCELLED' | 'UNKNOWN';

interface CatalogEntry {
  http: number;
  rpc: RpcStatus;
  /** What the caller can do about it; shown in the README's error table. */
  description: string;
}

/** Stable error codes. The README's error table is generated from this catalog's descriptions. */
export const CATALOG = {
  invalid_json: { http: 400, rpc: 'INVALID_ARGUMENT', description: 'The body is not valid JSON (or is empty).' },
  invalid_payload: { http: 400, rpc: 'INVALID_ARGUMENT', description: 'The JSON breaks a payload rule; the message names the path and what was expected.' },
  invalid_request: { http: 400, rpc: 'INVALID_ARGUMENT', description: 'A header or URL part is malformed.' },
  unknown_deployed_model: { http: 400, rpc: 'INVALID_ARGUMENT', description: 'The X-Predictgate-Deployed-Model-Id header names no deployed model of the Endpoint; the message lists its ids.' },
  invalid_manifest: { http: 400, rpc: 'FAILED_PRECONDITION', description: 'The Endpoint (or, on the TF Serving surface, the DeployedModel) breaks a rule of its manifest, so it takes no calls until the manifest is fixed; the message names it and the rules, as its status does (reason InvalidSpec).' },
  openai_unsupported: { http: 400, rpc: 'FAILED_PRECONDITION', description: 'An OpenAI-compatible call (chat/completions, completions) went to a deployed model whose manifest does not say that its container serves that route (modelSpec.openai); the message names the model.' },
  explain_unsupported: { http: 400, rpc: 'FAILED_PRECONDITION', description: 'explain on a deployed model without an explain route (containerSpec.explainRoute, or a predictRoute ending in :predict).' },
  graph_missing_field: { http: 401, rpc: 'INVALID_ARGUMENT', description: 'GraphStorm payload: a required field is missing (GraphStorm status_code 401); the message names it.' },
  graph_missing_value: { http: 402, rpc: 'INVALID_ARGUMENT', description: 'GraphStorm payload: a field is present but has no value (null, empty string or empty list; status_code 402).' },
  graph_unknown_node_type: { http: 403, rpc: 'INVALID_ARGUMENT', description: 'GraphStorm payload: a target\'s node_type is the type of no node in graph.nodes (status_code 403).' },
  graph_unknown_node_id: { http: 404, rpc: 'INVALID_ARGUMENT', description: 'GraphStorm payload: a target\'s node_id is not a node of its type in graph.nodes (status_code 404).' },
  graph_construction: { http: 411, rpc: 'INVALID_ARGUMENT', description: 'GraphStorm payload: no graph can be built from it (an edge to a node not in graph.nodes, a node listed twice, feature names differing within a node or edge type; status_code 411).' },
  graph_task_mismatch: { http: 421, rpc: 'FAILED_PRECONDITION', description: 'GraphStorm payload: gml_task is not the deployed model\'s gmlTask (status_code 421).' },
  unauthenticated: { http: 401, rpc: 'UNAUTHENTICATED', description: 'With --auth kubernetes: the call has no Authorization: Bearer token, or the Kubernetes API did not accept it (expired, revoked, for another audience); the answer carries WWW-Authenticate: Bearer.' },
  permission_denied: { http: 403, rpc: 'PERMISSION_DENIED', description: 'With --auth kubernetes: the caller may not make this call; the message names the user, the verb, the resource and the namespace RBAC was asked about.' },
  endpoint_not_found: { http: 404, rpc: 'NOT_FOUND', description: 'No Endpoint with that name in that project (namespace), or no Endpoint has that Host as its FQDN.' },
  route_not_found: { http: 404, rpc: 'NOT_FOUND', description: 'No such route on the gateway.' },
  method_not_allowed: { http: 405, rpc: 'UNIMPLEMENTED', description: 'The route exists but not for this HTTP method.' },
  client_timeout: { http: 408, rpc: 'DEADLINE_EXCEEDED', description: 'The request did not arrive in time: its headers not within HEADERS_TIMEOUT_SECONDS, or its body paused longer than BODY_TIMEOUT_SECONDS or arrived slower than BODY_MIN_BYTES_PER_SECOND; the model call (if any) is cancelled and the connection closed.' },
  payload_too_large: { http: 413, rpc: 'INVALID_ARGUMENT', description: 'The body is larger than maxRequestBytes (gateway default, Endpoint or DeployedModel override), sent or, with Content-Encoding: gzip, decompressed.' },
  invalid_encoding: { http: 400, rpc: 'INVALID_ARGUMENT', description: 'The body says Content-Encoding: gzip but is not gzip data (or is cut short); the message says what zlib found.' },
  unsupported_encoding: { http: 415, rpc: 'INVALID_ARGUMENT', description: 'The body\'s Content-Encoding is neither gzip nor identity (the calls the gateway reads take those two; rawPredict passes any coding on to the model); the answer\'s Accept-Encoding header lists what is taken.' },
  auth_throttled: { http: 429, rpc: 'RESOURCE_EXHAUSTED', description: 'With --auth kubernetes: the call needed a TokenReview or SubjectAccessReview and more than AUTH_REVIEWS_PER_SECOND were being asked for (calls with remembered tokens are not affected). Retry after the Retry-After header\'s seconds.' },
  model_busy: { http: 429, rpc: 'RESOURCE_EXHAUSTED', description: 'The deployed model has spec.serving.maxConcurrency calls in flight on each replica and its queue (maxQueuedCalls) is full, or the call waited in the queue longer than queueTimeoutSeconds, or the model is waking from zero replicas and COLD_START_QUEUE calls already wait for it; nothing reached the model. Retry after the Retry-After header\'s seconds.' },
  model_starting: { http: 503, rpc: 'UNAVAILABLE', description: 'The deployed model was scaled to zero and no replica became ready within the call\'s timeoutSeconds while the call waited; nothing reached the model. Retry after the Retry-After header\'s seconds.' },
  no_ready_destination: { http: 503, rpc: 'UNAVAILABLE', description: 'The Endpoint has no Ready deployed model with traffic.' },
  overloaded: { http: 503, rpc: 'UNAVAILABLE', description: 'The gateway\'s memory for request and answer bodies held whole (BUFFERED_BODY_BYTES) stayed full for the call\'s timeoutSeconds; retry later.' },
  auth_unavailable: { http: 503, rpc: 'UNAVAILABLE', description: 'With --auth kubernetes: the Kubernetes API could not be asked whether the caller may call (unreachable, too slow, or it refused the gateway\'s review), so the call is refused; the message says what failed.' },
  too_many_connections: { http: 503, rpc: 'UNAVAILABLE', description: 'The gateway already has MAX_CONNECTIONS connections open, or the client\'s address MAX_CONNECTIONS_PER_CLIENT; the new connection is answered at once and closed. Reuse connections (keep-alive) or retry after Retry-After.' },
  model_unreachable: { http: 503, rpc: 'UNAVAILABLE', description: 'No replica of the chosen deployed model accepted a connection (after one retry on another replica).' },
  upstream_timeout: { http: 504, rpc: 'DEADLINE_EXCEEDED', description: 'The model\'s whole answer did not arrive within timeoutSeconds, or a streamed answer paused longer than UPSTREAM_IDLE_TIMEOUT_SECONDS.' },
  upstream_error: { http: 500, rpc: 'INTERNAL', description: 'The model answered 4xx/5xx: its status and message are passed on.' },
  bad_upstream_response: { http: 502, rpc: 'INTERNAL', description: 'The model answered 200 with a body that is not a valid prediction response (not JSON, no predictions list, wrong number of predictions).' },
  upstream_reset: { http: 502, rpc: 'UNAVAILABLE', description: 'The model closed the connection before answering. If the answer had started, the client connection is aborted instead (never a truncated 200).' },
  internal: { http: 500, rpc: 'INTERNAL', description: 'A bug in the gateway; the request id is in the logs.' },
  shutting_down: { http: 503, rpc: 'UNAVAILABLE', description: 'The gateway was shutting down and its drain time (DRAIN_SECONDS) ran out before this call was answered; nothing of the answer had been sent. Retry: another gateway replica takes it.' },
  client_closed: { http: 499, rpc: 'CANCELLED', description: 'The client went away before the answer was complete; nothing is sent (logged and counted as 499, like nginx). A model call still waiting for its answer is cancelled.' },
} as const satisfies Record<string, CatalogEntry>;

export type ErrorCode = keyof typeof CATALOG;

/** The one error type of the project. `httpStatus` may be overridden for passed-on upstream errors. */
export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly httpStatus: number;
  readonly rpcStatus: RpcStatus;
  /** Headers the error answer carries (Allow on a 405, say). */
  headers: Record<string, string> | undefined;

  constructor(code: ErrorCode, message: string, httpStatus?: number) {
    super(message);
    this.headers = undefined;
    this.name = 'ApiError';
    this.code = code;
    this.httpStatus = httpStatus ?? CATALOG[code].http;
    this.rpcStatus = httpStatus === undefined ? CATALOG[code].rpc : rpcStatusForHttp(httpStatus);
  }
}

/** The google.rpc status that Google APIs pair with an HTTP status (google/rpc/code.proto mapping). */
export function rpcStatusForHttp(status: number): RpcStatus {
  switch (status) {
    case 400: return 'INVALID_ARGUMENT';
    case 401: return 'UNAUTHENTICATED';
    case 403: return 'PERMISSION_DENIED';
    case 404: return 'NOT_FOUND';
    case 409: return 'ABORTED';
    case 413: return 'INVALID_ARGUMENT';
    case 429: return 'RESOURCE_EXHAUSTED';
    case 499: return 'CANCELLED';
    case 501: return 'UNIMPLEMENTED';
    case 503: return 'UNAVAILABLE';
    case 504: return 'DEADLINE_EXCEEDED';
    default:
      if (status >= 400 && status < 500) return 'FAILED_PRECONDITION';
      if (status >= 500 && status < 600) return 'INTERNAL';
      return 'UNKNOWN';
  }
}

/**
 * Which wire dialect a call speaks; it decides the error body's shape. `graphstorm` is predict on a
 * graphstorm deployed model, whichever path (Vertex or GDC) it came by: GraphStorm's response body.
 */
export type Dialect = 'vertex' | 'gdc' | 'tfserving' | 'graphstorm' | 'openai';

/**
 * Renders an error body: google.rpc.Status for Vertex, `{"error": "..."}` for GDC and TF Serving,
 * GraphStorm's response body (status_code = the HTTP status, request_uid = the request id) for graphstorm,
 * OpenAI's error object for the OpenAI-compatible routes (what the openai SDKs read).
 */
export function errorBody(err: ApiError, dialect: Dialect, requestId = ''): string {
  if (dialect === 'vertex') {
    return JSON.stringify({ error: { code: err.httpStatus, message: err.message, status: err.rpcStatus } });
  }
  if (dialect === 'openai') return JSON.stringify(openAiError(err));
  if (dialect === 'graphstorm') {
    return JSON.stringify({ status_code: err.httpStatus, request_uid: requestId, message: '', error: err.message, data: {} });
  }
  return JSON.stringify({ error: err.message });
}

/** OpenAI's error object: `{"error": {"message", "type", "param", "code"}}`, the type from the HTTP status as OpenAI's API has them. */
export function openAiError(err: ApiError): { error: { message: string; type: string; param: string | null; code: string } } {
  return { error: { message: err.message, type: openAiErrorType(err.httpStatus), param: paramOf(err), code: err.code } };
}

/** The field a payload error names (its message starts with the field's path: `messages[0].role: ...`). */
function paramOf(err: ApiError): string | null {
  if (err.code !== 'invalid_payload') return null;
  const m = /^([A-Za-z_][\w]*(?:\[\d+\]|\.[A-Za-z_]\w*)*): /.exec(err.message);
  return m && m[1] !== 'body' ? m[1] : null;
}

function openAiErrorType(status: number): string {
  switch (status) {
    case 401: return 'authentication_error';
    case 403: return 'permission_error';
    case 404: return 'not_found_error';
    case 429: return 'rate_limit_error';
    default: return status < 500 ? 'invalid_request_error' : 'server_error';
  }
}

/** Any thrown value as an ApiError; unknown errors become `internal` without leaking their text. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  return new ApiError('internal', 'internal error in the gateway; see its logs for the request id');
}

/** The README's error table (test/unit/docs.test.ts keeps the README in step with it). */
export function catalogMarkdown(): string {
  const rows = (Object.keys(CATALOG) as ErrorCode[]).map((code) => {
    const e: CatalogEntry = CATALOG[code];
    return `| \`${code}\` | ${e.http} | \`${e.rpc}\` | ${e.description} |`;
  });
  return ['| code (logs) | HTTP | status | when |', '| --- | --- | --- | --- |', ...rows].join('\n');
}
