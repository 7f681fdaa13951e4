// Where the cluster's request autoscaler learns the demand: every gateway replica, found through the
// EndpointSlices of the gateway's Service (GATEWAY_SERVICE), is asked for its counts (GET
// /stats/demand) with the controller's own credentials, as a Prometheus server scrapes /metrics;
// the gateways authorise the read with a SubjectAccessReview for that URL. A replica that does not
// answer within the read timeout is left out of that read (its counters are differenced again from
// its next answer). While someone listens for held calls (the leader's autoscaler), one more read per
// replica waits on it (?heldAfter=N: answered as soon as that gateway holds a call for a model at
// zero), so a wake is heard within a round trip instead of at the next read. Nothing here is on a
// call's path: the gateways only count.
import type { KubeConfig } from '@kubernetes/client-node';
import type { DemandReport, ModelDemand } from '../api/autoscaling.js';
import { HELD_WAIT_MS } from '../gateway/demand.js';
import { DEMAND_PATH } from '../gateway/routes.js';
import type { Logger } from '../log.js';
import { ServiceReplicas } from '../store/endpointSlices.js';
import type { DemandSource } from './autoscaler.js';

export interface GatewayDemandOptions {
  kc: KubeConfig;
  /** The gateway's Service, namespace/name. */
  service: string;
  logger: Logger;
  /** Longest wait for one replica's answer. */
  timeoutMs: number;
}

export class GatewayDemand implements DemandSource {
  private readonly gateways: ServiceReplicas;

  /** The replicas' calls in flight summed over the gateways, as of the last read; undefined when a gateway did not answer it. */
  private inFlight: Map<string, number> | undefined = new Map();
  private readonly heldListeners = new Set<(modelKey: string) => void>();
  /** Per gateway replica, the wait for its held calls that runs. */
  private readonly waits = new Map<string, AbortController>();
  private stopped = false;

  constructor(private readonly opts: GatewayDemandOptions) {
    this.gateways = new ServiceReplicas(opts);
    // A gateway replica that comes or goes gets its wait, or loses it, at once.
    this.gateways.onChange(() => this.followWaits());
  }

  start(): Promise<void> {
    return this.gateways.start();
  }

  stop(): Promise<void> {
    this.stopped = true;
    this.followWaits();
    return this.gateways.stop();
  }

  /** The gateway replicas that take calls now (ready endpoints of the Service's http port). */
  replicas(): readonly string[] {
    return this.gateways.replicas();
  }

  /** The credentials as the API client has them (a pod's ServiceAccount token is re-read as it rotates). */
  private async headers(): Promise<Record<string, string>> {
    const init = await this.opts.kc.applyToFetchOptions({});
    const authorization = authorizationOf(init.headers);
    return authorization ? { authorization } : {};
  }

  async read(): Promise<Map<string, Map<string, ModelDemand>>> {
    const headers = await this.headers();
    const out = new Map<string, Map<string, ModelDemand>>();
    let inFlight: Map<string, number> | undefined = new Map<string, number>();
    await Promise.all(this.replicas().map(async (base) => {
      try {
        const res = await fetch(base + DEMAND_PATH, { headers, signal: AbortSignal.timeout(this.opts.timeoutMs) });
        if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${(await res.text()).slice(0, 300)}`);
        const doc = (await res.json()) as Partial<DemandReport>;
        out.set(base, new Map(Object.entries(doc.models ?? {})));
        for (const [address, n] of Object.entries(doc.replicas ?? {})) if (typeof n === 'number' && n > 0) inFlight?.set(address, (inFlight.get(address) ?? 0) + n);
      } catch (err) {
        // Without its word, no pod is known to be idle: no scale-down on this read.
        inFlight = undefined;
        this.opts.logger.warn({ gateway: base, err: err instanceof Error ? err.message : String(err) }, 'could not read a gateway replica\'s demand; left out of this read');
      }
    }));
    this.inFlight = inFlight;
    return out;
  }

  replicasInFlight(): ReadonlyMap<string, number> | undefined {
    return this.inFlight;
  }

  /** Listens for held calls: while anyone listens, a wait runs on every gateway replica. */
  onHeld(listener: (modelKey: string) => void): () => void {
    this.heldListeners.add(listener);
    this.followWaits();
    return () => {
      this.heldListeners.delete(listener);
      this.followWaits();
    };
  }

  /** A wait on each gateway replica while someone listens; none else. */
  private followWaits(): void {
    const want = new Set(this.heldListeners.size > 0 && !this.stopped ? this.replicas() : []);
    for (const [base, wait] of this.waits) {
      if (want.has(base)) continue;
      wait.abort();
      this.waits.delete(base);
    }
    for (const base of want) {
      if (this.waits.has(base)) continue;
      const wait = new AbortController();
      this.waits.set(base, wait);
      void this.waitOn(base, wait.signal);
    }
  }

  /**
   * Reads one replica's held count, then waits for it to grow, over and over; each growth is a wake.
   * After a failure (the replica restarted, say) it pauses and takes a fresh count first.
   */
  private async waitOn(base: string, signal: AbortSignal): Promise<void> {
    let seen: number | undefined;
    while (!signal.aborted) {
      try {
        const url = seen === undefined ? base + DEMAND_PATH : `${base}${DEMAND_PATH}?heldAfter=${seen}`;
        const res = await fetch(url, { headers: await this.headers(), signal: AbortSignal.any([signal, AbortSignal.timeout(HELD_WAIT_MS + this.opts.timeoutMs)]) });
        if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${(await res.text()).slice(0, 300)}`);
        const held = ((await res.json()) as Partial<DemandReport>).held;
        if (typeof held !== 'number') throw new Error('its answer has no held count');
        if (seen !== undefined && held > seen) for (const l of this.heldListeners) l('');
        seen = held;
      } catch (err) {
        if (signal.aborted) return;
        seen = undefined;
        this.opts.logger.debug({ gateway: base, err: err instanceof Error ? err.message : String(err) }, 'waiting for a gateway replica\'s held calls failed; trying again');
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, WAIT_RETRY_MS);
          signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
        });
      }
    }
  }
}

/** After a failed wait on a gateway replica, this long before the next. */
const WAIT_RETRY_MS = 1000;

/** The Authorization header of the API client's request options (a Headers object, pairs or a plain object). */
function authorizationOf(headers: unknown): string | undefined {
  if (!headers) return undefined;
  if (typeof (headers as { get?: unknown }).get === 'function') return (headers as { get(name: string): string | null }).get('authorization') ?? undefined;
  const pairs = Array.isArray(headers) ? (headers as [string, string][]) : Object.entries(headers as Record<string, string>);
  return pairs.find(([k]) => k.toLowerCase() === 'authorization')?.[1];
}
