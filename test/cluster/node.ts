// A real one-node Kubernetes cluster for the node tier: a control plane (controlPlane.ts) on the
// machine's end of a veth pair, and in a network namespace of its own containerd with runc and the
// CNI bridge, the kubelet, kube-proxy, kube-controller-manager, kube-scheduler, CoreDNS and
// metrics-server (metrics.k8s.io through the aggregation layer, so HPAs act on CPU), with images
// imported from local OCI archives (nothing is pulled). What it changes on the machine is
// recorded first and put back on stop (machine.ts); one node cluster runs per machine at a time.
import { spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { ensureNodeBinaries, type NodeBinaries } from './binaries.js';
import { ensureImages, type Images } from './images.js';
import { kubeconfigFor, startControlPlane, startProcess, stopControlPlane, stopProcess, tail, waitHealthy, type ControlPlane, type ControlPlaneInfo } from './controlPlane.js';
import { CGROUP_ROOT, killNodeProcesses, leftovers, recordMachine, restoreMachine, type MachineRecord } from './machine.js';
import {
  COREDNS_RBAC,
  HPA_CONTROLLER_FLAGS,
  METRICS_SERVER,
  METRICS_SERVER_RBAC,
  NODE_NET,
  NODE_USERS,
  containerdConfig,
  corefile,
  cniConfig,
  kubeProxyConfig,
  kubeletConfig,
  metricsApi,
  metricsServerArgs,
  nodePaths,
  type NodePaths,
} from './nodeConfig.js';
import { TOOLS, requireTools, run as runLogged } from './tools.js';

/** The one record of the node running on this machine: read by the next start after a crash, and by cluster:down. */
export const NODE_STATE_FILE = `/run/${NODE_NET.netns}.json`;

export interface NodeClusterInfo {
  controlPlane: ControlPlaneInfo;
  machine: MachineRecord;
  /** The node's address, where NodePorts answer. */
  nodeIp: string;
  pids: Record<string, number>;
}

export interface NodeCluster extends NodeClusterInfo {
  kubeconfig: string;
  /** The images imported into the node. */
  images: Images;
  stop(): Promise<void>;
}

export interface NodeStartOptions {
  dir: string;
  detached?: boolean;
  log?: (line: string) => void;
}

const CNI_BIN_DIR = '/usr/lib/cni';
const COREDNS_PORTS = { health: 8181, ready: 8182 };

/** The same command inside the node's network namespace (the machine's mounts and cgroups stay shared). */
function inNode(cmd: string, args: string[]): [string, string[]] {
  return ['nsenter', [`--net=/run/netns/${NODE_NET.netns}`, '--', cmd, ...args]];
}

function checkMachine(): void {
  if (process.getuid?.() !== 0) throw new Error('the node tier runs containerd and a kubelet, which need root');
  requireTools([TOOLS.containerd, TOOLS.ctr, TOOLS.runc, TOOLS.iptables, TOOLS.conntrack, TOOLS.ip, TOOLS.nsenter, TOOLS.kubectl], 'The node tier');
  if (!existsSync(join(CNI_BIN_DIR, 'bridge'))) throw new Error(`The node tier needs the CNI plugins in ${CNI_BIN_DIR}; install the Debian package: apt-get install containernetworking-plugins`);
}

/** Stops a node left running by a crashed run (or cluster:up) and puts the machine back. */
export async function stopLeftoverNode(log: (line: string) => void = () => {}): Promise<void> {
  if (!existsSync(NODE_STATE_FILE)) {
    if (existsSync(`/run/netns/${NODE_NET.netns}`)) throw new Error(`a network namespace ${NODE_NET.netns} exists with no record of it in ${NODE_STATE_FILE}; remove it with 'ip netns delete ${NODE_NET.netns}' if no node runs`);
    return;
  }
  const info = JSON.parse(readFileSync(NODE_STATE_FILE, 'utf8')) as NodeClusterInfo;
  log(`stopping the node cluster recorded in ${NODE_STATE_FILE} (${info.machine.dir})`);
  await stopNodeCluster(info);
}

/** Stops every part of a node cluster from its record, restores the machine and checks that nothing is left. */
export async function stopNodeCluster(info: NodeClusterInfo, children: Map<string, ChildProcess> = new Map()): Promise<void> {
  // The kubelet first, so it restarts nothing; the rest may go at once.
  for (const name of ['kubelet', 'kube-controller-manager', 'kube-scheduler', 'kube-proxy', 'coredns', 'metrics-server']) {
    const pid = info.pids[name];
    if (pid !== undefined) await stopProcess(children.get(name), pid);
  }
  // containerd, its shims and every container: nothing of theirs outlives the node.
  await killNodeProcesses();
  await stopControlPlane(info.controlPlane);
  restoreMachine(info.machine);
  const left = leftovers(info.machine);
  rmSync(NODE_STATE_FILE, { force: true });
  if (left.length) throw new Error(`the node cluster left on this machine:\n  ${left.join('\n  ')}`);
}

/** A setup command, its output kept in `logFile`; a failure throws with the log's last lines. */
function setupStep(logFile: string): (cmd: string, args: string[]) => string {
  return (cmd, args) => runLogged(cmd, args, { logFile, what: `${cmd} ${args.join(' ')}`, capture: true });
}

function setUpNetwork(run: (cmd: string, args: string[]) => string): void {
  const { netns, hostIf, nodeIf, hostIp, nodeIp, prefix, podCidr } = NODE_NET;
  run('ip', ['netns', 'add', netns]);
  run('ip', ['link', 'add', hostIf, 'type', 'veth', 'peer', 'name', nodeIf]);
  run('ip', ['link', 'set', nodeIf, 'netns', netns]);
  run('ip', ['addr', 'add', `${hostIp}/${prefix}`, 'dev', hostIf]);
  run('ip', ['link', 'set', hostIf, 'up']);
  const n = (args: string[]): string => run('ip', ['-n', netns, ...args]);
  n(['link', 'set', 'lo', 'up']);
  n(['addr', 'add', `${nodeIp}/${prefix}`, 'dev', nodeIf]);
  n(['link', 'set', nodeIf, 'up']);
  n(['route', 'add', 'default', 'via', hostIp]);
  // Forwarding between the pods' bridge and the veth, in the node's namespace only.
  run(...inNode('sysctl', ['-q', '-w', 'net.ipv4.ip_forward=1']));
  // The machine reaches pods through the node (the route goes when the interface does).
  run('ip', ['route', 'add', podCidr, 'via', nodeIp, 'dev', hostIf]);
}

/** The node's cgroup in every hierarchy, with the cpuset of the machine (the kubelet requires that it exists). */
function makeCgroupRoot(): void {
  for (const h of readdirSync('/sys/fs/cgroup')) {
    const d = join('/sys/fs/cgroup', h, CGROUP_ROOT);
    mkdirSync(d, { recursive: true });
    if (h === 'cpuset') {
      for (const f of ['cpuset.cpus', 'cpuset.mems']) writeFileSync(join(d, f), readFileSync(join('/sys/fs/cgroup', h, f), 'utf8').trim());
    }
  }
}

function writeConfigs(p: NodePaths, cp: ControlPlane): void {
  for (const d of [p.cniConfDir, p.cniIpamDir, p.kubeletRoot, p.podLogs, p.containerdRoot, p.containerdState, p.runcRoot, join(p.dir, 'metrics-server')]) mkdirSync(d, { recursive: true });
  writeFileSync(p.containerdConfig, containerdConfig(p, CNI_BIN_DIR));
  writeFileSync(join(p.cniConfDir, '10-predictgate.conflist'), cniConfig(p));
  writeFileSync(p.kubeletConfig, kubeletConfig(p));
  // Pods' upstream resolvers: none (nothing is resolved off the machine).
  writeFileSync(p.resolvConf, 'options ndots:5\n');
  writeFileSync(p.kubeProxyConfig, kubeProxyConfig(p));
  writeFileSync(p.corefile, corefile(p, COREDNS_PORTS));
  for (const u of NODE_USERS) writeFileSync(p.kubeconfig(u.component), kubeconfigFor(u.component, cp.server, cp.caFile, cp.tokens[u.name]), { mode: 0o600 });
}

/** Polls `check` until it returns true; a start has no event to wait for. */
async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number, logFile?: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${what} not within ${timeoutMs / 1000} s${logFile ? `; log: ${logFile}\n${tail(logFile)}` : ''}`);
}

function kubectl(kubeconfig: string, args: string[], input?: string): { ok: boolean; out: string } {
  const r = spawnSync('kubectl', ['--kubeconfig', kubeconfig, ...args], { encoding: 'utf8', input });
  return { ok: r.status === 0, out: (r.stdout || r.stderr || '').trim() };
}

export async function startNodeCluster(opts: NodeStartOptions): Promise<NodeCluster> {
  const log = opts.log ?? (() => {});
  const detached = opts.detached ?? false;
  checkMachine();
  const bin: NodeBinaries = ensureNodeBinaries(log);
  const images = await ensureImages(log);
  await stopLeftoverNode(log);
  const started = Date.now();
  const p = nodePaths(opts.dir);
  mkdirSync(p.dir, { recursive: true });
  const machine = recordMachine(p.dir);
  const pids: Record<string, number> = {};
  const children = new Map<string, ChildProcess>();
  let cp: ControlPlane | undefined;
  const info = (): NodeClusterInfo => ({ controlPlane: cp ? { ...cp, pids: cp.pids } : emptyControlPlane(p.dir), machine, nodeIp: NODE_NET.nodeIp, pids: { ...pids } });
  const save = (): void => writeFileSync(NODE_STATE_FILE, JSON.stringify(info(), null, 2));
  save();
  const component = (name: string, binary: string, args: string[]): ChildProcess => {
    const [cmd, full] = inNode(binary, args);
    const child = startProcess(cmd, full, p.log(name), detached);
    children.set(name, child);
    pids[name] = child.pid!;
    save();
    return child;
  };
  const run = setupStep(p.log('setup'));
  try {
    setUpNetwork(run);
    makeCgroupRoot();
    cp = await startControlPlane({ dir: join(p.dir, 'control-plane'), detached, log, nodeAddress: NODE_NET.hostIp, users: NODE_USERS });
    save();
    writeConfigs(p, cp);
    const applied = kubectl(cp.kubeconfig, ['apply', '-f', '-'], [...COREDNS_RBAC, ...METRICS_SERVER_RBAC, ...metricsApi()].map((o) => stringify(o)).join('---\n'));
    if (!applied.ok) throw new Error(`applying the RBAC of CoreDNS and metrics-server and the metrics.k8s.io APIService failed: ${applied.out}`);

    component('containerd', 'containerd', ['--config', p.containerdConfig]);
    const ctr = (args: string[]): string => run('ctr', ['--address', p.containerdSocket, '--namespace', 'k8s.io', ...args]);
    await until('containerd answering', () => spawnSync('ctr', ['--address', p.containerdSocket, 'version'], { stdio: 'ignore' }).status === 0, 30_000, p.log('containerd'));
    for (const image of [images.pause, images.predictgate, images.llamaServer]) ctr(['images', 'import', '--snapshotter', 'overlayfs', image.archive]);
    log(`containerd up, ${images.pause.ref}, ${images.predictgate.ref} and ${images.llamaServer.ref} imported (${((Date.now() - started) / 1000).toFixed(1)} s)`);

    component('kube-controller-manager', bin.kubeControllerManager, [
      `--kubeconfig=${p.kubeconfig('kube-controller-manager')}`,
      `--bind-address=${NODE_NET.nodeIp}`,
      '--leader-elect=false',
      '--use-service-account-credentials',
      `--service-account-private-key-file=${join(cp.dir, 'sa.key')}`,
      `--root-ca-file=${cp.caFile}`,
      `--service-cluster-ip-range=${NODE_NET.serviceCidr}`,
      '--controllers=*',
      ...HPA_CONTROLLER_FLAGS,
    ]);
    component('kube-scheduler', bin.kubeScheduler, [`--kubeconfig=${p.kubeconfig('kube-scheduler')}`, `--bind-address=${NODE_NET.nodeIp}`, '--leader-elect=false']);
    const kubelet = component('kubelet', bin.kubelet, [
      `--config=${p.kubeletConfig}`,
      `--kubeconfig=${p.kubeconfig('kubelet')}`,
      `--root-dir=${p.kubeletRoot}`,
      `--hostname-override=${NODE_NET.nodeName}`,
      `--node-ip=${NODE_NET.nodeIp}`,
    ]);
    const proxy = component('kube-proxy', bin.kubeProxy, [`--config=${p.kubeProxyConfig}`]);
    const dns = component('coredns', bin.coredns, ['-conf', p.corefile]);
    const metrics = component('metrics-server', bin.metricsServer, metricsServerArgs(p));

    await waitHealthy(`http://${NODE_NET.nodeIp}:10256/healthz`, 'kube-proxy', proxy, p.log('kube-proxy'), {}, 60_000);
    await waitHealthy(`http://${NODE_NET.nodeIp}:${COREDNS_PORTS.ready}/ready`, 'CoreDNS', dns, p.log('coredns'), {}, 60_000);
    // Alive; ready only once it has scraped the kubelet, which the suites that read metrics wait for.
    await waitHealthy(`https://${NODE_NET.nodeIp}:${METRICS_SERVER.port}/livez`, 'metrics-server', metrics, p.log('metrics-server'), {}, 60_000);
    let kubeletExit: number | null | undefined;
    kubelet.once('exit', (code) => (kubeletExit = code));
    await until(`node ${NODE_NET.nodeName} Ready`, () => {
      if (kubeletExit !== undefined) throw new Error(`the kubelet exited with ${kubeletExit}; log: ${p.log('kubelet')}\n${tail(p.log('kubelet'))}`);
      return kubectl(cp!.kubeconfig, ['get', 'node', NODE_NET.nodeName, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}']).out === 'True';
    }, 90_000, p.log('kubelet'));
    // Pods need their namespace's ServiceAccount and root CA ConfigMap, which the controllers publish.
    await until('the default ServiceAccount', () => kubectl(cp!.kubeconfig, ['get', 'serviceaccount', 'default', '-n', 'default']).ok, 60_000, p.log('kube-controller-manager'));
    // The apiserver reaches metrics-server through the aggregation layer (its discovery answered).
    await until('the APIService v1beta1.metrics.k8s.io Available', () => kubectl(cp!.kubeconfig, ['get', 'apiservice', 'v1beta1.metrics.k8s.io', '-o', 'jsonpath={.status.conditions[?(@.type=="Available")].status}']).out === 'True', 60_000, p.log('metrics-server'));
    log(`node ${NODE_NET.nodeName} Ready at ${NODE_NET.nodeIp} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    const kubeconfig = cp.kubeconfig;
    return {
      ...info(),
      kubeconfig,
      images,
      stop: () => stopNodeCluster(info(), children),
    };
  } catch (err) {
    // Nothing may outlive a failed start (jest runs no teardown when its setup throws).
    try {
      await stopNodeCluster(info(), children);
    } catch (cleanup) {
      log(`cleaning up after the failed start: ${(cleanup as Error).message}`);
    }
    throw err;
  }
}

function emptyControlPlane(dir: string): ControlPlaneInfo {
  return { server: '', kubeconfig: '', adminToken: '', caFile: '', etcdUrl: '', dir, pids: { etcd: -1, apiserver: -1 }, tokens: {} };
}
