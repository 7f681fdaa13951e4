// jest global teardown of the node tier: stops the node cluster, puts the machine back, and fails
// the run when anything of the node is left on the machine.
import { rmSync } from 'node:fs';

export default async function nodeTeardown(): Promise<void> {
  const node = globalThis.__predictgateNode;
  if (!node) return;
  try {
    await node.stop();
  } finally {
    rmSync(node.machine.dir, { recursive: true, force: true });
  }
}
