// buildah on storage of the harness's own: a storage root under the image cache (overlay driver when
// it works there, vfs otherwise), a run root and temporary files in a folder of the session's, and a
// close() that leaves no working container, mount or folder behind, after a failed build too.
import { spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, rmdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run, unmountUnder } from './tools.js';

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
