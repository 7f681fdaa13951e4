// Where the cluster's request autoscaler learns the demand: every gateway replica, found through the
// EndpointSlices of the gateway's Service (GATEWAY_SERVICE), is asked for its counts (GET
// /stats/demand) with the controller's own credentials, as a Prometheus server scrapes /metrics;
// the gateways authorise the read with a SubjectAccessReview for that URL. A replica that does not
// answer within the read timeout is left out of that read (its counters are differenced again from
// its next answer). Nothing here is on a call's path: the gateways only count.
import type { KubeConfig } from '@kubernetes/client-node';
import type { DemandReport, ModelDemand } from '../api/autoscaling.js';
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

  constructor(private readonly opts: GatewayDemandOptions) {
    this.gateways = new ServiceReplicas(opts);
  }

  start(): Promise<void> {
    return this.gateways.start();
  }

  stop(): Promise<void> {
    return this.gateways.stop();
  }

  /** The gateway replicas that take calls now (ready endpoints of the Service's http port). */
  replicas(): readonly string[] {
    return this.gateways.replicas();
  }

  async read(): Promise<Map<string, Map<string, ModelDemand>>> {
    // The credentials as the API client has them (a pod's ServiceAccount token is re-read as it rotates).
    const init = await this.opts.kc.applyToFetchOptions({});
    const authorization = authorizationOf(init.headers);
    const headers: Record<string, string> = authorization ? { authorization } : {};
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

  /** Held calls are seen at the next read (one interval): the gateways do not call the controller. */
  onHeld(): void {}
}

/** The Authorization header of the API client's request options (a Headers object, pairs or a plain object). */
function authorizationOf(headers: unknown): string | undefined {
  if (!headers) return undefined;
  if (typeof (headers as { get?: unknown }).get === 'function') return (headers as { get(name: string): string | null }).get('authorization') ?? undefined;
  const pairs = Array.isArray(headers) ? (headers as [string, string][]) : Object.entries(headers as Record<string, string>);
  return pairs.find(([k]) => k.toLowerCase() === 'authorization')?.[1];
}
