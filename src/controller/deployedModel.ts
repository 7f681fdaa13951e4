// The DeployedModel reconciler. Pure parts: desiredWorkload (spec → what to run, with the Vertex
// container environment) and deployedModelStatus (observation → GDC primaryCondition + Ready
// condition + addresses). The reconcile function only reads, applies, observes and writes status
// when it changed.
import { DEFAULT_CONTAINER_PORT, healthRouteOf, keyOf, predictRouteOf, type AutoscalingStatus, type DeployedModel, type DeployedModelStatus } from '../api/types.js';
import { requestAutoscalingOf, type ScaleToZeroPolicy } from '../api/autoscaling.js';
import { rfc3339, setCondition } from '../api/conditions.js';
import { deployedModelIdOf, sameStatus } from '../api/status.js';
import { deployedModelProblems } from '../api/validation.js';
import type { WorkloadBackend, WorkloadObservation, WorkloadSpec } from '../workload/workload.js';
import type { Store } from '../store/store.js';
import type { Reconcile } from './queue.js';
import { transitionEvent } from './events.js';
import type { EventRecorder } from '../api/events.js';


/** What to run for a valid DeployedModel. `endpointId` is the Endpoint it serves, when known. */
export function desiredWorkload(dm: DeployedModel, endpointId: string | undefined): WorkloadSpec {
  const m = dm.spec.modelSpec;
  const c = m.containerSpec;
  const port = c.ports?.[0]?.containerPort ?? DEFAULT_CONTAINER_PORT;
  const predictRoute = predictRouteOf(m);
  const healthRoute = healthRouteOf(m);
  const env: Record<string, string> = {};
  for (const e of c.env ?? []) env[e.name] = e.value ?? '';
  Object.assign(env, {
    AIP_MODE: 'PREDICTION',
    AIP_HTTP_PORT: String(port),
    AIP_PREDICT_ROUTE: predictRoute,
    AIP_HEALTH_ROUTE: healthRoute,
    AIP_DEPLOYED_MODEL_ID: deployedModelIdOf(dm),
  });
  if (endpointId) env.AIP_ENDPOINT_ID = endpointId;
  if (m.artifactLocation) env.AIP_STORAGE_URI = m.artifactLocation;
  const scaling = requestAutoscalingOf(dm);
  return {
    key: keyOf(dm.metadata),
    command: c.command ?? [],
    args: c.args ?? [],
    env,
    // A model that scales on calls starts with one replica at least (its image and health are known
    // before the first call), and the autoscaler decides from there.
    replicas: scaling ? Math.max(scaling.min, 1) : (dm.spec.dedicatedResources?.minReplicaCount ?? 1),
    ...(scaling ? { scaledByRequests: true } : {}),
    predictRoute,
    healthRoute,
    port,
    image: c.image,
    resources: dm.spec.dedicatedResources?.resources,
    maxReplicas: dm.spec.dedicatedResources?.maxReplicaCount,
    targetCPUUtilizationPercentage: dm.spec.dedicatedResources?.autoscaling?.targetCPUUtilizationPercentage,
    owner: dm.metadata.uid ? { name: dm.metadata.name, uid: dm.metadata.uid } : undefined,
  };
}

interface Verdict {
  ready: boolean;
  reason: string;
  message: string;
}

/** Reasons of a model at zero replicas that still takes calls (they wait for it to wake). */
const AT_ZERO = new Set(['ScaledToZero', 'ScalingFromZero']);

function verdict(dm: DeployedModel, problems: string[], obs: WorkloadObservation | undefined, zero: ScaleToZeroPolicy | undefined): Verdict {
  if (problems.length) return { ready: false, reason: 'InvalidSpec', message: problems.join('; ') };
  if (!obs) return { ready: false, reason: 'Pending', message: 'waiting for the workload to be created' };
  if (obs.readyReplicas > 0 && (obs.serviceAddress || obs.addresses.length)) return { ready: true, reason: 'Ready', message: 'DeployedModel is ready' };
  if (obs.readyReplicas > 0) return { ready: false, reason: 'Progressing', message: 'replicas are ready; waiting for the model Service' };
  if (zero && obs.replicas === 0) return { ready: true, reason: 'ScaledToZero', message: `scaled to zero after at least ${zero.idleMs / 1000} s without a call (idleScaledownPeriod); the next call wakes it and waits for a replica` };
  // Waking: pods not ready yet are the wake under way (a Deployment that fails says so, and that ends it).
  if (zero && (!obs.failure || obs.notYetAvailable) && AT_ZERO.has(dm.status?.primaryCondition?.reason ?? '')) {
    return { ready: true, reason: 'ScalingFromZero', message: `waking from zero: waiting for a replica (0/${obs.replicas} ready); calls wait for it` };
  }
  if (obs.replicas === 0) return { ready: false, reason: 'ScaledToZero', message: 'minReplicaCount is 0: no replica is running' };
  if (obs.failure) return { ready: false, reason: 'Unavailable', message: obs.failure };
  return { ready: false, reason: 'Progressing', message: `waiting for replicas to become ready (0/${obs.replicas} ready)` };
}

/** The status a DeployedModel should have, given what was observed. Pure. */
export function deployedModelStatus(dm: DeployedModel, obs: WorkloadObservation | undefined, problems: string[], now: Date, scaled?: AutoscalingStatus): DeployedModelStatus {
  const prev = dm.status;
  const generation = dm.metadata.generation;
  const scaling = problems.length ? undefined : requestAutoscalingOf(dm);
  const v = verdict(dm, problems, obs, scaling?.scaleToZero);
  const prevPrimary = prev?.primaryCondition;
  const same = prevPrimary && prevPrimary.reason === v.reason && prevPrimary.message === v.message && prevPrimary.observedGeneration === generation;
  const status: DeployedModelStatus = {
    primaryCondition: {
      firstObservedTime: prevPrimary?.firstObservedTime ?? rfc3339(now),
      lastUpdateTime: same ? prevPrimary.lastUpdateTime : rfc3339(now),
      message: v.message,
      observedGeneration: generation,
      reason: v.reason,
      resourceName: dm.metadata.name,
      type: 'DeployedModel',
    },
    conditions: setCondition(prev?.conditions, { type: 'Ready', status: v.ready ? 'True' : 'False', reason: v.reason, message: v.message, observedGeneration: generation }, now),
    observedGeneration: generation,
    deployedModelId: deployedModelIdOf(dm),
    replicas: obs?.replicas ?? 0,
    readyReplicas: obs?.readyReplicas ?? 0,
  };
  const autoscaling = scaling ? (scaled ?? prev?.autoscaling) : undefined;
  if (autoscaling) status.autoscaling = autoscaling;
  // A model at zero (or waking) has nowhere to send a call yet: no address, so that the gateway holds its calls.
  const address = AT_ZERO.has(v.reason) ? undefined : (obs?.serviceAddress ?? obs?.addresses[0]);
  if (address && !problems.length) status.address = address;
  if (obs && obs.addresses.length && !obs.serviceAddress && !problems.length) status.replicaAddresses = obs.addresses;
  return status;
}

export interface DeployedModelReconcilerDeps {
  store: Store;
  backend: WorkloadBackend;
  events: EventRecorder;
  clock(): Date;
  /** The Endpoint a DeployedModel serves (for AIP_ENDPOINT_ID). */
  endpointIdOf(dm: DeployedModel): string | undefined;
  /** The request autoscaler's last decision for a model, where one runs. */
  scaledOf?(key: string): AutoscalingStatus | undefined;
}

/**
 * How long a new DeployedModel that no Endpoint names yet waits before its workload is created: a
 * manifest file holding a model and its Endpoint creates them a moment apart, and starting the model
 * without AIP_ENDPOINT_ID would roll it out again when the Endpoint arrives.
 */
export const ENDPOINT_GRACE_MS = 2000;

export function deployedModelReconciler(deps: DeployedModelReconcilerDeps): Reconcile {
  return async (key) => {
    const dm = deps.store.getDeployedModel(key);
    if (!dm) {
      await deps.backend.delete(key);
      return;
    }
    const problems = deployedModelProblems(dm);
    const endpointId = deps.endpointIdOf(dm);
    if (!problems.length && endpointId === undefined && !deps.backend.observe(key)) {
      const age = deps.clock().getTime() - Date.parse(dm.metadata.creationTimestamp ?? '');
      if (age >= 0 && age < ENDPOINT_GRACE_MS) return { requeueAfterMs: ENDPOINT_GRACE_MS - age }; // an Endpoint event re-enqueues it sooner
    }
    if (problems.length) await deps.backend.delete(key);
    else await deps.backend.apply(desiredWorkload(dm, endpointId));
    const status = deployedModelStatus(dm, deps.backend.observe(key), problems, deps.clock(), deps.scaledOf?.(key));
    if (sameStatus(dm.status, status)) return;
    await deps.store.updateDeployedModelStatus(key, status);
    const event = transitionEvent(dm.status?.conditions, status.conditions, 'Ready');
    if (event) deps.events.record(dm, event);
  };
}
