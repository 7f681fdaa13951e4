// A real Kubernetes control plane for tests, started the way envtest starts one: etcd and
// kube-apiserver as processes on free loopback ports, RBAC on, static-token authentication (an admin
// token in system:masters), service-account signing keys (so TokenRequest works), and a kubeconfig
// that kubectl, helm and @kubernetes/client-node use as is. No controllers run: tests play
// kube-controller-manager where they need one. For the node tier (node.ts) it listens on an address
// pods reach instead, with Node authorization, ServiceAccount admission, tokens for the node's
// components, and the aggregation layer's front proxy (a CA and a client certificate of its own,
// certs.ts) so that metrics-server serves metrics.k8s.io through it.
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { request as httpRequest } from 'node:http';
import { freePort } from '../../src/workload/ports.js';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { ensureBinaries } from './binaries.js';
import { issueClientCert, makeCa } from './certs.js';

export interface ControlPlaneInfo {
  /** https://127.0.0.1:PORT */
  server: string;
  kubeconfig: string;
  adminToken: string;
  /** PEM bundle that verifies the apiserver's serving certificate. */
  caFile: string;
  etcdUrl: string;
  dir: string;
  pids: { etcd: number; apiserver: number };
  /** Static tokens of the extra users (StartOptions.users), by user name. */
  tokens: Record<string, string>;
}

export interface ControlPlane extends ControlPlaneInfo {
  /** Stops the apiserver (SIGTERM, or SIGKILL for a crash) and starts it again on the same port and etcd (watches break, data stays). */
  restartApiserver(signal?: 'SIGTERM' | 'SIGKILL'): Promise<void>;
  stop(): Promise<void>;
}

export interface StartOptions {
  dir: string;
  /** Leave the processes running when this process exits (npm run cluster:up). */
  detached?: boolean;
  log?: (line: string) => void;
  /** Listen on this address rather than loopback, set up as a real cluster's apiserver is (node.ts). */
  nodeAddress?: string;
  /** Extra users with static tokens (the node's kubelet, kube-proxy, controllers). */
  users?: readonly { name: string; groups: readonly string[] }[];
}

export function startProcess(bin: string, args: string[], logFile: string, detached: boolean): ChildProcess {
  const fd = openSync(logFile, 'a');
  const child = spawn(bin, args, { stdio: ['ignore', fd, fd], detached });
  closeSync(fd);
  // A binary that cannot start shows up as an exit in waitHealthy, with the log; never as a crash here.
  child.on('error', (err) => writeFileSync(logFile, `could not start ${bin}: ${err.message}\n`, { flag: 'a' }));
  if (detached) child.unref();
  return child;
}

/** GET `url` until it answers 200 (or the process exits, or the deadline passes). */
export async function waitHealthy(url: string, what: string, child: ChildProcess, logFile: string, opts: { token?: string; caFile?: string } = {}, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited: number | null | undefined;
  child.once('exit', (code) => (exited = code));
  let last = '';
  while (Date.now() < deadline) {
    if (exited !== undefined) throw new Error(`${what} exited with ${exited} while starting; log: ${logFile}\n${tail(logFile)}`);
    try {
      const status = await get(url, opts);
      if (status === 200) return;
      last = `HTTP ${status}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 200)); // polling a process that is starting: there is no event to wait for
  }
  throw new Error(`${what} not healthy after ${timeoutMs / 1000} s (${last}); log: ${logFile}\n${tail(logFile)}`);
}

export function tail(file: string): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-15).join('\n');
  } catch {
    return '';
  }
}

function get(url: string, opts: { token?: string; caFile?: string }): Promise<number> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const headers: Record<string, string> = opts.token ? { authorization: `Bearer ${opts.token}` } : {};
    const req = u.protocol === 'https:'
      ? request(u, { headers, ca: opts.caFile && existsSync(opts.caFile) ? readFileSync(opts.caFile) : undefined, rejectUnauthorized: Boolean(opts.caFile && existsSync(opts.caFile)), timeout: 2000 })
      : httpRequest(u, { headers, timeout: 2000 });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

/** process.kill that tolerates a process gone meanwhile. */
function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

export async function stopProcess(child: ChildProcess | undefined, pid: number | undefined, sig: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (pid === undefined || !isAlive(pid)) return;
  const exited = child ? new Promise<void>((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.once('exit', () => r()))) : null;
  signal(pid, sig);
  const deadline = Date.now() + 15_000;
  if (exited) {
    const timer = setTimeout(() => signal(pid, 'SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
    return;
  }
  while (isAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100)); // not our child: no exit event
  signal(pid, 'SIGKILL');
}

/**
 * Whether pid runs. A zombie does not: a process left by `cluster:up` exits with no parent of its
 * own, and an init that reaps nobody keeps it in the process table.
 */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    // /proc/PID/stat: "PID (COMMAND) STATE ...", COMMAND possibly holding spaces and parentheses.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** Whether pid still runs `name` (after a reboot a recorded pid may belong to anything). */
function runs(pid: number, name: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0].endsWith(`/${name}`);
  } catch {
    return false;
  }
}

/** Stops the processes of a control plane started elsewhere (npm run cluster:down). */
export async function stopControlPlane(info: ControlPlaneInfo): Promise<void> {
  if (runs(info.pids.apiserver, 'kube-apiserver')) await stopProcess(undefined, info.pids.apiserver);
  if (runs(info.pids.etcd, 'etcd')) await stopProcess(undefined, info.pids.etcd);
}

/** A kubeconfig for one user with a static token, its context named `context` (and `namespace`, when given). */
export function kubeconfigFor(context: string, server: string, caFile: string, token: string, namespace?: string): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'predictgate-test', cluster: { server, 'certificate-authority': caFile } }],
    users: [{ name: context, user: { token } }],
    contexts: [{ name: context, context: { cluster: 'predictgate-test', user: context, ...(namespace ? { namespace } : {}) } }],
    'current-context': context,
  });
}

/** The front proxy's user: the name its client certificate carries, the only one allowed to pass X-Remote-* headers. */
export const FRONT_PROXY_CLIENT = 'front-proxy-client';

/**
 * The aggregation layer's front proxy (how the apiserver calls metrics-server on a user's behalf):
 * a CA of its own and the apiserver's client certificate signed by it, written into `certDir`, and
 * the apiserver's flags that use them. Extension apiservers find the CA and the header names in
 * the kube-system/extension-apiserver-authentication ConfigMap the apiserver publishes.
 */
function frontProxy(certDir: string): string[] {
  const caName = 'predictgate-front-proxy-ca';
  const ca = makeCa({ commonName: caName });
  const client = issueClientCert(ca, caName, { commonName: FRONT_PROXY_CLIENT });
  const file = (n: string): string => join(certDir, n);
  writeFileSync(file('front-proxy-ca.crt'), ca.cert);
  writeFileSync(file('front-proxy-client.crt'), client.cert);
  writeFileSync(file('front-proxy-client.key'), client.key, { mode: 0o600 });
  return [
    `--requestheader-client-ca-file=${file('front-proxy-ca.crt')}`,
    `--proxy-client-cert-file=${file('front-proxy-client.crt')}`,
    `--proxy-client-key-file=${file('front-proxy-client.key')}`,
    `--requestheader-allowed-names=${FRONT_PROXY_CLIENT}`,
    '--requestheader-username-headers=X-Remote-User',
    '--requestheader-group-headers=X-Remote-Group',
    '--requestheader-extra-headers-prefix=X-Remote-Extra-',
    // To an APIService's endpoints themselves, not its ClusterIP: ClusterIPs answer only inside the
    // node's namespace (kube-proxy's rules), and the apiserver runs on the machine.
    '--enable-aggregator-routing=true',
  ];
}

export async function startControlPlane(opts: StartOptions): Promise<ControlPlane> {
  const log = opts.log ?? (() => {});
  const detached = opts.detached ?? false;
  const binaries = ensureBinaries(log);
  const { dir } = opts;
  mkdirSync(join(dir, 'certs'), { recursive: true });

  // Service-account signing keys and the static token file.
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  writeFileSync(join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));
  writeFileSync(join(dir, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  const adminToken = randomBytes(24).toString('hex');
  const tokens: Record<string, string> = {};
  let tokenLines = `${adminToken},admin,admin,"system:masters"\n`;
  for (const u of opts.users ?? []) {
    tokens[u.name] = randomBytes(24).toString('hex');
    tokenLines += `${tokens[u.name]},${u.name},${u.name},"${u.groups.join(',')}"\n`;
  }
  writeFileSync(join(dir, 'tokens.csv'), tokenLines, { mode: 0o600 });
  const address = opts.nodeAddress ?? '127.0.0.1';

  const [etcdPort, peerPort, apiPort] = [await freePort(), await freePort(), await freePort()];
  const etcdUrl = `http://127.0.0.1:${etcdPort}`;
  const etcdLog = join(dir, 'etcd.log');
  const etcd = startProcess(binaries.etcd, [
    '--name=default',
    `--data-dir=${join(dir, 'etcd')}`,
    `--listen-client-urls=${etcdUrl}`,
    `--advertise-client-urls=${etcdUrl}`,
    `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
    `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
    `--initial-cluster=default=http://127.0.0.1:${peerPort}`,
    '--unsafe-no-fsync',
    '--log-level=warn',
  ], etcdLog, detached);
  try {
    await waitHealthy(`${etcdUrl}/health`, 'etcd', etcd, etcdLog);
  } catch (err) {
    await stopProcess(etcd, etcd.pid);
    throw err;
  }

  const server = `https://${address}:${apiPort}`;
  const caFile = join(dir, 'certs', 'apiserver.crt');
  const apiLog = join(dir, 'kube-apiserver.log');
  const apiArgs = [
    `--etcd-servers=${etcdUrl}`,
    `--cert-dir=${join(dir, 'certs')}`,
    `--secure-port=${apiPort}`,
    `--bind-address=${address}`,
    `--advertise-address=${address}`,
    '--service-cluster-ip-range=10.0.0.0/16', // room for thousands of model Services (bench:controller)
    '--allow-privileged=true',
    `--token-auth-file=${join(dir, 'tokens.csv')}`,
    '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
    `--service-account-key-file=${join(dir, 'sa.pub')}`,
    `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
    // As hardened clusters do: setting blockOwnerDeletion needs update on the owner's finalizers,
    // so the chart's RBAC is tested against the stricter rule.
    ...(opts.nodeAddress
      ? [
          // Pods get their ServiceAccount tokens; the kubelet may touch only its own node's objects.
          '--authorization-mode=Node,RBAC',
          '--enable-admission-plugins=OwnerReferencesPermissionEnforcement,NodeRestriction',
          // logs, exec and port-forward reach the kubelet at its node's address.
          '--kubelet-preferred-address-types=InternalIP,Hostname',
          ...frontProxy(join(dir, 'certs')),
        ]
      : ['--authorization-mode=RBAC', '--disable-admission-plugins=ServiceAccount', '--enable-admission-plugins=OwnerReferencesPermissionEnforcement']),
    '--profiling=false',
  ];
  let apiserver = startProcess(binaries.kubeApiserver, apiArgs, apiLog, detached);
  try {
    await waitHealthy(`${server}/readyz`, 'kube-apiserver', apiserver, apiLog, { token: adminToken, caFile });
  } catch (err) {
    // Nothing may outlive a failed start (jest runs no teardown when its setup throws).
    await stopProcess(apiserver, apiserver.pid);
    await stopProcess(etcd, etcd.pid);
    throw err;
  }

  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, kubeconfigFor('predictgate-test', server, caFile, adminToken, 'default'), { mode: 0o600 });
  log(`kube-apiserver ${binaries.kubernetesVersion} at ${server}, etcd at ${etcdUrl}`);

  const info = (): ControlPlaneInfo => ({ server, kubeconfig, adminToken, caFile, etcdUrl, dir, pids: { etcd: etcd.pid!, apiserver: apiserver.pid! }, tokens });
  return {
    ...info(),
    get pids() {
      return info().pids;
    },
    async restartApiserver(signal = 'SIGTERM') {
      await stopProcess(apiserver, apiserver.pid, signal);
      apiserver = startProcess(binaries.kubeApiserver, apiArgs, apiLog, detached);
      await waitHealthy(`${server}/readyz`, 'kube-apiserver', apiserver, apiLog, { token: adminToken, caFile });
    },
    async stop() {
      await stopProcess(apiserver, apiserver.pid);
      await stopProcess(etcd, etcd.pid);
    },
  };
}
