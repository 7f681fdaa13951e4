// Proof that the image archives are what a containerd node takes: a throwaway containerd (its own
// root, state and socket in a temporary folder; no CRI plugin) imports both into the k8s.io
// namespace, lists them, and runs predictgate's image once (`predictgate --help`); then the daemon
// is stopped and its folder unmounted and removed.
import { spawn, execFile } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, rmdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TOOLS, requireTools, unmountUnder } from './tools.js';
import type { Images } from './images.js';

export interface ImportCheck {
  /** What `ctr images import` printed, per archive. */
  imported: string[];
  /** `ctr images ls -q` in the k8s.io namespace. */
  listed: string[];
  /** What `ctr run --rm` of predictgate's image printed. */
  help: string;
  /** All of it, for a person to read. */
  output: string;
  /** The daemon's folder (root, state, socket), removed when the check ends. */
  dir: string;
}

function ctr(address: string, args: string[], timeoutMs = 120_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('ctr', ['--address', address, '--namespace', 'k8s.io', ...args], { encoding: 'utf8', timeout: timeoutMs, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`ctr ${args.join(' ')} failed: ${err.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/** Pids of the shims serving a containerd at `address` (they outlive the daemon while a container runs). */
function shimsOf(address: string): number[] {
  const pids: number[] = [];
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (argv[0]?.includes('containerd-shim') && argv.includes(address)) pids.push(Number(pid));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** The folders a shim makes for its socket (/run/containerd/s, fixed in containerd 1.6) that did not exist before. */
const SHIM_DIRS = ['/run/containerd/s', '/run/containerd'];

export async function checkImport(images: Images, log: (line: string) => void = () => {}): Promise<ImportCheck> {
  requireTools([TOOLS.containerd, TOOLS.ctr, TOOLS.runc], 'Importing the images into a containerd');
  const made = SHIM_DIRS.filter((d) => !existsSync(d));
  const dir = mkdtempSync(join(tmpdir(), 'predictgate-containerd-'));
  const address = join(dir, 'containerd.sock');
  const config = join(dir, 'config.toml');
  writeFileSync(
    config,
    [
      'version = 2',
      `root = "${dir}/root"`,
      `state = "${dir}/state"`,
      'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
      '[grpc]',
      `  address = "${address}"`,
      '[plugins."io.containerd.internal.v1.opt"]',
      `  path = "${dir}/opt"`,
      '',
    ].join('\n'),
  );
  const logFile = join(dir, 'containerd.log');
  const fd = openSync(logFile, 'a');
  const daemon = spawn('containerd', ['--config', config, '--root', `${dir}/root`, '--state', `${dir}/state`, '--address', address], { stdio: ['ignore', fd, fd] });
  closeSync(fd);
  let exited: number | null | undefined;
  const exit = new Promise<void>((resolve) => daemon.once('exit', (code) => ((exited = code), resolve())));
  daemon.once('error', (err) => writeFileSync(logFile, `could not start containerd: ${err.message}\n`, { flag: 'a' }));
  try {
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (exited !== undefined) throw new Error(`containerd exited with ${exited} while starting:\n${readFileSync(logFile, 'utf8').slice(-2000)}`);
      try {
        await ctr(address, ['version'], 5_000);
        break;
      } catch (err) {
        if (Date.now() > deadline) throw new Error(`containerd did not answer on ${address} within 30 s: ${(err as Error).message}`);
      }
      await new Promise((r) => setTimeout(r, 100)); // polling a daemon that is starting: there is no event to wait for
    }
    log(`throwaway containerd ready on ${address}`);
    const transcript: string[] = [];
    const step = async (args: string[]): Promise<string> => {
      const out = await ctr(address, args);
      transcript.push(`$ ctr --address ${address} --namespace k8s.io ${args.join(' ')}\n${out.trimEnd()}`);
      return out;
    };
    const imported: string[] = [];
    for (const archive of [images.predictgate.archive, images.pause.archive]) {
      const started = Date.now();
      imported.push((await step(['images', 'import', archive])).trim());
      log(`ctr images import ${archive}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
    }
    const listed = (await step(['images', 'ls', '--quiet'])).trim().split('\n').filter(Boolean);
    const help = await step(['run', '--rm', '--fifo-dir', join(dir, 'fifo'), '--runc-root', join(dir, 'runc'), images.predictgate.ref, `predictgate-check-${process.pid}`]);
    const output = transcript.join('\n');
    return { imported, listed, help, output, dir };
  } finally {
    if (exited === undefined) {
      // A container left by a failed run is stopped and removed through the daemon before it stops.
      for (const id of (await ctr(address, ['containers', 'ls', '--quiet']).catch(() => '')).split('\n').filter(Boolean)) {
        await ctr(address, ['tasks', 'kill', '--signal', 'SIGKILL', id]).catch(() => '');
        await ctr(address, ['tasks', 'delete', '--force', id]).catch(() => '');
        await ctr(address, ['containers', 'delete', id]).catch(() => '');
      }
      daemon.kill('SIGTERM');
      const timer = setTimeout(() => daemon.kill('SIGKILL'), 10_000);
      await exit;
      clearTimeout(timer);
    }
    for (const pid of shimsOf(address)) process.kill(pid, 'SIGKILL');
    unmountUnder(dir);
    rmSync(dir, { recursive: true, force: true });
    for (const d of made) {
      try {
        rmdirSync(d);
      } catch {
        // not empty: another containerd uses it now
      }
    }
  }
}
