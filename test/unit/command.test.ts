// The `predictgate` command as users run it: through its own shebang line, whose Node and V8 flags
// are part of the product (bin/predictgate.js), and with the lean undici load (undiciCore.ts).
// Both run in child processes: the tests elsewhere start the command as `node bin/predictgate.js`,
// which skips the shebang, and share module caches.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { BIN, ROOT } from '../helpers/local.js';
import { commandNodeFlags } from '../bench/targets.js';

const run = promisify(execFile);

test('the command runs through its shebang: Node accepts every flag on it', async () => {
  const flags = commandNodeFlags(BIN);
  expect(flags).toEqual(expect.arrayContaining(['--max-semi-space-size=4', '--heap-growing-percent=200', '--liftoff-only', '--expose-gc']));
  const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  const { stdout, stderr } = await run(BIN, ['--version']);
  expect(stdout).toBe(`${version}\n`);
  expect(stderr).toBe('');
});

test("the gateway's transports load undici's pool, not the whole package", async () => {
  const script = `
    const { createRequire } = await import('node:module');
    const { UpstreamPool } = await import(${JSON.stringify(join(ROOT, 'dist/src/gateway/upstream.js'))});
    const loaded = Object.keys(createRequire(import.meta.url).cache).filter((f) => f.includes('/node_modules/undici/'));
    new UpstreamPool({ keepAliveMs: 1000, connections: 1 }).close();
    console.log(JSON.stringify(loaded.map((f) => f.slice(f.indexOf('/node_modules/undici/') + 21))));
  `;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script]);
  const loaded = JSON.parse(stdout) as string[];
  expect(loaded).toEqual(expect.arrayContaining(['lib/dispatcher/agent.js']));
  // The package's index (fetch, WebSocket, EventSource, cache, mocks) is never loaded.
  expect(loaded).not.toContain('index.js');
  expect(loaded.filter((f) => f.startsWith('lib/api/'))).toEqual([]);
  expect(loaded.filter((f) => f.startsWith('lib/web/'))).toEqual([]);
});
