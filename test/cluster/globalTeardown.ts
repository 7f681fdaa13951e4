// jest global teardown: stops the control plane globalSetup started (not one that was reused).
import { rmSync } from 'node:fs';

export default async function globalTeardown(): Promise<void> {
  const cp = globalThis.__predictgateControlPlane;
  if (!cp) return;
  try {
    await cp.stop();
  } finally {
    rmSync(cp.dir, { recursive: true, force: true });
  }
}
