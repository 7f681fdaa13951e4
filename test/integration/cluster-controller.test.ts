// `predictgate controller` as a process against the real apiserver, in its own namespaces. The test
// plays kube-controller-manager (it marks Deployments available). Checks the reference commands'
// output shapes, the children and their owner references, not-ready reasons, tenancy, Events, deletion,
// and that a resync of an unchanged world writes nothing.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ROOT } from '../helpers/local.js';
import {
  applyCrds, clients, conditionOf, deleteNamespace, getEndpoint, getModel, inNamespace, kubectl, kubectlOk, newNamespace, setAvailable, startController, waitFor,
  type ClusterProcess, type Clients,
} from '../helpers/cluster.js';

let c: Clients;
let ns: string;
let other: string;
let controller: ClusterProcess;
let dir: string;

const sample = (name: string): string => readFileSync(join(ROOT, 'crds/samples', name), 'utf8');
/** The sample split into one file per object, moved to the test namespace (the reference commands use `-f dm.yaml`). */
function writeObjects(file: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const doc of parseAllDocuments(inNamespace(sample(file), ns))) {
    const o = doc.toJS() as { kind: string; metadata: { name: string } };
    const path = join(dir, `${o.kind}-${o.metadata.name}.yaml`);
    writeFileSync(path, doc.toString());
    out[`${o.kind}/${o.metadata.name}`] = path;
  }
  return out;
}

beforeAll(async () => {
  c = clients();
  await applyCrds();
  ns = await newNamespace(c, 'ctl');
  other = await newNamespace(c, 'ctl-other');
  dir = mkdtempSync(join(tmpdir(), 'predictgate-ctl-'));
  controller = await startController([ns, other], { RESYNC_SECONDS: '1' });
});

afterAll(async () => {
  await controller?.stop();
  await deleteNamespace(c, ns);
  await deleteNamespace(c, other);
  rmSync(dir, { recursive: true, force: true });
});

test('a sample goes Ready and EndpointReady, printed in the reference shapes', async () => {
  const files = writeObjects('half-plus-two.yaml');
  await kubectlOk(['apply', '-f', files['DeployedModel/half-plus-two']]);
  await kubectlOk(['apply', '-f', files['Endpoint/half-plus-two']]);

  // Before the Deployment is available: Progressing, and the Endpoint names the model that blocks.
  const progressing = await waitFor(async () => {
    const dm = await getModel(c, ns, 'half-plus-two');
    return dm.status?.primaryCondition?.reason === 'Progressing' && dm;
  }, 'DeployedModel Progressing');
  expect(conditionOf(progressing, 'Ready')).toMatchObject({ status: 'False', reason: 'Progressing' });
  const blocked = await waitFor(async () => {
    const ep = await getEndpoint(c, ns, 'half-plus-two');
    return conditionOf(ep, 'EndpointReady')?.reason === 'DeployedModelNotReady' && ep;
  }, 'Endpoint blocked');
  expect(conditionOf(blocked, 'EndpointReady')).toMatchObject({ status: 'False', message: expect.stringContaining(`DeployedModel ${ns}/half-plus-two is not ready`) });

  await setAvailable(c, ns, 'half-plus-two', 1);
  await kubectlOk(['wait', '--for=condition=Ready', '--timeout=30s', '-f', files['DeployedModel/half-plus-two']]);
  await kubectlOk(['wait', '--for=condition=EndpointReady', '--timeout=30s', '-f', files['Endpoint/half-plus-two']]);

  const primary = JSON.parse(await kubectlOk(['get', '-f', files['DeployedModel/half-plus-two'], '-o', 'jsonpath={.status.primaryCondition}'])) as Record<string, unknown>;
  expect(Object.keys(primary).sort()).toEqual(['firstObservedTime', 'lastUpdateTime', 'message', 'observedGeneration', 'reason', 'resourceName', 'type']);
  expect(primary).toMatchObject({ message: 'DeployedModel is ready', observedGeneration: 1, reason: 'Ready', resourceName: 'half-plus-two', type: 'DeployedModel' });
  expect(primary.firstObservedTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  expect(primary.firstObservedTime).toBe(progressing.status!.primaryCondition!.firstObservedTime); // fixed at first observation
  expect(Date.parse(primary.lastUpdateTime as string)).toBeGreaterThanOrEqual(Date.parse(primary.firstObservedTime as string));

  const ready = JSON.parse(await kubectlOk(['get', '-f', files['Endpoint/half-plus-two'], '-o', 'jsonpath={$.status.conditions[?(@.type == "EndpointReady")]}'])) as Record<string, unknown>;
  expect(Object.keys(ready).sort()).toEqual(['lastTransitionTime', 'message', 'observedGeneration', 'reason', 'status', 'type']);
  expect(ready).toMatchObject({ message: 'Endpoint Ready', observedGeneration: 1, reason: 'ResourceReady', status: 'True', type: 'EndpointReady' });

  const ep = await getEndpoint(c, ns, 'half-plus-two');
  expect(ep.status).toMatchObject({ endpointFQDN: `half-plus-two.${ns}.predictgate.internal`, trafficSplit: { 'half-plus-two': 100 }, observedGeneration: 1 });
  const dm = await getModel(c, ns, 'half-plus-two');
  expect(dm.status).toMatchObject({ deployedModelId: 'half-plus-two', address: `http://half-plus-two.${ns}.svc:8080`, replicas: 1, readyReplicas: 1, observedGeneration: 1 });

  const events = await kubectlOk(['get', 'events', '-n', ns, '-o', 'jsonpath={range .items[*]}{.involvedObject.kind}/{.reason}{"\\n"}{end}']);
  expect(events).toContain('DeployedModel/Ready');
  expect(events).toContain('Endpoint/ResourceReady');
});

test('the Deployment and Service carry the container contract, the probe and owner references', async () => {
  const dm = await getModel(c, ns, 'half-plus-two');
  const d = await c.apps.readNamespacedDeployment({ name: 'half-plus-two', namespace: ns });
  const owner = d.metadata?.ownerReferences?.[0];
  expect(owner).toMatchObject({ apiVersion: 'prediction.predictgate.dev/v1', kind: 'DeployedModel', name: 'half-plus-two', uid: dm.metadata.uid, controller: true, blockOwnerDeletion: true });
  expect(d.spec?.replicas).toBe(1);
  // Applied once: the Endpoint (applied right after the model) was there before the Deployment was created.
  expect(d.metadata?.generation).toBe(1);
  const container = d.spec!.template.spec!.containers[0];
  expect(container.image).toBe('predictgate:0.1.0');
  expect(container.command).toEqual(['predictgate', 'model', 'half-plus-two']);
  expect(Object.fromEntries((container.env ?? []).map((e) => [e.name, e.value]))).toEqual({
    AIP_MODE: 'PREDICTION',
    AIP_HTTP_PORT: '8080',
    AIP_PREDICT_ROUTE: '/v1/models/half_plus_two:predict',
    AIP_HEALTH_ROUTE: '/v1/models/half_plus_two',
    AIP_DEPLOYED_MODEL_ID: 'half-plus-two',
    AIP_ENDPOINT_ID: 'half-plus-two',
  });
  expect(container.readinessProbe?.httpGet).toMatchObject({ path: '/v1/models/half_plus_two', port: 'http' });
  // The kubelet's sleep action, as the API server stored it (it validates the field).
  expect(container.lifecycle?.preStop?.sleep?.seconds).toBe(10);
  const svc = await c.core.readNamespacedService({ name: 'half-plus-two', namespace: ns });
  expect(svc.metadata?.ownerReferences?.[0]?.uid).toBe(dm.metadata.uid);
  expect(svc.spec?.ports?.[0]).toMatchObject({ port: 8080, targetPort: 'http' });
  expect(svc.spec?.selector).toEqual(d.spec?.selector?.matchLabels);
  const managed = d.metadata?.managedFields?.map((f) => f.manager);
  expect(managed).toContain('predictgate');
});

test('a resync of an unchanged world writes nothing', async () => {
  const before = await Promise.all([getModel(c, ns, 'half-plus-two'), getEndpoint(c, ns, 'half-plus-two'), c.apps.readNamespacedDeployment({ name: 'half-plus-two', namespace: ns })]);
  const reconciles = async (): Promise<number> => {
    const text = await controller.metrics();
    return [...text.matchAll(/^predictgate_reconcile_total\{controller="deployedmodel",result="success"\} (\d+)/gm)].reduce((s, m) => s + Number(m[1]), 0);
  };
  const start = await reconciles();
  await waitFor(async () => (await reconciles()) >= start + 3, 'three more resyncs (RESYNC_SECONDS=1)');
  const after = await Promise.all([getModel(c, ns, 'half-plus-two'), getEndpoint(c, ns, 'half-plus-two'), c.apps.readNamespacedDeployment({ name: 'half-plus-two', namespace: ns })]);
  expect(after.map((o) => o.metadata?.resourceVersion)).toEqual(before.map((o) => o.metadata?.resourceVersion));
});

test('unavailable replicas turn Ready and EndpointReady False with reasons, and back', async () => {
  await setAvailable(c, ns, 'half-plus-two', 0);
  const dm = await waitFor(async () => {
    const m = await getModel(c, ns, 'half-plus-two');
    return conditionOf(m, 'Ready')?.status === 'False' && m;
  }, 'Ready=False');
  expect(dm.status?.primaryCondition).toMatchObject({ reason: 'Unavailable', message: expect.stringContaining('0 of 1 replicas available') });
  await kubectlOk(['wait', '--for=condition=EndpointReady=False', '--timeout=30s', '-n', ns, 'endpoints.prediction.predictgate.dev/half-plus-two']);
  await setAvailable(c, ns, 'half-plus-two', 1);
  await kubectlOk(['wait', '--for=condition=EndpointReady', '--timeout=30s', '-n', ns, 'endpoints.prediction.predictgate.dev/half-plus-two']);
  const back = await getModel(c, ns, 'half-plus-two');
  expect(back.status?.primaryCondition?.reason).toBe('Ready');
  expect(back.status?.primaryCondition?.firstObservedTime).toBe(dm.status?.primaryCondition?.firstObservedTime);
});

test('a spec change rolls the Deployment; autoscaling adds and removes an HPA', async () => {
  await kubectlOk(['patch', 'dm', 'half-plus-two', '-n', ns, '--type=merge', '-p', '{"spec":{"dedicatedResources":{"minReplicaCount":3,"maxReplicaCount":3}}}']);
  await waitFor(async () => (await c.apps.readNamespacedDeployment({ name: 'half-plus-two', namespace: ns })).spec?.replicas === 3, '3 replicas');
  await kubectlOk(['patch', 'dm', 'half-plus-two', '-n', ns, '--type=merge', '-p', '{"spec":{"dedicatedResources":{"minReplicaCount":2,"maxReplicaCount":5,"autoscaling":{"targetCPUUtilizationPercentage":70}}}}']);
  const hpa = await waitFor(async () => (await kubectlOk(['get', 'hpa', 'half-plus-two', '-n', ns, '-o', 'json']).catch(() => '')) || undefined, 'the HPA');
  const h = JSON.parse(hpa) as { spec: Record<string, any>; metadata: { ownerReferences: { kind: string }[] } };
  expect(h.spec).toMatchObject({ minReplicas: 2, maxReplicas: 5, scaleTargetRef: { kind: 'Deployment', name: 'half-plus-two' } });
  expect(h.spec.metrics[0].resource.target.averageUtilization).toBe(70);
  expect(h.metadata.ownerReferences[0].kind).toBe('DeployedModel');
  const dm = await waitFor(async () => {
    const m = await getModel(c, ns, 'half-plus-two');
    return m.status?.observedGeneration === 3 && m;
  }, 'generation 3 observed');
  expect(dm.status?.primaryCondition?.observedGeneration).toBe(3);
  // The HPA takes the count over from 3: the handover keeps it (dropping the field would reset it to 1).
  const handed = await c.apps.readNamespacedDeployment({ name: 'half-plus-two', namespace: ns });
  expect(handed.spec?.replicas).toBe(3);
  expect(handed.metadata?.managedFields?.find((f) => f.manager === 'predictgate')?.fieldsV1).not.toHaveProperty(['f:spec', 'f:replicas']);

  await kubectlOk(['patch', 'dm', 'half-plus-two', '-n', ns, '--type=merge', '-p', '{"spec":{"dedicatedResources":{"minReplicaCount":1,"maxReplicaCount":1}}}']);
  await waitFor(async () => (await kubectl(['get', 'hpa', 'half-plus-two', '-n', ns])).code !== 0, 'the HPA to go');
  const d = await waitFor(async () => {
    const x = await c.apps.readNamespacedDeployment({ name: 'half-plus-two', namespace: ns });
    return x.spec?.replicas === 1 && x;
  }, 'replicas back to 1');
  expect(d.metadata?.generation).toBeGreaterThan(1);
  await setAvailable(c, ns, 'half-plus-two', 1);
  await kubectlOk(['wait', '--for=condition=Ready', '--timeout=30s', '-n', ns, 'dm/half-plus-two']);
});

test('an Endpoint names a missing model, a refused cross-namespace model, then an allowed one', async () => {
  const endpoint = (name: string, model: string, modelNs: string): string =>
    JSON.stringify({ apiVersion: 'prediction.predictgate.dev/v1', kind: 'Endpoint', metadata: { name, namespace: other }, spec: { destinations: [{ serviceRef: { kind: 'DeployedModel', name: model, namespace: modelNs } }] } });
  await kubectlOk(['apply', '-f', '-'], { input: endpoint('missing', 'nope', other) });
  const missing = await waitFor(async () => {
    const e = await getEndpoint(c, other, 'missing');
    return conditionOf(e, 'EndpointReady') && e;
  }, 'status of the Endpoint with a missing model');
  expect(conditionOf(missing, 'EndpointReady')).toMatchObject({ status: 'False', reason: 'DeployedModelNotFound', message: `DeployedModel ${other}/nope does not exist` });

  await kubectlOk(['apply', '-f', '-'], { input: endpoint('borrow', 'half-plus-two', ns) });
  const refused = await waitFor(async () => {
    const e = await getEndpoint(c, other, 'borrow');
    return conditionOf(e, 'EndpointReady') && e;
  }, 'status of the borrowing Endpoint');
  expect(conditionOf(refused, 'EndpointReady')).toMatchObject({ status: 'False', reason: 'CrossNamespaceRefused' });
  expect(refused.status?.trafficSplit).toEqual({});

  await kubectlOk(['patch', 'dm', 'half-plus-two', '-n', ns, '--type=merge', '-p', JSON.stringify({ spec: { allowedNamespaces: [other] } })]);
  await kubectlOk(['wait', '--for=condition=EndpointReady', '--timeout=30s', '-n', other, 'endpoints.prediction.predictgate.dev/borrow']);
  expect((await getEndpoint(c, other, 'borrow')).status?.trafficSplit).toEqual({ 'half-plus-two': 100 });
});

test('deleting a DeployedModel removes its children and its Endpoint goes not-ready', async () => {
  const files = writeObjects('echo.yaml');
  await kubectlOk(['apply', '-f', files['DeployedModel/echo'], '-f', files['Endpoint/echo']]);
  await waitFor(async () => (await c.apps.readNamespacedDeployment({ name: 'echo', namespace: ns })).metadata?.name, 'the echo Deployment');
  await setAvailable(c, ns, 'echo', 1);
  await kubectlOk(['wait', '--for=condition=EndpointReady', '--timeout=30s', '-f', files['Endpoint/echo']]);

  await kubectlOk(['delete', '-f', files['DeployedModel/echo']]);
  await kubectlOk(['wait', '--for=condition=EndpointReady=False', '--timeout=30s', '-f', files['Endpoint/echo']]);
  const ep = await getEndpoint(c, ns, 'echo');
  expect(conditionOf(ep, 'EndpointReady')).toMatchObject({ reason: 'DeployedModelNotFound' });
  await waitFor(async () => (await kubectl(['get', 'deployment/echo', '-n', ns])).code !== 0 && (await kubectl(['get', 'service/echo', '-n', ns])).code !== 0, 'children deleted');
  const warnings = await kubectlOk(['get', 'events', '-n', ns, '--field-selector', 'involvedObject.name=echo,type=Warning', '-o', 'jsonpath={.items[*].reason}']);
  expect(warnings).toContain('DeployedModelNotFound');
});
