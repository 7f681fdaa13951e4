// The test control plane's binary cache, without building anything: versions read from the Go
// module, the link flags that stamp them, the cache key, and the errors a user gets without Go or
// with an incomplete PREDICTGATE_CLUSTER_BIN. Also: every key of the chart's values.yaml is commented.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { binDir, ensureBinaries, ldflags, moduleVersions } from '../cluster/binaries.js';
import { ROOT } from '../helpers/local.js';

test('versions come from the Go module and are stamped into the binaries', () => {
  expect(moduleVersions()).toEqual({ kubernetes: expect.stringMatching(/^v1\.36\.\d+$/), etcd: expect.stringMatching(/^v3\.6\.\d+$/), helm: expect.stringMatching(/^v3\.\d+\.\d+$/) });
  const v = moduleVersions();
  expect(ldflags()).toContain(`-X k8s.io/component-base/version.gitVersion=${v.kubernetes}`);
  expect(ldflags()).toContain('-X k8s.io/component-base/version.gitMinor=36');
  expect(ldflags()).toContain(`-X helm.sh/helm/v3/internal/version.version=${v.helm}`);
  expect(binDir({ PREDICTGATE_CACHE_DIR: '/c' })).toMatch(new RegExp(`^/c/control-plane/k8s-${v.kubernetes}_etcd-${v.etcd}_helm-${v.helm}_[0-9a-f]{12}$`));
  expect(binDir({ XDG_CACHE_HOME: '/x' })).toMatch(/^\/x\/predictgate\/control-plane\//);
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
