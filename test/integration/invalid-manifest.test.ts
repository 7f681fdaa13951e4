// Local mode with manifests that break a rule of the CRDs: calls to such an Endpoint (predict,
// rawPredict, explain, the GDC Host form) and TF Serving calls to such a DeployedModel answer 400
// FAILED_PRECONDITION naming the object and the rule, the same rule the status reports; fixing the
// manifest makes the Endpoint take calls again.
import { startLocal, ready, faultyYaml, endpointYaml, deployedModelYaml, post, rawRequest, type LocalHarness } from '../helpers/local.js';
import { findCondition } from '../../src/api/conditions.js';

let h: LocalHarness;

const SUM = 'endpoint bad in project default breaks a rule of its manifest: spec.destinations: trafficPercentage values must add up to 100';
const GML = 'DeployedModel tf-bad in namespace default breaks a rule of its manifest: spec.modelSpec: gmlTask is required for framework graphstorm and allowed for no other framework';
const NAME = 'DeployedModel 9lives in namespace default breaks a rule of its manifest: metadata.name: "9lives" must be a DNS-1035 label (at most 63 lowercase letters, digits or \'-\', starting with a letter and ending with a letter or digit): the model\'s Service takes this name';

beforeAll(async () => {
  const tensorflow = (name: string): string => deployedModelYaml({ name, framework: 'tensorflow', command: ['predictgate', 'model', 'half-plus-two'] });
  h = await startLocal({
    'm.yaml': `${faultyYaml('m', 'none')}---\n${endpointYaml('m', [{ model: 'm' }])}`,
    // A lone destination at 60%: the traffic rule of the CRD.
    'bad.yaml': endpointYaml('bad', [{ model: 'm', traffic: 60 }]),
    // One model named with and without its namespace: the one check no CRD rule can make.
    'twice.yaml': endpointYaml('twice', [{ model: 'm', traffic: 50 }, { model: 'm', namespace: 'default', traffic: 50 }]),
    'tf-bad.yaml': tensorflow('tf-bad').replace('framework: tensorflow', 'framework: tensorflow\n    gmlTask: node_regression'),
    '9lives.yaml': tensorflow('9lives'),
  });
  await h.until((x) => ready(x, 'Endpoint', 'default/m') && ready(x, 'Endpoint', 'default/bad', 'False') && ready(x, 'Endpoint', 'default/twice', 'False')
    && ready(x, 'DeployedModel', 'default/tf-bad', 'False') && ready(x, 'DeployedModel', 'default/9lives', 'False'), 'every object evaluated');
});

afterAll(async () => {
  await h?.stop();
});

const vertexError = (message: string): unknown => ({ error: { code: 400, message, status: 'FAILED_PRECONDITION' } });

test('the status names the rule the calls are refused with', () => {
  expect(findCondition(h.endpoint('default/bad')?.status?.conditions, 'EndpointReady')).toMatchObject({ status: 'False', reason: 'InvalidSpec', message: 'spec.destinations: trafficPercentage values must add up to 100' });
  expect(findCondition(h.model('default/tf-bad')?.status?.conditions, 'Ready')).toMatchObject({ status: 'False', reason: 'InvalidSpec', message: 'spec.modelSpec: gmlTask is required for framework graphstorm and allowed for no other framework' });
});

test.each(['predict', 'rawPredict', 'explain'])('%s on an Endpoint that breaks a rule: 400 FAILED_PRECONDITION naming it and the rule', async (verb) => {
  const r = await post(h.vertex('bad', verb), '{"instances": [1]}');
  expect([r.status, r.json()]).toEqual([400, vertexError(SUM)]);
});

test('the GDC Host form answers the same, in its dialect', async () => {
  for (const verb of ['predict', 'rawPredict']) {
    const r = await rawRequest(h.url(`/v1/model:${verb}`), Buffer.from('{"instances": [1]}'), { host: 'bad.default.predictgate.internal', 'content-type': 'application/json' });
    expect([verb, r.status, JSON.parse(r.body.toString())]).toEqual([verb, 400, { error: SUM }]);
  }
});

test('an Endpoint naming one model with and without its namespace is refused the same way', async () => {
  const r = await post(h.vertex('twice'), '{"instances": [1]}');
  expect([r.status, r.json()]).toEqual([400, vertexError('endpoint twice in project default breaks a rule of its manifest: spec.destinations: DeployedModel default/m is listed twice')]);
});

test('the TF Serving surface of a DeployedModel that breaks a rule: 400 naming it and the rule', async () => {
  const status = await fetch(h.url('/tfserving/default/tf-bad/v1/models/half_plus_two'));
  expect([status.status, await status.json()]).toEqual([400, { error: GML }]);
  const predict = await post(h.url('/tfserving/default/tf-bad/v1/models/half_plus_two:predict'), '{"instances": [1.0]}');
  expect([predict.status, predict.json()]).toEqual([400, { error: GML }]);
  const named = await post(h.url('/tfserving/default/9lives/v1/models/half_plus_two:predict'), '{"instances": [1.0]}');
  expect([named.status, named.json()]).toEqual([400, { error: NAME }]);
});

test('the Endpoint takes calls once its manifest is fixed', async () => {
  await h.write('bad.yaml', endpointYaml('bad', [{ model: 'm', traffic: 100 }]));
  await h.mode.store.reload();
  await h.until((x) => ready(x, 'Endpoint', 'default/bad'), 'the fixed Endpoint Ready');
  const r = await post(h.vertex('bad'), '{"instances": [1]}');
  expect([r.status, r.json()]).toEqual([200, { predictions: [1], deployedModelId: 'm', modelDisplayName: 'm' }]);
});
