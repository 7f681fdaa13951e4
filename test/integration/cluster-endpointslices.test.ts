// The cluster gateway routes to a model's pods from its Service's EndpointSlices, on the real
// apiserver. This tier has no endpointslice controller, so the test writes the slices as that
// controller would (labels, `http` port, ready and terminating conditions), each pointing at a
// real bundled model process on loopback: half-plus-two behind the Service address, echo (serving
// the same route, it answers rawPredict with the request itself) as a "pod", so every answer says
// who served it. The apiserver refuses loopback
// endpoint addresses, so the slices name a documentation address (192.0.2.1) that UPSTREAM_RESOLVE
// maps to loopback, as it maps the Service address. A slice's endpoint turning
// terminating or unready stops new calls to it at once; with no slice, the Service address is used.
import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { join } from 'node:path';
import { ROOT } from '../helpers/local.js';
import { startBundledModel, stopAll, type PredictgateProcess } from '../helpers/procs.js';
import {
  applyCrds, clients, deleteNamespace, inNamespace, kubectlOk, newNamespace, setAvailable, startClusterGateway, startController, waitFor,
  type ClusterProcess, type Clients,
} from '../helpers/cluster.js';

let c: Clients;
let ns: string;
let controller: ClusterProcess;
let gateway: ClusterProcess;
let halfPlusTwo: number;
let echo: number;
const models: PredictgateProcess[] = [];

const ROUTE = '/v1/models/half_plus_two:predict';
const INSTANCES = [1.0, 2.0, 5.0];
/** The rawPredict answers of the two processes: half-plus-two's predictions, echo's own request. */
const BY_SERVICE = { status: 200, body: { predictions: [2.5, 3.0, 4.5] } };
const BY_POD = { status: 200, body: { instances: INSTANCES } };

const startModel = (kind: string): Promise<number> => startBundledModel(kind, { AIP_PREDICT_ROUTE: ROUTE, AIP_DEPLOYED_MODEL_ID: 'half-plus-two' }, models);

/** A rawPredict call (the answer's bytes are the model's own): its status and body. */
async function predict(): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`http://127.0.0.1:${gateway.port}/v1/projects/${ns}/locations/us-central1/endpoints/half-plus-two:rawPredict`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ instances: INSTANCES }),
  });
  // Parsed here, so that the objects are this test's own (fetch's json() makes another realm's).
  return { status: res.status, body: JSON.parse(await res.text()) as unknown };
}

/** Waits until a call answers `expected`, then requires 20 more calls in a row to answer the same. */
async function settlesOn(expected: Awaited<ReturnType<typeof predict>>, what: string): Promise<void> {
  let last: unknown;
  await waitFor(async () => isDeepStrictEqual((last = await predict()), expected), what).catch((err: Error) => {
    throw new Error(`${err.message}; the last answer: ${JSON.stringify(last)}`);
  });
  for (let i = 0; i < 20; i++) expect(await predict()).toEqual(expected);
}

/** An EndpointSlice of the Service half-plus-two, as the endpointslice controller writes one. */
function slice(name: string, port: number, conditions: { ready: boolean; serving: boolean; terminating: boolean }): string {
  return JSON.stringify({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name,
      namespace: ns,
      labels: { 'kubernetes.io/service-name': 'half-plus-two', 'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io', 'app.kubernetes.io/managed-by': 'predictgate' },
    },
    addressType: 'IPv4',
    endpoints: [{ addresses: [POD_IP], conditions }],
    ports: [{ name: 'http', port, protocol: 'TCP' }],
  });
}

const READY = { ready: true, serving: true, terminating: false };
const POD_IP = '192.0.2.1';

beforeAll(async () => {
  c = clients();
  await applyCrds();
  ns = await newNamespace(c, 'slices');
  [halfPlusTwo, echo] = [await startModel('half-plus-two'), await startModel('echo')];
  controller = await startController([ns]);
  gateway = await startClusterGateway([ns], {
    UPSTREAM_RESOLVE: [`half-plus-two.${ns}.svc:8080=127.0.0.1:${halfPlusTwo}`, ...[halfPlusTwo, echo].map((p) => `${POD_IP}:${p}=127.0.0.1:${p}`)].join(','),
  });
  await kubectlOk(['apply', '-f', '-'], { input: inNamespace(readFileSync(join(ROOT, 'crds/samples/half-plus-two.yaml'), 'utf8'), ns) });
  await waitFor(async () => (await c.apps.readNamespacedDeployment({ name: 'half-plus-two', namespace: ns })).metadata?.name, 'Deployment half-plus-two');
  await setAvailable(c, ns, 'half-plus-two', 1);
  await kubectlOk(['wait', '--for=condition=EndpointReady', '--timeout=30s', '-n', ns, 'endpoints.prediction.predictgate.dev/half-plus-two']);
});

afterAll(async () => {
  await gateway?.stop();
  await controller?.stop();
  await stopAll(models);
  await deleteNamespace(c, ns);
});

test('with no EndpointSlice of its Service the gateway calls the Service address', async () => {
  await settlesOn(BY_SERVICE, 'answers through the Service address');
});

test('a slice\'s ready endpoint takes the calls; one turning terminating gets no new call; none ready is 503; slices gone, the Service address again', async () => {
  await kubectlOk(['apply', '-f', '-'], { input: slice('half-plus-two-pod', echo, READY) });
  await settlesOn(BY_POD, 'answers from the pod of the slice');

  // A second slice (the Service's endpoints may span several) with the half-plus-two process as
  // its pod; then the echo pod turns terminating, as it does the moment its deletion starts.
  await kubectlOk(['apply', '-f', '-'], { input: slice('half-plus-two-other', halfPlusTwo, READY) });
  await kubectlOk(['apply', '-f', '-'], { input: slice('half-plus-two-pod', echo, { ready: false, serving: true, terminating: true }) });
  await settlesOn(BY_SERVICE, 'only the pod that is not terminating');

  // The last pod unready (its readiness probe failing): no replica takes calls.
  await kubectlOk(['apply', '-f', '-'], { input: slice('half-plus-two-other', halfPlusTwo, { ready: false, serving: false, terminating: false }) });
  await settlesOn({
    status: 503,
    body: { error: { code: 503, status: 'UNAVAILABLE', message: 'endpoint half-plus-two has no Ready deployed model with traffic (deployed models: half-plus-two; half-plus-two is Ready, but none of its replicas is ready to take calls)' } },
  }, 'no ready pod: 503');

  await kubectlOk(['delete', 'endpointslices.discovery.k8s.io', '-n', ns, 'half-plus-two-pod', 'half-plus-two-other']);
  await settlesOn(BY_SERVICE, 'the Service address again');
});

test('slices without the controller\'s label are not watched', async () => {
  // The same Service name, pointing at the echo process, but not labelled as the controller's.
  const foreign = JSON.parse(slice('someone-else', echo, READY)) as { metadata: { labels: Record<string, string> } };
  delete foreign.metadata.labels['app.kubernetes.io/managed-by'];
  await kubectlOk(['apply', '-f', '-'], { input: JSON.stringify(foreign) });
  // Then a slice of the controller's (half-plus-two): the watch delivers events in order, so once
  // it is seen the other one would have been too, and would take about half of the calls.
  await kubectlOk(['apply', '-f', '-'], { input: slice('half-plus-two-own', halfPlusTwo, READY) });
  try {
    await settlesOn(BY_SERVICE, 'only the labelled slice');
  } finally {
    await kubectlOk(['delete', 'endpointslices.discovery.k8s.io', '-n', ns, 'someone-else', 'half-plus-two-own']);
  }
});
