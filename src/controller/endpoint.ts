// The Endpoint reconciler. Pure part: endpointStatus (destinations resolved against DeployedModels
// → EndpointReady condition, FQDN, traffic split). EndpointReady is True with reason ResourceReady
// and message "Endpoint Ready" exactly when every destination with traffic is Ready; otherwise the
// reason and message name the DeployedModel that blocks. A model scaled to zero takes calls (they wait
// for it to wake), so it does not block; the message says it is at zero.
import type { DeployedModel, Endpoint, EndpointStatus } from '../api/types.js';
import { setCondition } from '../api/conditions.js';
import { isModelReady, sameStatus } from '../api/status.js';
import { destinationKey, fqdnOf, routableDestinations, trafficOf, trafficSplitOf, unresolved } from '../api/references.js';
import { endpointProblems } from '../api/validation.js';
import type { Store } from '../store/store.js';
import type { Reconcile } from './queue.js';
import { transitionEvent } from './events.js';
import type { EventRecorder } from '../api/events.js';

interface Blocker {
  reason: string;
  message: string;
}

export function endpointStatus(ep: Endpoint, lookup: (key: string) => DeployedModel | undefined, domain: string, now: Date): EndpointStatus {
  const problems = endpointProblems(ep);
  const trafficSplit = problems.length ? {} : trafficSplitOf(routableDestinations(ep, lookup));
  let blocker: Blocker | null = problems.length ? { reason: 'InvalidSpec', message: problems.join('; ') } : null;
  const atZero: string[] = [];
  if (!problems.length) {
    for (const d of ep.spec.destinations) {
      const key = destinationKey(ep, d);
      const traffic = trafficOf(ep, d);
      const dm = lookup(key);
      if (traffic === 0 || blocker) continue;
      blocker = unresolved(ep, d, dm) ?? null;
      if (blocker || !dm) continue;
      // The message names the model but not its reason: the model's own conditions say why, and the
      // Endpoint's status then changes once when the model goes ready instead of at every step.
      if (!isModelReady(dm)) blocker = { reason: 'DeployedModelNotReady', message: `DeployedModel ${key} is not ready` };
      else if (dm.status?.primaryCondition?.reason === 'ScaledToZero') atZero.push(key);
    }
    if (!blocker && ep.spec.destinations.length === 0) blocker = { reason: 'NoDestinations', message: 'spec.destinations is empty' };
  }
  const generation = ep.metadata.generation;
  return {
    conditions: setCondition(ep.status?.conditions, blocker
      ? { type: 'EndpointReady', status: 'False', reason: blocker.reason, message: blocker.message, observedGeneration: generation }
      : { type: 'EndpointReady', status: 'True', reason: 'ResourceReady', message: atZero.length ? `Endpoint Ready; scaled to zero, woken by the next call: DeployedModel ${atZero.join(', ')}` : 'Endpoint Ready', observedGeneration: generation }, now),
    endpointFQDN: fqdnOf(ep, domain),
    observedGeneration: generation,
    trafficSplit,
  };
}

export interface EndpointReconcilerDeps {
  store: Store;
  events: EventRecorder;
  domain: string;
  clock(): Date;
}

export function endpointReconciler(deps: EndpointReconcilerDeps): Reconcile {
  return async (key) => {
    const ep = deps.store.getEndpoint(key);
    if (!ep) return;
    const status = endpointStatus(ep, (k) => deps.store.getDeployedModel(k), deps.domain, deps.clock());
    if (sameStatus(ep.status, status)) return;
    await deps.store.updateEndpointStatus(key, status);
    const event = transitionEvent(ep.status?.conditions, status.conditions, 'EndpointReady');
    if (event) deps.events.record(ep, event);
  };
}
