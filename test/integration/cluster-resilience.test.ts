// The controller outlives its apiserver: on a control plane of its own (restarting the shared one
// would disturb other suites), the apiserver crashes and restarts while the controller is paused and the world
// changes, so its watches resume from a resource version the new apiserver no longer has (410 Gone).
// The controller relists and converges: every change applied, no duplicate objects or conditions.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startControlPlane, type ControlPlane } from '../cluster/controlPlane.js';
import { applyCrds, clients, conditionOf, getModel, kubectlOk, newNamespace, setAvailable, startController, waitFor, type Clients, type ClusterProcess } from '../helpers/cluster.js';

let cp: ControlPlane;
let c: Clients;
let ns: string;
let controller: ClusterProcess;

function model(name: string, env: Record<string, string> = {}): string {
  return JSON.stringify({
    apiVersion: 'prediction.predictgate.dev/v1',
    kind: 'DeployedModel',
    metadata: { name, namespace: ns },
    spec: { modelSpec: { framework: 'custom', containerSpec: { image: 'example/model:1', env: Object.entries(env).map(([n, value]) => ({ name: n, value })) } } },
  });
}

function endpoint(name: string, modelName: string): string {
  return JSON.stringify({ apiVersion: 'prediction.predictgate.dev/v1', kind: 'Endpoint', metadata: { name, namespace: ns }, spec: { destinations: [{ serviceRef: { name: modelName } }] } });
}

async function lists(): Promise<number> {
  const counts = [...(await controller.metrics()).matchAll(/^predictgate_watch_lists_total\{resource="[a-z]+"\} (\d+)$/gm)];
  // Every watched resource has its line: DeployedModels, Endpoints, Deployments, Services, HPAs.
  expect(counts).toHaveLength(5);
  return counts.reduce((s, m) => s + Number(m[1]), 0);
}

beforeAll(async () => {
  cp = await startControlPlane({ dir: mkdtempSync(join(tmpdir(), 'predictgate-cp-restart-')) });
  c = clients(cp.kubeconfig);
  await applyCrds(cp.kubeconfig);
  ns = await newNamespace(c, 'restart');
  controller = await startController([ns], { KUBECONFIG: cp.kubeconfig });
});

afterAll(async () => {
  if (controller) {
    controller.proc.child.kill('SIGCONT');
    await controller.stop();
  }
  await cp?.stop();
  if (cp) rmSync(cp.dir, { recursive: true, force: true });
});

test('after an apiserver restart and 410 Gone, the controller relists and converges without duplicates', async () => {
  const k = { kubeconfig: cp.kubeconfig };
  await kubectlOk(['apply', '-f', '-'], { ...k, input: model('a') });
  await kubectlOk(['apply', '-f', '-'], { ...k, input: endpoint('a', 'a') });
  await waitFor(async () => (await c.apps.readNamespacedDeployment({ name: 'a', namespace: ns })).metadata?.name, 'Deployment a');
  await setAvailable(c, ns, 'a', 1);
  await kubectlOk(['wait', '--for=condition=EndpointReady', '--timeout=30s', '-n', ns, 'endpoints.prediction.predictgate.dev/a'], k);
  const listsBefore = await lists();

  // Freeze the controller, change the world, restart the apiserver, thaw the controller.
  controller.proc.child.kill('SIGSTOP');
  await kubectlOk(['apply', '-f', '-'], { ...k, input: model('a', { MODEL_FLAVOUR: 'new' }) });
  await kubectlOk(['apply', '-f', '-'], { ...k, input: model('b') });
  await kubectlOk(['apply', '-f', '-'], { ...k, input: endpoint('b', 'b') });
  await cp.restartApiserver('SIGKILL'); // a crash: its connections drop at once
  controller.proc.child.kill('SIGCONT');

  // The change to a reaches its Deployment; b gets one; both Endpoints become ready.
  await waitFor(async () => {
    const d = await c.apps.readNamespacedDeployment({ name: 'a', namespace: ns });
    return d.spec?.template.spec?.containers[0].env?.some((e) => e.name === 'MODEL_FLAVOUR' && e.value === 'new');
  }, 'the changed env in Deployment a', 60_000);
  await waitFor(async () => (await c.apps.readNamespacedDeployment({ name: 'b', namespace: ns })).metadata?.name, 'Deployment b', 60_000);
  await setAvailable(c, ns, 'a', 1);
  await setAvailable(c, ns, 'b', 1);
  await kubectlOk(['wait', '--for=condition=EndpointReady', '--timeout=60s', '-n', ns, 'endpoints.prediction.predictgate.dev/a', 'endpoints.prediction.predictgate.dev/b'], k);

  expect(await lists()).toBeGreaterThan(listsBefore); // the caches relisted: their resource version had expired
  const deployments = await c.apps.listNamespacedDeployment({ namespace: ns });
  expect(deployments.items.map((d) => d.metadata?.name).sort()).toEqual(['a', 'b']);
  const services = await c.core.listNamespacedService({ namespace: ns });
  expect(services.items.map((s) => s.metadata?.name).sort()).toEqual(['a', 'b']);
  for (const name of ['a', 'b']) {
    const dm = await getModel(c, ns, name);
    expect(dm.status?.conditions?.map((x) => x.type)).toEqual(['Ready']);
    expect(conditionOf(dm, 'Ready')?.status).toBe('True');
    expect(dm.status?.observedGeneration).toBe(dm.metadata.generation);
  }
});
