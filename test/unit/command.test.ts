// The `predictgate` command as users run it: through its own plain `#!/usr/bin/env node` line (runtime
// settings come from NODE_OPTIONS, not from the command), and with Express loaded only for the routes
// that need it (server.ts). Both run in child processes: the tests elsewhere start the command as
// `node bin/predictgate.js` and share module caches.
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { BIN, ROOT } from '../helpers/local.js';

const run = promisify(execFile);

test('the command runs through a plain node shebang', async () => {
  expect(readFileSync(BIN, 'utf8').split('\n', 1)[0]).toBe('#!/usr/bin/env node');
  const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  const { stdout, stderr } = await run(BIN, ['--version']);
  expect(stdout).toBe(`${version}\n`);
  expect(stderr).toBe('');
});

test('the operations routes are served without Express; the first other request loads it', async () => {
  // NODE_DEBUG=module makes Node report every CommonJS module it loads (Express is one) on stderr.
  const dir = mkdtempSync(join(tmpdir(), 'predictgate-ops-'));
  const child = spawn(process.execPath, [BIN, 'local', dir], { env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', NODE_DEBUG: 'module' }, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const expressLoaded = () => stderr.includes('/node_modules/express/');
  try {
    const port = await new Promise<number>((resolve, reject) => {
      createInterface({ input: child.stdout }).on('line', (text) => {
        const line = JSON.parse(text) as { msg?: string; port?: number };
        if (line.msg === 'gateway listening' && line.port) resolve(line.port);
      });
      child.once('exit', (code) => reject(new Error(`predictgate local exited (${code})`)));
    });
    const base = `http://127.0.0.1:${port}`;
    const health = await fetch(`${base}/healthz`);
    expect([health.status, health.headers.get('content-type'), await health.json()]).toEqual([200, 'application/json; charset=utf-8', { status: 'ok' }]);
    const ready = await fetch(`${base}/readyz?verbose`);
    expect([ready.status, await ready.json()]).toEqual([200, { status: 'ready' }]);
    const metrics = await fetch(`${base}/metrics`);
    expect(metrics.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(await metrics.text()).toContain('predictgate_requests_in_flight 0');
    const head = await fetch(`${base}/healthz`, { method: 'HEAD' });
    expect([head.status, await head.text()]).toEqual([200, '']);
    // As Express matched them: any letter case, one trailing slash.
    expect((await fetch(`${base}/HEALTHZ/`)).status).toBe(200);
    expect(expressLoaded()).toBe(false);

    const other = await fetch(`${base}/nowhere`);
    expect(other.status).toBe(404);
    expect((await other.json()) as unknown).toMatchObject({ error: { status: 'NOT_FOUND' } });
    expect(expressLoaded()).toBe(true);
  } finally {
    child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  }
});
