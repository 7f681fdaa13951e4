// `npm run cluster:up [-- --node]` / `npm run cluster:down`: a test cluster that outlives the
// command, for trying predictgate by hand (kubectl, helm, `predictgate controller`). Plain `up` is
// the control plane alone; `--node` adds a real node (node.ts) with the predictgate image imported,
// so `helm install` runs real pods. State lives in .cluster/ at the repository root; `up` prints the
// kubeconfig path, `down` stops the processes, puts the machine back and removes it.
import { existsSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { isAlive, startControlPlane, stopControlPlane, type ControlPlaneInfo } from './controlPlane.js';
import { NODE_STATE_FILE, startNodeCluster, stopLeftoverNode } from './node.js';

const DIR = fileURLToPath(new URL('../../../.cluster/', import.meta.url));
const STATE = join(DIR, 'state.json');
const log = (l: string): void => void process.stderr.write(`${l}\n`);

function readState(): ControlPlaneInfo | undefined {
  return existsSync(STATE) ? (JSON.parse(readFileSync(STATE, 'utf8')) as ControlPlaneInfo) : undefined;
}

function running(state: ControlPlaneInfo): boolean {
  const cmdline = `/proc/${state.pids.apiserver}/cmdline`;
  return isAlive(state.pids.apiserver) && isAlive(state.pids.etcd) && existsSync(cmdline) && readFileSync(cmdline, 'utf8').includes('kube-apiserver');
}

async function up(withNode: boolean): Promise<void> {
  const state = readState();
  if (state && running(state) && existsSync(NODE_STATE_FILE) === withNode) {
    process.stdout.write(`already running at ${state.server}\nexport KUBECONFIG=${state.kubeconfig}\n`);
    return;
  }
  await down(true);
  mkdirSync(DIR, { recursive: true });
  if (withNode) {
    const node = await startNodeCluster({ dir: join(DIR, 'node'), detached: true, log });
    writeFileSync(STATE, JSON.stringify(node.controlPlane, null, 2));
    process.stdout.write(`kube-apiserver at ${node.controlPlane.server}, node ${node.nodeIp} (NodePorts answer there; logs in ${join(DIR, 'node')})\nexport KUBECONFIG=${node.kubeconfig}\n`);
    return;
  }
  const cp = await startControlPlane({ dir: DIR, detached: true, log });
  const info: ControlPlaneInfo = { server: cp.server, kubeconfig: cp.kubeconfig, adminToken: cp.adminToken, caFile: cp.caFile, etcdUrl: cp.etcdUrl, dir: cp.dir, pids: cp.pids, tokens: cp.tokens };
  writeFileSync(STATE, JSON.stringify(info, null, 2));
  process.stdout.write(`kube-apiserver at ${cp.server} (logs in ${DIR})\nexport KUBECONFIG=${cp.kubeconfig}\n`);
}

async function down(quiet = false): Promise<void> {
  const state = readState();
  const node = existsSync(NODE_STATE_FILE);
  if (!state && !node) {
    if (!quiet) process.stdout.write('no test cluster is running\n');
    return;
  }
  await stopLeftoverNode(log);
  if (state) await stopControlPlane(state);
  rmSync(DIR, { recursive: true, force: true });
  if (!quiet) process.stdout.write('stopped\n');
}

const [command, ...flags] = process.argv.slice(2);
const unknown = flags.filter((f) => f !== '--node');
(unknown.length
  ? Promise.reject(new Error(`unknown option ${unknown.join(' ')}; usage: cli.js up [--node] | down`))
  : command === 'up'
    ? up(flags.includes('--node'))
    : command === 'down'
      ? down()
      : Promise.reject(new Error('usage: cli.js up [--node] | down'))
).catch((err: Error) => {
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
});
