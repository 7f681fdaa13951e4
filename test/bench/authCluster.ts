// The cluster an A/B run with BENCH_COMPARE_AUTH=kubernetes asks about callers: the test control plane
// (a kube-apiserver and etcd, test/cluster/controlPlane.ts), a ServiceAccount allowed to predict on
// every Endpoint, and its token. Both gateways get that token on every call, so they differ only by
// the second one checking it (a remembered decision after the first call).
import fs from 'node:fs';
import path from 'node:path';
import { startControlPlane, type ControlPlane } from '../cluster/controlPlane.js';
import { kubectlOk } from '../helpers/cluster.js';

export interface AuthCluster {
  /** The second gateway's environment. */
  env: Record<string, string>;
  /** The header every call of the run carries. */
  headers: Record<string, string>;
  stop(): Promise<void>;
}

export async function startAuthCluster(dir: string, log: (line: string) => void): Promise<AuthCluster> {
  fs.mkdirSync(dir, { recursive: true });
  const cp: ControlPlane = await startControlPlane({ dir: path.join(dir, 'control-plane'), log });
  try {
    const kubeconfig = cp.kubeconfig;
    await kubectlOk(['create', 'serviceaccount', 'bench-caller', '-n', 'default'], { kubeconfig });
    // As JSON: kubectl create clusterrole looks the resource up, and local mode's CRDs are not installed here.
    const role = { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'bench-predictor' }, rules: [{ apiGroups: ['prediction.predictgate.dev'], resources: ['endpoints/predict'], verbs: ['create'] }] };
    await kubectlOk(['apply', '-f', '-'], { kubeconfig, input: JSON.stringify(role) });
    await kubectlOk(['create', 'clusterrolebinding', 'bench-predictor', '--clusterrole=bench-predictor', '--serviceaccount=default:bench-caller'], { kubeconfig });
    const token = (await kubectlOk(['create', 'token', 'bench-caller', '-n', 'default', '--duration=2h'], { kubeconfig })).trim();
    return { env: { PREDICT_AUTH: 'kubernetes', KUBECONFIG: kubeconfig }, headers: { authorization: `Bearer ${token}` }, stop: () => cp.stop() };
  } catch (err) {
    await cp.stop();
    throw err;
  }
}
