// Access to the Kubernetes API: the kubeconfig (KUBECONFIG, ~/.kube/config, or the pod's service
// account), the field manager predictgate writes as, and one keep-alive connection pool for API calls.
import { Agent as HttpsAgent, type RequestOptions } from 'node:https';
import { join } from 'node:path';
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

/**
 * What client-node's loadFromDefault loads when there is no KUBECONFIG, no ~/.kube/config and no
 * service account: a made-up cluster at http://localhost:8080. It is no configuration at all.
 */
function isLibraryFallback(kc: KubeConfig): boolean {
  const cluster = kc.getCurrentCluster();
  return kc.getCurrentContext() === 'loaded-context' && cluster?.name === 'cluster' && cluster.server === 'http://localhost:8080' && kc.getCurrentUser()?.name === 'user';
}

/** Where loadFromDefault looks first, for messages: what a user would check. */
function sourceOf(env: NodeJS.ProcessEnv): string {
  if (env.KUBECONFIG) return `the kubeconfig named by KUBECONFIG (${env.KUBECONFIG})`;
  return env.HOME ? `the kubeconfig ${join(env.HOME, '.kube', 'config')}` : 'the kubeconfig';
}

export const NO_CLUSTER = 'no Kubernetes cluster configured: set KUBECONFIG, create ~/.kube/config, or run in a pod with a service account';

/**
 * The kubeconfig from KUBECONFIG, ~/.kube/config or the pod's service account, in client-node's
 * order. Throws a one-line message when none is there (rather than the library's localhost:8080),
 * when the file cannot be read, or when its current context names no cluster.
 */
export function loadKubeConfig(): KubeConfig {
  const env = process.env;
  const kc = new PooledKubeConfig();
  try {
    kc.loadFromDefault();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new Error(`cannot load ${sourceOf(env)}: ${message.split('\n', 1)[0]}`);
  }
  if (isLibraryFallback(kc)) throw new Error(NO_CLUSTER);
  if (!kc.getCurrentCluster()) throw new Error(`${sourceOf(env)} has no current context with a cluster`);
  return kc;
}
