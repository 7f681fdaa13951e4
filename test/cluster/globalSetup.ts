// jest global setup: one real control plane for every suite (each suite works in its own namespace).
// PREDICTGATE_TEST_KUBECONFIG set beforehand (e.g. from `npm run cluster:up`) reuses that cluster.
// Suites find helm through PREDICTGATE_TEST_HELM.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBinaries } from './binaries.js';
import { startControlPlane, type ControlPlane } from './controlPlane.js';

declare global {
  // eslint-disable-next-line no-var
  var __predictgateControlPlane: ControlPlane | undefined;
}

const log = (line: string): void => void process.stderr.write(`\n[control plane] ${line}\n`);

export default async function globalSetup(): Promise<void> {
  if (process.env.PREDICTGATE_TEST_KUBECONFIG) {
    if (process.env.PREDICTGATE_TEST_KUBECONFIG !== 'x') process.env.PREDICTGATE_TEST_HELM ??= ensureBinaries(log).helm;
    return;
  }
  // The binaries first, on their own: their first build takes minutes and says so.
  process.env.PREDICTGATE_TEST_HELM = ensureBinaries(log).helm;
  const started = Date.now();
  const cp = await startControlPlane({ dir: mkdtempSync(join(tmpdir(), 'predictgate-cp-')), log });
  process.stderr.write(`[control plane] ready in ${((Date.now() - started) / 1000).toFixed(1)} s: ${cp.server}\n`);
  process.env.PREDICTGATE_TEST_KUBECONFIG = cp.kubeconfig;
  globalThis.__predictgateControlPlane = cp;
}
