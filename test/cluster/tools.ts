// The small helpers the node tier's harness shares (images.ts, buildah.ts, node.ts, machine.ts):
// running a tool with its output in a log file, the tools a step needs (with the Debian package that
// has each) and the machine's mount points.
import { spawnSync } from 'node:child_process';
import { appendFileSync, closeSync, openSync, readFileSync } from 'node:fs';

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
  iptables: { cmd: 'iptables', args: ['--version'], pkg: 'iptables' },
  conntrack: { cmd: 'conntrack', args: ['--version'], pkg: 'conntrack' },
  ip: { cmd: 'ip', args: ['-V'], pkg: 'iproute2' },
  nsenter: { cmd: 'nsenter', args: ['--version'], pkg: 'util-linux' },
  kubectl: { cmd: 'kubectl', args: ['version', '--client'], pkg: 'kubectl' },
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

/** Every mount point of this process's mount namespace (from /proc/self/mountinfo, whose paths escape spaces and the like in octal). */
export function mountPoints(): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((p): p is string => p !== undefined)
    .map((p) => p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))));
}

/** Mount points at or under `dir`, deepest first. */
export function mountsUnder(dir: string): string[] {
  const prefix = dir.replace(/\/+$/, '');
  return mountPoints()
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
