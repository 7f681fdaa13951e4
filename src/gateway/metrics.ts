// Gateway metrics on their own prom-client registry (never the global one): requests by endpoint,
// deployed model, method and code; gateway and upstream latency; in-flight; payload sizes; the body
// memory budget (bytes held, calls waiting).
// The hot path does no more than it must: labelled children are cached (a Map lookup per call),
// request counts are added up and histogram observations queued (Batch below), and both reach
// prom-client in batches, at the latest when the registry is read, so every scrape is exact. The
// gauges are read at scrape time from the state they report (in flight, body memory).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { BodyMemoryStats } from './bodyMemory.js';

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const BYTES_BUCKETS = [256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864];

/** Observations queued before they are handed to prom-client together. */
export const OBSERVATION_BATCH = 512;

type Observer = { observe(v: number): void };

/**
 * Histogram observations on their way to prom-client. Each call of a prediction makes four, and
 * prom-client checks and hashes the labels on each one: measured in the gateway under small-JSON
 * load, about 7 µs a call (6-8% of its CPU) when made one by one among the call's own work, and
 * about 0.44 µs each when made in a batch (README "Performance"). Queued ones go in when the queue
 * is full and whenever the registry is read.
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

export interface RequestLabels {
  endpoint: string;
  deployedModel: string;
  method: string;
}

export class GatewayMetrics {
  readonly registry = new Registry();
  private readonly batch = new Batch();
  private readonly counted: CountedLabels[] = [];
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
  private readonly requests = new Counter({ name: 'predictgate_requests_total', help: 'Prediction calls by endpoint, deployed model, method and HTTP code.', labelNames: ['endpoint', 'deployed_model', 'method', 'code'], registers: [this.registry], collect: this.flush });
  private readonly duration = new Histogram({ name: 'predictgate_request_duration_seconds', help: 'Time from request start to the end of the answer, by method.', labelNames: ['method'], buckets: LATENCY_BUCKETS, registers: [this.registry], collect: this.flush });
  private readonly upstreamDuration = new Histogram({ name: 'predictgate_upstream_duration_seconds', help: 'Time from sending to a model until its answer headers, by deployed model.', labelNames: ['deployed_model'], buckets: LATENCY_BUCKETS, registers: [this.registry], collect: this.flush });
  private readonly requestBytes = new Histogram({ name: 'predictgate_request_bytes', help: 'Request body sizes, by method.', labelNames: ['method'], buckets: BYTES_BUCKETS, registers: [this.registry], collect: this.flush });
  private readonly responseBytes = new Histogram({ name: 'predictgate_response_bytes', help: 'Answer body sizes, by method (predict only: rawPredict streams).', labelNames: ['method'], buckets: BYTES_BUCKETS, registers: [this.registry], collect: this.flush });
  private readonly cache = new Map<string, CountedLabels>();
  private readonly observers = new Map<Histogram<string>, Map<string, Observer>>();

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: 'predictgate_' });
  }

  finished(l: RequestLabels, code: number, seconds: number): void {
    const key = `${l.endpoint}\u0000${l.deployedModel}\u0000${l.method}\u0000${code}`;
    let c = this.cache.get(key);
    if (c === undefined) {
      c = { child: this.requests.labels(l.endpoint, l.deployedModel, l.method, String(code)), pending: 0 };
      this.cache.set(key, c);
      this.counted.push(c);
    }
    c.pending++;
    this.batch.add(this.observer(this.duration, l.method), seconds);
  }

  upstream(deployedModel: string, seconds: number): void {
    this.batch.add(this.observer(this.upstreamDuration, deployedModel), seconds);
  }

  /** The histogram's child for one label value, made once (prom-client hashes the labels on every labels() call). */
  private observer(h: Histogram<string>, value: string): Observer {
    let children = this.observers.get(h);
    if (children === undefined) {
      children = new Map();
      this.observers.set(h, children);
    }
    let o = children.get(value);
    if (o === undefined) {
      o = h.labels(value);
      children.set(value, o);
    }
    return o;
  }

  /** The in-flight gauge, read from the gateway's own count at scrape time. */
  watchInFlight(count: () => number): void {
    new Gauge({ name: 'predictgate_requests_in_flight', help: 'Prediction calls being served.', registers: [this.registry], collect() { this.set(count()); } });
  }

  /** Gauges read from the body memory at scrape time. */
  watchBodyMemory(stats: () => BodyMemoryStats): void {
    new Gauge({ name: 'predictgate_body_memory_reserved_bytes', help: 'Bytes of request and answer bodies held whole by calls in flight (BUFFERED_BODY_BYTES is the budget).', registers: [this.registry], collect() { this.set(stats().reservedBytes); } });
    new Gauge({ name: 'predictgate_body_memory_waiting_calls', help: 'Calls waiting for body memory before their body is read.', registers: [this.registry], collect() { this.set(stats().waiting); } });
  }

  bytes(method: string, requestBytes: number, responseBytes?: number): void {
    this.batch.add(this.observer(this.requestBytes, method), requestBytes);
    if (responseBytes !== undefined) this.batch.add(this.observer(this.responseBytes, method), responseBytes);
  }
}
