// The Kubernetes client plumbing on the real apiserver: API calls of a PooledKubeConfig share one
// keep-alive TLS connection (the library alone opens one per call), and new credentials get a new pool.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent as HttpsAgent } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { jest } from '@jest/globals';
import { PooledKubeConfig } from '../../src/kube/client.js';
import { testKubeconfig } from '../helpers/cluster.js';

/** TLS connections the https agents open while `calls` sequential API calls run. */
async function connectionsFor(kc: KubeConfig, calls: number): Promise<number> {
  const spy = jest.spyOn(HttpsAgent.prototype, 'createConnection');
  try {
    const core = kc.makeApiClient(CoreV1Api);
    for (let i = 0; i < calls; i++) await core.listNamespace({ limit: 1 });
    return spy.mock.calls.length;
  } finally {
    spy.mockRestore();
  }
}

test('ten API calls through a PooledKubeConfig use one connection; the library alone opens ten', async () => {
  const pooled = new PooledKubeConfig();
  pooled.loadFromFile(testKubeconfig());
  expect(await connectionsFor(pooled, 10)).toBe(1);
  const plain = new KubeConfig();
  plain.loadFromFile(testKubeconfig());
  expect(await connectionsFor(plain, 10)).toBe(10);
});

test('a rotated CA bundle on disk gets a new pool, once', async () => {
  const base = new KubeConfig();
  base.loadFromFile(testKubeconfig());
  const cluster = base.getCurrentCluster()!;
  const dir = mkdtempSync(join(tmpdir(), 'predictgate-ca-'));
  try {
    const caFile = join(dir, 'ca.crt');
    const ca = readFileSync(cluster.caFile!, 'utf8');
    writeFileSync(caFile, ca);
    const kc = new PooledKubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: cluster.name, server: cluster.server, caFile, skipTLSVerify: false }],
      users: base.users,
      contexts: base.contexts,
      currentContext: base.getCurrentContext(),
    });
    expect(await connectionsFor(kc, 3)).toBe(1);
    // The bundle gains a certificate (as a CA rotation does): the library re-reads the file, the
    // settings differ, a new pool is made and then reused.
    writeFileSync(caFile, `${ca}\n${ca}`);
    expect(await connectionsFor(kc, 3)).toBe(1);
    expect(await connectionsFor(kc, 3)).toBe(0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
