// Access to the Kubernetes API: the kubeconfig (KUBECONFIG, ~/.kube/config, or the pod's service
// account), the field manager predictgate writes as, and how API errors read (status code, message).
import { Agent as HttpsAgent, type AgentOptions } from 'node:https';
import { KubeConfig, type RequestContext } from '@kubernetes/client-node';

export const FIELD_MANAGER = 'predictgate';

/**
 * A KubeConfig whose API calls share one keep-alive connection pool. The library builds a new agent,
 * so a new TLS connection, for every call; at hundreds of writes a second that costs a handshake per
 * call and hundreds of MB of TLS buffers. Watches keep their own connections.
 */
export class PooledKubeConfig extends KubeConfig {
  private pool: { key: string; agent: HttpsAgent } | undefined;

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    const fresh = context.getAgent();
    if (!(fresh instanceof HttpsAgent)) return; // plain HTTP or a proxy agent: leave it
    const o = (fresh as HttpsAgent & { options: AgentOptions }).options;
    const key = JSON.stringify([o.ca, o.cert, o.key, o.pfx, o.servername, o.rejectUnauthorized].map((x) => (Buffer.isBuffer(x) ? x.toString('base64') : x)));
    if (this.pool?.key !== key) {
      // New credentials (a rotated client certificate): calls in flight on the old pool finish first.
      const old = this.pool?.agent;
      if (old) setTimeout(() => old.destroy(), 60_000).unref();
      this.pool = { key, agent: new HttpsAgent({ ...o, keepAlive: true, maxSockets: 32, maxFreeSockets: 8 }) };
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

