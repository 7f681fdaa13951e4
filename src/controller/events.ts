// Events for condition transitions: which change deserves an Event (pure), and local mode's
// EventRecorder (log lines; api/events.ts has the seam).
import type { Condition } from '../api/types.js';
import type { EventRecord, EventRecorder } from '../api/events.js';
import { findCondition } from '../api/conditions.js';
import type { Logger } from '../log.js';

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
