// The request autoscaler on the real apiserver: the controller finds the gateway replicas through
// the EndpointSlices of the gateway's Service (GATEWAY_SERVICE), reads each one's demand at
// /stats/demand with its own token (the gateway authorises it by SubjectAccessReview, as it does
// /metrics), hears a held call at once through a read that waits for one (?heldAfter=N; the suite's
// reads are a minute apart), and, leading, writes its decision to the Deployment's scale subresource; the Deployment
// is created with the model's minimum (at least one) and no HPA is made. A model at zero is Ready
// (ScaledToZero) with no address; a call for it is held by the gateway, the controller wakes the model, and once the test plays the
// kube-controller-manager (the Deployment available) the held call is answered by the model process.
// The gateway reads the same slices (GATEWAY_SERVICE) to split a model's maxConcurrency with the
// other gateway replicas listed there.
import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../helpers/local.js';
import { freePort } from '../../src/workload/ports.js';
import { startBundledModel, startFaultyModel, stopAll, type PredictgateProcess } from '../helpers/procs.js';
import { seriesValue } from '../helpers/metrics.js';
import {
  applyCrds, clients, conditionOf, deleteNamespace, getModel, inNamespace, kubectlOk, newNamespace, setAvailable, startClusterGateway, startController, waitFor,
  type ClusterProcess, type Clients,
} from '../helpers/cluster.js';

let c: Clients;
let ns: string;
let controller: ClusterProcess;
let gateway: ClusterProcess;
let token: string;
const models: PredictgateProcess[] = [];
const NAME = 'scale-to-zero';
/** A model with maxConcurrency 2 and no queue, served by a faulty model that holds every call. */
const SHARED = 'shared';
let faulty: string;

/** The sample with periods of one second: its idle period is over before the test scales it by hand. */
const manifest = (): string => inNamespace(readFileSync(join(ROOT, 'crds/samples/scale-to-zero.yaml'), 'utf8'), ns)
  .replace(/idleScaledownPeriod: 30s/, 'idleScaledownPeriod: 1s').replace(/minScaleupPeriod: 30s/, 'minScaleupPeriod: 1s');

/** An address of this machine that an EndpointSlice may hold (the API refuses loopback ones). */
function hostAddress(): string {
  const a = Object.values(networkInterfaces()).flat().find((i) => i && i.family === 'IPv4' && !i.internal);
  if (!a) throw new Error('this machine has no IPv4 address besides loopback for the gateway\'s EndpointSlice');
  return a.address;
}

/** An EndpointSlice of the gateway's Service listing one ready gateway replica at `ip`, on the test gateway's port unless told. */
const gatewaySlice = (name: string, ip: string, port = gateway.port): Promise<string> => kubectlOk(['apply', '-n', ns, '-f', '-'], {
  input: JSON.stringify({
    apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: { name, labels: { 'kubernetes.io/service-name': 'gateway' } },
    addressType: 'IPv4', endpoints: [{ addresses: [ip], conditions: { ready: true } }], ports: [{ name: 'http', port, protocol: 'TCP' }],
  }),
});

/** The gateway's count of gateway replicas, from its /metrics. */
const gatewayReplicas = async (): Promise<number> =>
  seriesValue(await (await fetch(`http://127.0.0.1:${gateway.port}/metrics`, { headers: { authorization: `Bearer ${token}` } })).text(), 'predictgate_gateway_replicas');

const predictShared = (): Promise<Response> => fetch(`http://127.0.0.1:${gateway.port}/v1/projects/${ns}/locations/us-central1/endpoints/${SHARED}:predict`, {
  method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ instances: [1] }),
});

const heldByModel = async (): Promise<number> => ((await (await fetch(`${faulty}/calls`)).json()) as { held: number }).held;

const replicasOf = async (): Promise<number | undefined> => (await c.apps.readNamespacedDeployment({ name: NAME, namespace: ns })).spec?.replicas;

beforeAll(async () => {
  c = clients();
  token = c.kc.getCurrentUser()?.token as string;
  await applyCrds();
  ns = await newNamespace(c, 'autoscale');
  const model = await startBundledModel('half-plus-two', { AIP_DEPLOYED_MODEL_ID: NAME }, models);
  faulty = `http://127.0.0.1:${await startFaultyModel('hold', {}, models)}`;
  const ip = hostAddress();
  gateway = await startClusterGateway([ns], {
    HOST: '0.0.0.0', PREDICT_AUTH: 'kubernetes', GATEWAY_SERVICE: `${ns}/gateway`,
    UPSTREAM_RESOLVE: `${NAME}.${ns}.svc:8080=127.0.0.1:${model},${SHARED}.${ns}.svc:8080=${faulty.slice('http://'.length)}`,
  });
  // The gateway's Service and its one replica, as the EndpointSlice controller would list a gateway pod.
  await c.core.createNamespacedService({ namespace: ns, body: { metadata: { name: 'gateway' }, spec: { ports: [{ name: 'http', port: 80 }] } } });
  await gatewaySlice('gateway-1', ip);
  // Reads a minute apart: a model at zero wakes within the test's time only through the read that waits for a held call.
  controller = await startController([ns], { GATEWAY_SERVICE: `${ns}/gateway`, AUTOSCALE_INTERVAL_MS: '60000' });
  await kubectlOk(['apply', '-f', '-'], { input: manifest() });
  await waitFor(replicasOf, 'the Deployment');
  await setAvailable(c, ns, NAME, 1);
  await kubectlOk(['wait', '--for=condition=Ready', '--timeout=30s', '-n', ns, `deployedmodels.prediction.predictgate.dev/${NAME}`]);
});

afterAll(async () => {
  await gateway?.stop();
  await controller?.stop();
  await stopAll(models);
  await deleteNamespace(c, ns);
});

test('a model that scales on calls gets no HPA; its Deployment is created with one replica (minReplicaCount 0: at least one)', async () => {
  const hpas = await kubectlOk(['get', 'horizontalpodautoscalers.autoscaling', '-n', ns, '-o', 'name']);
  expect(hpas.trim()).toBe('');
  expect((await c.apps.readNamespacedDeployment({ name: NAME, namespace: ns })).spec?.replicas).toBe(1);
});

test('a Deployment the autoscaler scales is created with the model\'s minimum (2)', async () => {
  const name = 'two-at-least';
  await kubectlOk(['apply', '-f', '-'], {
    input: JSON.stringify({
      apiVersion: 'prediction.predictgate.dev/v1', kind: 'DeployedModel', metadata: { name, namespace: ns },
      spec: { modelSpec: { framework: 'custom', containerSpec: { image: 'predictgate:0.1.0' } }, dedicatedResources: { minReplicaCount: 2, maxReplicaCount: 3, autoscaling: { targetConcurrency: 1 } } },
    }),
  });
  const created = await waitFor(async () => (await c.apps.readNamespacedDeployment({ name, namespace: ns }).catch(() => undefined))?.spec?.replicas, `Deployment ${name}`);
  expect(created).toBe(2);
});

test('the gateway\'s demand is read with a token only: without one, 401', async () => {
  const anonymous = await fetch(`http://127.0.0.1:${gateway.port}/stats/demand`);
  expect(anonymous.status).toBe(401);
  const read = await fetch(`http://127.0.0.1:${gateway.port}/stats/demand`, { headers: { authorization: `Bearer ${token}` } });
  expect([read.status, typeof ((await read.json()) as { models: unknown }).models]).toEqual([200, 'object']);
});

test('at zero the model is Ready (ScaledToZero) with no address; a call waits, the controller hears of it at once (its reads are a minute apart), wakes it through the scale subresource, and the call is answered', async () => {
  await kubectlOk(['scale', '-n', ns, `deployment/${NAME}`, '--replicas=0']);
  await setAvailable(c, ns, NAME, 0);
  const atZero = await waitFor(async () => {
    const m = await getModel(c, ns, NAME);
    return conditionOf(m, 'Ready')?.reason === 'ScaledToZero' && m;
  }, 'the model at zero');
  expect([conditionOf(atZero, 'Ready')?.status, atZero.status?.address]).toEqual(['True', undefined]);

  const call = fetch(`http://127.0.0.1:${gateway.port}/v1/projects/${ns}/locations/us-central1/endpoints/${NAME}:predict`, {
    method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ instances: [1, 2, 5] }),
  });
  await waitFor(async () => (await replicasOf()) === 1, 'the controller scaling the Deployment to 1', 10_000);
  await setAvailable(c, ns, NAME, 1);
  const res = await call;
  expect([res.status, await res.json()]).toEqual([200, { predictions: [2.5, 3, 4.5], deployedModelId: NAME, modelDisplayName: 'half-plus-two', modelVersionId: '1' }]);
  const woke = await waitFor(async () => {
    const m = await getModel(c, ns, NAME);
    return m.status?.autoscaling?.lastScaleReason === 'ScaledFromZero' && m;
  }, 'the decision in the status');
  expect(woke.status?.autoscaling).toMatchObject({ desiredReplicas: 1, lastScaleMessage: '0 → 1 replicas: 1 call waiting' });
  const events = await kubectlOk(['get', 'events', '-n', ns, '--field-selector', `involvedObject.name=${NAME},reason=ScaledFromZero`, '-o', 'jsonpath={.items[*].message}']);
  expect(events).toContain('0 → 1 replicas: 1 call waiting');
});

test('a second gateway replica in the gateway\'s Service halves this one\'s share of maxConcurrency 2: the second call is refused; alone again, it goes', async () => {
  await kubectlOk(['apply', '-f', '-'], {
    input: [
      JSON.stringify({
        apiVersion: 'prediction.predictgate.dev/v1', kind: 'DeployedModel', metadata: { name: SHARED, namespace: ns },
        spec: { modelSpec: { framework: 'custom', containerSpec: { image: 'predictgate:0.1.0' } }, serving: { maxConcurrency: 2, maxQueuedCalls: 0 } },
      }),
      JSON.stringify({ apiVersion: 'prediction.predictgate.dev/v1', kind: 'Endpoint', metadata: { name: SHARED, namespace: ns }, spec: { destinations: [{ serviceRef: { kind: 'DeployedModel', name: SHARED, namespace: ns }, trafficPercentage: 100 }] } }),
    ].join('\n'),
  });
  await waitFor(async () => (await c.apps.readNamespacedDeployment({ name: SHARED, namespace: ns }).catch(() => undefined))?.spec?.replicas, `Deployment ${SHARED}`);
  await setAvailable(c, ns, SHARED, 1);
  await kubectlOk(['wait', '--for=condition=EndpointReady', '--timeout=30s', '-n', ns, `endpoints.prediction.predictgate.dev/${SHARED}`]);
  expect(await gatewayReplicas()).toBe(1);

  // Another gateway pod joins the Service: this machine's address on a port nothing listens on (the
  // controller's reads of it are refused at once; nothing leaves the machine).
  await gatewaySlice('gateway-2', hostAddress(), await freePort());
  await waitFor(async () => (await gatewayReplicas()) === 2, 'the gateway counting two gateway replicas');
  const first = predictShared();
  await waitFor(async () => (await heldByModel()) === 1, 'the first call at the model');
  const second = await predictShared();
  const refusal = (await second.json()) as { error: { message: string } };
  expect([second.status, second.headers.get('retry-after')]).toEqual([429, '1']);
  expect(refusal.error.message).toContain('as one of 2 gateway replicas');

  // It leaves: this gateway admits the whole limit again.
  await kubectlOk(['delete', 'endpointslice', '-n', ns, 'gateway-2']);
  await waitFor(async () => (await gatewayReplicas()) === 1, 'the gateway counting itself alone');
  const third = predictShared();
  await waitFor(async () => (await heldByModel()) === 2, 'the third call at the model');
  await fetch(`${faulty}/release`);
  expect([(await first).status, (await third).status]).toEqual([200, 200]);
});
