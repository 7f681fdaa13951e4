// The two questions the Kubernetes gate asks the apiserver, through @kubernetes/client-node: a
// TokenReview (who holds this token?) and a SubjectAccessReview (may they do this?), each with a
// deadline. What comes back is reduced to what the gate needs.
import { AuthenticationV1Api, AuthorizationV1Api, type KubeConfig, type V1SubjectAccessReviewSpec } from '@kubernetes/client-node';
import { withTimeout } from '../../timeout.js';
import type { Access } from './access.js';
import type { Identity } from './gate.js';

export type TokenVerdict = { authenticated: true; identity: Identity; audiences: string[] } | { authenticated: false; error: string };
export interface AccessVerdict {
  allowed: boolean;
  /** The authorizer's reason (RBAC gives none for a plain deny), or its evaluation error. */
  reason: string;
}

/** What the gate asks; tests may answer it themselves. Both reject when no answer came. */
export interface Reviewer {
  tokenReview(token: string, audiences: readonly string[]): Promise<TokenVerdict>;
  accessReview(who: Identity, access: Access): Promise<AccessVerdict>;
}

/** How long a review may take before the call is refused with 503 auth_unavailable. */
export const REVIEW_TIMEOUT_MS = 5000;

/** Reviews asked of the cluster `kc` points at, as the gateway's own identity (it needs create on tokenreviews and subjectaccessreviews). */
export function kubeReviewer(kc: KubeConfig): Reviewer {
  const authn = kc.makeApiClient(AuthenticationV1Api);
  const authz = kc.makeApiClient(AuthorizationV1Api);
  return {
    async tokenReview(token, audiences) {
      const review = await withTimeout(authn.createTokenReview({ body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token, audiences: audiences.length ? [...audiences] : undefined } } }), REVIEW_TIMEOUT_MS);
      const s = review.status;
      if (!s?.authenticated || !s.user?.username) return { authenticated: false, error: s?.error ?? '' };
      return { authenticated: true, identity: { user: s.user.username, uid: s.user.uid ?? '', groups: s.user.groups ?? [], extra: s.user.extra ?? {} }, audiences: s.audiences ?? [] };
    },
    async accessReview(who, access) {
      const spec: V1SubjectAccessReviewSpec = { user: who.user, uid: who.uid || undefined, groups: who.groups, extra: who.extra };
      if (access.kind === 'nonResource') spec.nonResourceAttributes = { verb: access.verb, path: access.path };
      else {
        spec.resourceAttributes = {
          verb: access.verb, group: access.group, resource: access.resource, subresource: access.subresource || undefined,
          namespace: access.namespace || undefined, name: access.name || undefined,
        };
      }
      const review = await withTimeout(authz.createSubjectAccessReview({ body: { apiVersion: 'authorization.k8s.io/v1', kind: 'SubjectAccessReview', spec } }), REVIEW_TIMEOUT_MS);
      const s = review.status;
      return { allowed: s?.allowed === true && s.denied !== true, reason: s?.reason || s?.evaluationError || '' };
    },
  };
}
