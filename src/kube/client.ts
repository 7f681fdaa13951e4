// Access to the Kubernetes API: the kubeconfig (KUBECONFIG, ~/.kube/config, or the pod's service
// account), the field manager predictgate writes as, and how API errors read (status code, message).
import { KubeConfig } from '@kubernetes/client-node';

export const FIELD_MANAGER = 'predictgate';

export function loadKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  if (!kc.getCurrentCluster()) {
    throw new Error('no Kubernetes cluster configured: set KUBECONFIG, have ~/.kube/config, or run in a pod with a service account');
  }
  return kc;
}

/** The HTTP status of an API error from @kubernetes/client-node, if it carries one. */
export function statusCodeOf(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown } | null;
  const code = e?.code ?? e?.statusCode;
  return typeof code === 'number' ? code : undefined;
}

/** A one-line description of an API error: the apiserver's message when there is one. */
export function describeApiError(err: unknown): string {
  const e = err as { body?: unknown; message?: string } | null;
  let body = e?.body;
  if (typeof body === 'string') {
    try {
      body = JSON.parse(body) as unknown;
    } catch {
      // not JSON: keep the text
    }
  }
  const message = (body as { message?: unknown } | undefined)?.message;
  const code = statusCodeOf(err);
  if (typeof message === 'string') return code ? `${code}: ${message}` : message;
  return e?.message ?? String(err);
}
