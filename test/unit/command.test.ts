// The `predictgate` command as users run it: through its own shebang line, whose Node and V8 flags
// are part of the product (bin/predictgate.js), with the lean undici load (undiciCore.ts), and with
// Express loaded only for the routes that need it (server.ts).
// Both run in child processes: the tests elsewhere start the command as `node bin/predictgate.js`,
// which skips the shebang, and share module caches.
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { BIN, ROOT } from '../helpers/local.js';
import { commandNodeFlags } from '../bench/targets.js';

const run = promisify(execFile);

test('the command runs through its shebang: Node accepts every flag on it', async () => {
  const flags = commandNodeFlags(BIN);
  expect(flags).toEqual(expect.arrayContaining(['--max-semi-space-size=4', '--heap-growing-percent=200', '--initial-old-space-size=56', '--liftoff-only', '--expose-gc']));
  const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  const { stdout, stderr } = await run(BIN, ['--version']);
  expect(stdout).toBe(`${version}\n`);
  expect(stderr).toBe('');
});

// What the shebang's old-generation floor is for. V8 starts a full collection once the old
// generation plus the off-heap bytes made since the last one come within the young generation of
// the old generation's limit, and it leaves young ArrayBuffers (every socket read makes one) to a
// young collection only once they reach 32 MB. So the limit must stand 32 MB plus the young
// generation above the live heap. A heap the size of the idle gateway's (about 13 MB), collected
// in full once, shows the limit V8 sets from it (`--trace-gc-verbose`, a pure function of the
// heap's size and the flags): 43.5 MB with the growing factor alone, 56 MB with the floor.
const LIVE_HEAP = `
  const live = [];
  for (let i = 0; i < 150000; i++) live.push({ a: i, b: String(i) });
  gc();
  console.log(live.length);
`;
const YOUNG_BUFFERS_KB = 32 * 1024;
const YOUNG_GENERATION_KB = 4 * 1024; // the shebang's --max-semi-space-size=4

test("the shebang's old-generation floor leaves room for 32 MB of young buffers over the gateway's heap", async () => {
  const flags = commandNodeFlags(BIN);
  const limit = async (nodeFlags: string[]): Promise<{ oldKb: number; limitKb: number }> => {
    const { stdout } = await run(process.execPath, [...nodeFlags, '--trace-gc-verbose', '--input-type=module', '-e', LIVE_HEAP]);
    const lines = [...stdout.matchAll(/\[HeapController\] Limit: old size: (\d+) KB, new limit: (\d+) KB/g)];
    expect(lines.length).toBeGreaterThan(0);
    const last = lines[lines.length - 1];
    return { oldKb: Number(last[1]), limitKb: Number(last[2]) };
  };
  const withFloor = await limit(flags);
  const withoutFloor = await limit(flags.filter((f) => !f.startsWith('--initial-old-space-size')));
  // The heap is the gateway's size (12.5 MB idle in local mode).
  expect(withFloor.oldKb).toBeGreaterThan(10 * 1024);
  expect(withFloor.oldKb).toBeLessThan(16 * 1024);
  expect(withFloor.limitKb).toBe(56 * 1024);
  expect(withFloor.limitKb - withFloor.oldKb).toBeGreaterThanOrEqual(YOUNG_BUFFERS_KB + YOUNG_GENERATION_KB);
  // Without the floor the growing factor leaves too little room: the case the floor is for.
  expect(withoutFloor.limitKb - withoutFloor.oldKb).toBeLessThan(YOUNG_BUFFERS_KB + YOUNG_GENERATION_KB);
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

test('the operations routes are served without Express; the first other request loads it', async () => {
  // NODE_DEBUG=module makes Node report every CommonJS module it loads (Express is one) on stderr.
  const dir = mkdtempSync(join(tmpdir(), 'predictgate-ops-'));
  const child = spawn(process.execPath, [BIN, 'local', dir], { env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', NODE_DEBUG: 'module' }, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const expressLoaded = () => stderr.includes('/node_modules/express/');
  try {
    let port: number | undefined;
    const listening = await new Promise<number>((resolve, reject) => {
      createInterface({ input: child.stdout }).on('line', (text) => {
        const line = JSON.parse(text) as { msg?: string; port?: number };
        if (line.msg === 'gateway listening' && line.port) port = line.port;
        // Ready once the manifests are in (/readyz is 503 before).
        if (line.msg === 'manifests loaded' && port) resolve(port);
      });
      child.once('exit', (code) => reject(new Error(`predictgate local exited (${code})`)));
    });
    const base = `http://127.0.0.1:${listening}`;
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
