// Events for condition transitions: which change deserves an Event (pure), and the EventRecorder
// seam (Kubernetes Events in a cluster, log lines in local mode). Recording never fails a reconcile.
import type { Condition, Resource } from '../api/types.js';
import { findCondition } from '../api/conditions.js';
import type { Logger } from '../log.js';

export interface EventRecord {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export interface EventRecorder {
  record(obj: Resource, event: EventRecord): void;
}

/**
 * The Event for a change of condition `type`, or null: when its status flips, when it first
 * appears True, and when it first appears with reason InvalidSpec (the user must act).
 */
export function transitionEvent(prev: readonly Condition[] | undefined, next: readonly Condition[] | undefined, type: string): EventRecord | null {
  const before = findCondition(prev, type);
  const after = findCondition(next, type);
  if (!after) return null;
  const flipped = before ? before.status !== after.status : after.status === 'True' || after.reason === 'InvalidSpec';
  if (!flipped) return null;
  return { type: after.status === 'True' ? 'Normal' : 'Warning', reason: after.reason, message: after.message };
}

/** Local mode: Events are log lines. */
export function logEvents(logger: Logger): EventRecorder {
  return {
    record(obj, e) {
      logger.info({ event: e.reason, type: e.type, kind: obj.kind, name: obj.metadata.name, namespace: obj.metadata.namespace }, e.message);
    },
  };
}
