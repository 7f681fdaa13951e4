// Access to the Kubernetes API: the kubeconfig (KUBECONFIG, ~/.kube/config, or the pod's service
// account), the field manager predictgate writes as, and one keep-alive connection pool for API calls.
import { Agent as HttpsAgent, type RequestOptions } from 'node:https';
import { KubeConfig, type RequestContext } from '@kubernetes/client-node';

export const FIELD_MANAGER = 'predictgate';

/** The TLS settings of a connection to the apiserver, as KubeConfig.applyToHTTPSOptions gives them. */
const TLS_KEYS = ['ca', 'cert', 'key', 'pfx', 'passphrase', 'servername', 'rejectUnauthorized'] as const;

/**
 * A KubeConfig whose API calls share one keep-alive connection pool. The library builds a new agent,
 * so a new TLS connection, for every call. The pool is keyed by the TLS settings the library itself
 * resolves for each call (applyToHTTPSOptions, its public API; files are re-read as it re-reads
 * them), so rotated credentials get a new pool. Watches keep their own connections.
 */
export class PooledKubeConfig extends KubeConfig {
  private pool: { key: string; agent: HttpsAgent } | undefined;

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    if (!(context.getAgent() instanceof HttpsAgent)) return; // plain HTTP or a proxy agent: leave it
    const resolved: RequestOptions = {};
    await this.applyToHTTPSOptions(resolved);
    const tls: Record<string, unknown> = {};
    for (const k of TLS_KEYS) if (resolved[k] !== undefined) tls[k] = resolved[k];
    const key = JSON.stringify(TLS_KEYS.map((k) => (Buffer.isBuffer(tls[k]) ? (tls[k] as Buffer).toString('base64') : tls[k])));
    if (this.pool?.key !== key) {
      // New credentials (a rotated client certificate): calls in flight on the old pool finish first.
      const old = this.pool?.agent;
      if (old) setTimeout(() => old.destroy(), 60_000).unref();
      this.pool = { key, agent: new HttpsAgent({ ...tls, keepAlive: true, maxSockets: 32, maxFreeSockets: 8 }) };
    }
    context.setAgent(this.pool.agent);
  }
}

export function loadKubeConfig(): KubeConfig {
  const kc = new PooledKubeConfig();
  kc.loadFromDefault();
  if (!kc.getCurrentCluster()) {
    throw new Error('no Kubernetes cluster configured: set KUBECONFIG, have ~/.kube/config, or run in a pod with a service account');
  }
  return kc;
}
