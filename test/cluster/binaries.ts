// The Kubernetes binaries the tests run, built from their Go modules once per machine into cache
// folders keyed by their versions and the module's files: the control plane (kube-apiserver, etcd,
// helm; test/cluster/go) and the node tier (kubelet, kube-controller-manager, kube-scheduler,
// kube-proxy from the same k8s.io/kubernetes module, CoreDNS and metrics-server from their own).
// PREDICTGATE_CLUSTER_BIN=DIR uses binaries that are already there instead. A missing Go toolchain
// is an error that says what to do, never a silent skip.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** Where the Go module lives, in the source tree (tests run from dist/, the module stays in test/). */
export const GO_MODULE_DIR = fileURLToPath(new URL('../../../test/cluster/go/', import.meta.url));

export interface Binaries {
  kubeApiserver: string;
  etcd: string;
  helm: string;
  /** k8s.io/kubernetes version, e.g. v1.36.3. */
  kubernetesVersion: string;
}

const NAMES = ['kube-apiserver', 'etcd', 'helm'] as const;

export interface NodeBinaries {
  kubelet: string;
  kubeControllerManager: string;
  kubeScheduler: string;
  kubeProxy: string;
  coredns: string;
  metricsServer: string;
}

const NODE_NAMES = ['kubelet', 'kube-controller-manager', 'kube-scheduler', 'kube-proxy', 'coredns', 'metrics-server'] as const;

/** CoreDNS, built from its own module (its Kubernetes libraries are newer than the control plane's). */
const COREDNS_MODULE = 'github.com/coredns/coredns@v1.15.0';
/** metrics-server (the resource metrics API the HPA controller reads), built from its own module too. */
export const METRICS_SERVER_MODULE = 'sigs.k8s.io/metrics-server/cmd/metrics-server@v0.8.0';
/** Its version stamped as its Makefile does (client-go's default says v0.0.0-master). */
const METRICS_SERVER_LDFLAGS = ` -X k8s.io/client-go/pkg/version.gitVersion=${METRICS_SERVER_MODULE.split('@')[1]}`;

/** Module versions from go.mod, so the cache key follows the module. */
export function moduleVersions(goMod = readFileSync(join(GO_MODULE_DIR, 'go.mod'), 'utf8')): Record<'kubernetes' | 'etcd' | 'helm', string> {
  const find = (path: string): string => {
    const m = new RegExp(`^\\s*${path.replace(/[.]/g, '\\.')}\\s+(v\\S+)`, 'm').exec(goMod);
    if (!m) throw new Error(`test/cluster/go/go.mod does not require ${path}`);
    return m[1];
  };
  return { kubernetes: find('k8s.io/kubernetes'), etcd: find('go.etcd.io/etcd/server/v3'), helm: find('helm.sh/helm/v3') };
}

export function cacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  return env.PREDICTGATE_CACHE_DIR ?? join(env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'predictgate');
}

/** The cache folder for this module: versions in the name, a digest of the module's files and link flags after them. */
export function binDir(env: NodeJS.ProcessEnv = process.env): string {
  const v = moduleVersions();
  const digest = createHash('sha256');
  for (const f of ['go.mod', 'go.sum', 'cmd/etcd/main.go']) digest.update(readFileSync(join(GO_MODULE_DIR, f)));
  digest.update(ldflags());
  return join(cacheRoot(env), 'control-plane', `k8s-${v.kubernetes}_etcd-${v.etcd}_helm-${v.helm}_${digest.digest('hex').slice(0, 12)}`);
}

/** The node tier's cache folder, keyed like binDir's, and by the CoreDNS and metrics-server modules. */
export function nodeBinDir(env: NodeJS.ProcessEnv = process.env): string {
  const v = moduleVersions();
  const digest = createHash('sha256');
  for (const f of ['go.mod', 'go.sum']) digest.update(readFileSync(join(GO_MODULE_DIR, f)));
  digest.update(ldflags()).update(COREDNS_MODULE).update(METRICS_SERVER_MODULE).update(METRICS_SERVER_LDFLAGS);
  const version = (module: string): string => module.split('@')[1];
  return join(cacheRoot(env), 'node', `k8s-${v.kubernetes}_coredns-${version(COREDNS_MODULE)}_metrics-server-${version(METRICS_SERVER_MODULE)}_${digest.digest('hex').slice(0, 12)}`);
}

/** `-ldflags` stamping the Kubernetes and helm versions, so /version and `helm version` are right. */
export function ldflags(): string {
  const v = moduleVersions();
  const [major, minor] = v.kubernetes.slice(1).split('.');
  const flags = ['-s', '-w'];
  for (const pkg of ['k8s.io/component-base/version', 'k8s.io/client-go/pkg/version']) {
    flags.push(`-X ${pkg}.gitVersion=${v.kubernetes}`, `-X ${pkg}.gitMajor=${major}`, `-X ${pkg}.gitMinor=${minor}`, `-X ${pkg}.gitTreeState=clean`);
  }
  flags.push(`-X helm.sh/helm/v3/internal/version.version=${v.helm}`);
  // helm's default Kubernetes version (helm template, helm lint) follows the client-go it is built with.
  for (const pkg of ['helm.sh/helm/v3/pkg/chartutil', 'helm.sh/helm/v3/pkg/lint/rules']) flags.push(`-X ${pkg}.k8sVersionMajor=${major}`, `-X ${pkg}.k8sVersionMinor=${minor}`);
  return flags.join(' ');
}

/**
 * Takes an exclusive lock file (another process building or installing into the same cache waits
 * for it, blocking), released by the returned function. The file holds its taker's pid. A lock older
 * than `timeoutMs`, or whose taker no longer runs, is left over from a killed process and is taken over. `onWait` hears what is waited
 * for when the wait starts and once a minute after.
 */
export function lockFile(path: string, timeoutMs: number, onWait: (line: string) => void = () => {}): () => void {
  const start = Date.now();
  let told = -Infinity;
  for (;;) {
    try {
      writeFileSync(path, `${process.pid}\n`, { flag: 'wx' });
      return () => rmSync(path, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      if (Date.now() - statSync(path).mtimeMs > timeoutMs || !holderAlive(path)) rmSync(path, { force: true });
      else if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for the lock ${path}`);
      else {
        if (Date.now() - told >= 60_000) {
          told = Date.now();
          const holder = readFileSync(path, 'utf8').trim() || 'unknown';
          onWait(`waiting for the lock ${path}, held by process ${holder} for ${Math.round((Date.now() - statSync(path).mtimeMs) / 1000)} s`);
        }
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
      }
    }
  }
}

/** Whether the process a lock file names still runs (a lock of a killed run is taken over at once). */
function holderAlive(path: string): boolean {
  const pid = Number(readFileSync(path, 'utf8').trim());
  if (!Number.isInteger(pid) || pid <= 0) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/** One cached set of binaries: the names it holds, where, and how to build them into a folder. */
interface BinarySet {
  what: string;
  names: readonly string[];
  dir: string;
  /** What a cold build costs, for the log line. */
  took: string;
  build(out: string, env: NodeJS.ProcessEnv): void;
}

/** The set's folder, building it first (under a lock, into a temporary folder renamed at the end) when the cache lacks it. */
function ensureSet(set: BinarySet, log: (line: string) => void, env: NodeJS.ProcessEnv): string {
  if (env.PREDICTGATE_CLUSTER_BIN) {
    const dir = env.PREDICTGATE_CLUSTER_BIN;
    const missing = set.names.filter((n) => !existsSync(join(dir, n)));
    if (missing.length) throw new Error(`PREDICTGATE_CLUSTER_BIN=${dir} lacks ${missing.join(', ')}`);
    return dir;
  }
  const { dir } = set;
  const haveAll = (): boolean => set.names.every((n) => existsSync(join(dir, n)));
  if (haveAll()) return dir;
  const go = spawnSync('go', ['version'], { encoding: 'utf8', env });
  if (go.error || go.status !== 0) {
    throw new Error(
      `The cluster tests need ${set.what}, built from Go modules, and no Go toolchain was found ` +
        `(running 'go version' failed: ${go.error?.message ?? go.stderr}). Install Go 1.26 or later, or set ` +
        `PREDICTGATE_CLUSTER_BIN to a folder holding ${set.names.join(', ')}.`,
    );
  }
  mkdirSync(join(dir, '..'), { recursive: true });
  const release = lockFile(`${dir}.lock`, 90 * 60_000, (line) => log(`${line}: another run is building ${set.what} into ${dir}`));
  try {
    if (haveAll()) return dir;
    const tmp = `${dir}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    log(`building ${set.what} into ${dir} (${go.stdout.trim()}; once per machine: ${set.took})`);
    const started = Date.now();
    set.build(tmp, env);
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
    log(`built ${set.what} in ${Math.round((Date.now() - started) / 1000)} s`);
    return dir;
  } finally {
    release();
  }
}

function goBuild(what: string, args: string[], cwd: string, env: NodeJS.ProcessEnv, hint = ''): void {
  const build = spawnSync('go', args, { cwd, stdio: ['ignore', 'inherit', 'inherit'], env });
  if (build.status !== 0) throw new Error(`go build of ${what} failed (exit ${build.status ?? build.signal})${hint}; see the output above`);
}

/** A static binary from its own module's requirements (go install MODULE@VERSION), from the Go module proxy. */
function goInstall(binary: string, module: string, out: string, env: NodeJS.ProcessEnv, extraLdflags = ''): void {
  const proxy = env.GOPROXY ?? spawnSync('go', ['env', 'GOPROXY'], { encoding: 'utf8', env }).stdout?.trim();
  goBuild(binary, ['install', '-trimpath', '-ldflags', `-s -w${extraLdflags}`, module], out, { ...env, GOBIN: out, CGO_ENABLED: '0', GOFLAGS: '' },
    `: the node tier needs ${binary}, built by 'go install ${module}' from the Go module proxy (GOPROXY=${proxy || 'unset'})`);
}

/**
 * Returns the control plane's binaries, building them first when the cache lacks them (about 6
 * minutes on 2 cores the first time; seconds after). `log` receives progress lines.
 */
export function ensureBinaries(log: (line: string) => void = () => {}, env: NodeJS.ProcessEnv = process.env): Binaries {
  const dir = ensureSet({
    what: 'kube-apiserver, etcd and helm',
    names: NAMES,
    dir: env.PREDICTGATE_CLUSTER_BIN ? '' : binDir(env),
    took: 'about 6 minutes on 2 cores with empty Go caches, 14 s to relink after a flag change',
    build: (out, e) => goBuild('the control plane', ['build', '-trimpath', '-ldflags', ldflags(), '-o', `${out}/`, 'k8s.io/kubernetes/cmd/kube-apiserver', './cmd/etcd', 'helm.sh/helm/v3/cmd/helm'], GO_MODULE_DIR, e),
  }, log, env);
  return { kubeApiserver: join(dir, 'kube-apiserver'), etcd: join(dir, 'etcd'), helm: join(dir, 'helm'), kubernetesVersion: moduleVersions().kubernetes };
}

/** Returns the node tier's binaries, building them first when the cache lacks them. */
export function ensureNodeBinaries(log: (line: string) => void = () => {}, env: NodeJS.ProcessEnv = process.env): NodeBinaries {
  const dir = ensureSet({
    what: 'kubelet, kube-controller-manager, kube-scheduler, kube-proxy, CoreDNS and metrics-server',
    names: NODE_NAMES,
    dir: env.PREDICTGATE_CLUSTER_BIN ? '' : nodeBinDir(env),
    took: 'about 7 minutes on 2 cores after the control plane, with its Go build cache, and 3 more for metrics-server\'s module',
    build: (out, e) => {
      goBuild('the node tier', ['build', '-trimpath', '-ldflags', ldflags(), '-o', `${out}/`, 'k8s.io/kubernetes/cmd/kubelet', 'k8s.io/kubernetes/cmd/kube-controller-manager', 'k8s.io/kubernetes/cmd/kube-scheduler', 'k8s.io/kubernetes/cmd/kube-proxy'], GO_MODULE_DIR, e);
      goInstall('coredns', COREDNS_MODULE, out, e);
      goInstall('metrics-server', METRICS_SERVER_MODULE, out, e, METRICS_SERVER_LDFLAGS);
    },
  }, log, env);
  return {
    kubelet: join(dir, 'kubelet'),
    kubeControllerManager: join(dir, 'kube-controller-manager'),
    kubeScheduler: join(dir, 'kube-scheduler'),
    kubeProxy: join(dir, 'kube-proxy'),
    coredns: join(dir, 'coredns'),
    metricsServer: join(dir, 'metrics-server'),
  };
}
