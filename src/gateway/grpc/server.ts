// The gRPC surface (GRPC_PORT): Vertex AI's PredictionService, v1 and v1beta1, as the official
// client libraries call it by default: Predict, Explain, RawPredict and StreamRawPredict (every
// other method is UNIMPLEMENTED). Each call is made as the REST call it names, through the hop
// (hop.ts), so it is routed, let in, limited, counted and drained as that call is; its answer comes
// back as the method's message, and a failure as one gRPC status whose code is the error's
// google.rpc code and whose message is the REST error's. A stream's parts go out as HttpBody
// messages as they come, held back while the client reads slowly (HTTP/2 flow control); a stream
// the gateway cuts ends with the error's status, never OK; a client that cancels closes the model's
// call. The port's connections are taken by the gateway's own listener and counted with the HTTP
// port's (MAX_CONNECTIONS, MAX_CONNECTIONS_PER_CLIENT) before grpc-js is handed them; a call's
// request message and a unary answer held whole count in the body budget (BUFFERED_BODY_BYTES).
import * as grpc from '@grpc/grpc-js';
import { createServer, type Server as NetServer, type Socket } from 'node:net';
import type { ClientRequest, IncomingMessage } from 'node:http';
import { Counter, type Registry } from 'prom-client';
import { ApiError, rpcStatusForHttp, toApiError, type RpcStatus } from '../../errors.js';
import type { Logger } from '../../log.js';
import { PIN_HEADER } from '../resolve.js';
import { Hop, readAnswer, STREAM_ERROR_TRAILER, type HopRequest } from './hop.js';
import { explainAnswer } from './explanation.js';
import {
  ExplainRequest, ExplainResponse, HttpBody, PredictRequest, PredictResponse, RawPredictRequest, StreamRawPredictRequest,
  type Codec, type ExplainRequestMessage, type ExplainResponseMessage, type HttpBodyMessage, type PredictResponseMessage, type RawPredictRequestMessage,
} from './proto.js';
import { jsonToValue, valueToJson } from './value.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** What decides whether a new connection is taken (connections.ts' ConnectionLimit): false, and `refuse` has been given it. */
export interface ConnectionGate {
  admit(socket: Socket, refuse: (socket: Socket) => void): boolean;
}

/** The gateway's body budget (bodyMemory.ts' BodyMemory): bytes counted in it without waiting, and given back. */
export interface BodyBudget {
  reserveNow(bytes: number): void;
  unreserve(bytes: number): void;
}

export interface GrpcOptions {
  hop: Hop;
  connections: ConnectionGate;
  /** Where a call's request message (for the call's life) and a unary answer (while held whole) are counted. */
  memory: BodyBudget;
  /** Largest request message (grpc.max_receive_message_length). */
  maxReceiveBytes: number;
  /** Largest unary answer taken from the REST surface (MAX_RESPONSE_BYTES). */
  maxAnswerBytes: number;
  maxJsonDepth: number;
  registry: Registry;
  logger: Logger;
}

/** The API versions served, each as Vertex's package google.cloud.aiplatform.{version}. */
const VERSIONS = ['v1', 'v1beta1'] as const;
type Version = (typeof VERSIONS)[number];

/** Metadata passed to the REST call as headers: the caller's token, its request id, the pinning header. */
const PASSED_METADATA = ['authorization', 'x-request-id', PIN_HEADER];
/** Headers of the REST answer passed back as metadata (initial on success, trailing on failure). */
const ANSWER_METADATA = ['x-request-id', 'x-vertex-ai-deployed-model-id', 'retry-after', 'www-authenticate'];
/** Most bytes of a stream's answer held on this side while the client reads slowly (besides one part). */
export const STREAM_HELD_BYTES = 64 * 1024;
/** At the drain's end, how long the calls just ended get to send their status before the connections close. */
const LAST_STATUS_MS = 1000;
/** Most of an error answer read for its message. */
const ERROR_BODY_BYTES = 64 * 1024;
const ENDPOINT_NAME = /^projects\/([^/]+)\/locations\/([^/]+)\/endpoints\/([^/]+)$/;

/** A failed call's status, as grpc-js sends it. */
type Failure = Partial<grpc.StatusObject> & { code: grpc.status; details: string };

export class GrpcSurface {
  readonly server: grpc.Server;
  private readonly calls: Counter<'method' | 'code'>;
  /** The port's listener: its connections, once let in, go to grpc-js. */
  private listener: NetServer | undefined;
  /** The connections handed to grpc-js and still open. */
  private readonly sockets = new Set<Socket>();
  /** Calls whose status has not been given to grpc-js yet. */
  private active = 0;
  /** Resolved when `active` falls to 0 (close() waits for it). */
  private onIdle: (() => void) | undefined;

  constructor(private readonly opts: GrpcOptions) {
    this.server = new grpc.Server({ 'grpc.max_receive_message_length': opts.maxReceiveBytes });
    this.calls = new Counter({
      name: 'predictgate_grpc_calls_total',
      help: 'Calls on the gRPC surface (GRPC_PORT), by method (Predict, Explain, RawPredict, StreamRawPredict; either API version) and gRPC status code name.',
      labelNames: ['method', 'code'],
      registers: [opts.registry],
    });
    for (const version of VERSIONS) this.server.addService(serviceOf(version), this.handlers(version));
  }

  /**
   * Listens (plaintext HTTP/2: TLS ends in front of the gateway, as for its HTTP port); resolves with
   * the port. A connection over the gateway's limits is closed at once: its client sees UNAVAILABLE.
   */
  listen(port: number, host: string): Promise<number> {
    const injector = this.server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
    const listener = (this.listener = createServer((socket) => {
      if (!this.opts.connections.admit(socket, (refused) => refused.destroy())) return;
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
      injector.injectConnection(socket);
    }));
    return new Promise((resolve, reject) => {
      listener.once('error', reject);
      listener.listen(port, host, () => {
        listener.off('error', reject);
        // Once listening, an error of the listener (a failed accept) is logged, never thrown.
        listener.on('error', (err) => this.opts.logger.warn({ err }, 'gRPC port: the listener failed to take a connection'));
        resolve((listener.address() as { port: number }).port);
      });
    });
  }

  /**
   * The drain begins: no new connection is taken; calls under way go on (the HTTP server's drain ends
   * them), and a new call on an open connection meets that drain's refusal (UNAVAILABLE). The
   * connections stay open until close(), after their calls' statuses.
   */
  drain(): void {
    this.listener?.close();
  }

  /**
   * After the HTTP server's drain: the calls it ended get LAST_STATUS_MS to send their status (the
   * REST answers are over, the gRPC ones close after them); then every connection left is closed, and the hop.
   */
  async close(): Promise<void> {
    this.drain();
    // The calls the HTTP drain ended give their status to grpc-js once their REST answers' ends
    // arrive over the hop; only then are the sessions closed (closing them first resets the streams,
    // and a client would read CANCELLED instead of the drain's UNAVAILABLE).
    const idle = this.active === 0 ? Promise.resolve() : new Promise<void>((resolve) => (this.onIdle = resolve));
    const lastStatus = sleep(LAST_STATUS_MS, undefined, { ref: false });
    await Promise.race([idle, lastStatus]);
    // grpc-js's graceful shutdown (GOAWAY) reports its sessions closed before their sockets have
    // sent the last frames; the sockets' own close says when they have.
    this.server.tryShutdown(() => undefined);
    const closed = [...this.sockets].map((socket) => new Promise((resolve) => socket.once('close', resolve)));
    await Promise.race([Promise.all(closed), lastStatus]);
    this.server.forceShutdown();
    await this.opts.hop.close();
  }

  /** The methods' handlers; each request arrives as its bytes and is decoded here, so that a malformed one is INVALID_ARGUMENT. */
  private handlers(version: Version): grpc.UntypedServiceImplementation {
    return {
      Predict: (call: grpc.ServerUnaryCall<Buffer, PredictResponseMessage>, done: grpc.sendUnaryData<PredictResponseMessage>) =>
        this.unary('Predict', call, done, () => this.envelopeRequest(version, 'predict', decoded(PredictRequest, 'PredictRequest', call.request)), (body) => predictAnswer(body)),
      Explain: (call: grpc.ServerUnaryCall<Buffer, ExplainResponseMessage>, done: grpc.sendUnaryData<ExplainResponseMessage>) =>
        this.unary('Explain', call, done, () => this.envelopeRequest(version, 'explain', decoded(ExplainRequest, 'ExplainRequest', call.request)), (body) => explainAnswer(body)),
      RawPredict: (call: grpc.ServerUnaryCall<Buffer, HttpBodyMessage>, done: grpc.sendUnaryData<HttpBodyMessage>) =>
        this.unary('RawPredict', call, done, () => rawRequest(version, 'rawPredict', decoded(RawPredictRequest, 'RawPredictRequest', call.request)), (body, res) => ({ content_type: header(res, 'content-type') ?? '', data: body })),
      StreamRawPredict: (call: grpc.ServerWritableStream<Buffer, HttpBodyMessage>) =>
        this.stream(call, () => rawRequest(version, 'streamRawPredict', decoded(StreamRawPredictRequest, 'StreamRawPredictRequest', call.request))),
    };
  }

  /** predict's and explain's REST call: the instances and parameters as JSON (and explain's deployed model, which picks it). */
  private envelopeRequest(version: Version, verb: 'predict' | 'explain', m: ExplainRequestMessage): HopRequest {
    const depth = this.opts.maxJsonDepth;
    const body: Record<string, unknown> = { instances: (m.instances ?? []).map((v, i) => valueToJson(v, `instances[${i}]`, depth)) };
    if (m.parameters) body.parameters = valueToJson(m.parameters, 'parameters', depth);
    if (verb === 'explain' && m.deployed_model_id) body.deployedModelId = m.deployed_model_id;
    return { method: 'POST', path: restPath(version, m.endpoint, verb), headers: { 'content-type': 'application/json' }, body: Buffer.from(JSON.stringify(body)) };
  }

  /** A unary call: the REST call, then its answer whole as one message, or its error as the status. */
  private unary<Req extends Buffer, Res>(method: string, call: grpc.ServerUnaryCall<Req, Res>, done: grpc.sendUnaryData<Res>, build: () => HopRequest, answer: (body: Buffer, res: IncomingMessage) => Res): void {
    const held = this.held(call.request.length);
    const finish = (failure: Failure | null, value?: Res, res?: IncomingMessage): void => {
      this.calls.inc({ method, code: grpc.status[failure?.code ?? grpc.status.OK] });
      if (failure) done({ ...failure, metadata: failure.metadata ?? (res && answerMetadata(res)) });
      else done(null, value, res && answerMetadata(res));
      held.release();
    };
    const req = this.send(call.metadata, build, finish);
    if (!req) return;
    call.once('cancelled', () => req.destroy());
    req.once('response', (res: IncomingMessage) => {
      res.on('error', () => undefined);
      if (!ok(res)) return void failureOf(res).then((f) => finish(f, undefined, res));
      readAnswer(res, this.opts.maxAnswerBytes).then(({ body, cut }) => {
        held.add(body.length);
        if (cut) return finish(failed(new ApiError('bad_upstream_response', `the answer is larger than ${this.opts.maxAnswerBytes} bytes (MAX_RESPONSE_BYTES)`)), undefined, res);
        let value: Res;
        try {
          value = answer(body, res);
        } catch (err) {
          return finish(failed(err), undefined, res);
        }
        finish(null, value, res);
      }, () => finish(brokeOff(), undefined, res));
    });
  }

  /** A streamed call: the REST call's answer part by part as HttpBody messages, then OK or its error's status. */
  private stream(call: grpc.ServerWritableStream<Buffer, HttpBodyMessage>, build: () => HopRequest): void {
    let over = false;
    // The request message is held for the stream's life (grpc-js keeps it with the call), minutes for a generation.
    const held = this.held(call.request.length);
    const finish = (failure: Failure | null, res?: IncomingMessage): void => {
      if (over) return;
      over = true;
      held.release();
      this.calls.inc({ method: 'StreamRawPredict', code: grpc.status[failure?.code ?? grpc.status.OK] });
      if (failure) call.emit('error', { ...failure, metadata: failure.metadata ?? (res && answerMetadata(res)) });
      else call.end();
    };
    const req = this.send(call.metadata, build, finish);
    if (!req) return;
    call.once('cancelled', () => {
      if (!over) this.calls.inc({ method: 'StreamRawPredict', code: 'CANCELLED' });
      over = true;
      held.release();
      req.destroy();
    });
    req.once('response', (res: IncomingMessage) => {
      res.on('error', () => undefined);
      if (!ok(res)) return void failureOf(res).then((f) => finish(f, res));
      call.sendMetadata(answerMetadata(res));
      const contentType = header(res, 'content-type') ?? '';
      // Bytes handed to grpc-js and not yet taken by HTTP/2 (the client's flow-control window): past
      // STREAM_HELD_BYTES the REST answer waits, and so, through TCP, does the model.
      let held = 0;
      res.on('data', (chunk: Buffer) => {
        held += chunk.length;
        call.write({ content_type: contentType, data: chunk }, () => {
          held -= chunk.length;
          if (held <= STREAM_HELD_BYTES && res.isPaused()) res.resume();
        });
        if (held > STREAM_HELD_BYTES) res.pause();
      });
      res.once('end', () => {
        const cut = res.trailers[STREAM_ERROR_TRAILER];
        finish(cut === undefined ? null : cutFailure(cut), res);
      });
      res.once('close', () => {
        if (!res.complete) finish(brokeOff(), res);
      });
    });
  }

  /**
   * A call's lease, from its start until release (once): the call counted in flight (close() waits
   * for those), and its bytes counted in the body budget, with more added as the call holds them.
   */
  private held(bytes: number): { add(more: number): void; release(): void } {
    const memory = this.opts.memory;
    let count = 0;
    let released = false;
    const add = (more: number): void => {
      if (released) return;
      memory.reserveNow(more);
      count += more;
    };
    this.active++;
    add(bytes);
    return {
      add,
      release: () => {
        if (released) return;
        released = true;
        memory.unreserve(count);
        if (--this.active === 0) this.onIdle?.();
      },
    };
  }

  /** Starts the REST call; a request that cannot be made ends the call with its status at once. */
  private send(md: grpc.Metadata, build: () => HopRequest, finish: (f: Failure) => void): ClientRequest | undefined {
    let req: ClientRequest;
    try {
      const r = build();
      for (const k of PASSED_METADATA) {
        const v = md.get(k)[0];
        if (typeof v === 'string') r.headers[k] = v;
      }
      req = this.opts.hop.send(r);
    } catch (err) {
      finish(failed((err as NodeJS.ErrnoException).code === 'ERR_INVALID_CHAR' ? new ApiError('invalid_request', `a metadata value is not a valid header value (${(err as Error).message})`) : err));
      return undefined;
    }
    req.once('error', (err) => {
      this.opts.logger.debug({ err }, 'gRPC call: the REST call failed');
      finish(brokeOff());
    });
    return req;
  }
}

/** The service definition of PredictionService in one API version: the methods served, requests as bytes, answers encoded. */
function serviceOf(version: Version): grpc.ServiceDefinition {
  const bytes = (b: Buffer): Buffer => b;
  const method = <Res>(name: string, res: Codec<Res>, responseStream: boolean): grpc.MethodDefinition<Buffer, Res> => ({
    path: `/google.cloud.aiplatform.${version}.PredictionService/${name}`,
    requestStream: false,
    responseStream,
    requestDeserialize: bytes,
    requestSerialize: bytes,
    responseDeserialize: res.decode,
    responseSerialize: res.encode,
  });
  return {
    Predict: method('Predict', PredictResponse, false),
    Explain: method('Explain', ExplainResponse, false),
    RawPredict: method('RawPredict', HttpBody, false),
    StreamRawPredict: method('StreamRawPredict', HttpBody, true),
  };
}

/** A request message decoded; one protobuf cannot read (truncated, mistyped, nested past its 100 levels) is the caller's error. */
function decoded<T>(codec: Codec<T>, name: string, bytes: Buffer): T {
  try {
    return codec.decode(bytes);
  } catch (err) {
    throw new ApiError('invalid_request', `the request is not a valid ${name} message (${(err as Error).message})`);
  }
}

/** The REST path of an Endpoint's verb, from the request's `endpoint` (refused unless a full Endpoint name). */
function restPath(version: Version, endpoint: string | undefined, verb: string): string {
  const m = ENDPOINT_NAME.exec(endpoint ?? '');
  if (!m) throw new ApiError('invalid_request', `endpoint: expected projects/{project}/locations/{location}/endpoints/{endpoint}, got ${JSON.stringify(endpoint ?? '')}`);
  const [, project, location, name] = m.map((s) => encodeURIComponent(s));
  return `/${version}/projects/${project}/locations/${location}/endpoints/${name}:${verb}`;
}

/** rawPredict's and streamRawPredict's REST call: the HttpBody's bytes, with its content type. */
function rawRequest(version: Version, verb: 'rawPredict' | 'streamRawPredict', m: RawPredictRequestMessage): HopRequest {
  const body = m.http_body;
  const data = body?.data ?? new Uint8Array(0);
  return {
    method: 'POST',
    path: restPath(version, m.endpoint, verb),
    headers: body?.content_type ? { 'content-type': body.content_type } : {},
    body: Buffer.from(data.buffer, data.byteOffset, data.byteLength),
  };
}

/** PredictResponse from the REST predict answer. */
function predictAnswer(body: Buffer): PredictResponseMessage {
  const doc = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
  const out: PredictResponseMessage = {
    predictions: Array.isArray(doc.predictions) ? doc.predictions.map(jsonToValue) : [],
    deployed_model_id: typeof doc.deployedModelId === 'string' ? doc.deployedModelId : '',
  };
  if (typeof doc.model === 'string') out.model = doc.model;
  if (typeof doc.modelDisplayName === 'string') out.model_display_name = doc.modelDisplayName;
  if (typeof doc.modelVersionId === 'string') out.model_version_id = doc.modelVersionId;
  if (doc.metadata !== undefined) out.metadata = jsonToValue(doc.metadata);
  return out;
}

function ok(res: IncomingMessage): boolean {
  const s = res.statusCode ?? 0;
  return s >= 200 && s < 300;
}

function header(res: IncomingMessage, name: string): string | undefined {
  const v = res.headers[name];
  return typeof v === 'string' ? v : undefined;
}

function answerMetadata(res: IncomingMessage): grpc.Metadata {
  const md = new grpc.Metadata();
  for (const k of ANSWER_METADATA) {
    const v = header(res, k);
    if (v !== undefined) md.set(k, v);
  }
  return md;
}

const codeOf = (rpc: RpcStatus): grpc.status => grpc.status[rpc];

/** The status of an error thrown on this side (a bad request, a bug). */
function failed(err: unknown): Failure {
  const api = toApiError(err);
  return { code: codeOf(api.rpcStatus), details: api.message };
}

function brokeOff(): Failure {
  return { code: grpc.status.UNAVAILABLE, details: 'the answer broke off before it was complete (the model or the gateway closed the connection)' };
}

/** The status of a stream the gateway cut (its STREAM_ERROR_TRAILER). */
function cutFailure(trailer: string): Failure {
  try {
    const { status, message } = JSON.parse(decodeURIComponent(trailer)) as { status: RpcStatus; message: string };
    return { code: codeOf(status) ?? grpc.status.UNKNOWN, details: message };
  } catch {
    return { code: grpc.status.UNKNOWN, details: 'the stream was cut' };
  }
}

/**
 * The status of a REST error answer: the gateway's own (a google.rpc error body) keeps its code and
 * message; a model's answer passed on (rawPredict) gets the code of its HTTP status and its text.
 */
async function failureOf(res: IncomingMessage): Promise<Failure> {
  const status = res.statusCode ?? 500;
  let text = '';
  try {
    text = (await readAnswer(res, ERROR_BODY_BYTES)).body.toString('utf8');
  } catch {
    // Broke off: the status alone.
  }
  const model = header(res, 'x-vertex-ai-deployed-model-id');
  let message: string | undefined;
  try {
    const doc = JSON.parse(text) as { error?: { message?: unknown; status?: unknown } };
    const rpc = doc.error?.status;
    if (typeof doc.error?.message === 'string') {
      // A google.rpc error body: the gateway's own error (or a model's in the same form).
      if (typeof rpc === 'string' && rpc in grpc.status) return { code: codeOf(rpc as RpcStatus), details: doc.error.message };
      message = doc.error.message;
    }
  } catch {
    // Not JSON: its text.
  }
  const what = (message ?? text.trim()).slice(0, 1024);
  const details = model === undefined ? what || `HTTP ${status}` : `deployed model ${model} answered ${status}${what ? `: ${what}` : ''}`;
  return { code: codeOf(rpcStatusForHttp(status)), details };
}
