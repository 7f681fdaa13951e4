// The full chain on the real apiserver: kubectl apply, the controller reconciles, the test marks the
// Deployments available, and `predictgate gateway` (cluster mode) routes by the resources' status to
// real bundled model processes (UPSTREAM_RESOLVE points the Service addresses at them). curl gets
// predictions; availability dropping to zero gives 503 and EndpointReady=False, and back. An Endpoint
// the apiserver accepts but the controller reports InvalidSpec is refused with that rule (400). Both
// processes' /metrics pass promtool. The gateway listens on GRPC_PORT too, as the chart runs it.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../../src/workload/ports.js';
import { ROOT } from '../helpers/local.js';
import { startBundledModel, stopAll, type PredictgateProcess } from '../helpers/procs.js';
import { documentedMetrics, metricNames, promtoolCheck } from '../helpers/metrics.js';
import {
  applyCrds, clients, conditionOf, deleteNamespace, getEndpoint, inNamespace, kubectlOk, newNamespace, setAvailable, startClusterGateway, startController, waitFor,
  type ClusterProcess, type Clients,
} from '../helpers/cluster.js';

let c: Clients;
let ns: string;
let controller: ClusterProcess;
let gateway: ClusterProcess;
const models: PredictgateProcess[] = [];

const startModel = (name: string): Promise<number> => startBundledModel('half-plus-two', { AIP_DEPLOYED_MODEL_ID: name }, models);

function curl(args: string[]): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    execFile('curl', ['-sS', '-w', '\n%{http_code}', ...args], (err, stdout) => {
      if (err) return reject(err);
      const i = stdout.lastIndexOf('\n');
      resolve({ status: Number(stdout.slice(i + 1)), body: stdout.slice(0, i) });
    });
  });
}

const predictUrl = (endpoint: string): string => `http://127.0.0.1:${gateway.port}/v1/projects/${ns}/locations/us-central1/endpoints/${endpoint}:predict`;
const predict = (endpoint: string): Promise<{ status: number; body: string }> =>
  curl(['-X', 'POST', predictUrl(endpoint), '-H', 'Content-Type: application/json', '-d', '{"instances": [1.0, 2.0, 5.0]}']);

beforeAll(async () => {
  c = clients();
  await applyCrds();
  ns = await newNamespace(c, 'chain');
  const [stable, canary] = [await startModel('half-plus-two'), await startModel('half-plus-two-canary')];
  controller = await startController([ns]);
  gateway = await startClusterGateway([ns], {
    GRPC_PORT: String(await freePort()),
    UPSTREAM_RESOLVE: `half-plus-two.${ns}.svc:8080=127.0.0.1:${stable},half-plus-two-canary.${ns}.svc:8080=127.0.0.1:${canary}`,
  });
  for (const f of ['half-plus-two.yaml', 'traffic-split.yaml']) {
    await kubectlOk(['apply', '-f', '-'], { input: inNamespace(readFileSync(join(ROOT, 'crds/samples', f), 'utf8'), ns) });
  }
  for (const name of ['half-plus-two', 'half-plus-two-canary']) {
    await waitFor(async () => (await c.apps.readNamespacedDeployment({ name, namespace: ns })).metadata?.name, `Deployment ${name}`);
    await setAvailable(c, ns, name, 1);
  }
  await kubectlOk(['wait', '--for=condition=EndpointReady', '--timeout=30s', '-n', ns, 'endpoints.prediction.predictgate.dev/half-plus-two', 'endpoints.prediction.predictgate.dev/half-plus-two-split']);
});

afterAll(async () => {
  await gateway?.stop();
  await controller?.stop();
  await stopAll(models);
  await deleteNamespace(c, ns);
});

test('the cluster gateway is ready once its caches are filled', async () => {
  const res = await fetch(`http://127.0.0.1:${gateway.port}/readyz`);
  expect([res.status, await res.json()]).toEqual([200, { status: 'ready' }]);
});

test('curl predict through the cluster gateway returns the predictions and the deployedModelId', async () => {
  const res = await waitFor(async () => {
    const r = await predict('half-plus-two');
    return r.status === 200 && r;
  }, 'a 200 from the gateway');
  expect(JSON.parse(res.body)).toEqual({ predictions: [2.5, 3.0, 4.5], deployedModelId: 'half-plus-two', modelDisplayName: 'half-plus-two', modelVersionId: '1' });
});

test('the GDC form finds the Endpoint by its FQDN from the status', async () => {
  const ep = await getEndpoint(c, ns, 'half-plus-two');
  const res = await curl(['-X', 'POST', `http://127.0.0.1:${gateway.port}/v1/model:predict`, '-H', `Host: ${ep.status!.endpointFQDN!}`, '-H', 'Content-Type: application/json', '-d', '{"instances": [4]}']);
  expect([res.status, JSON.parse(res.body)]).toEqual([200, { predictions: [4], deployedModelId: 'half-plus-two', modelDisplayName: 'half-plus-two', modelVersionId: '1' }]);
});

test('the 80/20 Endpoint sends calls to both deployed models', async () => {
  const seen = new Map<string, string>();
  for (let i = 0; i < 100 && seen.size < 2; i++) {
    const r = await predict('half-plus-two-split');
    expect(r.status).toBe(200);
    const body = JSON.parse(r.body) as { deployedModelId: string; modelVersionId: string };
    seen.set(body.deployedModelId, body.modelVersionId);
  }
  expect(Object.fromEntries(seen)).toEqual({ 'half-plus-two': '1', 'half-plus-two-canary': '2' });
});

test('an Endpoint the controller reports InvalidSpec is refused with its rule, on both forms', async () => {
  // One model named with and without its namespace: no CRD rule can see that, so the apiserver takes it.
  const twice = { apiVersion: 'prediction.predictgate.dev/v1', kind: 'Endpoint', metadata: { name: 'twice', namespace: ns },
    spec: { destinations: [{ serviceRef: { name: 'half-plus-two' }, trafficPercentage: 50 }, { serviceRef: { name: 'half-plus-two', namespace: ns }, trafficPercentage: 50 }] } };
  await kubectlOk(['apply', '-f', '-'], { input: JSON.stringify(twice) });
  const rule = `spec.destinations: DeployedModel ${ns}/half-plus-two is listed twice`;
  const ep = await waitFor(async () => {
    const e = await getEndpoint(c, ns, 'twice');
    return conditionOf(e, 'EndpointReady')?.reason === 'InvalidSpec' && e;
  }, 'EndpointReady=False InvalidSpec');
  expect(conditionOf(ep, 'EndpointReady')).toMatchObject({ status: 'False', reason: 'InvalidSpec', message: rule });
  const message = `endpoint twice in project ${ns} breaks a rule of its manifest: ${rule}`;
  const vertex = await waitFor(async () => {
    const r = await predict('twice');
    return r.status !== 404 && r;
  }, 'the gateway to see Endpoint twice');
  expect([vertex.status, JSON.parse(vertex.body)]).toEqual([400, { error: { code: 400, message, status: 'FAILED_PRECONDITION' } }]);
  const gdc = await curl(['-X', 'POST', `http://127.0.0.1:${gateway.port}/v1/model:predict`, '-H', `Host: ${ep.status!.endpointFQDN!}`, '-H', 'Content-Type: application/json', '-d', '{"instances": [4]}']);
  expect([gdc.status, JSON.parse(gdc.body)]).toEqual([400, { error: message }]);
  await kubectlOk(['delete', 'endpoints.prediction.predictgate.dev', 'twice', '-n', ns]);
});

test('no available replica: 503 and EndpointReady=False; available again: 200', async () => {
  await setAvailable(c, ns, 'half-plus-two', 0);
  const down = await waitFor(async () => {
    const r = await predict('half-plus-two');
    return r.status === 503 && r;
  }, 'a 503 from the gateway');
  // The message says why the model takes no call: its Ready condition's message.
  expect(JSON.parse(down.body)).toEqual({ error: { code: 503, status: 'UNAVAILABLE', message: expect.stringMatching(/^endpoint half-plus-two has no Ready deployed model with traffic \(deployed models: half-plus-two; half-plus-two is not Ready: 0 of \d+ replicas available \(MinimumReplicasUnavailable: Deployment does not have minimum availability\.\)\)$/) } });
  // The gateway acts on the model's status; the Endpoint's own status follows it a moment later.
  const ep = await waitFor(async () => {
    const e = await getEndpoint(c, ns, 'half-plus-two');
    return conditionOf(e, 'EndpointReady')?.status === 'False' && e;
  }, 'EndpointReady=False');
  expect(conditionOf(ep, 'EndpointReady')).toMatchObject({ status: 'False', reason: 'DeployedModelNotReady' });
  // The split Endpoint still serves, from the canary alone.
  const split = await predict('half-plus-two-split');
  expect([split.status, JSON.parse(split.body)]).toEqual([200, { predictions: [2.5, 3.0, 4.5], deployedModelId: 'half-plus-two-canary', modelDisplayName: 'half-plus-two', modelVersionId: '2' }]);

  await setAvailable(c, ns, 'half-plus-two', 1);
  const up = await waitFor(async () => {
    const r = await predict('half-plus-two');
    return r.status === 200 && r;
  }, 'a 200 again');
  expect(JSON.parse(up.body)).toEqual({ predictions: [2.5, 3.0, 4.5], deployedModelId: 'half-plus-two', modelDisplayName: 'half-plus-two', modelVersionId: '1' });
});

test('the gateway\'s and the controller\'s scrapes pass promtool and hold exactly the metrics docs/metrics.md lists', async () => {
  const gatewayText = await gateway.metrics();
  const controllerText = await controller.metrics();
  expect(await promtoolCheck(gatewayText)).toEqual({ code: 0, output: '' });
  expect(await promtoolCheck(controllerText)).toEqual({ code: 0, output: '' });
  expect(metricNames(gatewayText)).toEqual([...documentedMetrics('Gateway'), ...documentedMetrics('Process')].sort());
  expect(metricNames(controllerText)).toEqual([...documentedMetrics('Controller'), ...documentedMetrics('Process')].sort());
  // The calls above, labelled by the Endpoint and the deployed model with their namespaces.
  expect(gatewayText).toMatch(new RegExp(`^predictgate_requests_total\\{endpoint_namespace="${ns}",endpoint="half-plus-two",deployed_model_namespace="${ns}",deployed_model="half-plus-two",method="predict",code="200"\\} \\d+$`, 'm'));
  expect(gatewayText).toMatch(new RegExp(`^predictgate_upstream_duration_seconds_count\\{deployed_model_namespace="${ns}",deployed_model="half-plus-two-canary"\\} \\d+$`, 'm'));
  // Each watched resource has its counters: the gateway watches the predictgate resources and the
  // EndpointSlices of their Services, the controller their children.
  const resources = (text: string) => [...text.matchAll(/^predictgate_watch_lists_total\{resource="([a-z]+)"\} [1-9]\d*$/gm)].map((m) => m[1]).sort();
  expect(resources(gatewayText)).toEqual(['deployedmodels', 'endpoints', 'endpointslices']);
  expect(resources(controllerText)).toEqual(['deployedmodels', 'deployments', 'endpoints', 'horizontalpodautoscalers', 'services']);
});
