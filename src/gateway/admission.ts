// Per-DeployedModel concurrency: at most maxConcurrency calls in flight per replica in rotation,
// further calls waiting in a bounded first-in-first-out queue for at most the queue timeout, and a
// call that cannot be admitted refused at once with 429 model_busy and Retry-After (Knative's
// queue-proxy breaker, in spirit). A call is admitted before its body is read, so a waiting call
// holds no body memory; its slot is held until its handler is over. Models without a limit never
// come here.
import { ApiError } from '../errors.js';
import { clientAborted, type Cancellation } from './upstream/index.js';

/** A DeployedModel's spec.serving concurrency settings, in the gateway's units. */
export interface ConcurrencyLimit {
  /** Calls in flight per ready replica. */
  maxConcurrency: number;
  /** Calls waiting for a slot, per ready replica. */
  maxQueued: number;
  queueTimeoutMs: number;
}

/** Whose slots: the model's key (for its gate) and id (for messages). */
export interface AdmissionTarget {
  modelKey: string;
  deployedModelId: string;
}

/** The seconds a refused caller is told to wait (Retry-After). */
export const RETRY_AFTER_SECONDS = 1;

export interface AdmissionStats {
  /** Calls that waited in a queue before they went (or gave up). */
  queuedTotal: number;
  refusedQueueFullTotal: number;
  refusedQueueTimeoutTotal: number;
}

export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

interface Waiter {
  go(): void;
  fail(err: Error): void;
  timer: unknown;
  cancel: Cancellation | undefined;
}

/** One model's slots and queue; the bounds follow its latest count of replicas in rotation. */
interface Gate {
  inFlight: number;
  capacity: number;
  /** In arrival order (a Set iterates in insertion order and deletes in O(1)). */
  queue: Set<Waiter>;
}

export class Admission {
  private readonly gates = new Map<string, Gate>();
  readonly stats: AdmissionStats = { queuedTotal: 0, refusedQueueFullTotal: 0, refusedQueueTimeoutTotal: 0 };

  constructor(private readonly timers: Timers = { setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout) }) {}

  /**
   * Takes a slot of `target`'s model, which has `inRotation` replicas taking calls now, waiting in
   * its queue when all are taken. Rejects with 429 model_busy when the queue is full or the wait
   * outlasts the queue timeout, and as the client leaving when `cancel` is requested while it
   * waits. Every resolved enter needs one leave.
   */
  enter(target: AdmissionTarget, limit: ConcurrencyLimit, inRotation: number, cancel?: Cancellation): Promise<void> {
    if (cancel?.requested) return Promise.reject(clientAborted());
    const replicas = Math.max(1, inRotation);
    let gate = this.gates.get(target.modelKey);
    if (!gate) {
      gate = { inFlight: 0, capacity: 0, queue: new Set() };
      this.gates.set(target.modelKey, gate);
    }
    gate.capacity = limit.maxConcurrency * replicas;
    // More replicas than at the last call: the waiting calls take the new slots first.
    this.pump(gate);
    if (gate.inFlight < gate.capacity && gate.queue.size === 0) {
      gate.inFlight++;
      return Promise.resolve();
    }
    const queueBound = limit.maxQueued * replicas;
    if (gate.queue.size >= queueBound) {
      this.stats.refusedQueueFullTotal++;
      this.forgetIfIdle(target.modelKey, gate);
      return Promise.reject(busy(`deployed model ${target.deployedModelId} has its ${gate.capacity} calls in flight (maxConcurrency ${limit.maxConcurrency} per replica, ${replicas} in rotation) and its queue is full (${gate.queue.size} waiting, maxQueuedCalls ${limit.maxQueued} per replica); retry later`));
    }
    this.stats.queuedTotal++;
    const g = gate;
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        go: resolve,
        fail: reject,
        cancel,
        timer: this.timers.setTimeout(() => {
          this.stats.refusedQueueTimeoutTotal++;
          this.drop(target.modelKey, g, waiter, busy(`deployed model ${target.deployedModelId} had no free slot within queueTimeoutSeconds (${limit.queueTimeoutMs / 1000} s; maxConcurrency ${limit.maxConcurrency} per replica, ${replicas} in rotation); retry later`));
        }, limit.queueTimeoutMs),
      };
      if (cancel) cancel.onCancel = () => this.drop(target.modelKey, g, waiter, clientAborted());
      g.queue.add(waiter);
    });
  }

  /** A call admitted by enter is over: its slot goes to the first waiter, if any. */
  leave(modelKey: string): void {
    const gate = this.gates.get(modelKey);
    if (!gate) return;
    gate.inFlight--;
    this.pump(gate);
    this.forgetIfIdle(modelKey, gate);
  }

  /** Gives free slots to the waiting calls, first come first served. */
  private pump(gate: Gate): void {
    for (const waiter of gate.queue) {
      if (gate.inFlight >= gate.capacity) break;
      gate.queue.delete(waiter);
      this.timers.clearTimeout(waiter.timer);
      if (waiter.cancel) waiter.cancel.onCancel = undefined;
      gate.inFlight++;
      waiter.go();
    }
  }

  /** Calls in flight and waiting for a model (tests, metrics). */
  load(modelKey: string): { inFlight: number; queued: number } {
    const gate = this.gates.get(modelKey);
    return { inFlight: gate?.inFlight ?? 0, queued: gate?.queue.size ?? 0 };
  }

  /** How many models have calls in flight or waiting (an idle model holds nothing). */
  get activeModels(): number {
    return this.gates.size;
  }

  /** Calls waiting in every queue now. */
  queuedNow(): number {
    let n = 0;
    for (const gate of this.gates.values()) n += gate.queue.size;
    return n;
  }

  private drop(modelKey: string, gate: Gate, waiter: Waiter, err: Error): void {
    if (!gate.queue.delete(waiter)) return;
    this.timers.clearTimeout(waiter.timer);
    if (waiter.cancel) waiter.cancel.onCancel = undefined;
    waiter.fail(err);
    this.forgetIfIdle(modelKey, gate);
  }

  /** A gate with nothing in flight or waiting is dropped: models come and go. */
  private forgetIfIdle(modelKey: string, gate: Gate): void {
    if (gate.inFlight === 0 && gate.queue.size === 0 && this.gates.get(modelKey) === gate) this.gates.delete(modelKey);
  }
}

function busy(message: string): ApiError {
  const err = new ApiError('model_busy', message);
  err.headers = { 'Retry-After': String(RETRY_AFTER_SECONDS) };
  return err;
}
