// The `predictgate` command as users run it, in child processes: through its shebang and through
// `node`, each command's --help, and what a user meets when a start fails (an unknown flag, a busy
// port, no build, no cluster, an apiserver that does not answer). Also Express loaded only
// for the routes that need it (server.ts).
import { execFile, spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { BIN, ROOT } from '../helpers/local.js';
import { spawnPredictgate } from '../helpers/procs.js';
import { commandHelp, topHelp } from '../../src/help.js';
import { listenError } from '../../src/cli.js';

const run = promisify(execFile);
const { version: VERSION } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `file args` to its end with `env` as its whole environment. */
function outcome(file: string, args: string[], env: NodeJS.ProcessEnv): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The machine's environment without any kubeconfig, with HOME an empty folder. */
function noCluster(home: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: home, PORT: '0' };
  delete env.KUBECONFIG;
  return env;
}

const predictgate = (args: string[], env: NodeJS.ProcessEnv = process.env) => outcome(process.execPath, [BIN, ...args], env);

let scratch: string;
beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'predictgate-command-'));
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A kubeconfig whose apiserver is `server`. */
function kubeconfig(name: string, server: string): string {
  const file = join(scratch, name);
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      `- name: c\n  cluster: {server: "${server}", insecure-skip-tls-verify: true}`,
      'users:',
      '- name: u\n  user: {token: t}',
      'contexts:',
      '- name: x\n  context: {cluster: c, user: u}',
      'current-context: x',
      '',
    ].join('\n'),
  );
  return file;
}

/** A loopback port held by a listener until `close`. */
async function busyPort(): Promise<{ port: number; close(): Promise<void> }> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return { port, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

/** A loopback port nobody listens on (bound once, then let go). */
async function closedPort(): Promise<number> {
  const held = await busyPort();
  await held.close();
  return held.port;
}

test('the shebang is plain node: the command and `node bin/predictgate.js` answer alike', async () => {
  expect(readFileSync(BIN, 'utf8').split('\n', 1)[0]).toBe('#!/usr/bin/env node');
  for (const args of [['--version'], ['--help'], ['local', '--help']]) {
    const viaShebang = await run(BIN, args);
    const viaNode = await run(process.execPath, [BIN, ...args]);
    expect(viaNode).toEqual(viaShebang);
  }
  const { stdout, stderr } = await run(BIN, ['--version']);
  expect([stdout, stderr]).toEqual([`${VERSION}\n`, '']);
});

test('predictgate --help, -h, help and no command list the commands', async () => {
  const text = topHelp(VERSION);
  expect(text.split('\n').filter((l) => /^ {2}\S/.test(l) && !l.includes('Prints')).map((l) => l.trim().split(/\s{2,}/)[0])).toEqual(['local [DIR]', 'gateway', 'controller', 'model NAME']);
  const runs = await Promise.all([['--help'], ['-h'], ['help'], []].map((args) => predictgate(args)));
  expect(runs).toEqual(Array(4).fill({ code: 0, stdout: text, stderr: '' }));
});

/** The flags a command's help lists, in order. */
const flagsIn = (help: string): string[] => [...help.matchAll(/^ {2}(--[a-z-]+) \/ /gm)].map((m) => m[1]);

const COMMON = ['--host', '--port', '--endpoint-domain'];
const BALANCING = ['--outlier-consecutive-failures', '--outlier-ejection-seconds', '--outlier-max-ejection-percent', '--retry-budget-percent', '--upstream-health-check-interval-ms', '--upstream-health-check-timeout-ms', '--load-scrape-interval-ms', '--prefix-affinity-block-chars', '--upstream-unhealthy-threshold'];
const AUTH = ['--auth', '--auth-audiences', '--auth-allow-ttl-seconds', '--auth-deny-ttl-seconds', '--auth-cache-size', '--auth-reviews-per-second'];
const CLIENTS = ['--headers-timeout-seconds', '--body-timeout-seconds', '--body-min-bytes-per-second', '--max-connections', '--max-connections-per-client', '--probe-port', '--grpc-port'];
const GATEWAY = ['--timeout-seconds', '--idle-timeout-seconds', '--stream-timeout-seconds', '--stream-idle-timeout-seconds', '--cold-start-queue', '--max-request-bytes', '--max-response-bytes', '--response-gzip-min-bytes', '--buffered-body-bytes', '--max-json-depth', '--upstream-keepalive-ms'];

test.each([
  ['local', 'Usage: predictgate local [DIR] [SETTINGS]', [...COMMON, ...GATEWAY, '--upstream-connections', '--upstream-stream-connections', ...BALANCING, '--drain-seconds', ...CLIENTS, '--health-interval-ms', '--autoscale-interval-ms', '--autoscale-stable-window-seconds', ...AUTH, '--log-level']],
  ['gateway', 'Usage: predictgate gateway [SETTINGS]', [...COMMON, ...GATEWAY, '--upstream-connections', '--upstream-stream-connections', ...BALANCING, '--drain-seconds', ...CLIENTS, '--namespaces', '--gateway-service', '--upstream-resolve', ...AUTH, '--log-level']],
  ['controller', 'Usage: predictgate controller [SETTINGS]', [...COMMON, '--namespaces', '--leader-election', '--leader-election-namespace', '--lease-duration-seconds', '--resync-seconds', '--autoscale-interval-ms', '--autoscale-stable-window-seconds', '--gateway-service', '--log-level']],
])('predictgate %s --help prints its usage and only its settings, and exits 0', async (command, usage, flags) => {
  const text = commandHelp(command as 'local');
  expect(text.split('\n', 1)[0]).toBe(usage);
  expect(flagsIn(text)).toEqual(flags);
  const runs = await Promise.all([[command, '--help'], [command, '-h'], ['help', command], [command, '--nope', '--help']].map((args) => predictgate(args)));
  expect(runs).toEqual(Array(4).fill({ code: 0, stdout: text, stderr: '' }));
});

test('predictgate model --help prints its usage and the contract variables it reads, and exits 0', async () => {
  const text = commandHelp('model');
  expect(text.split('\n', 1)[0]).toBe('Usage: predictgate model NAME');
  expect([...text.matchAll(/^ {2}([A-Z_]+) \(default /gm)].map((m) => m[1])).toEqual(['AIP_HTTP_PORT', 'AIP_HTTP_HOST', 'AIP_PREDICT_ROUTE', 'AIP_HEALTH_ROUTE', 'GRAPHSTORM_TASK', 'TINY_LLM_TOKEN_INTERVAL_MS', 'TINY_LLM_MAX_RUNNING', 'TINY_LLM_MODEL_NAME']);
  expect(flagsIn(text)).toEqual([]);
  const runs = await Promise.all([['model', '--help'], ['model', '-h'], ['model', 'echo', '--help'], ['help', 'model']].map((args) => predictgate(args)));
  expect(runs).toEqual(Array(4).fill({ code: 0, stdout: text, stderr: '' }));
});

test.each([
  [['local', '--nope'], 'unknown option --nope; see predictgate local --help'],
  [['local', '-x'], 'unknown option -x; see predictgate local --help'],
  [['local', '--leader-election', 'false'], '--leader-election is not a setting of predictgate local; see predictgate local --help'],
  [['gateway', '--health-interval-ms=5'], '--health-interval-ms is not a setting of predictgate gateway; see predictgate gateway --help'],
  [['controller', '--port'], '--port needs a value; see predictgate controller --help'],
  [['local', '--port', '--host', 'h'], '--port needs a value; see predictgate local --help'],
  [['local', '--port', 'x'], '--port must be a non-negative integer, got "x"'],
  [['local', 'a', 'b'], 'local takes one folder, got a b; see predictgate local --help'],
  [['gateway', 'extra'], 'gateway takes no arguments, got extra; see predictgate gateway --help'],
  [['model'], 'usage: predictgate model NAME, NAME one of half-plus-two, echo, graphstorm, tiny-llm; see predictgate model --help'],
  [['model', 'echo', '--port', '1'], '--port is not a setting of predictgate model; see predictgate model --help'],
  [['model', 'nope'], 'unknown model "nope"; valid names: half-plus-two, echo, graphstorm, tiny-llm'],
  [['frob'], "unknown command 'frob'; see predictgate --help"],
  [['help', 'frob'], 'usage: predictgate help [COMMAND], COMMAND one of local, gateway, controller, model'],
])('predictgate %j is refused with one line naming the help', async (args, message) => {
  expect(await predictgate(args, { ...process.env, PORT: '0', AIP_HTTP_PORT: '0' })).toEqual({ code: 1, stdout: '', stderr: `predictgate: ${message}\n` });
});

describe('a busy port says which setting changes it', () => {
  let held: Awaited<ReturnType<typeof busyPort>>;
  beforeAll(async () => {
    held = await busyPort();
  });
  afterAll(() => held.close());

  test('local (PORT, and --port)', async () => {
    const dir = join(scratch, 'empty-folder');
    mkdirSync(dir, { recursive: true });
    const message = { code: 1, stdout: '', stderr: `predictgate: port ${held.port} is in use (set --port or PORT)\n` };
    expect(await predictgate(['local', dir], { ...process.env, PORT: String(held.port), LOG_LEVEL: 'silent' })).toEqual(message);
    expect(await predictgate(['local', dir, '--port', String(held.port)], { ...process.env, LOG_LEVEL: 'silent' })).toEqual(message);
  });

  test.each(['gateway', 'controller'])('%s', async (command) => {
    // The port is taken before the apiserver is tried: this one answers nothing.
    const env = { ...process.env, KUBECONFIG: kubeconfig(`${command}-busy.yaml`, `https://127.0.0.1:${await closedPort()}`), PORT: String(held.port), LOG_LEVEL: 'silent' };
    expect(await predictgate([command], env)).toEqual({ code: 1, stdout: '', stderr: `predictgate: port ${held.port} is in use (set --port or PORT)\n` });
  });

  test('model (AIP_HTTP_PORT)', async () => {
    expect(await predictgate(['model', 'echo'], { ...process.env, AIP_HTTP_PORT: String(held.port) })).toEqual({
      code: 1,
      stdout: '',
      stderr: `predictgate: port ${held.port} is in use (set AIP_HTTP_PORT)\n`,
    });
  });
});

test('an address that is not this machine\'s names HOST; a privileged port names the port setting', async () => {
  const dir = join(scratch, 'empty-folder');
  mkdirSync(dir, { recursive: true });
  // 192.0.2.1 is TEST-NET-1 (RFC 5737): never an address of this machine; nothing is sent to it.
  expect(await predictgate(['local', dir, '--host', '192.0.2.1'], { ...process.env, PORT: '0', LOG_LEVEL: 'silent' })).toEqual({
    code: 1,
    stdout: '',
    stderr: 'predictgate: address 192.0.2.1 is not one of this machine\'s (set --host or HOST)\n',
  });
  // Privileged ports refuse only unprivileged users, and the tests may run as root: the error as Node raises it.
  const eacces = Object.assign(new Error('listen EACCES: permission denied 127.0.0.1:80'), { code: 'EACCES', syscall: 'listen', address: '127.0.0.1', port: 80 });
  expect((listenError(eacces, { port: 'AIP_HTTP_PORT', host: 'AIP_HTTP_HOST' }) as Error).message).toBe('port 80 needs privileges this process lacks (set AIP_HTTP_PORT)');
  const other = new Error('something else');
  expect(listenError(other, { port: 'PORT', host: 'HOST' })).toBe(other);
});

test('before a build the command says to run npm run build', async () => {
  const checkout = join(scratch, 'unbuilt');
  mkdirSync(join(checkout, 'bin'), { recursive: true });
  copyFileSync(BIN, join(checkout, 'bin', 'predictgate.js'));
  writeFileSync(join(checkout, 'package.json'), JSON.stringify({ type: 'module' }));
  expect(await outcome(process.execPath, [join(checkout, 'bin', 'predictgate.js'), '--help'], process.env)).toEqual({
    code: 1,
    stdout: '',
    stderr: `predictgate: ${join(checkout, 'dist', 'src', 'cli.js')} is missing: run \`npm run build\` in ${checkout} first\n`,
  });
});

test.each(['gateway', 'controller'])('predictgate %s with no cluster configured exits 1 and says so', async (command) => {
  const home = join(scratch, `home-${command}`);
  mkdirSync(home, { recursive: true });
  expect(await predictgate([command], noCluster(home))).toEqual({
    code: 1,
    stdout: '',
    stderr: 'predictgate: no Kubernetes cluster configured: set KUBECONFIG, create ~/.kube/config, or run in a pod with a service account\n',
  });
});

test('a KUBECONFIG that cannot be read, or names no cluster, is one line', async () => {
  const missing = join(scratch, 'missing.yaml');
  expect(await predictgate(['gateway'], { ...process.env, KUBECONFIG: missing })).toEqual({
    code: 1,
    stdout: '',
    stderr: `predictgate: cannot load the kubeconfig named by KUBECONFIG (${missing}): ENOENT: no such file or directory, open '${missing}'\n`,
  });
  const empty = join(scratch, 'empty.yaml');
  writeFileSync(empty, 'apiVersion: v1\nkind: Config\nclusters: []\n');
  expect(await predictgate(['controller'], { ...process.env, KUBECONFIG: empty })).toEqual({
    code: 1,
    stdout: '',
    stderr: `predictgate: the kubeconfig named by KUBECONFIG (${empty}) has no current context with a cluster\n`,
  });
});

test('an apiserver that does not answer is retried with backoff, one plain line per try, while /readyz says starting', async () => {
  const server = `https://127.0.0.1:${await closedPort()}`;
  const gw = spawnPredictgate(['gateway'], { KUBECONFIG: kubeconfig('unreachable.yaml', server) });
  try {
    const listening = await gw.waitForLog((l) => l.msg === 'gateway listening', 'gateway listening');
    const tries = (n: number) => gw.waitForLog(() => gw.logs().filter((l) => l.server === server && l.level === 40).length >= n, `${n} failed tries`);
    await tries(2);
    const [first, second] = gw.logs().filter((l) => l.server === server && l.level === 40);
    const reason = `connect ECONNREFUSED ${server.slice('https://'.length)}`;
    expect({ ...first, time: 'T' }).toEqual({ level: 40, time: 'T', name: 'predictgate', server, retryInMs: 500, err: reason, msg: `Kubernetes API at ${server} unreachable (${reason}); next try in 500 ms` });
    expect({ ...second, time: 'T' }).toEqual({ level: 40, time: 'T', name: 'predictgate', server, retryInMs: 1000, err: reason, msg: `Kubernetes API at ${server} unreachable (${reason}); next try in 1 s` });
    const ready = await fetch(`http://127.0.0.1:${listening.port as number}/readyz`);
    expect([ready.status, await ready.json()]).toEqual([503, { status: 'starting' }]);
    // Nothing but those lines: no stack, no watch started yet.
    expect(gw.logs().filter((l) => l.level !== 30 && !(l.server === server && l.level === 40))).toEqual([]);
  } finally {
    gw.child.kill('SIGTERM');
    await gw.exited;
  }
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

    // 404 and 405 come from the route table, without Express.
    const nowhere = await fetch(`${base}/nowhere`);
    expect([nowhere.status, await nowhere.json()]).toEqual([404, { error: { code: 404, status: 'NOT_FOUND', message: 'no route for GET /nowhere; prediction calls are POST /v1/projects/{project}/locations/{location}/endpoints/{endpoint}:predict or :rawPredict' } }]);
    const wrongMethod = await fetch(`${base}/v1/projects/default/locations/l/endpoints/e:predict`);
    expect([wrongMethod.status, wrongMethod.headers.get('allow'), await wrongMethod.json()]).toEqual([405, 'POST', { error: { code: 405, status: 'UNIMPLEMENTED', message: 'GET is not allowed on /v1/projects/default/locations/l/endpoints/e:predict; it takes POST' } }]);
    expect(expressLoaded()).toBe(false);

    // A management route (local mode's status API) loads it.
    const list = await fetch(`${base}/apis/prediction.predictgate.dev/v1/endpoints`);
    expect([list.status, ((await list.json()) as { kind: string }).kind]).toEqual([200, 'EndpointList']);
    expect(expressLoaded()).toBe(true);
  } finally {
    child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  }
});
