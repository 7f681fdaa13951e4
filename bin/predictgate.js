#!/usr/bin/env node
// The `predictgate` command: runs the compiled command line (src/cli.ts, which `npm run build` puts
// in dist/), or says to build it first.
import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const cli = new URL('../dist/src/cli.js', import.meta.url);
if (!existsSync(cli)) {
  const checkout = dirname(dirname(fileURLToPath(import.meta.url)));
  process.stderr.write(`predictgate: ${fileURLToPath(cli)} is missing: run \`npm run build\` in ${checkout} first\n`);
  process.exit(1);
}
const { run } = await import(cli.href);
await run(process.argv.slice(2));
