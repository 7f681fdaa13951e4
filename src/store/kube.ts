// The Store over the Kubernetes API (cluster mode): DeployedModels and Endpoints from watched caches,
// status written through the status subresource. A status just written is served in place of the
// cached one until the watch delivers it, so a reconcile that runs in between sees its own write and
// does not write the same status twice. The gateway uses it read-only.
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, VERSION, keyOf, splitKey, type DeployedModel, type Endpoint, type Resource, type ResourceKind } from '../api/types.js';
import type { Logger } from '../log.js';
import { WatchedCache, type CacheStats } from '../kube/informer.js';
import { statusCodeOf } from '../kube/errors.js';
import { PendingWrites } from '../kube/pendingWrites.js';
import type { Store, StoreEvent } from './store.js';

const PLURAL: Record<ResourceKind, string> = { DeployedModel: 'deployedmodels', Endpoint: 'endpoints' };

export interface KubeStoreOptions {
  kc: KubeConfig;
  /** Watched namespaces; empty: all. */
  namespaces: string[];
  logger: Logger;
}

export class KubeStore implements Store {
  private readonly api: CustomObjectsApi;
  private readonly caches: { [K in ResourceKind]: WatchedCache<Extract<Resource, { kind: K }>> };
  private readonly pending = new PendingWrites<unknown>();
  private readonly listeners: ((e: StoreEvent) => void)[] = [];
  private synced = false;

  constructor(opts: KubeStoreOptions) {
    this.api = opts.kc.makeApiClient(CustomObjectsApi);
    const cache = <K extends ResourceKind>(kind: K): WatchedCache<Extract<Resource, { kind: K }>> => {
      const plural = PLURAL[kind];
      const c = new WatchedCache<Extract<Resource, { kind: K }>>({
        kc: opts.kc,
        name: plural,
        namespaces: opts.namespaces,
        logger: opts.logger,
        path: (ns) => (ns ? `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${plural}` : `/apis/${GROUP}/${VERSION}/${plural}`),
        list: (ns) =>
          (ns
            ? this.api.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural })
            : this.api.listClusterCustomObject({ group: GROUP, version: VERSION, plural })) as Promise<{ items: Extract<Resource, { kind: K }>[] }>,
      });
      c.onChange((type, obj) => {
        const key = keyOf(obj.metadata);
        const id = `${kind}/${key}`;
        this.pending.observed(id, obj.metadata.resourceVersion, type === 'delete');
        for (const l of this.listeners) l({ kind, key });
      });
      return c;
    };
    this.caches = { DeployedModel: cache('DeployedModel'), Endpoint: cache('Endpoint') };
  }

  /** Starts watching; resolves once both caches hold their first list. */
  async start(): Promise<void> {
    await Promise.all([this.caches.DeployedModel.start(), this.caches.Endpoint.start()]);
    await Promise.all([this.caches.DeployedModel.synced, this.caches.Endpoint.synced]);
    this.synced = true;
  }

  /** True once the caches are filled (the gateway is ready then). */
  get loaded(): boolean {
    return this.synced;
  }

  /** Lists and restarts of each watched resource, by plural. */
  get stats(): Record<string, CacheStats> {
    return Object.fromEntries(Object.values(this.caches).map((c) => [c.name, c.stats]));
  }

  private withPending<T extends Resource>(obj: T | undefined): T | undefined {
    if (!obj) return undefined;
    const status = this.pending.pending(`${obj.kind}/${keyOf(obj.metadata)}`, obj.metadata.resourceVersion);
    return status !== undefined ? { ...obj, status } : obj;
  }

  private get<K extends ResourceKind>(kind: K, key: string): Extract<Resource, { kind: K }> | undefined {
    const { namespace, name } = splitKey(key);
    return this.withPending(this.caches[kind].get(namespace, name) as Extract<Resource, { kind: K }> | undefined);
  }

  listDeployedModels(): DeployedModel[] {
    return this.caches.DeployedModel.list().map((o) => this.withPending(o)!);
  }

  listEndpoints(): Endpoint[] {
    return this.caches.Endpoint.list().map((o) => this.withPending(o)!);
  }

  getDeployedModel(key: string): DeployedModel | undefined {
    return this.get('DeployedModel', key);
  }

  getEndpoint(key: string): Endpoint | undefined {
    return this.get('Endpoint', key);
  }

  updateDeployedModelStatus(key: string, status: DeployedModel['status']): Promise<void> {
    return this.writeStatus('DeployedModel', key, status);
  }

  updateEndpointStatus(key: string, status: Endpoint['status']): Promise<void> {
    return this.writeStatus('Endpoint', key, status);
  }

  /** Replaces .status in one JSON patch (`add` replaces an existing member), via the status subresource. */
  private async writeStatus(kind: ResourceKind, key: string, status: unknown): Promise<void> {
    const { namespace, name } = splitKey(key);
    let written: Resource;
    try {
      written = (await this.api.patchNamespacedCustomObjectStatus({
        group: GROUP,
        version: VERSION,
        namespace,
        plural: PLURAL[kind],
        name,
        body: [{ op: 'add', path: '/status', value: status }],
      })) as Resource;
    } catch (err) {
      if (statusCodeOf(err) === 404) return; // deleted meanwhile: its delete event re-enqueues it
      throw err;
    }
    this.pending.wrote(`${kind}/${key}`, written.metadata.resourceVersion, written.status, this.caches[kind].get(namespace, name)?.metadata.resourceVersion);
  }

  onChange(listener: (event: StoreEvent) => void): void {
    this.listeners.push(listener);
  }

  async stop(): Promise<void> {
    await Promise.all([this.caches.DeployedModel.stop(), this.caches.Endpoint.stop()]);
  }
}
