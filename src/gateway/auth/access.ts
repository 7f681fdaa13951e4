// What a call asks to do, in the terms a SubjectAccessReview asks RBAC: a verb on a resource (or a
// subresource) of the prediction API group in a namespace, by name; or a verb on a non-resource URL
// (/metrics). Every route's question is made here, and so is the sentence a refusal names it by.
import { GROUP } from '../../api/types.js';
import type { Verb } from '../routes.js';

export type Access =
  | { kind: 'resource'; verb: string; group: string; resource: string; subresource: string; namespace: string; name: string }
  | { kind: 'nonResource'; verb: string; path: string };

/** `create` on `endpoints/predict` (predict, rawPredict) or `endpoints/explain` of one Endpoint. */
export function endpointCallAccess(verb: Verb, namespace: string, name: string): Access {
  return { kind: 'resource', verb: 'create', group: GROUP, resource: 'endpoints', subresource: verb === 'explain' ? 'explain' : 'predict', namespace, name };
}

/** The TF Serving surface of one DeployedModel: `create` (POST) or `get` (status and metadata) on `deployedmodels/predict`. */
export function modelCallAccess(method: string, namespace: string, name: string): Access {
  return { kind: 'resource', verb: method === 'POST' ? 'create' : 'get', group: GROUP, resource: 'deployedmodels', subresource: 'predict', namespace, name };
}

/** Reading a prediction resource (the Vertex Endpoint resource, local mode's status API); `name` empty for a list. */
export function readAccess(resource: string, namespace: string, name: string): Access {
  return { kind: 'resource', verb: name === '' ? 'list' : 'get', group: GROUP, resource, subresource: '', namespace, name };
}

/** A GET of a non-resource URL (`/metrics`). */
export function urlAccess(path: string): Access {
  return { kind: 'nonResource', verb: 'get', path };
}

/** The key an access is remembered by (with the token's hash). */
export function accessKey(a: Access): string {
  return a.kind === 'nonResource' ? `${a.verb} ${a.path}` : `${a.verb} ${a.resource}/${a.subresource} ${a.namespace}/${a.name}`;
}

/**
 * Why a call was refused, in kubectl's words: `User "alice" cannot create resource "endpoints/predict"
 * in API group "prediction.predictgate.dev" in the namespace "team-a"` (with the object's name first).
 */
export function refusal(user: string, a: Access, reason: string): string {
  const why = reason ? `: ${reason}` : '';
  if (a.kind === 'nonResource') return `forbidden: User ${JSON.stringify(user)} cannot ${a.verb} path ${JSON.stringify(a.path)}${why}`;
  const resource = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const object = a.name ? `${a.resource}.${a.group} ${JSON.stringify(a.name)} is forbidden` : 'forbidden';
  const where = a.namespace ? ` in the namespace ${JSON.stringify(a.namespace)}` : ' at the cluster scope';
  return `${object}: User ${JSON.stringify(user)} cannot ${a.verb} resource ${JSON.stringify(resource)} in API group ${JSON.stringify(a.group)}${where}${why}`;
}
