// jest global setup of the node tier: one real node cluster (node.ts) with the predictgate image
// built and imported, shared by every node suite (each works in its own namespace). The suites find
// it through PREDICTGATE_NODE_KUBECONFIG (its address is NODE_NET.nodeIp), helm through PREDICTGATE_TEST_HELM.
// With PREDICTGATE_NODE_KUBECONFIG already set (the node of `npm run cluster:up -- --node`), the
// suites run on that node and nothing is started or stopped.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBinaries } from './binaries.js';
import { startNodeCluster, type NodeCluster } from './node.js';

declare global {
  // eslint-disable-next-line no-var
  var __predictgateNode: NodeCluster | undefined;
}

const log = (line: string): void => void process.stderr.write(`\n[node] ${line}\n`);

export default async function nodeSetup(): Promise<void> {
  process.env.PREDICTGATE_TEST_HELM ??= ensureBinaries(log).helm;
  if (process.env.PREDICTGATE_NODE_KUBECONFIG) {
    log(`using the node cluster of ${process.env.PREDICTGATE_NODE_KUBECONFIG}`);
    return;
  }
  const started = Date.now();
  const node = await startNodeCluster({ dir: mkdtempSync(join(tmpdir(), 'predictgate-node-')), log });
  process.stderr.write(`[node] cluster ready in ${((Date.now() - started) / 1000).toFixed(1)} s: ${node.controlPlane.server}, node ${node.nodeIp}\n`);
  process.env.PREDICTGATE_NODE_KUBECONFIG = node.kubeconfig;
  globalThis.__predictgateNode = node;
}
