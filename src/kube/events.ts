// Kubernetes Events (core/v1, what `kubectl describe` and `kubectl get events` show) for predictgate's
// resources. Fire-and-forget: a failed Event is logged and never fails the reconcile that raised it.
// At most EVENTS_IN_FLIGHT are sent at once, so a burst of transitions (thousands of models turning
// Ready together) does not take the API connections the reconciles need (nor hold thousands of
// requests in memory); those waiting are a few hundred bytes each. Past EVENTS_QUEUED waiting, new
// ones are dropped with a warning, as client-go's event broadcaster drops past its queue of 1000.
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { API_VERSION, type Resource } from '../api/types.js';
import type { Logger } from '../log.js';
import type { EventRecord, EventRecorder } from '../api/events.js';
import { describeApiError } from './errors.js';

export const EVENT_SOURCE = 'predictgate-controller';

export const EVENTS_IN_FLIGHT = 8;
export const EVENTS_QUEUED = 10_000;

/** An EventRecorder that says how many Events are in flight, waiting, and dropped so far. */
export interface QueuedEventRecorder extends EventRecorder {
  counts(): { inFlight: number; waiting: number; dropped: number };
}

export function kubeEvents(kc: KubeConfig, logger: Logger, clock: () => Date): QueuedEventRecorder {
  const core = kc.makeApiClient(CoreV1Api);
  const waiting: (() => Promise<unknown>)[] = [];
  let inFlight = 0;
  let dropped = 0;
  const pump = (): void => {
    while (inFlight < EVENTS_IN_FLIGHT && waiting.length > 0) {
      inFlight++;
      void waiting.shift()!().finally(() => {
        inFlight--;
        pump();
      });
    }
  };
  return {
    counts: () => ({ inFlight, waiting: waiting.length, dropped }),
    record(obj: Resource, e: EventRecord): void {
      const namespace = obj.metadata.namespace ?? 'default';
      if (waiting.length >= EVENTS_QUEUED) {
        if (dropped++ % EVENTS_QUEUED === 0) logger.warn({ kind: obj.kind, name: obj.metadata.name, namespace, reason: e.reason, droppedSoFar: dropped }, `more than ${EVENTS_QUEUED} Events waiting to be sent: dropping new ones`);
        return;
      }
      const now = clock();
      waiting.push(() => core
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
        .catch((err: unknown) => logger.warn({ kind: obj.kind, name: obj.metadata.name, namespace, reason: e.reason, err: describeApiError(err) }, 'could not record event')));
      pump();
    },
  };
}
