// buildah on storage of the harness's own: a storage root under the image cache (overlay driver when
// it works there, vfs otherwise), a run root and temporary files in a folder of the session's, and a
// close() that leaves no working container, mount or folder behind, after a failed build too. Also
// the small helpers the image builds share: running a tool with its output in a log file, the tools a
// build needs (with the Debian package to install) and the mounts under a folder.
import { spawnSync } from 'node:child_process';
import { appendFileSync, closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, rmdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Runs `cmd` to completion with stdout and stderr appended to `logFile`; returns stdout when `capture` (then stderr alone goes to the log). */
export function run(cmd: string, args: string[], opts: { logFile: string; what: string; env?: NodeJS.ProcessEnv; cwd?: string; capture?: boolean }): string {
  appendFileSync(opts.logFile, `$ ${cmd} ${args.join(' ')}\n`);
  const fd = openSync(opts.logFile, 'a');
  const started = Date.now();
  try {
    const r = spawnSync(cmd, args, { cwd: opts.cwd, env: opts.env, encoding: 'utf8', maxBuffer: 64 << 20, stdio: ['ignore', opts.capture ? 'pipe' : fd, fd] });
    appendFileSync(opts.logFile, `# ${cmd}: exit ${r.status ?? r.signal} after ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
    if (r.error) throw new Error(`${opts.what}: could not run ${cmd}: ${r.error.message}`);
    if (r.status !== 0) {
      throw new Error(`${opts.what} failed (${cmd} exited with ${r.status ?? r.signal}); the last lines of ${opts.logFile}:\n${tail(opts.logFile, 25)}`);
    }
    return opts.capture ? r.stdout : '';
  } finally {
    closeSync(fd);
  }
}

function tail(file: string, lines: number): string {
  return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
}

/** A tool a build runs: the command, how to ask it its version, and the Debian package that has it. */
export interface Tool {
  cmd: string;
  args: string[];
  pkg: string;
}

export const TOOLS = {
  buildah: { cmd: 'buildah', args: ['--version'], pkg: 'buildah' },
  runc: { cmd: 'runc', args: ['--version'], pkg: 'runc' },
  mmdebstrap: { cmd: 'mmdebstrap', args: ['--version'], pkg: 'mmdebstrap' },
  gcc: { cmd: 'gcc', args: ['--version'], pkg: 'gcc' },
  tar: { cmd: 'tar', args: ['--version'], pkg: 'tar' },
  npm: { cmd: 'npm', args: ['--version'], pkg: 'npm' },
  containerd: { cmd: 'containerd', args: ['--version'], pkg: 'containerd' },
  ctr: { cmd: 'ctr', args: ['--version'], pkg: 'containerd' },
} satisfies Record<string, Tool>;

/** Throws one error naming every missing tool and the Debian packages that install them; `why` says what needs them. */
export function requireTools(tools: Tool[], why: string): void {
  const missing = tools.filter((t) => {
    const r = spawnSync(t.cmd, t.args, { stdio: 'ignore' });
    return r.error !== undefined || r.status !== 0;
  });
  if (!missing.length) return;
  const pkgs = [...new Set(missing.map((t) => t.pkg))];
  throw new Error(`${why} needs ${missing.map((t) => t.cmd).join(', ')}, which ${missing.length > 1 ? 'were' : 'was'} not found on the PATH; install the Debian package${pkgs.length > 1 ? 's' : ''}: apt-get install ${pkgs.join(' ')}`);
}

/** Mount points at or under `dir`, deepest first (from /proc/self/mountinfo, whose paths escape spaces and the like in octal). */
export function mountsUnder(dir: string): string[] {
  const prefix = dir.replace(/\/+$/, '');
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((p): p is string => p !== undefined)
    .map((p) => p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))))
    .filter((p) => p === prefix || p.startsWith(`${prefix}/`))
    .sort((a, b) => b.length - a.length);
}

/** Unmounts everything at or under `dir` (lazily when a mount is busy); returns what was unmounted. */
export function unmountUnder(dir: string): string[] {
  const done: string[] = [];
  for (const m of mountsUnder(dir)) {
    const r = spawnSync('umount', [m], { stdio: 'ignore' });
    if (r.status !== 0) spawnSync('umount', ['--lazy', m], { stdio: 'ignore' });
    done.push(m);
  }
  return done;
}

function rmdirIfEmpty(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // not empty (something else uses it now) or gone
  }
}

export interface Buildah {
  /** The storage driver in use: overlay or vfs. */
  driver: string;
  /** The storage root (under the image cache, kept). */
  root: string;
  /** A folder of this session's for temporary files (removed by close). */
  work: string;
  /** Flags for RUN steps' runc: its state in the session's folder, not in /run/runc. */
  runtimeFlags: string[];
  /** Runs buildah on this storage; returns stdout when `capture`. */
  run(args: string[], what: string, capture?: boolean): string;
  /** Whether the storage holds an image by this name. */
  hasImage(ref: string): boolean;
  /** Removes every working container and mount of this storage and the session's folder. */
  close(): void;
}

/**
 * Opens buildah on the storage under `cacheDir` (callers hold the image cache's lock, so any
 * container found there is left over from a killed run and is removed). `logFile` receives every
 * command and its output.
 */
export function openBuildah(cacheDir: string, logFile: string, log: (line: string) => void): Buildah {
  const work = mkdtempSync(join(tmpdir(), 'predictgate-buildah-'));
  const runroot = join(work, 'run');
  const tmp = join(work, 'tmp');
  mkdirSync(tmp, { recursive: true });
  // containers/image puts its large temporary files in TMPDIR (/var/tmp otherwise).
  const env = { ...process.env, TMPDIR: tmp };
  const global = (driver: string, root: string): string[] => ['--root', root, '--runroot', runroot, '--storage-driver', driver];
  let driver = 'overlay';
  let root = join(cacheDir, `buildah-${driver}`);
  // The driver is fixed per storage root (a root made with one cannot be opened with the other), hence one root per driver.
  const fresh = !existsSync(root);
  const probe = spawnSync('buildah', [...global(driver, root), 'info'], { env, encoding: 'utf8' });
  if (probe.status !== 0) {
    log(`buildah's overlay driver does not work in ${root} (${(probe.stderr || probe.error?.message || '').trim().split('\n').pop()}); using vfs (slower, more disk)`);
    if (fresh) rmSync(root, { recursive: true, force: true });
    driver = 'vfs';
    root = join(cacheDir, `buildah-${driver}`);
  }
  const runBuildah = (args: string[], what: string, capture = false): string => run('buildah', [...global(driver, root), ...args], { logFile, what, env, capture });
  const cleanup = (): void => {
    const left = spawnSync('buildah', [...global(driver, root), 'containers', '--quiet'], { env, encoding: 'utf8' });
    if (left.status === 0 && left.stdout.trim()) {
      appendFileSync(logFile, `removing working containers: ${left.stdout.trim().split('\n').join(' ')}\n`);
      spawnSync('buildah', [...global(driver, root), 'rm', '--all'], { env, stdio: 'ignore' });
    }
    for (const m of [...unmountUnder(root), ...unmountUnder(work)]) appendFileSync(logFile, `unmounted ${m}\n`);
  };
  // containers/image keeps a blob-info cache in /var/lib/containers/cache whatever --root says; when
  // this session is the one that makes it, close() removes it again.
  const blobInfoCache = ['/var/lib/containers', '/var/lib/containers/cache'].filter((d) => !existsSync(d));
  cleanup();
  return {
    driver,
    root,
    work,
    runtimeFlags: ['--runtime-flag', `root=${join(work, 'runc')}`],
    run: runBuildah,
    hasImage: (ref) => spawnSync('buildah', [...global(driver, root), 'inspect', '--type', 'image', '--format', '{{.FromImageID}}', ref], { env, stdio: 'ignore' }).status === 0,
    close: () => {
      cleanup();
      if (existsSync(work)) rmSync(work, { recursive: true, force: true });
      if (blobInfoCache.includes('/var/lib/containers/cache')) rmSync('/var/lib/containers/cache', { recursive: true, force: true });
      if (blobInfoCache.includes('/var/lib/containers')) rmdirIfEmpty('/var/lib/containers');
    },
  };
}
