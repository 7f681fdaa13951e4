// Where a model's pods can be called, from the EndpointSlices of the Services the controller made
// (the cluster gateway): per Service, the endpoints that take new calls (ready, not terminating) as
// base URLs of the Service's `http` port. The gateway calls those pods itself rather than the
// Service address, so it balances per call and stops sending to a pod the moment it turns
// terminating or unready.
import { DiscoveryV1Api, type KubeConfig } from '@kubernetes/client-node';
import { splitKey } from '../api/types.js';
import type { Logger } from '../log.js';
import { WatchedCache, type CacheStats } from '../kube/informer.js';
import { MANAGED_SELECTOR } from '../workload/kubeObjects.js';

/** The label the EndpointSlice controller puts on each slice: the name of its Service. */
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

/** What this module reads of a discovery.k8s.io/v1 EndpointSlice. */
export interface EndpointSlice {
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; resourceVersion?: string };
  addressType?: string;
  endpoints?: { addresses: string[]; conditions?: { ready?: boolean | null; terminating?: boolean | null } }[] | null;
  ports?: { name?: string | null; port?: number | null }[] | null;
}

/** The replica addresses of model Services, as the routing table asks for them. */
export interface ReplicaAddresses {
  /**
   * Base URLs of the Service's endpoints that take new calls; empty when none does; undefined when
   * no slice of the Service is known (then the Service address is all there is).
   */
  addressesOf(namespace: string, service: string): readonly string[] | undefined;
}

/**
 * Base URLs of a slice's endpoints that take new calls: ready (unset counts as ready, as the API
 * documents) and not terminating, on the slice's `http` port (else its only port).
 */
export function callableAddresses(slice: EndpointSlice): string[] {
  const ports = slice.ports ?? [];
  const port = (ports.find((p) => p.name === 'http') ?? (ports.length === 1 ? ports[0] : undefined))?.port;
  if (!port) return [];
  const ipv6 = slice.addressType === 'IPv6';
  const out: string[] = [];
  for (const e of slice.endpoints ?? []) {
    const c = e.conditions ?? {};
    if (c.ready === false || c.terminating === true || !e.addresses?.length) continue;
    out.push(`http://${ipv6 ? `[${e.addresses[0]}]` : e.addresses[0]}:${port}`);
  }
  return out;
}

export interface EndpointSliceCacheOptions {
  kc: KubeConfig;
  /** Watched namespaces; empty: all. */
  namespaces: string[];
  logger: Logger;
  /** Which slices (default: those of the controller's model Services). */
  labelSelector?: string;
}

/** The watched EndpointSlices of the controller's Services (or of those `labelSelector` picks), indexed by Service. */
export class EndpointSliceCache implements ReplicaAddresses {
  private readonly cache: WatchedCache<EndpointSlice>;
  /** namespace/service → slice name → its callable addresses. */
  private readonly slices = new Map<string, Map<string, string[]>>();
  /** namespace/service → the union of its slices' addresses, sorted (one array per change). */
  private readonly merged = new Map<string, readonly string[]>();
  private readonly listeners: ((serviceKey: string) => void)[] = [];
  private synced = false;

  constructor(opts: EndpointSliceCacheOptions) {
    const api = opts.kc.makeApiClient(DiscoveryV1Api);
    this.cache = new WatchedCache<EndpointSlice>({
      kc: opts.kc,
      name: 'endpointslices',
      namespaces: opts.namespaces,
      logger: opts.logger,
      // Slices carry their Service's labels: the controller's Services' slices only.
      labelSelector: opts.labelSelector ?? MANAGED_SELECTOR,
      path: (ns) => (ns ? `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices` : '/apis/discovery.k8s.io/v1/endpointslices'),
      list: (ns, labelSelector) =>
        (ns ? api.listNamespacedEndpointSlice({ namespace: ns, labelSelector }) : api.listEndpointSliceForAllNamespaces({ labelSelector })) as Promise<{ items: EndpointSlice[] }>,
    });
    this.cache.onChange((type, slice) => {
      const service = slice.metadata.labels?.[SERVICE_NAME_LABEL];
      if (!service) return;
      const key = `${slice.metadata.namespace}/${service}`;
      let bySlice = this.slices.get(key);
      if (type === 'delete') bySlice?.delete(slice.metadata.name);
      else {
        if (!bySlice) this.slices.set(key, (bySlice = new Map()));
        bySlice.set(slice.metadata.name, callableAddresses(slice));
      }
      if (bySlice && bySlice.size === 0) {
        this.slices.delete(key);
        this.merged.delete(key);
      } else if (bySlice) {
        this.merged.set(key, [...new Set([...bySlice.values()].flat())].sort());
      }
      for (const l of this.listeners) l(key);
    });
  }

  /** Starts watching; resolves once the first list is in. */
  async start(): Promise<void> {
    await this.cache.start();
    await this.cache.synced;
    this.synced = true;
  }

  get loaded(): boolean {
    return this.synced;
  }

  get stats(): Record<string, CacheStats> {
    return { [this.cache.name]: this.cache.stats };
  }

  addressesOf(namespace: string, service: string): readonly string[] | undefined {
    return this.merged.get(`${namespace}/${service}`);
  }

  /** Called after any slice change, with the slice's Service (namespace/name). */
  onChange(listener: (serviceKey: string) => void): void {
    this.listeners.push(listener);
  }

  stop(): Promise<void> {
    return this.cache.stop();
  }
}

export interface ServiceReplicasOptions {
  kc: KubeConfig;
  /** The Service, namespace/name. */
  service: string;
  logger: Logger;
}

/** The replicas of one Service that take calls now, from its EndpointSlices (the gateway's own: for the autoscaler's reads and the gateways' split of concurrency). */
export class ServiceReplicas {
  private readonly slices: EndpointSliceCache;
  private readonly namespace: string;
  private readonly name: string;

  constructor(opts: ServiceReplicasOptions) {
    ({ namespace: this.namespace, name: this.name } = splitKey(opts.service));
    this.slices = new EndpointSliceCache({ kc: opts.kc, namespaces: [this.namespace], logger: opts.logger, labelSelector: `${SERVICE_NAME_LABEL}=${this.name}` });
  }

  start(): Promise<void> {
    return this.slices.start();
  }

  stop(): Promise<void> {
    return this.slices.stop();
  }

  get loaded(): boolean {
    return this.slices.loaded;
  }

  /** Base URLs of the ready, not terminating endpoints of the Service's http port, sorted. */
  replicas(): readonly string[] {
    return this.slices.addressesOf(this.namespace, this.name) ?? [];
  }

  onChange(listener: () => void): void {
    this.slices.onChange(() => listener());
  }
}
