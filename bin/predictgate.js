#!/usr/bin/env node
// Entry point of the `predictgate` command: runs the compiled CLI (npm run build makes dist/).
import { main } from '../dist/src/cli.js';

main(process.argv.slice(2)).catch((err) => {
  process.stderr.write(`predictgate: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
