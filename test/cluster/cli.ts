// `npm run cluster:up` / `npm run cluster:down`: a test control plane that outlives the command, for
// trying predictgate by hand (kubectl, helm, `predictgate controller`). State lives in .cluster/ at
// the repository root; `up` prints the kubeconfig path, `down` stops the processes and removes it.
import { existsSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { isAlive, startControlPlane, stopControlPlane, type ControlPlaneInfo } from './controlPlane.js';

const DIR = fileURLToPath(new URL('../../../.cluster/', import.meta.url));
const STATE = join(DIR, 'state.json');

function readState(): ControlPlaneInfo | undefined {
  return existsSync(STATE) ? (JSON.parse(readFileSync(STATE, 'utf8')) as ControlPlaneInfo) : undefined;
}

async function up(): Promise<void> {
  const state = readState();
  if (state && isAlive(state.pids.apiserver) && isAlive(state.pids.etcd) && existsSync(`/proc/${state.pids.apiserver}/cmdline`) && readFileSync(`/proc/${state.pids.apiserver}/cmdline`, 'utf8').includes('kube-apiserver')) {
    process.stdout.write(`already running at ${state.server}\nexport KUBECONFIG=${state.kubeconfig}\n`);
    return;
  }
  if (state) await stopControlPlane(state);
  rmSync(DIR, { recursive: true, force: true });
  mkdirSync(DIR, { recursive: true });
  const cp = await startControlPlane({ dir: DIR, detached: true, log: (l) => process.stderr.write(`${l}\n`) });
  const info: ControlPlaneInfo = { server: cp.server, kubeconfig: cp.kubeconfig, adminToken: cp.adminToken, caFile: cp.caFile, etcdUrl: cp.etcdUrl, dir: cp.dir, pids: cp.pids };
  writeFileSync(STATE, JSON.stringify(info, null, 2));
  process.stdout.write(`kube-apiserver at ${cp.server} (logs in ${DIR})\nexport KUBECONFIG=${cp.kubeconfig}\n`);
}

async function down(): Promise<void> {
  const state = readState();
  if (!state) {
    process.stdout.write('no test control plane is running\n');
    return;
  }
  await stopControlPlane(state);
  rmSync(DIR, { recursive: true, force: true });
  process.stdout.write('stopped\n');
}

const command = process.argv[2];
(command === 'up' ? up() : command === 'down' ? down() : Promise.reject(new Error('usage: cli.js up|down'))).catch((err: Error) => {
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
});
