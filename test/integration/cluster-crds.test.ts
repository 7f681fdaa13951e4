// The CRDs on a real kube-apiserver, through the real kubectl: they install, every sample is a valid
// cluster manifest, `kubectl get prediction`, short names, printer columns and `kubectl explain` work,
// and bad manifests are refused with a message that says what is wrong. Local mode's validation (the
// same schema and CEL rules) refuses the same manifests; cluster-cel.test.ts compares each rule's message.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { ROOT } from '../helpers/local.js';
import { applyCrds, clients, deleteNamespace, inNamespace, kubectl, kubectlOk, newNamespace, type Clients } from '../helpers/cluster.js';
import { deployedModelProblems, endpointProblems } from '../../src/api/validation.js';
import type { DeployedModel, Endpoint } from '../../src/api/types.js';

let c: Clients;
let ns: string;

beforeAll(async () => {
  c = clients();
  await applyCrds();
  ns = await newNamespace(c, 'crds');
});

afterAll(async () => {
  await deleteNamespace(c, ns);
});

const SAMPLES = readdirSync(join(ROOT, 'crds/samples')).filter((f) => f.endsWith('.yaml'));

test('every sample is accepted by the apiserver', async () => {
  expect(SAMPLES.length).toBeGreaterThanOrEqual(4);
  for (const f of SAMPLES) {
    const yaml = inNamespace(readFileSync(join(ROOT, 'crds/samples', f), 'utf8'), ns);
    const out = await kubectlOk(['apply', '-f', '-'], { input: yaml });
    expect(out).toMatch(/created|configured|unchanged/);
  }
  const out = await kubectlOk(['get', 'prediction', '-n', ns, '-o', 'name']);
  expect(out).toContain('deployedmodel.prediction.predictgate.dev/half-plus-two');
  expect(out).toContain('endpoint.prediction.predictgate.dev/half-plus-two');
});

test('short names, printer columns and the prediction category', async () => {
  const dms = await kubectlOk(['get', 'dm', '-n', ns]);
  expect(dms.split('\n')[0].split(/\s{2,}/)).toEqual(['NAME', 'READY', 'REASON', 'DEPLOYED-MODEL-ID', 'FRAMEWORK', 'DESIRED', 'AVAILABLE', 'AGE']);
  // Priority 1 columns: only with -o wide, in their place.
  const dmsWide = await kubectlOk(['get', 'dm', '-n', ns, '-o', 'wide']);
  expect(dmsWide.split('\n')[0].split(/\s{2,}/)).toEqual(['NAME', 'READY', 'REASON', 'DEPLOYED-MODEL-ID', 'FRAMEWORK', 'DESIRED', 'AVAILABLE', 'LAST-SCALE', 'ADDRESS', 'AGE']);
  const eps = await kubectlOk(['get', 'pep', '-n', ns]);
  expect(eps.split('\n')[0].split(/\s{2,}/)).toEqual(['NAME', 'READY', 'REASON', 'TRAFFIC', 'AGE']);
  const wide = await kubectlOk(['get', 'pep', '-n', ns, '-o', 'wide']);
  expect(wide.split('\n')[0]).toContain('FQDN');
  // `endpoints` alone is the core API's; the group-qualified name reaches ours.
  const qualified = await kubectlOk(['get', 'endpoints.prediction.predictgate.dev', '-n', ns, '-o', 'name']);
  expect(qualified).toContain('endpoint.prediction.predictgate.dev/half-plus-two');
});

test('kubectl explain shows the field descriptions', async () => {
  const framework = await kubectlOk(['explain', 'deployedmodel.spec.modelSpec.framework']);
  expect(framework).toContain('tensorflow');
  expect(framework).toMatch(/Chooses how predict payloads are validated/);
  const traffic = await kubectlOk(['explain', 'pep.spec.destinations.trafficPercentage']);
  expect(traffic).toMatch(/Share of traffic in percent/);
  const primary = await kubectlOk(['explain', 'deployedmodel.status.primaryCondition']);
  expect(primary).toMatch(/DeployedModel is ready/);
});

function dm(name: string, spec: Record<string, unknown>): string {
  return JSON.stringify({ apiVersion: 'prediction.predictgate.dev/v1', kind: 'DeployedModel', metadata: { name, namespace: ns }, spec });
}
function ep(name: string, spec: Record<string, unknown>): string {
  return JSON.stringify({ apiVersion: 'prediction.predictgate.dev/v1', kind: 'Endpoint', metadata: { name, namespace: ns }, spec });
}
const MODEL_SPEC = { framework: 'custom', containerSpec: { image: 'x' } };

const INVALID: [string, string, RegExp][] = [
  ['unknown framework', dm('bad-framework', { modelSpec: { framework: 'onnx', containerSpec: { image: 'x' } } }), /spec\.modelSpec\.framework: Unsupported value: "onnx"/],
  ['min above max replicas', dm('bad-replicas', { modelSpec: MODEL_SPEC, dedicatedResources: { minReplicaCount: 3, maxReplicaCount: 2 } }), /spec\.dedicatedResources: Invalid value: minReplicaCount must not exceed maxReplicaCount/],
  ['negative replicas', dm('bad-negative', { modelSpec: MODEL_SPEC, dedicatedResources: { minReplicaCount: -1 } }), /minReplicaCount: Invalid value: -1: .*greater than or equal to 0/],
  ['missing modelSpec', dm('bad-missing', {}), /spec\.modelSpec: Required value/],
  ['unknown field', dm('bad-field', { modelSpec: { ...MODEL_SPEC, containerSpec: { image: 'x', imagee: 'y' } } }), /unknown field "spec\.modelSpec\.containerSpec\.imagee"/],
  ['graphstorm without gmlTask', dm('bad-gs', { modelSpec: { framework: 'graphstorm', containerSpec: { image: 'x' } } }), /gmlTask is required for framework graphstorm and allowed for no other framework/],
  ['gmlTask on a tensorflow model', dm('bad-gs-tf', { modelSpec: { framework: 'tensorflow', gmlTask: 'node_regression', containerSpec: { image: 'x' } } }), /gmlTask is required for framework graphstorm and allowed for no other framework/],
  ['unknown gmlTask', dm('bad-gs-task', { modelSpec: { framework: 'graphstorm', gmlTask: 'link_prediction', containerSpec: { image: 'x' } } }), /spec\.modelSpec\.gmlTask: Unsupported value: "link_prediction"/],
  ['route without slash', dm('bad-route', { modelSpec: { ...MODEL_SPEC, containerSpec: { image: 'x', predictRoute: 'predict' } } }), /predictRoute: Invalid value: "predict"/],
  ['name that cannot be a Service', dm('9lives', { modelSpec: MODEL_SPEC }), /metadata\.name: Invalid value: "9lives" must be a DNS-1035 label/],
  ['traffic not adding up to 100', ep('bad-sum', { destinations: [{ serviceRef: { name: 'a' }, trafficPercentage: 70 }, { serviceRef: { name: 'b' }, trafficPercentage: 20 }] }), /spec\.destinations: Invalid value: trafficPercentage values must add up to 100/],
  ['traffic above 100', ep('bad-pct', { destinations: [{ serviceRef: { name: 'a' }, trafficPercentage: 150 }] }), /trafficPercentage: Invalid value: 150: .*less than or equal to 100/],
  ['destination listed twice', ep('bad-dup', { destinations: [{ serviceRef: { name: 'a' }, trafficPercentage: 50 }, { serviceRef: { name: 'a' }, trafficPercentage: 50 }] }), /spec\.destinations: Invalid value: a DeployedModel is listed twice/],
  ['two destinations without percentages', ep('bad-split', { destinations: [{ serviceRef: { name: 'a' } }, { serviceRef: { name: 'b' } }] }), /each needs a trafficPercentage/],
  ['missing destinations', ep('bad-nodest', {}), /spec\.destinations: Required value/],
];

test.each(INVALID)('kubectl apply refuses a manifest with %s, and so does local mode', async (_what, manifest, message) => {
  const r = await kubectl(['apply', '-f', '-'], { input: manifest });
  expect(r.code).not.toBe(0);
  expect(r.stderr).toMatch(message);
  const obj = parse(manifest) as DeployedModel | Endpoint;
  const problems = obj.kind === 'DeployedModel' ? deployedModelProblems({ ...obj, spec: obj.spec ?? {} } as DeployedModel) : endpointProblems({ ...obj, spec: obj.spec ?? {} } as Endpoint);
  expect(problems.length).toBeGreaterThan(0);
});
