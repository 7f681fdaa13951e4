// The Kubernetes workload backend (cluster mode): each DeployedModel runs as a Deployment, a Service
// and, when it autoscales, an HPA, written with server-side apply (field manager "predictgate") and
// observed through watched caches of the objects the controller manages. An object whose applied
// hash is already in the cache (or was just written and the watch has not caught up) is not written
// again, so a resync of an unchanged model makes no API call. The request autoscaler's count goes to
// the Deployment's scale subresource; a scale-down first marks the idle pods it takes (their
// pod-deletion-cost), so the ReplicaSet removes those and not a pod with a stream running.
import { KubernetesObjectApi, PatchStrategy, setHeaderOptions, type KubeConfig, type KubernetesObject, type V1Pod } from '@kubernetes/client-node';
import { AppsV1Api, AutoscalingV2Api, CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from '../log.js';
import { FIELD_MANAGER } from '../kube/client.js';
import { statusCodeOf } from '../kube/errors.js';
import { WatchedCache, type CacheStats } from '../kube/informer.js';
import type { WorkloadBackend, WorkloadObservation, WorkloadSpec } from './workload.js';
import { splitKey } from '../api/types.js';
import { PendingWrites } from '../kube/pendingWrites.js';
import { ANNOTATION_DELETION_COST, ANNOTATION_HASH, LABEL_MODEL, MANAGED_SELECTOR, desiredObjects, observeObjects, planScaleDown, type KubeObject, type PodView } from './kubeObjects.js';

export interface KubeBackendOptions {
  kc: KubeConfig;
  namespaces: string[];
  logger: Logger;
}

type Kind = 'Deployment' | 'Service' | 'HorizontalPodAutoscaler';
const API_VERSION_OF: Record<Kind, string> = { Deployment: 'apps/v1', Service: 'v1', HorizontalPodAutoscaler: 'autoscaling/v2' };

/** Whether predictgate's apply owns a Deployment's spec.replicas (from its managedFields). */
function ownsReplicas(d: KubeObject): boolean {
  const fields = (d.metadata as { managedFields?: { manager?: string; operation?: string; fieldsV1?: Record<string, Record<string, unknown>> }[] }).managedFields ?? [];
  return fields.some((f) => f.manager === FIELD_MANAGER && f.operation === 'Apply' && f.fieldsV1?.['f:spec']?.['f:replicas'] !== undefined);
}

export class KubeWorkloadBackend implements WorkloadBackend {
  private readonly objects: KubernetesObjectApi;
  private readonly caches: Record<Kind, WatchedCache<KubeObject>>;
  /** kind/namespace/name → our last write, until the cache holds it. */
  private readonly written = new PendingWrites<KubeObject>();
  private readonly listeners: ((key: string) => void)[] = [];
  private readonly apps: AppsV1Api;
  private readonly core: CoreV1Api;

  constructor(opts: KubeBackendOptions) {
    const { kc, namespaces, logger } = opts;
    this.objects = KubernetesObjectApi.makeApiClient(kc);
    const apps = (this.apps = kc.makeApiClient(AppsV1Api));
    const core = (this.core = kc.makeApiClient(CoreV1Api));
    const autoscaling = kc.makeApiClient(AutoscalingV2Api);
    const make = (kind: Kind, base: string, plural: string, list: (ns: string | undefined, sel: string | undefined) => Promise<unknown>): WatchedCache<KubeObject> => {
      const cache = new WatchedCache<KubeObject>({
        kc,
        name: plural,
        namespaces,
        logger,
        labelSelector: MANAGED_SELECTOR,
        path: (ns) => (ns ? `${base}/namespaces/${ns}/${plural}` : `${base}/${plural}`),
        list: (ns, sel) => list(ns, sel) as Promise<{ items: KubeObject[] }>,
      });
      cache.onChange((type, obj) => {
        const id = `${kind}/${obj.metadata.namespace}/${obj.metadata.name}`;
        this.written.observed(id, obj.metadata.resourceVersion, type === 'delete');
        const model = obj.metadata.labels?.[LABEL_MODEL];
        if (model) for (const l of this.listeners) l(`${obj.metadata.namespace}/${model}`);
      });
      return cache;
    };
    this.caches = {
      Deployment: make('Deployment', '/apis/apps/v1', 'deployments', (ns, labelSelector) =>
        ns ? apps.listNamespacedDeployment({ namespace: ns, labelSelector }) : apps.listDeploymentForAllNamespaces({ labelSelector })),
      Service: make('Service', '/api/v1', 'services', (ns, labelSelector) =>
        ns ? core.listNamespacedService({ namespace: ns, labelSelector }) : core.listServiceForAllNamespaces({ labelSelector })),
      HorizontalPodAutoscaler: make('HorizontalPodAutoscaler', '/apis/autoscaling/v2', 'horizontalpodautoscalers', (ns, labelSelector) =>
        ns ? autoscaling.listNamespacedHorizontalPodAutoscaler({ namespace: ns, labelSelector }) : autoscaling.listHorizontalPodAutoscalerForAllNamespaces({ labelSelector })),
    };
  }

  /** Starts watching; resolves once every cache holds its first list. */
  async start(): Promise<void> {
    const all = Object.values(this.caches);
    await Promise.all(all.map((c) => c.start()));
    await Promise.all(all.map((c) => c.synced));
  }

  private cached(kind: Kind, key: string): KubeObject | undefined {
    const { namespace, name } = splitKey(key);
    return this.caches[kind].get(namespace, name);
  }

  /** Our last write of an object while the cache has not caught up with it (and it is recent). */
  private pendingWrite(kind: Kind, key: string): KubeObject | undefined {
    return this.written.pending(`${kind}/${key}`, this.cached(kind, key)?.metadata.resourceVersion);
  }

  /** The cached object, or the one just written when the cache has not caught up with it. */
  private current(kind: Kind, key: string): KubeObject | undefined {
    return this.pendingWrite(kind, key) ?? this.cached(kind, key);
  }

  /** True when the object as desired is already there (or was just written and the cache lags). */
  private upToDate(obj: KubeObject): boolean {
    const key = `${obj.metadata.namespace}/${obj.metadata.name}`;
    const pending = this.pendingWrite(obj.kind as Kind, key);
    if (pending) return pending.metadata.annotations?.[ANNOTATION_HASH] === obj.metadata.annotations?.[ANNOTATION_HASH];
    const current = this.cached(obj.kind as Kind, key);
    if (current?.metadata.annotations?.[ANNOTATION_HASH] !== obj.metadata.annotations?.[ANNOTATION_HASH]) return false;
    // The one field others commonly change by hand (kubectl scale) while our hash stays: put it back.
    const want = (obj.spec as { replicas?: number }).replicas;
    return want === undefined || (current?.spec as { replicas?: number } | undefined)?.replicas === want;
  }

  private async write(obj: KubeObject): Promise<void> {
    const result = (await this.objects.patch(obj as KubernetesObject, undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply)) as unknown as KubeObject;
    const key = `${obj.metadata.namespace}/${obj.metadata.name}`;
    this.written.wrote(`${obj.kind}/${key}`, result.metadata?.resourceVersion, result, this.cached(obj.kind as Kind, key)?.metadata.resourceVersion);
  }

  /**
   * When an HPA takes over the replica count, an apply that just leaves `spec.replicas` out would
   * delete the field (it defaults to 1: the model scales down before the HPA scales it up). A second
   * field manager first co-owns the current count, so the field stays until the HPA writes it.
   */
  private async handOverReplicas(deployment: KubeObject): Promise<void> {
    if ((deployment.spec as { replicas?: number }).replicas !== undefined) return;
    const current = this.current('Deployment', `${deployment.metadata.namespace}/${deployment.metadata.name}`);
    const replicas = (current?.spec as { replicas?: number } | undefined)?.replicas;
    if (current === undefined || replicas === undefined || !ownsReplicas(current)) return;
    const handover = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: deployment.metadata.name, namespace: deployment.metadata.namespace }, spec: { replicas } };
    await this.objects.patch(handover as KubernetesObject, undefined, undefined, `${FIELD_MANAGER}-replicas-handover`, true, PatchStrategy.ServerSideApply);
  }

  async apply(spec: WorkloadSpec): Promise<void> {
    const want = desiredObjects(spec);
    // The request autoscaler owns the count of a Deployment it scales, but only once it exists: it is
    // created with the spec's first count (the minimum, at least one), as local mode starts it.
    if (spec.scaledByRequests && !this.current('Deployment', spec.key)) want.deployment = { ...want.deployment, spec: { ...want.deployment.spec, replicas: spec.replicas } };
    for (const obj of [want.deployment, want.service, want.hpa]) {
      if (!obj || this.upToDate(obj)) continue;
      if (obj === want.deployment) await this.handOverReplicas(obj);
      await this.write(obj);
    }
    if (!want.hpa) await this.remove('HorizontalPodAutoscaler', spec.key);
  }

  /**
   * The request autoscaler's count, written to the Deployment's scale subresource (field manager
   * predictgate-autoscaler), as an HPA writes it; the apply leaves spec.replicas to it. A scale-down
   * reads the model's pods, takes only those without calls in flight and marks them with the lowest
   * pod-deletion-cost before the count is written (pods with calls stay, and so does a count that
   * much higher).
   */
  async scale(key: string, replicas: number, inFlight: ReadonlyMap<string, number>): Promise<number> {
    const { namespace, name } = splitKey(key);
    const deployment = this.current('Deployment', key);
    const current = (deployment?.spec as { replicas?: number } | undefined)?.replicas;
    if (!deployment || current === undefined || current === replicas) return current ?? replicas;
    if (replicas < current) replicas = await this.markScaleDown(namespace, name, current, replicas, inFlight);
    if (replicas === current) return current;
    const body = { apiVersion: 'autoscaling/v1', kind: 'Scale', metadata: { name, namespace }, spec: { replicas } };
    await this.apps.replaceNamespacedDeploymentScale({ name, namespace, body, fieldManager: `${FIELD_MANAGER}-autoscaler` });
    return replicas;
  }

  /** Marks the idle pods a scale-down takes (planScaleDown); the count it may go to. */
  private async markScaleDown(namespace: string, name: string, current: number, wanted: number, inFlight: ReadonlyMap<string, number>): Promise<number> {
    const { items } = await this.core.listNamespacedPod({ namespace, labelSelector: `${LABEL_MODEL}=${name}` });
    const plan = planScaleDown(items.map(podView), current, wanted, inFlight);
    const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    await Promise.all([...plan.costs].map(([pod, cost]) =>
      this.core.patchNamespacedPod({ name: pod, namespace, body: { metadata: { annotations: { [ANNOTATION_DELETION_COST]: cost } } } }, merge)));
    return plan.replicas;
  }

  observe(key: string): WorkloadObservation | undefined {
    return observeObjects(this.current('Deployment', key), this.current('Service', key));
  }

  private async remove(kind: Kind, key: string): Promise<void> {
    const obj = this.cached(kind, key);
    if (!obj) return;
    try {
      await this.objects.delete({ apiVersion: API_VERSION_OF[kind], kind, metadata: { name: obj.metadata.name, namespace: obj.metadata.namespace } }, undefined, undefined, undefined, undefined, 'Background');
    } catch (err) {
      if (statusCodeOf(err) !== 404) throw err;
    }
  }

  /**
   * Deletes the children. A deleted DeployedModel's children also go by their owner references (the
   * garbage collector); this covers an invalid spec, and clusters or tests without one.
   */
  async delete(key: string): Promise<void> {
    for (const kind of ['HorizontalPodAutoscaler', 'Service', 'Deployment'] as const) await this.remove(kind, key);
  }

  onChange(listener: (key: string) => void): void {
    this.listeners.push(listener);
  }

  /** Lists and restarts of each watched resource, by plural. */
  get stats(): Record<string, CacheStats> {
    return Object.fromEntries(Object.values(this.caches).map((c) => [c.name, c.stats]));
  }

  async stop(): Promise<void> {
    await Promise.all(Object.values(this.caches).map((c) => c.stop()));
  }
}

function podView(p: V1Pod): PodView {
  return {
    name: p.metadata?.name ?? '',
    ip: p.status?.podIP || undefined,
    ready: p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false,
    terminating: p.metadata?.deletionTimestamp !== undefined && p.metadata?.deletionTimestamp !== null,
    cost: p.metadata?.annotations?.[ANNOTATION_DELETION_COST],
  };
}
