// TEMPORARY development stand-in for `predictgate model echo` while src/cli.ts does not exist yet:
// runs the real bundled echo model (src/models) from the Vertex container contract in the environment.
// Used only when BENCH_MODEL_ENTRY points at it; the harness otherwise runs bin/predictgate.js.

import { modelOptionsFromEnv, startModelServer } from '../../src/models/index.js';

startModelServer('echo', modelOptionsFromEnv(process.env)).catch((err: unknown) => {
  process.stderr.write(`standin model: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
