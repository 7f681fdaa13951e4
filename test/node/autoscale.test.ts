// Scale to zero and back on real pods: the scale-to-zero sample (its periods shortened to a second)
// behind the chart's two gateway pods. With no call, the leading controller scales it to zero once it
// has watched it for a stable window (60 s): the model pod goes, the DeployedModel stays Ready
// (ScaledToZero). Then a burst of calls through the NodePort, with a caller's token: every one is held
// by the gateway that took it, the controller reads the demand of both gateway pods and scales the
// Deployment up, and every call is answered 200 by the new pod.
import { INSTALL, nodeShell, origin, pods, predictorToken, removeRelease, settled, type NodeShell } from '../helpers/rollout.js';
import { inNamespace, waitFor } from '../helpers/cluster.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../helpers/local.js';

const NS = 'predictgate-autoscale';
const NAME = 'scale-to-zero';
const CALLER = 'autoscale-caller';
const BURST = 50;

let shell: NodeShell;
let token = '';

const manifests = (): string => `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${NS}}\n---\n` + inNamespace(readFileSync(join(ROOT, 'crds/samples/scale-to-zero.yaml'), 'utf8'), NS)
  .replace(/idleScaledownPeriod: 30s/, 'idleScaledownPeriod: 1s').replace(/minScaleupPeriod: 30s/, 'minScaleupPeriod: 1s');

const modelPods = async (): Promise<number> => (await pods(shell, NS, `prediction.predictgate.dev/deployed-model=${NAME}`)).length;
const reason = async (): Promise<string | undefined> => (await shell.kube.custom.getNamespacedCustomObject({ group: 'prediction.predictgate.dev', version: 'v1', namespace: NS, plural: 'deployedmodels', name: NAME }) as { status?: { primaryCondition?: { reason?: string } } }).status?.primaryCondition?.reason;

beforeAll(async () => {
  shell = nodeShell();
  await shell.ok(INSTALL);
  await shell.ok('kubectl apply -f -', manifests());
  token = await predictorToken(shell, NS, CALLER);
  await shell.ok(`kubectl wait -n ${NS} --for=condition=Ready deployedmodels.prediction.predictgate.dev/${NAME} --timeout=3m`);
  await settled(shell, 'predictgate-system', 'app.kubernetes.io/component=gateway', 2, 'two ready gateway pods');
}, 600_000);

afterAll(async () => {
  if (!shell) return;
  try {
    await removeRelease(shell, NS);
  } finally {
    shell.close();
  }
}, 300_000);

test('without calls the model goes to zero (after the autoscaler\'s stable window): its pod goes, and it stays Ready (ScaledToZero)', async () => {
  await waitFor(async () => ((await reason()) === 'ScaledToZero' ? true : undefined), 'the model at zero', 180_000, 1000);
  await waitFor(async () => ((await modelPods()) === 0 ? true : undefined), 'the model pod to go', 120_000, 500);
  const ready = await shell.ok(`kubectl get deployedmodels.prediction.predictgate.dev/${NAME} -n ${NS} -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'`);
  expect(ready).toBe('True');
}, 320_000);

test(`a burst of ${BURST} calls at zero through both gateway pods: every one is answered 200 by the pod the controller starts`, async () => {
  const started = performance.now();
  const answers = await Promise.all(Array.from({ length: BURST }, async () => {
    const res = await fetch(`${origin()}/v1/projects/${NS}/locations/us-central1/endpoints/${NAME}:predict`, {
      method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ instances: [1, 2, 5] }),
    });
    return { status: res.status, body: await res.json(), ms: performance.now() - started };
  }));
  const failed = answers.filter((a) => a.status !== 200);
  expect(failed).toEqual([]);
  expect(answers[0].body).toMatchObject({ predictions: [2.5, 3, 4.5], deployedModelId: NAME });
  // The cold start as a caller sees it: the first answer (hold, the controller's read, scheduling, the pod's start and readiness).
  process.stderr.write(`[autoscale] ${BURST} calls at zero answered in ${Math.min(...answers.map((a) => a.ms)).toFixed(0)}..${Math.max(...answers.map((a) => a.ms)).toFixed(0)} ms\n`);
  const status = await shell.ok(`kubectl get deployedmodels.prediction.predictgate.dev/${NAME} -n ${NS} -o jsonpath={.status.autoscaling.lastScaleReason}`);
  expect(['ScaledFromZero', 'ScaledUp']).toContain(status);
}, 180_000);
