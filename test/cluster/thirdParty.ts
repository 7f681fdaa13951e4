// CRDs of other projects that the chart's optional objects need on the test apiserver: Gateway API
// (HTTPRoute, GRPCRoute) and the Prometheus Operator (ServiceMonitor), taken from their Go modules through the Go
// module proxy (cached in the Go module cache), never from other sites.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

const MODULES = [
  { module: 'sigs.k8s.io/gateway-api', version: 'v1.6.3', files: ['config/crd/standard/gateway.networking.k8s.io_httproutes.yaml', 'config/crd/standard/gateway.networking.k8s.io_grpcroutes.yaml'] },
  { module: 'github.com/prometheus-operator/prometheus-operator', version: 'v0.85.0', files: ['example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml'] },
];

/** Paths of the CRD files, downloading the modules first when the Go module cache lacks them. */
export function thirdPartyCrds(): string[] {
  const paths: string[] = [];
  for (const m of MODULES) {
    const r = spawnSync('go', ['mod', 'download', '-json', `${m.module}@${m.version}`], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`go mod download ${m.module}@${m.version} failed: ${r.stderr || r.stdout}`);
    const dir = (JSON.parse(r.stdout) as { Dir: string }).Dir;
    paths.push(...m.files.map((f) => join(dir, f)));
  }
  return paths;
}
