// Kubernetes Events (core/v1, what `kubectl describe` and `kubectl get events` show) for predictgate's
// resources. Fire-and-forget: a failed Event is logged and never fails the reconcile that raised it.
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { API_VERSION, type Resource } from '../api/types.js';
import type { Logger } from '../log.js';
import type { EventRecord, EventRecorder } from '../controller/events.js';
import { describeApiError } from './errors.js';

export const EVENT_SOURCE = 'predictgate-controller';

export function kubeEvents(kc: KubeConfig, logger: Logger, clock: () => Date): EventRecorder {
  const core = kc.makeApiClient(CoreV1Api);
  return {
    record(obj: Resource, e: EventRecord): void {
      const namespace = obj.metadata.namespace ?? 'default';
      const now = clock();
      core
        .createNamespacedEvent({
          namespace,
          body: {
            metadata: { generateName: `${obj.metadata.name}.`, namespace },
            involvedObject: { apiVersion: API_VERSION, kind: obj.kind, name: obj.metadata.name, namespace, uid: obj.metadata.uid, resourceVersion: obj.metadata.resourceVersion },
            type: e.type,
            reason: e.reason,
            message: e.message,
            source: { component: EVENT_SOURCE },
            reportingComponent: EVENT_SOURCE,
            firstTimestamp: now,
            lastTimestamp: now,
            count: 1,
          },
        })
        .catch((err: unknown) => logger.warn({ kind: obj.kind, name: obj.metadata.name, namespace, reason: e.reason, err: describeApiError(err) }, 'could not record event'));
    },
  };
}
