// How an Endpoint's destinations refer to DeployedModels: the key a destination points at, its
// traffic share, and the tenancy rule (a DeployedModel in another namespace is followed only when
// it lists the Endpoint's namespace in spec.allowedNamespaces), and the traffic split by deployed
// model id. Shared by the Endpoint reconciler, the gateway's routing table and the Vertex Endpoint
// resource so all three always agree.
import type { DeployedModel, Destination, Endpoint } from './types.js';
import { deployedModelIdOf } from './status.js';

export function destinationKey(ep: Endpoint, d: Destination): string {
  return `${d.serviceRef.namespace ?? ep.metadata.namespace ?? 'default'}/${d.serviceRef.name}`;
}

/** A destination's traffic; a lone destination without trafficPercentage takes 100. */
export function trafficOf(ep: Endpoint, d: Destination): number {
  return d.trafficPercentage ?? (ep.spec.destinations.length === 1 ? 100 : 0);
}

/** A destination that resolves: its DeployedModel exists and may be routed to from the Endpoint. */
export interface Routable {
  model: DeployedModel;
  traffic: number;
}

/** The Endpoint's destinations that resolve, in spec order (the router, the status and the resource all start here). */
export function routableDestinations(ep: Endpoint, lookup: (key: string) => DeployedModel | undefined): Routable[] {
  const out: Routable[] = [];
  for (const d of Array.isArray(ep.spec?.destinations) ? ep.spec.destinations : []) {
    const model = lookup(destinationKey(ep, d));
    if (model && mayRoute(ep, model)) out.push({ model, traffic: trafficOf(ep, d) });
  }
  return out;
}

/**
 * deployedModelId -> percent over the destinations that resolve. Two DeployedModels with one id
 * (same name in two namespaces, or one spec.id) add up: the router sends each its own share, and
 * answers name that id for both.
 */
export function trafficSplitOf(routable: readonly Routable[]): Record<string, number> {
  const split: Record<string, number> = {};
  for (const { model, traffic } of routable) {
    const id = deployedModelIdOf(model);
    split[id] = (split[id] ?? 0) + traffic;
  }
  return split;
}

/**
 * Why a destination does not resolve (its DeployedModel does not exist, or does not let the
 * Endpoint's namespace use it); undefined when it resolves. The Endpoint's status and the gateway's
 * refusals say the same.
 */
export function unresolved(ep: Endpoint, d: Destination, dm: DeployedModel | undefined): { reason: 'DeployedModelNotFound' | 'CrossNamespaceRefused'; message: string } | undefined {
  const key = destinationKey(ep, d);
  if (!dm) return { reason: 'DeployedModelNotFound', message: `DeployedModel ${key} does not exist` };
  if (!mayRoute(ep, dm)) return { reason: 'CrossNamespaceRefused', message: `DeployedModel ${key} does not allow Endpoints of namespace ${ep.metadata.namespace ?? 'default'} (spec.allowedNamespaces)` };
  return undefined;
}

export function mayRoute(ep: Endpoint, dm: DeployedModel): boolean {
  const epNs = ep.metadata.namespace ?? 'default';
  const dmNs = dm.metadata.namespace ?? 'default';
  return epNs === dmNs || (dm.spec.allowedNamespaces ?? []).includes(epNs);
}

/** `{name}.{namespace}.{domain}`: the Host of GDC-form calls to an Endpoint. */
export function fqdnOf(ep: Endpoint, domain: string): string {
  return `${ep.metadata.name}.${ep.metadata.namespace ?? 'default'}.${domain}`;
}

/** Keys of the DeployedModels an Endpoint names (for re-enqueueing Endpoints when a model changes). */
export function referencedModelKeys(ep: Endpoint): string[] {
  // Called on every Endpoint, valid or not (a hand-edited manifest may have any shape).
  const ds: unknown = ep.spec?.destinations;
  if (!Array.isArray(ds)) return [];
  return ds.filter((d: Destination) => typeof d?.serviceRef?.name === 'string').map((d: Destination) => destinationKey(ep, d));
}
