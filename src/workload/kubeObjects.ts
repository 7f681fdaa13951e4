// Pure translation between a WorkloadSpec and the Kubernetes objects that run it: the Deployment
// (model container with the Vertex environment, a readiness probe on the health route and a preStop
// pause), the Service, and an autoscaling/v2 HPA when the spec allows more replicas than it asks for; and back
// from an observed Deployment and Service to a WorkloadObservation. Each object carries a hash of what
// was applied, so an unchanged spec costs no API write. And which pods a scale-down takes: those
// without calls in flight, marked with the lowest pod-deletion-cost.
import { createHash } from 'node:crypto';
import { API_VERSION, splitKey } from '../api/types.js';
import type { WorkloadObservation, WorkloadSpec } from './workload.js';

export const LABEL_MODEL = 'prediction.predictgate.dev/deployed-model';
export const ANNOTATION_HASH = 'prediction.predictgate.dev/applied-hash';
export const MANAGED_BY = 'app.kubernetes.io/managed-by';
export const MANAGED_BY_VALUE = 'predictgate';
/** Selects every object the controller manages. */
export const MANAGED_SELECTOR = `${MANAGED_BY}=${MANAGED_BY_VALUE}`;
export const DEFAULT_TARGET_CPU = 60;
/**
 * The ReplicaSet controller removes pods of a lower cost first (among ready pods; pending and unready
 * ones go before them): a scale-down marks the idle pods it takes.
 */
export const ANNOTATION_DELETION_COST = 'controller.kubernetes.io/pod-deletion-cost';
export const TAKEN_DELETION_COST = '-1000';
/** How long a stopping model pod keeps serving after it left its Service (Kubernetes >= 1.30). */
const PRESTOP_SLEEP_SECONDS = 10;
/**
 * A new model pod's health route is asked every second until it first answers (the startup probe);
 * the kubelet runs the readiness probe at once when the startup probe passes, so a pod is Ready
 * within a second of its server listening, not at the next 5 s readiness period. A server that has
 * not answered within an hour of starting is restarted (large weights may take many minutes to load).
 */
const STARTUP_PROBE = { periodSeconds: 1, timeoutSeconds: 1, failureThreshold: 3600 };

/** The fields of a Kubernetes object this module reads and writes. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: unknown[];
    resourceVersion?: string;
    generation?: number;
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

export interface ModelObjects {
  deployment: KubeObject;
  service: KubeObject;
  /** null: no autoscaler (and any existing one is deleted). */
  hpa: KubeObject | null;
}

export function serviceAddress(name: string, namespace: string, port: number): string {
  return `http://${name}.${namespace}.svc:${port}`;
}

/** Whether an HPA manages the replica count: more replicas allowed than asked for, at least one asked for, and no request target. */
export function autoscaled(spec: WorkloadSpec): boolean {
  return !spec.scaledByRequests && spec.replicas >= 1 && spec.maxReplicas !== undefined && spec.maxReplicas > spec.replicas;
}

function withHash(obj: KubeObject): KubeObject {
  const hash = createHash('sha256').update(JSON.stringify(obj)).digest('hex').slice(0, 16);
  obj.metadata.annotations = { ...obj.metadata.annotations, [ANNOTATION_HASH]: hash };
  return obj;
}

export function desiredObjects(spec: WorkloadSpec): ModelObjects {
  const { namespace, name } = splitKey(spec.key);
  const labels = { 'app.kubernetes.io/name': name, 'app.kubernetes.io/component': 'model-server', [MANAGED_BY]: MANAGED_BY_VALUE, [LABEL_MODEL]: name };
  const ownerReferences = spec.owner
    ? [{ apiVersion: API_VERSION, kind: 'DeployedModel', name: spec.owner.name, uid: spec.owner.uid, controller: true, blockOwnerDeletion: true }]
    : undefined;
  const metadata = (): KubeObject['metadata'] => ({ name, namespace, labels: { ...labels }, ...(ownerReferences ? { ownerReferences } : {}) });
  const container: Record<string, unknown> = {
    name: 'model',
    image: spec.image ?? '',
    ...(spec.command.length ? { command: spec.command } : {}),
    ...(spec.args.length ? { args: spec.args } : {}),
    env: Object.entries(spec.env).map(([n, value]) => ({ name: n, value })),
    ports: [{ name: 'http', containerPort: spec.port, protocol: 'TCP' }],
    startupProbe: { httpGet: { path: spec.healthRoute, port: 'http' }, ...STARTUP_PROBE },
    readinessProbe: { httpGet: { path: spec.healthRoute, port: 'http' }, periodSeconds: 5, timeoutSeconds: 5, failureThreshold: 3 },
    // A stopping pod turns terminating in its Service's EndpointSlices at once and keeps serving for
    // this long before SIGTERM: the gateway sends it no new call, the calls in flight on it finish,
    // and its pooled connections idle out (UPSTREAM_KEEPALIVE_MS). The kubelet's own sleep action:
    // no shell needed in the image.
    lifecycle: { preStop: { sleep: { seconds: PRESTOP_SLEEP_SECONDS } } },
    ...(spec.resources ? { resources: spec.resources } : {}),
  };
  const hpa = autoscaled(spec);
  const deployment = withHash({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: metadata(),
    spec: {
      // An HPA or the request autoscaler (the scale subresource) owns the count; the apply leaves it to them.
      ...(hpa || spec.scaledByRequests ? {} : { replicas: spec.replicas }),
      selector: { matchLabels: { [LABEL_MODEL]: name } },
      template: { metadata: { labels: { ...labels } }, spec: { containers: [container] } },
    },
  });
  const service = withHash({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: metadata(),
    spec: { type: 'ClusterIP', selector: { [LABEL_MODEL]: name }, ports: [{ name: 'http', port: spec.port, targetPort: 'http', protocol: 'TCP' }] },
  });
  const autoscaler = hpa
    ? withHash({
        apiVersion: 'autoscaling/v2',
        kind: 'HorizontalPodAutoscaler',
        metadata: metadata(),
        spec: {
          scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name },
          minReplicas: spec.replicas,
          maxReplicas: spec.maxReplicas,
          metrics: [{ type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: spec.targetCPUUtilizationPercentage ?? DEFAULT_TARGET_CPU } } }],
        },
      })
    : null;
  return { deployment, service, hpa: autoscaler };
}

interface DeploymentCondition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}

/** What the Deployment (and Service) say about the workload. Pure. */
export function observeObjects(deployment: KubeObject | undefined, service: KubeObject | undefined): WorkloadObservation | undefined {
  if (!deployment) return undefined;
  const spec = deployment.spec as { replicas?: number } | undefined;
  const st = (deployment.status ?? {}) as { observedGeneration?: number; replicas?: number; updatedReplicas?: number; availableReplicas?: number; conditions?: DeploymentCondition[] };
  const replicas = spec?.replicas ?? 1;
  const available = st.availableReplicas ?? 0;
  const seen = (st.observedGeneration ?? 0) >= (deployment.metadata.generation ?? 0) && st.observedGeneration !== undefined;
  const progressing = !seen || (st.updatedReplicas ?? 0) < replicas;
  const cond = (type: string): DeploymentCondition | undefined => st.conditions?.find((c) => c.type === type);
  const stalled = cond('Progressing');
  const replicaFailure = cond('ReplicaFailure');
  const availableCond = cond('Available');
  let failure: string | undefined;
  let notYetAvailable = false;
  if (stalled?.status === 'False') failure = `Deployment ${stalled.reason ?? 'not progressing'}: ${stalled.message ?? ''}`.trim();
  else if (replicaFailure?.status === 'True') failure = `Deployment ReplicaFailure: ${replicaFailure.message ?? replicaFailure.reason ?? ''}`.trim();
  else if (seen && !progressing && available === 0 && replicas > 0) {
    failure = `0 of ${replicas} replicas available` + (availableCond?.status === 'False' ? ` (${availableCond.reason ?? 'Unavailable'}: ${availableCond.message ?? ''})`.replace(/: \)$/, ')') : '');
    notYetAvailable = true;
  }
  const ports = (service?.spec as { ports?: { port: number }[] } | undefined)?.ports;
  return {
    replicas,
    runningReplicas: st.replicas ?? 0,
    readyReplicas: available,
    addresses: [],
    serviceAddress: service && ports?.[0] ? serviceAddress(service.metadata.name, service.metadata.namespace ?? 'default', ports[0].port) : undefined,
    progressing,
    failure,
    ...(notYetAvailable ? { notYetAvailable } : {}),
  };
}

/** What a scale-down reads of one pod of the model. */
export interface PodView {
  name: string;
  /** Its IP, once it has one. */
  ip: string | undefined;
  ready: boolean;
  /** Deletion under way (it no longer counts in the Deployment's replicas). */
  terminating: boolean;
  /** Its pod-deletion-cost annotation, if any. */
  cost: string | undefined;
}

export interface ScaleDownPlan {
  /** The count to ask for: `wanted`, or more when too few pods are idle. */
  replicas: number;
  /** Pods whose deletion cost changes: the taken ones marked, stale marks removed (null). */
  costs: Map<string, string | null>;
}

/** The host of a replica address as the gateway names it (http://10.0.0.5:8080, http://[fd00::5]:8080). */
export function hostOfAddress(address: string): string | undefined {
  try {
    return new URL(address).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return undefined;
  }
}

/**
 * A scale-down from `current` to `wanted` replicas that takes only pods without calls in flight
 * (`inFlight`: per replica address, summed over the gateways): pods not yet made or not ready first,
 * then idle ready ones, marked with the lowest deletion cost so the ReplicaSet removes those. Pods
 * with calls on them (a stream that runs for minutes) stay, and the count stays that much higher
 * until their calls end. Pure.
 */
export function planScaleDown(pods: readonly PodView[], current: number, wanted: number, inFlight: ReadonlyMap<string, number>): ScaleDownPlan {
  const busyHosts = new Map<string, number>();
  for (const [address, n] of inFlight) {
    const host = hostOfAddress(address);
    if (host !== undefined && n > 0) busyHosts.set(host, (busyHosts.get(host) ?? 0) + n);
  }
  const live = pods.filter((p) => !p.terminating);
  const idle = live.filter((p) => p.ip === undefined || !busyHosts.has(p.ip)).sort((a, b) => Number(a.ready) - Number(b.ready));
  // Replicas asked for whose pods are not there yet go first; then idle pods.
  const missing = Math.max(0, current - live.length);
  const take = Math.min(Math.max(0, current - wanted), missing + idle.length);
  const taken = new Set(idle.slice(0, Math.max(0, take - missing)).map((p) => p.name));
  const costs = new Map<string, string | null>();
  for (const p of live) {
    const want = taken.has(p.name) ? TAKEN_DELETION_COST : undefined;
    if (p.cost !== want) costs.set(p.name, want ?? null);
  }
  return { replicas: current - take, costs };
}
