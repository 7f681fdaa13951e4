// The CEL rule evaluator (src/api/cel.ts) on small schemas: rules run where they are declared and
// for every value there, values typed by the schema, property names escaped as the apiserver does,
// fieldPath, messageExpression and the default message, transition rules left out; and the CRDs'
// own rules through local validation (cluster-cel.test.ts compares those with the real apiserver).
import { checkRules, compileRules, escapeName } from '../../src/api/cel.js';
import { deployedModelProblems, endpointProblems } from '../../src/api/validation.js';
import type { DeployedModel, Endpoint } from '../../src/api/types.js';

type Rule = { rule: string; message?: string; messageExpression?: string; fieldPath?: string };
const obj = (properties: Record<string, unknown>, rules: Rule[] = [], extra: Record<string, unknown> = {}): Record<string, unknown> =>
  ({ type: 'object', properties, 'x-kubernetes-validations': rules, ...extra });
const check = (schema: Record<string, unknown>, value: unknown): { path: string; message: string }[] =>
  checkRules(compileRules(schema, false), value).map(({ path, message }) => ({ path, message }));

describe('where rules run', () => {
  test('at their position, for each list item and map value, with the field path of the value', () => {
    const even = { type: 'integer', 'x-kubernetes-validations': [{ rule: 'self % 2 == 0', message: 'must be even' }] };
    const schema = obj({ list: { type: 'array', items: even }, map: { type: 'object', additionalProperties: even }, one: obj({ n: even }) });
    expect(check(schema, { list: [2, 3, 4, 5], map: { a: 1, b: 2 }, one: { n: 7 } })).toEqual([
      { path: 'list[1]', message: 'must be even' },
      { path: 'list[3]', message: 'must be even' },
      { path: 'map[a]', message: 'must be even' },
      { path: 'one.n', message: 'must be even' },
    ]);
  });

  test('absent and null values are not validated (a rule on the parent checks presence)', () => {
    const schema = obj({ s: { type: 'string', nullable: true, 'x-kubernetes-validations': [{ rule: 'false' }] } });
    expect(check(schema, {})).toEqual([]);
    expect(check(schema, { s: null })).toEqual([]);
    expect(check(schema, { s: 'x' })).toEqual([{ path: 's', message: 'failed rule: false' }]);
  });

  test('rules naming oldSelf (transition rules) are the apiserver\'s alone', () => {
    expect(check(obj({ n: { type: 'integer' } }, [{ rule: 'self.n == oldSelf.n', message: 'immutable' }]), { n: 1 })).toEqual([]);
  });
});

describe('values as the apiserver types them', () => {
  test('integer fields are ints and number fields doubles, whatever the JSON spelled; untyped integers are ints', () => {
    const schema = obj({ i: { type: 'integer' }, d: { type: 'number' }, any: { 'x-kubernetes-int-or-string': true }, untyped: {} },
      [{ rule: 'type(self.i) == int && type(self.d) == double && type(self.any) == int && type(self.untyped) == double', message: 'typed' }]);
    expect(check(schema, { i: 3, d: 3, any: 3, untyped: 3.5 })).toEqual([]);
    expect(check(schema, { i: 3, d: 3, any: 3, untyped: 3 })).toEqual([{ path: '', message: 'typed' }]);
  });

  test('property names are escaped (reserved words, dashes, dots, double underscores); map keys are not', () => {
    expect([escapeName('namespace'), escapeName('a-b.c/d'), escapeName('x__y'), escapeName('plain'), escapeName('1st'), escapeName('a b')])
      .toEqual(['__namespace__', 'a__dash__b__dot__c__slash__d', 'x__underscores__y', 'plain', undefined, undefined]);
    const schema = obj({ namespace: { type: 'string' }, 'a-b': { type: 'string' }, labels: { type: 'object', additionalProperties: { type: 'string' } } },
      [{ rule: "self.__namespace__ == 'ns' && self.a__dash__b == 'v' && self.labels['app-name'] == 'x'", message: 'escaped' }]);
    expect(check(schema, { namespace: 'ns', 'a-b': 'v', labels: { 'app-name': 'x' } })).toEqual([]);
  });

  test('at the root, metadata holds only name and generateName', () => {
    const schema = obj({ metadata: { type: 'object' } }, [{ rule: "self.metadata.name == 'n' && !has(self.metadata.labels) && !has(self.metadata.namespace)", message: 'root' }]);
    expect(checkRules(compileRules(schema), { metadata: { name: 'n', namespace: 'ns', labels: { a: 'b' } } })).toEqual([]);
  });

  test('sum() of the Kubernetes list library; matches() is RE2', () => {
    const schema = obj({ ints: { type: 'array', items: { type: 'integer' } }, ds: { type: 'array', items: { type: 'number' } }, s: { type: 'string' } },
      [{ rule: "self.ints.sum() == 6 && self.ds.sum() == 1.5 && [].sum() == 0 && self.s.matches('(?i)^ab$')", message: 'library' }]);
    expect(check(schema, { ints: [1, 2, 3], ds: [0.5, 1], s: 'AB' })).toEqual([]);
    expect(check(schema, { ints: [1, 2], ds: [0.5, 1], s: 'AB' })).toEqual([{ path: '', message: 'library' }]);
  });
});

describe('what a failure says', () => {
  const n = { n: { type: 'integer' }, inner: obj({ x: { type: 'string' } }), odd: { type: 'object', properties: { 'a.b': { type: 'string' } } } };

  test('fieldPath moves the failure to the field it names (.a.b and [\'a.b\'] forms)', () => {
    expect(check(obj(n, [{ rule: 'false', message: 'm1', fieldPath: '.inner.x' }, { rule: 'false', message: 'm2', fieldPath: ".odd['a.b']" }]), { n: 1 }))
      .toEqual([{ path: 'inner.x', message: 'm1' }, { path: 'odd.a.b', message: 'm2' }]);
  });

  test('messageExpression, else message when it gives no one-line text, else "failed rule: RULE"', () => {
    const rules = [
      { rule: 'self.n < 3', messageExpression: "'n is ' + string(self.n)", message: 'static' },
      { rule: 'self.n < 3', messageExpression: "''", message: 'static when empty' },
      { rule: 'self.n < 3', messageExpression: "'two\\nlines'", message: 'static when two lines' },
      { rule: 'self.n < 3', messageExpression: 'self.missing', message: 'static when it fails' },
      { rule: ' self.n < 3 ' },
    ];
    expect(check(obj(n, rules), { n: 5 }).map((f) => f.message)).toEqual(['n is 5', 'static when empty', 'static when two lines', 'static when it fails', 'failed rule: self.n < 3']);
  });

  test('a rule that cannot be evaluated is a failure that says so, never a pass or a throw', () => {
    expect(check(obj(n, [{ rule: 'self.inner.x == "a"', message: 'needs inner.x' }]), { n: 1, inner: {} }))
      .toEqual([{ path: '', message: 'field not found: x evaluating rule: needs inner.x' }]);
  });

  test('a rule that does not compile is refused when the schema is compiled', () => {
    expect(() => compileRules(obj({}, [{ rule: 'self ==' }]))).toThrow(/^cannot compile the rule "self ==": /);
  });
});

describe('the CRDs\' rules through local validation', () => {
  const dm = (name: string, spec: Record<string, unknown>): DeployedModel => ({ apiVersion: 'prediction.predictgate.dev/v1', kind: 'DeployedModel', metadata: { name, namespace: 'ns' }, spec } as unknown as DeployedModel);
  const ep = (destinations: unknown[]): Endpoint => ({ apiVersion: 'prediction.predictgate.dev/v1', kind: 'Endpoint', metadata: { name: 'e', namespace: 'ns' }, spec: { destinations } } as unknown as Endpoint);
  const MS = { framework: 'custom', containerSpec: { image: 'x' } };

  test.each([
    ['a valid model', dm('ok', { modelSpec: MS, dedicatedResources: { minReplicaCount: 1, maxReplicaCount: 3 } }), []],
    ['min above max', dm('ok', { modelSpec: MS, dedicatedResources: { minReplicaCount: 3, maxReplicaCount: 2 } }), ['spec.dedicatedResources: minReplicaCount must not exceed maxReplicaCount']],
    ['two rules at once', dm('9lives', { modelSpec: { framework: 'graphstorm', containerSpec: {} } }), [
      'metadata.name: "9lives" must be a DNS-1035 label (at most 63 lowercase letters, digits or \'-\', starting with a letter and ending with a letter or digit): the model\'s Service takes this name',
      'spec.modelSpec: gmlTask is required for framework graphstorm and allowed for no other framework',
    ]],
    ['a schema problem first, alone', dm('9lives', { modelSpec: { framework: 'onnx', containerSpec: {} } }), ['spec.modelSpec.framework: must be one of tensorflow, pytorch, graphstorm, custom']],
    ['a valid scale-to-zero model', dm('ok', { modelSpec: MS, dedicatedResources: { minReplicaCount: 0, maxReplicaCount: 3, autoscaling: { targetConcurrency: 2, targetRequestsPerSecond: 10 }, scaleToZeroSpec: { minScaleupPeriod: '300s', idleScaledownPeriod: '1.5s' } } }), []],
    ['a CPU target with targetConcurrency', dm('ok', { modelSpec: MS, dedicatedResources: { minReplicaCount: 1, maxReplicaCount: 3, autoscaling: { targetCPUUtilizationPercentage: 60, targetConcurrency: 2 } } }), [
      'spec.dedicatedResources: autoscaling: targetCPUUtilizationPercentage (an HPA) cannot be combined with targetConcurrency or targetRequestsPerSecond (the request autoscaler); one of them decides the replicas',
    ]],
    ['scaleToZeroSpec without minReplicaCount 0', dm('ok', { modelSpec: MS, dedicatedResources: { minReplicaCount: 1, autoscaling: { targetConcurrency: 2 }, scaleToZeroSpec: {} } }), ['spec.dedicatedResources: scaleToZeroSpec needs minReplicaCount: 0']],
    ['scaleToZeroSpec with a CPU target', dm('ok', { modelSpec: MS, dedicatedResources: { minReplicaCount: 0, autoscaling: { targetCPUUtilizationPercentage: 60 }, scaleToZeroSpec: {} } }), [
      'spec.dedicatedResources: scaleToZeroSpec scales on calls and CPU cannot wake a model at zero: use autoscaling.targetConcurrency or targetRequestsPerSecond, not targetCPUUtilizationPercentage',
    ]],
    ['minReplicaCount 0 and targetConcurrency without scaleToZeroSpec', dm('ok', { modelSpec: MS, dedicatedResources: { minReplicaCount: 0, maxReplicaCount: 2, autoscaling: { targetConcurrency: 2 } } }), [
      'spec.dedicatedResources: minReplicaCount 0 with a request target needs scaleToZeroSpec (without it, 0 replicas is a stopped model)',
    ]],
    ['a period under 1 s', dm('ok', { modelSpec: MS, dedicatedResources: { minReplicaCount: 0, autoscaling: { targetConcurrency: 2 }, scaleToZeroSpec: { minScaleupPeriod: '0.5s' } } }), ['spec.dedicatedResources.scaleToZeroSpec.minScaleupPeriod: must be from 1s to 28800s (8 hours)']],
    ['a period over 8 h', dm('ok', { modelSpec: MS, dedicatedResources: { minReplicaCount: 0, autoscaling: { targetConcurrency: 2 }, scaleToZeroSpec: { idleScaledownPeriod: '28801s' } } }), ['spec.dedicatedResources.scaleToZeroSpec.idleScaledownPeriod: must be from 1s to 28800s (8 hours)']],
    ['a period in minutes', dm('ok', { modelSpec: MS, dedicatedResources: { minReplicaCount: 0, autoscaling: { targetConcurrency: 2 }, scaleToZeroSpec: { idleScaledownPeriod: '10m' } } }), ['spec.dedicatedResources.scaleToZeroSpec.idleScaledownPeriod: must match pattern "^[0-9]{1,5}(\\.[0-9]{1,9})?s$"']],
    ['targetConcurrency 0', dm('ok', { modelSpec: MS, dedicatedResources: { minReplicaCount: 1, maxReplicaCount: 2, autoscaling: { targetConcurrency: 0 } } }), ['spec.dedicatedResources.autoscaling.targetConcurrency: must be > 0']],
  ])('DeployedModel: %s', (_what, m, problems) => {
    expect(deployedModelProblems(m)).toEqual(problems);
  });

  test.each([
    ['a split', ep([{ serviceRef: { name: 'a' }, trafficPercentage: 60 }, { serviceRef: { name: 'a', namespace: 'other' }, trafficPercentage: 40 }]), []],
    ['a sum of 90', ep([{ serviceRef: { name: 'a' }, trafficPercentage: 70 }, { serviceRef: { name: 'b' }, trafficPercentage: 20 }]), ['spec.destinations: trafficPercentage values must add up to 100']],
    ['one model twice, once with its kind', ep([{ serviceRef: { name: 'a', kind: 'DeployedModel' }, trafficPercentage: 50 }, { serviceRef: { name: 'a' }, trafficPercentage: 50 }]), ['spec.destinations: a DeployedModel is listed twice']],
    ['one model with and without its namespace (no CRD rule can see that)', ep([{ serviceRef: { name: 'a', namespace: 'ns' }, trafficPercentage: 50 }, { serviceRef: { name: 'a' }, trafficPercentage: 50 }]), ['spec.destinations: DeployedModel ns/a is listed twice']],
  ])('Endpoint: %s', (_what, e, problems) => {
    expect(endpointProblems(e)).toEqual(problems);
  });

  test('a kept verdict never answers for another name or another spec', () => {
    const m = dm('ok', { modelSpec: MS });
    expect(deployedModelProblems(m)).toEqual([]);
    expect(deployedModelProblems({ ...m, metadata: { ...m.metadata, name: '9lives' } })).toHaveLength(1); // same spec, other name
    expect(deployedModelProblems({ ...m, spec: { ...m.spec, modelSpec: { ...MS, framework: 'graphstorm' } } } as DeployedModel)).toHaveLength(1);
    expect(deployedModelProblems(m)).toEqual([]);
  });
});
