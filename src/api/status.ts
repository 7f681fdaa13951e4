// What the resources' status says, read the same way by the reconcilers, the routing table and the
// Vertex Endpoint resource: a DeployedModel's client-facing id, whether it is Ready, and whether two
// statuses are the same (then nothing is written).
import { conditionIs } from './conditions.js';
import type { DeployedModel } from './types.js';

/** The id reported to clients: spec.id, else metadata.name. */
export function deployedModelIdOf(dm: DeployedModel): string {
  return dm.spec?.id ?? dm.metadata.name;
}

/** A DeployedModel is routable when its Ready condition is True. */
export function isModelReady(dm: DeployedModel): boolean {
  return conditionIs(dm.status?.conditions, 'Ready', 'True');
}

/**
 * Whether two statuses are the same. Compared as JSON with sorted keys: the apiserver hands objects
 * back with their keys sorted, and an absent field equals an undefined one. Timestamps only move with
 * a change, so no field needs ignoring.
 */
export function sameStatus(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

function canonicalJson(v: unknown): string {
  return JSON.stringify(v, (_key, value: unknown) =>
    value && typeof value === 'object' && !Array.isArray(value)
      ? Object.fromEntries(Object.entries(value as Record<string, unknown>).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)))
      : value,
  ) ?? 'undefined';
}
