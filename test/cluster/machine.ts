// What the node tier changes on the machine, recorded before it starts and put back when it stops
// (or when a crashed run's successor starts): sysctls the kubelet sets, machine-wide folders its
// parts create, mounts, cgroups, processes and the node's network namespace; and the list of
// whatever is still left over, which a clean stop leaves empty.
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readFileSync, readdirSync, readlinkSync, rmSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isAlive } from './controlPlane.js';
import { NODE_NET } from './nodeConfig.js';
import { mountPoints } from './tools.js';

/** Sysctls a kubelet or kube-proxy may set on the machine (the kubelet's "kernel defaults", conntrack). */
const WATCHED_SYSCTLS = [
  'vm/overcommit_memory',
  'vm/panic_on_oom',
  'kernel/panic',
  'kernel/panic_on_oops',
  'kernel/keys/root_maxkeys',
  'kernel/keys/root_maxbytes',
  'net/ipv4/ip_forward',
  'net/ipv4/conf/all/route_localnet',
  'net/bridge/bridge-nf-call-iptables',
  'net/netfilter/nf_conntrack_max',
] as const;

/** Machine-wide folders that a kubelet, containerd or the CNI plugins write into whatever their settings. */
export const WATCHED_DIRS = ['/run/containerd', '/var/lib/cni', '/var/log/containers', '/var/log/pods', '/var/lib/kubelet', '/run/netns', '/etc/cni', '/var/lib/containerd'] as const;

/** The cgroup name every pod and container of the node lives under (kubelet's cgroupRoot). */
export const CGROUP_ROOT = 'predictgate';

export interface MachineRecord {
  /** The node's folder (its mounts and processes are the node's). */
  dir: string;
  sysctls: Record<string, string>;
  /** Each watched folder's entries before the start (null: the folder did not exist). */
  dirs: Record<string, string[] | null>;
  /** Whether /run/netns was a mount point already (`ip netns add` makes it one). */
  netnsMounted: boolean;
}



const CGROUP_FS = '/sys/fs/cgroup';

function readSysctl(name: string): string | undefined {
  try {
    return readFileSync(`/proc/sys/${name}`, 'utf8').trim();
  } catch {
    return undefined;
  }
}

export function recordMachine(dir: string): MachineRecord {
  const sysctls: Record<string, string> = {};
  for (const s of WATCHED_SYSCTLS) {
    const v = readSysctl(s);
    if (v !== undefined) sysctls[s] = v;
  }
  const dirs: Record<string, string[] | null> = {};
  for (const d of WATCHED_DIRS) dirs[d] = existsSync(d) ? readdirSync(d).sort() : null;
  return { dir, sysctls, dirs, netnsMounted: mountPoints().includes('/run/netns') };
}

/** Inode of the node's network namespace (undefined when it does not exist). */
function netnsInode(): number | undefined {
  try {
    return statSync(`/run/netns/${NODE_NET.netns}`).ino;
  } catch {
    return undefined;
  }
}

/** cgroup folders under the node's root in every hierarchy, deepest first. */
function nodeCgroups(): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) walk(join(d, e.name));
    out.push(d);
  };
  for (const h of existsSync(CGROUP_FS) ? readdirSync(CGROUP_FS) : []) {
    const root = join(CGROUP_FS, h, CGROUP_ROOT);
    if (existsSync(root)) walk(root);
  }
  return out;
}

/** Processes of the node: those in its network namespace, and those in its cgroups (the pods'). */
function nodeProcesses(): number[] {
  const pids = new Set<number>();
  const ino = netnsInode();
  if (ino !== undefined) {
    for (const e of readdirSync('/proc')) {
      if (!/^\d+$/.test(e)) continue;
      try {
        if (readlinkSync(`/proc/${e}/ns/net`) === `net:[${ino}]`) pids.add(Number(e));
      } catch {
        // gone meanwhile, or a kernel thread
      }
    }
  }
  for (const cg of nodeCgroups()) {
    try {
      for (const line of readFileSync(join(cg, 'cgroup.procs'), 'utf8').split('\n')) if (line) pids.add(Number(line));
    } catch {
      // not a hierarchy with cgroup.procs
    }
  }
  pids.delete(process.pid);
  return [...pids];
}

/** Mount points the node made: under its folder, and the pods' network namespaces. Deepest first. */
function nodeMounts(rec: MachineRecord): string[] {
  const before = new Set((rec.dirs['/run/netns'] ?? []).map((e) => `/run/netns/${e}`));
  const points = mountPoints().filter(
    (m) => m === rec.dir || m.startsWith(`${rec.dir}/`) || (m.startsWith('/run/netns/') && !before.has(m)) || (m === '/run/netns' && !rec.netnsMounted) || m.startsWith('/run/containerd/'),
  );
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

/** SIGKILLs every process of the node and waits (up to 10 s) until they are gone. */
export async function killNodeProcesses(): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (let pids = nodeProcesses(); pids.length && Date.now() < deadline; pids = nodeProcesses().filter(isAlive)) {
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await new Promise((r) => setTimeout(r, 50)); // processes leave their cgroups asynchronously: poll until none is left
  }
}

/** Puts the machine back as recorded, once the node's processes are gone. */
export function restoreMachine(rec: MachineRecord): void {
  for (const m of nodeMounts(rec)) spawnSync('umount', ['--lazy', m], { stdio: 'ignore' });
  for (const cg of nodeCgroups()) {
    try {
      rmdirSync(cg);
    } catch {
      // a hierarchy mounted twice shows the same folder again
    }
  }
  // The machine's end first: a veth pair goes with its namespace only once the kernel lets go of it.
  if (existsSync(`/sys/class/net/${NODE_NET.hostIf}`)) spawnSync('ip', ['link', 'delete', NODE_NET.hostIf], { stdio: 'ignore' });
  if (netnsInode() !== undefined) spawnSync('ip', ['netns', 'delete', NODE_NET.netns], { stdio: 'ignore' });
  // `ip netns` mounts /run/netns on itself; unmount it when it was not before.
  for (const m of nodeMounts(rec)) spawnSync('umount', ['--lazy', m], { stdio: 'ignore' });
  for (const [name, value] of Object.entries(rec.sysctls)) {
    if (readSysctl(name) !== value) {
      try {
        writeFileSync(`/proc/sys/${name}`, value);
      } catch {
        // reported by leftovers()
      }
    }
  }
  for (const [d, entries] of Object.entries(rec.dirs)) {
    if (!existsSync(d)) continue;
    if (entries === null) {
      rmSync(d, { recursive: true, force: true });
      continue;
    }
    const keep = new Set(entries);
    for (const e of readdirSync(d)) if (!keep.has(e)) rmSync(join(d, e), { recursive: true, force: true });
  }
}

/** What the node left on the machine that restoreMachine should have removed: empty after a clean stop. */
export function leftovers(rec: MachineRecord): string[] {
  const out: string[] = [];
  for (const pid of nodeProcesses()) {
    let cmd = '?';
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
    } catch {
      // gone meanwhile
    }
    out.push(`process ${pid}: ${cmd}`);
  }
  for (const m of nodeMounts(rec)) out.push(`mount ${m}`);
  for (const cg of nodeCgroups()) out.push(`cgroup ${cg}`);
  if (netnsInode() !== undefined) out.push(`network namespace ${NODE_NET.netns}`);
  if (existsSync(`/sys/class/net/${NODE_NET.hostIf}`)) out.push(`interface ${NODE_NET.hostIf}`);
  for (const [name, value] of Object.entries(rec.sysctls)) {
    const now = readSysctl(name);
    if (now !== value) out.push(`sysctl ${name.replace(/\//g, '.')} is ${now}, was ${value}`);
  }
  for (const [d, entries] of Object.entries(rec.dirs)) {
    if (!existsSync(d)) continue;
    if (entries === null) out.push(`folder ${d}`);
    else {
      const keep = new Set(entries);
      for (const e of readdirSync(d)) if (!keep.has(e)) out.push(`${lstatSync(join(d, e)).isSymbolicLink() ? 'link' : 'entry'} ${join(d, e)}`);
    }
  }
  return out;
}
