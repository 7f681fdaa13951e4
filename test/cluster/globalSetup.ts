// jest global setup: one real control plane for every suite (each suite works in its own namespace).
// PREDICTGATE_TEST_KUBECONFIG set beforehand (e.g. from `npm run cluster:up`) reuses that cluster.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startControlPlane, type ControlPlane } from './controlPlane.js';

declare global {
  // eslint-disable-next-line no-var
  var __predictgateControlPlane: ControlPlane | undefined;
}

export default async function globalSetup(): Promise<void> {
  if (process.env.PREDICTGATE_TEST_KUBECONFIG) return;
  const started = Date.now();
  const cp = await startControlPlane({ dir: mkdtempSync(join(tmpdir(), 'predictgate-cp-')), log: (l) => process.stderr.write(`\n[control plane] ${l}\n`) });
  process.stderr.write(`[control plane] ready in ${((Date.now() - started) / 1000).toFixed(1)} s: ${cp.server}\n`);
  process.env.PREDICTGATE_TEST_KUBECONFIG = cp.kubeconfig;
  process.env.PREDICTGATE_TEST_CP_DIR = cp.dir;
  globalThis.__predictgateControlPlane = cp;
}
