// Condition helpers shared by the reconcilers and the routing table: find, set (moving
// lastTransitionTime only when the status flips), and test a condition's status.
import type { Condition, ConditionStatus } from './types.js';

export function findCondition(conditions: readonly Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

/**
 * Returns a new condition list with `next` set. lastTransitionTime is kept from the previous
 * condition of the same type unless the status changed (Kubernetes API conventions).
 */
export function setCondition(
  conditions: readonly Condition[] | undefined,
  next: Omit<Condition, 'lastTransitionTime'>,
  now: Date,
): Condition[] {
  const list = conditions ? [...conditions] : [];
  const i = list.findIndex((c) => c.type === next.type);
  const prev = i >= 0 ? list[i] : undefined;
  const lastTransitionTime = prev && prev.status === next.status ? prev.lastTransitionTime : rfc3339(now);
  const cond: Condition = { ...next, lastTransitionTime };
  if (i >= 0) list[i] = cond;
  else list.push(cond);
  return list;
}

export function conditionIs(conditions: readonly Condition[] | undefined, type: string, status: ConditionStatus): boolean {
  return findCondition(conditions, type)?.status === status;
}

/** RFC 3339 with second precision, as Kubernetes writes metav1.Time. */
export function rfc3339(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
