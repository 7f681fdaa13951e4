// Gateway metrics on their own prom-client registry (never the global one): calls by Endpoint,
// deployed model (each with its namespace), method and code; the gateway's latency from a call's
// request to the last byte of its answer; the model's time to its answer's headers and to its last
// byte; in-flight; payload sizes; the body memory budget (bytes held, calls waiting); the process's
// own metrics. docs/metrics.md lists every metric, its labels and the values they can take: label
// values come from the routing table (Endpoints and DeployedModels that exist), never from a URL.
// The hot path does no more than it must: labelled children are cached (a Map lookup per call),
// request counts are added up and histogram observations queued (Batch below), and both reach
// prom-client in batches, at the latest when the registry is read, so every scrape is exact. The
// gauges are read at scrape time from the state they report (in flight, body memory).
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { BodyMemoryStats } from './bodyMemory.js';
import type { ConnectionStats } from './connections.js';
import { following, gauge } from '../metrics/following.js';
import { collectProcessMetrics } from '../metrics/process.js';
import { splitKey } from '../api/types.js';
import { CATALOG } from '../errors.js';

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const BYTES_BUCKETS = [256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864];

/** Observations queued before they are handed to prom-client together. */
export const OBSERVATION_BATCH = 512;

/** Label value of an Endpoint or DeployedModel a call did not resolve to (unknown path or Host; no Endpoint on the TF Serving surface). */
export const UNRESOLVED = '-';


const CALL_LABELS = ['endpoint_namespace', 'endpoint', 'deployed_model_namespace', 'deployed_model', 'method'];
const MODEL_LABELS = ['deployed_model_namespace', 'deployed_model'];

type Observer = { observe(v: number): void };

/**
 * Histogram observations on their way to prom-client. A prediction call makes five, and prom-client
 * checks and hashes the labels on each one: made together in a batch they cost a fraction of what
 * they cost one by one among the call's own work (measured: docs/performance.md). Queued ones go in
 * when the queue is full and whenever the registry is read.
 */
class Batch {
  private readonly observers: (Observer | undefined)[] = new Array<Observer | undefined>(OBSERVATION_BATCH);
  private readonly values = new Float64Array(OBSERVATION_BATCH);
  private size = 0;

  add(observer: Observer, value: number): void {
    this.observers[this.size] = observer;
    this.values[this.size] = value;
    if (++this.size === OBSERVATION_BATCH) this.flush();
  }

  flush(): void {
    const n = this.size;
    this.size = 0;
    for (let i = 0; i < n; i++) {
      (this.observers[i] as Observer).observe(this.values[i]);
      this.observers[i] = undefined;
    }
  }
}

/** One request counter child and the calls counted since they were last added to it. */
interface CountedLabels {
  child: { inc(n: number): void };
  pending: number;
}

/** The children of one call label set: its duration, and its request counts by HTTP code. */
interface CallSeries {
  values: string[];
  duration: Observer;
  codes: Map<number, CountedLabels>;
}

/** Time to first token runs from a call's arrival: from a fast prefix hit to a long cold prompt. */
const FIRST_TOKEN_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const TOKEN_GAP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1, 2.5, 5];
const STREAM_LABELS = ['endpoint_namespace', 'endpoint', 'deployed_model_namespace', 'deployed_model'];

/** The children of one Endpoint and deployed model's stream and token metrics. */
interface StreamSeries {
  inFlight: { inc(): void; dec(): void };
  firstToken: Observer;
  interToken: Observer;
  prompt: { inc(n: number): void };
  completion: { inc(n: number): void };
}

/** The children of one deployed model's upstream histograms. */
interface ModelSeries {
  headers: Observer;
  done: Observer;
}

/** What a call reports once it is over (a CallContext carries these fields). */
export interface CallRecord {
  /** `namespace/name` of the Endpoint, or UNRESOLVED. */
  endpoint: string;
  /** `namespace/name` of the DeployedModel, or UNRESOLVED. */
  modelKey: string;
  /** The deployedModelId (what answers carry), or UNRESOLVED. */
  deployedModelId: string;
  method: string;
  requestBytes: number;
  /** Set when the gateway wrote a body of known length (not for streamed rawPredict). */
  responseBytes?: number;
}

/** A deployed model as the upstream histograms label it (a RouteDestination is one). */
export interface ModelLabels {
  /** `namespace/name` of the DeployedModel. */
  modelKey: string;
  deployedModelId: string;
}

export interface GatewayMetricsOptions {
  /** Register the process and Node.js metrics too (default true). */
  defaultMetrics?: boolean;
  /** Monotonic clock in nanoseconds (tests inject one). */
  now?: () => bigint;
}

/** The namespace and name label values of a `namespace/name` key; UNRESOLVED gives UNRESOLVED twice. */
function keyLabels(key: string): [string, string] {
  if (key === UNRESOLVED) return [UNRESOLVED, UNRESOLVED];
  const { namespace, name } = splitKey(key);
  return [namespace, name];
}

/**
 * One call's measurement, begun when its request arrived and taken in once both its handler and its
 * answer are over, whichever ends last: the duration runs to the answer's last byte, and the labels
 * and code are the handler's.
 */
export class CallMeter {
  private endNs = -1n;
  private delivered = false;
  private record: CallRecord | undefined;
  private code = 0;

  constructor(private readonly metrics: GatewayMetrics, private readonly startNs: bigint, private readonly now: () => bigint) {}

  /**
   * The answer is over (the response's 'close'): `delivered` when it was handed to the OS whole
   * (writableFinished), false when the connection was closed first.
   */
  responseOver(delivered: boolean): void {
    if (this.endNs >= 0n) return;
    this.endNs = this.now();
    this.delivered = delivered;
    if (this.record !== undefined) this.take();
  }

  /** The handler is over: what the call resolved to, and the HTTP code it answered with. */
  handlerOver(record: CallRecord, code: number): void {
    if (this.record !== undefined) return;
    this.record = record;
    this.code = code;
    if (this.endNs >= 0n) this.take();
  }

  private take(): void {
    // An answer the client did not take whole is a 499, whatever status it started with.
    const code = !this.delivered && this.code < 400 ? CATALOG.client_closed.http : this.code;
    this.metrics.finished(this.record as CallRecord, code, Number(this.endNs - this.startNs) / 1e9);
  }
}

export class GatewayMetrics {
  readonly registry = new Registry();
  private readonly batch = new Batch();
  private readonly counted: CountedLabels[] = [];
  private readonly now: () => bigint;
  /**
   * Hands everything pending to prom-client: the `collect` hook of every metric fed from the hot
   * path, so the registry takes it in before each read.
   */
  private readonly flush = (): void => {
    this.batch.flush();
    for (const c of this.counted) {
      if (c.pending === 0) continue;
      c.child.inc(c.pending);
      c.pending = 0;
    }
  };
  private readonly requests = new Counter({
    name: 'predictgate_requests_total',
    help: 'Prediction and TF Serving calls by Endpoint, deployed model (each with its namespace; "-" when the call did not resolve to one), method (predict, rawPredict, explain, streamRawPredict, chatCompletions, completions, models, tfserving) and HTTP code (499: the client left before the answer was complete).',
    labelNames: [...CALL_LABELS, 'code'], registers: [this.registry], collect: this.flush,
  });
  private readonly duration = new Histogram({
    name: 'predictgate_request_duration_seconds',
    help: 'Time from a call\'s request reaching the gateway to the last byte of its answer handed to the OS (or the connection closing), by Endpoint, deployed model (with namespaces; "-" when unresolved) and method.',
    labelNames: CALL_LABELS, buckets: LATENCY_BUCKETS, registers: [this.registry], collect: this.flush,
  });
  private readonly upstreamHeadersTime = new Histogram({
    name: 'predictgate_upstream_headers_seconds',
    help: 'Time from sending a call to a model until the status and headers of its answer, by deployed model and its namespace.',
    labelNames: MODEL_LABELS, buckets: LATENCY_BUCKETS, registers: [this.registry], collect: this.flush,
  });
  private readonly upstreamTime = new Histogram({
    name: 'predictgate_upstream_duration_seconds',
    help: 'Time from sending a call to a model until the last byte of its answer, by deployed model and its namespace (answers the model completed).',
    labelNames: MODEL_LABELS, buckets: LATENCY_BUCKETS, registers: [this.registry], collect: this.flush,
  });
  private readonly requestBytes = new Histogram({ name: 'predictgate_request_bytes', help: 'Request body sizes, by method (predict, rawPredict, explain, streamRawPredict, chatCompletions, completions, models, tfserving).', labelNames: ['method'], buckets: BYTES_BUCKETS, registers: [this.registry], collect: this.flush });
  private readonly responseBytes = new Histogram({ name: 'predictgate_response_bytes', help: 'Answer body sizes of successful calls written whole by the gateway, by method (streamed answers and error answers are not counted).', labelNames: ['method'], buckets: BYTES_BUCKETS, registers: [this.registry], collect: this.flush });
  private readonly streamsInFlight = new Gauge({
    name: 'predictgate_streams_in_flight',
    help: 'Streamed answers being relayed (streamRawPredict, and OpenAI calls answered as events), by Endpoint and deployed model (with namespaces).',
    labelNames: STREAM_LABELS, registers: [this.registry],
  });
  private readonly firstTokenTime = new Histogram({
    name: 'predictgate_time_to_first_token_seconds',
    help: 'Time from an OpenAI-compatible streamed call reaching the gateway to the first event with generated text passing through it, by Endpoint and deployed model (with namespaces).',
    labelNames: STREAM_LABELS, buckets: FIRST_TOKEN_BUCKETS, registers: [this.registry], collect: this.flush,
  });
  private readonly interTokenTime = new Histogram({
    name: 'predictgate_time_per_output_token_seconds',
    help: 'Time between two events with generated text of an OpenAI-compatible stream passing through the gateway, by Endpoint and deployed model (with namespaces).',
    labelNames: STREAM_LABELS, buckets: TOKEN_GAP_BUCKETS, registers: [this.registry], collect: this.flush,
  });
  private readonly promptTokens = new Counter({
    name: 'predictgate_prompt_tokens_total',
    help: 'Prompt tokens of OpenAI-compatible calls, from the usage the model reported (asked for on streams that did not), by Endpoint and deployed model (with namespaces).',
    labelNames: STREAM_LABELS, registers: [this.registry],
  });
  private readonly completionTokens = new Counter({
    name: 'predictgate_completion_tokens_total',
    help: 'Generated tokens of OpenAI-compatible calls, from the usage the model reported, by Endpoint and deployed model (with namespaces).',
    labelNames: STREAM_LABELS, registers: [this.registry],
  });
  private readonly streams = new Map<string, StreamSeries>();
  private readonly calls = new Map<string, CallSeries>();
  private readonly byMethod = new Map<Histogram<string>, Map<string, Observer>>();
  private readonly models = new WeakMap<ModelLabels, ModelSeries>();

  constructor(opts: GatewayMetricsOptions = {}) {
    this.now = opts.now ?? process.hrtime.bigint;
    if (opts.defaultMetrics !== false) collectProcessMetrics(this.registry);
  }

  /** Begins measuring a call whose request arrived at `startNs` (on the same clock as `now`). */
  meter(startNs: bigint): CallMeter {
    return new CallMeter(this, startNs, this.now);
  }

  /** Counts a call that is over, with its code and its duration (CallMeter calls this). */
  finished(r: CallRecord, code: number, seconds: number): void {
    const key = `${r.endpoint}\u0000${r.modelKey}\u0000${r.deployedModelId}\u0000${r.method}`;
    let s = this.calls.get(key);
    if (s === undefined) {
      s = { values: [...keyLabels(r.endpoint), keyLabels(r.modelKey)[0], r.deployedModelId, r.method], duration: undefined as unknown as Observer, codes: new Map() };
      s.duration = this.duration.labels(...s.values);
      this.calls.set(key, s);
    }
    let c = s.codes.get(code);
    if (c === undefined) {
      c = { child: this.requests.labels(...s.values, String(code)), pending: 0 };
      s.codes.set(code, c);
      this.counted.push(c);
    }
    c.pending++;
    this.batch.add(s.duration, seconds);
    this.batch.add(this.observer(this.requestBytes, r.method), r.requestBytes);
    if (r.responseBytes !== undefined) this.batch.add(this.observer(this.responseBytes, r.method), r.responseBytes);
  }

  /** A model's answer headers came `seconds` after the call was sent to it. */
  upstreamHeaders(model: ModelLabels, seconds: number): void {
    this.batch.add(this.model(model).headers, seconds);
  }

  /** A model's answer came to its last byte `seconds` after the call was sent to it. */
  upstreamDone(model: ModelLabels, seconds: number): void {
    this.batch.add(this.model(model).done, seconds);
  }

  /** A streamed answer began to be relayed (`call`: its Endpoint and deployed model). */
  streamStarted(call: CallRecord): void {
    this.stream(call).inFlight.inc();
  }

  streamEnded(call: CallRecord): void {
    this.stream(call).inFlight.dec();
  }

  /** The first generated text of a stream passed `seconds` after its call arrived. */
  firstToken(call: CallRecord, seconds: number): void {
    this.batch.add(this.stream(call).firstToken, seconds);
  }

  /** Generated text passed `seconds` after the stream's previous text. */
  interToken(call: CallRecord, seconds: number): void {
    this.batch.add(this.stream(call).interToken, seconds);
  }

  /** The usage of an answer. */
  tokens(call: CallRecord, prompt: number, completion: number): void {
    const s = this.stream(call);
    s.prompt.inc(prompt);
    s.completion.inc(completion);
  }

  private stream(r: CallRecord): StreamSeries {
    const key = `${r.endpoint}\u0000${r.modelKey}\u0000${r.deployedModelId}`;
    let s = this.streams.get(key);
    if (s === undefined) {
      const values = [...keyLabels(r.endpoint), keyLabels(r.modelKey)[0], r.deployedModelId];
      s = {
        inFlight: this.streamsInFlight.labels(...values),
        firstToken: this.firstTokenTime.labels(...values),
        interToken: this.interTokenTime.labels(...values),
        prompt: this.promptTokens.labels(...values),
        completion: this.completionTokens.labels(...values),
      };
      this.streams.set(key, s);
    }
    return s;
  }

  /** The upstream children of a deployed model, made once per routing table entry. */
  private model(m: ModelLabels): ModelSeries {
    let s = this.models.get(m);
    if (s === undefined) {
      const values = [keyLabels(m.modelKey)[0], m.deployedModelId];
      s = { headers: this.upstreamHeadersTime.labels(...values), done: this.upstreamTime.labels(...values) };
      this.models.set(m, s);
    }
    return s;
  }

  /** The histogram's child for one method, made once (prom-client hashes the labels on every labels() call). */
  private observer(h: Histogram<string>, method: string): Observer {
    let children = this.byMethod.get(h);
    if (children === undefined) {
      children = new Map();
      this.byMethod.set(h, children);
    }
    let o = children.get(method);
    if (o === undefined) {
      o = h.labels(method);
      children.set(method, o);
    }
    return o;
  }

  /** The in-flight gauge, read from the gateway's own count at scrape time. */
  watchInFlight(count: () => number): void {
    new Gauge({ name: 'predictgate_requests_in_flight', help: 'Prediction and TF Serving calls being served.', registers: [this.registry], collect() { this.set(count()); } });
  }

  /** The client connections (connections.ts), read at scrape time. */
  watchConnections(stats: () => ConnectionStats): void {
    gauge(this.registry, 'predictgate_connections_open', 'Client connections open on the gateway\'s port (MAX_CONNECTIONS is the limit).', () => stats().open);
    following(this.registry, 'predictgate_connections_refused_total', 'Client connections refused (on the HTTP port with 503 too_many_connections, on the gRPC port closed at once), by the limit they met: total (MAX_CONNECTIONS) or per_client (MAX_CONNECTIONS_PER_CLIENT).', {
      label: 'limit',
      series: { total: () => stats().refusedTotal, per_client: () => stats().refusedPerClient },
    });
  }

  /** Gauges read from the body memory at scrape time. */
  watchBodyMemory(stats: () => BodyMemoryStats): void {
    new Gauge({ name: 'predictgate_body_memory_reserved_bytes', help: 'Bytes of request and answer bodies held whole by calls in flight (BUFFERED_BODY_BYTES is the budget).', registers: [this.registry], collect() { this.set(stats().reservedBytes); } });
    new Gauge({ name: 'predictgate_body_memory_waiting_calls', help: 'Calls waiting for body memory before their body is read.', registers: [this.registry], collect() { this.set(stats().waiting); } });
  }
}
