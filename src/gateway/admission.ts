// Per-DeployedModel concurrency: at most maxConcurrency calls in flight per replica in rotation,
// further calls waiting in a bounded first-in-first-out queue for at most the queue timeout, and a
// call that cannot be admitted refused at once with 429 model_busy and Retry-After (Knative's
// queue-proxy breaker, in spirit). A call is admitted before its body is read, so a waiting call
// holds no body memory; its slot is held until its handler is over. Models without a limit never
// come here, except models that scale to zero: while such a model has no replica in rotation, its calls
// are held in the same queue (a bound and a deadline of their own) and go as soon as one is ready;
// recheck() is told when the replicas change. With several gateway replicas, each admits its share of
// a model's slots and queue (GatewayShare), so that together they admit what one gateway would.
import { ApiError } from '../errors.js';
import { clientAborted, type Cancellation } from './upstream/index.js';

/** A DeployedModel's spec.serving concurrency settings, in the gateway's units. */
export interface ConcurrencyLimit {
  /** Calls in flight per ready replica. */
  maxConcurrency: number;
  /** Calls waiting for a slot, per ready replica. */
  maxQueued: number;
  queueTimeoutMs: number;
  /** Set for a model that scales to zero: how many calls wait for it to wake, and for how long at most. */
  coldStart?: { maxHeld: number; timeoutMs: number };
}

/** Whose slots: the model's key (for its gate) and id (for messages). */
export interface AdmissionTarget {
  modelKey: string;
  deployedModelId: string;
}

/** This gateway's place among the gateway replicas that take calls: how many there are, and its position. */
export interface GatewayShare {
  replicas: number;
  index: number;
}

export const ALONE: GatewayShare = { replicas: 1, index: 0 };

/**
 * This gateway's part of `total` slots (or queue places): an even split over the gateway replicas,
 * the remainder to the first ones, so that the parts add up to the total; and at least one while
 * the total is not zero (fewer slots than gateway replicas let each of them one, as Knative's
 * activators do, for a gateway without a slot would only hold its calls).
 */
export function shareOf(total: number, share: GatewayShare): number {
  if (!Number.isFinite(total) || share.replicas <= 1) return total;
  if (total <= 0) return 0;
  return Math.max(1, Math.floor(total / share.replicas) + (share.index < total % share.replicas ? 1 : 0));
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
  limit: ConcurrencyLimit;
  /** Its replicas in rotation now. */
  rotation: () => number;
  /** In arrival order (a Set iterates in insertion order and deletes in O(1)). */
  queue: Set<Waiter>;
}

export class Admission {
  private readonly gates = new Map<string, Gate>();
  readonly stats: AdmissionStats = { queuedTotal: 0, refusedQueueFullTotal: 0, refusedQueueTimeoutTotal: 0 };

  constructor(
    private readonly timers: Timers = { setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout) },
    /** This gateway's place among the gateway replicas now (alone unless told otherwise). */
    private readonly share: () => GatewayShare = () => ALONE,
  ) {}

  /**
   * Takes a slot of `target`'s model, which has `inRotation` replicas taking calls now, waiting in
   * its queue when all are taken. Rejects with 429 model_busy when the queue is full or the wait
   * outlasts the queue timeout, and as the client leaving when `cancel` is requested while it
   * waits. Every resolved enter needs one leave.
   */
  enter(target: AdmissionTarget, limit: ConcurrencyLimit, rotation: () => number, cancel?: Cancellation): Promise<void> {
    if (cancel?.requested) return Promise.reject(clientAborted());
    let gate = this.gates.get(target.modelKey);
    if (!gate) {
      gate = { inFlight: 0, capacity: 0, limit, rotation, queue: new Set() };
      this.gates.set(target.modelKey, gate);
    }
    gate.limit = limit;
    gate.rotation = rotation;
    const inRotation = this.resize(gate);
    const replicas = Math.max(1, inRotation);
    // More replicas than at the last call: the waiting calls take the new slots first.
    this.pump(gate);
    if (gate.inFlight < gate.capacity && gate.queue.size === 0) {
      gate.inFlight++;
      return Promise.resolve();
    }
    const waking = gate.capacity === 0 && limit.coldStart !== undefined;
    const share = this.share();
    const queueBound = waking ? limit.coldStart!.maxHeld : shareOf(limit.maxQueued * replicas, share);
    if (gate.queue.size >= queueBound) {
      this.stats.refusedQueueFullTotal++;
      this.forgetIfIdle(target.modelKey, gate);
      return Promise.reject(waking
        ? busy(`deployed model ${target.deployedModelId} is waking from zero replicas and already holds ${gate.queue.size} calls (COLD_START_QUEUE); retry later`)
        : busy(`deployed model ${target.deployedModelId} has its ${gate.capacity} calls in flight (maxConcurrency ${limit.maxConcurrency} per replica, ${replicas} in rotation${ofFleet(share)}) and its queue is full (${gate.queue.size} waiting, maxQueuedCalls ${limit.maxQueued} per replica); retry later`));
    }
    this.stats.queuedTotal++;
    const g = gate;
    const waitMs = waking ? limit.coldStart!.timeoutMs : limit.queueTimeoutMs;
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        go: resolve,
        fail: reject,
        cancel,
        timer: this.timers.setTimeout(() => {
          this.stats.refusedQueueTimeoutTotal++;
          this.drop(target.modelKey, g, waiter, g.capacity === 0 && limit.coldStart
            ? starting(`deployed model ${target.deployedModelId} was scaled to zero and no replica was ready within ${waitMs / 1000} s; retry later`)
            : busy(`deployed model ${target.deployedModelId} had no free slot within ${waking ? 'the call\'s timeoutSeconds' : 'queueTimeoutSeconds'} (${waitMs / 1000} s; maxConcurrency ${limit.maxConcurrency} per replica, ${replicas} in rotation${ofFleet(share)}); retry later`));
        }, waitMs),
      };
      if (cancel) cancel.onCancel = () => this.drop(target.modelKey, g, waiter, clientAborted());
      g.queue.add(waiter);
    });
  }

  /** The replicas of some models changed: the calls waiting for them take the new slots. */
  recheck(): void {
    for (const gate of this.gates.values()) {
      if (gate.queue.size === 0) continue;
      this.resize(gate);
      this.pump(gate);
    }
  }

  /** Sets the gate's slots from its replicas in rotation now (none while a model that scales to zero has none); returns that count. */
  private resize(gate: Gate): number {
    const inRotation = gate.rotation();
    gate.capacity = inRotation === 0 && gate.limit.coldStart ? 0 : shareOf(gate.limit.maxConcurrency * Math.max(1, inRotation), this.share());
    return inRotation;
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

  /** This gateway's place among the gateway replicas now (metrics). */
  fleet(): GatewayShare {
    return this.share();
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

/** The split, for a message: nothing when this gateway is alone. */
function ofFleet(share: GatewayShare): string {
  return share.replicas > 1 ? `; this gateway admits its share of them, as one of ${share.replicas} gateway replicas` : '';
}

/** A refusal that nothing reached the model for: retry after RETRY_AFTER_SECONDS. */
function refused(code: 'model_busy' | 'model_starting', message: string): ApiError {
  const err = new ApiError(code, message);
  err.headers = { 'Retry-After': String(RETRY_AFTER_SECONDS) };
  return err;
}

const busy = (message: string): ApiError => refused('model_busy', message);
const starting = (message: string): ApiError => refused('model_starting', message);
