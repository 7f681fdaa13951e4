// Leader election on a coordination.k8s.io/v1 Lease, as client-go does it: a candidate takes the
// Lease when it is free or its holder has not renewed it for leaseDuration (measured on the
// candidate's own clock from when it last saw the record change, so clock skew between machines does
// not matter), renews it every retryPeriod, and gives up leading when it could not renew within
// renewDeadline. Writes use the Lease's resourceVersion, so two candidates never both win.
import { randomUUID } from 'node:crypto';
import { CoordinationV1Api, V1MicroTime, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import type { Logger } from '../log.js';
import { describeApiError, statusCodeOf } from '../kube/errors.js';
import { withTimeout } from '../timeout.js';

export interface LeaderElectionOptions {
  kc: KubeConfig;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs: number;
  /** Default: 2/3 of leaseDurationMs. */
  renewDeadlineMs?: number;
  /** Default: leaseDurationMs / 7.5 (2 s for 15 s). */
  retryPeriodMs?: number;
  clock: () => Date;
  logger: Logger;
  onStartedLeading(): void;
  onStoppedLeading(): void;
}

/**
 * A candidate's identity: its pod's name (or the host's) and a random part of its own, as client-go
 * makes it (NAME_UUID). Unique per process: a container restarted in the same pod runs with the same
 * process id (1) as the one before it, and with that in its identity it would find the Lease held by
 * "itself" and lead at once, without the Lease ever changing hands.
 */
export function candidateIdentity(name: string): string {
  return `${name}_${randomUUID()}`;
}

/** A MicroTime read back from the API (the client leaves it a string) as one it can write again. */
function microTime(t: unknown): V1MicroTime {
  return new V1MicroTime(t instanceof Date ? t.getTime() : Date.parse(String(t)));
}

export class LeaderElector {
  private readonly api: CoordinationV1Api;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private observedRecord = '';
  private observedAt = 0;
  private leading = false;
  private lastRenew = 0;
  private timer: NodeJS.Timeout | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  private stopped = false;
  /** The tick in progress, so stop() can wait for it. */
  private ticking: Promise<void> = Promise.resolve();
  /** A write that won the Lease after stop() began: it must be handed back too. */
  private wonWhileStopping = false;

  constructor(private readonly opts: LeaderElectionOptions) {
    this.api = opts.kc.makeApiClient(CoordinationV1Api);
    this.renewDeadlineMs = opts.renewDeadlineMs ?? Math.round((opts.leaseDurationMs * 2) / 3);
    this.retryPeriodMs = opts.retryPeriodMs ?? Math.round(opts.leaseDurationMs / 7.5);
  }

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    this.ticking = this.tick();
    // Checked on its own timer: a renewal hanging on a dead connection must not keep a leader leading.
    this.watchdog = setInterval(() => {
      if (this.leading && this.opts.clock().getTime() - this.lastRenew > this.renewDeadlineMs) this.lose();
    }, Math.max(50, Math.round(this.retryPeriodMs / 2)));
    this.watchdog.unref();
  }

  private schedule(): void {
    if (!this.stopped) this.timer = setTimeout(() => (this.ticking = this.tick()), this.retryPeriodMs);
  }

  private lose(): void {
    if (!this.leading) return;
    this.leading = false;
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.watchdog) clearInterval(this.watchdog);
    this.opts.logger.error({ lease: `${this.opts.namespace}/${this.opts.name}`, identity: this.opts.identity }, 'lost leadership: could not renew the lease in time');
    this.opts.onStoppedLeading();
  }

  private async tick(): Promise<void> {
    let ok = false;
    try {
      // A try that outlives the renew deadline counts as failed (its result could no longer be trusted).
      ok = await withTimeout(this.tryAcquireOrRenew(), this.renewDeadlineMs);
    } catch (err) {
      this.opts.logger.warn({ lease: `${this.opts.namespace}/${this.opts.name}`, err: describeApiError(err) }, 'lease update failed');
    }
    if (this.stopped) {
      if (ok && !this.leading) this.wonWhileStopping = true;
      return;
    }
    if (ok) {
      this.lastRenew = this.opts.clock().getTime();
      if (!this.leading) {
        this.leading = true;
        this.opts.logger.info({ lease: `${this.opts.namespace}/${this.opts.name}`, identity: this.opts.identity }, 'became leader');
        this.opts.onStartedLeading();
      }
    } else if (this.leading && this.opts.clock().getTime() - this.lastRenew > this.renewDeadlineMs) {
      this.lose();
      return;
    }
    this.schedule();
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, name, identity } = this.opts;
    const now = new V1MicroTime(this.opts.clock().getTime()); // RFC 3339 with microseconds, as the API wants
    const leaseDurationSeconds = Math.max(1, Math.round(this.opts.leaseDurationMs / 1000));
    let lease: V1Lease;
    try {
      lease = await this.api.readNamespacedLease({ name, namespace });
    } catch (err) {
      if (statusCodeOf(err) !== 404) throw err;
      try {
        await this.api.createNamespacedLease({
          namespace,
          body: { metadata: { name, namespace }, spec: { holderIdentity: identity, leaseDurationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 } },
        });
        return true;
      } catch (e) {
        if (statusCodeOf(e) === 409) return false; // another candidate created it first
        throw e;
      }
    }
    const spec = lease.spec ?? {};
    const record = JSON.stringify([spec.holderIdentity, spec.renewTime, spec.leaseDurationSeconds]);
    if (record !== this.observedRecord) {
      this.observedRecord = record;
      this.observedAt = now.getTime();
    }
    const holder = spec.holderIdentity ?? '';
    const heldByOther = holder !== '' && holder !== identity;
    const expired = this.observedAt + (spec.leaseDurationSeconds ?? leaseDurationSeconds) * 1000 < now.getTime();
    if (heldByOther && !expired) return false;
    const body: V1Lease = {
      ...lease,
      spec: {
        ...spec,
        holderIdentity: identity,
        leaseDurationSeconds,
        renewTime: now,
        acquireTime: holder === identity && spec.acquireTime ? microTime(spec.acquireTime) : now,
        leaseTransitions: (spec.leaseTransitions ?? 0) + (holder === identity ? 0 : 1),
      },
    };
    try {
      await this.api.replaceNamespacedLease({ name, namespace, body });
      return true;
    } catch (err) {
      if (statusCodeOf(err) === 409) return false; // someone else wrote it since we read it
      throw err;
    }
  }

  /** Stops campaigning; a leader hands the Lease back so a standby takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.watchdog) clearInterval(this.watchdog);
    await this.ticking;
    if (!this.leading && !this.wonWhileStopping) return;
    this.leading = false;
    const { namespace, name } = this.opts;
    try {
      const lease = await this.api.readNamespacedLease({ name, namespace });
      if (lease.spec?.holderIdentity !== this.opts.identity) return;
      await this.api.replaceNamespacedLease({ name, namespace, body: { ...lease, spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: new V1MicroTime(this.opts.clock().getTime()), acquireTime: undefined } } });
    } catch (err) {
      this.opts.logger.warn({ lease: `${namespace}/${name}`, err: describeApiError(err) }, 'could not release the lease');
    }
  }
}
