// The routing table with manifests that break a rule: such an Endpoint has a route without
// destinations that carries the rules (by name and by Host), such a DeployedModel's model route
// carries its rules, and invalidManifest turns them into the 400 FAILED_PRECONDITION calls get.
import { buildRoutes, invalidManifest } from '../../src/gateway/routing.js';
import { errorBody } from '../../src/errors.js';
import type { DeployedModel, Endpoint } from '../../src/api/types.js';

const READY = [{ type: 'Ready', status: 'True' as const, reason: 'Ready', message: 'DeployedModel is ready', lastTransitionTime: 'x' }];

function model(name: string, modelSpec: Record<string, unknown> = {}): DeployedModel {
  return {
    apiVersion: 'prediction.predictgate.dev/v1', kind: 'DeployedModel', metadata: { name, namespace: 'ns' },
    spec: { modelSpec: { framework: 'tensorflow', containerSpec: {}, ...modelSpec } },
    status: { conditions: READY, address: `http://${name}` },
  } as DeployedModel;
}

function endpoint(name: string, destinations: Endpoint['spec']['destinations'], status?: Endpoint['status']): Endpoint {
  return { apiVersion: 'prediction.predictgate.dev/v1', kind: 'Endpoint', metadata: { name, namespace: 'ns' }, spec: { destinations }, status };
}

const defaults = { domain: 'example.test', timeoutMs: 60_000, maxRequestBytes: 1000, streamTimeoutMs: 1_800_000, streamIdleTimeoutMs: 60_000, coldStartQueue: 1000 };

test('an Endpoint that breaks a rule is found by name and Host, with its rules and no destination', () => {
  const t = buildRoutes([endpoint('bad', [{ serviceRef: { name: 'a' }, trafficPercentage: 60 }]), endpoint('ok', [{ serviceRef: { name: 'a' } }])], [model('a')], defaults);
  const bad = t.byName('ns', 'bad')!;
  expect([bad.problems, bad.destinations, bad.allDeployedModelIds, bad.readyById.size]).toEqual([['spec.destinations: trafficPercentage values must add up to 100'], [], [], 0]);
  expect(t.byHost('bad.ns.example.test')).toBe(bad);
  expect(t.byName('ns', 'ok')!.problems).toEqual([]);
  const err = invalidManifest('Endpoint', bad.namespace, bad.name, bad.problems);
  expect([err.httpStatus, err.code]).toEqual([400, 'invalid_manifest']);
  expect(JSON.parse(errorBody(err, 'vertex'))).toEqual({ error: { code: 400, message: 'endpoint bad in project ns breaks a rule of its manifest: spec.destinations: trafficPercentage values must add up to 100', status: 'FAILED_PRECONDITION' } });
});

test('a valid Endpoint keeps its FQDN when an invalid one\'s status claims the same', () => {
  const claim = { endpointFQDN: 'ok.ns.example.test' };
  for (const order of [[0, 1], [1, 0]]) {
    const eps = [endpoint('ok', [{ serviceRef: { name: 'a' } }]), endpoint('bad', [{ serviceRef: { name: 'a' }, trafficPercentage: 60 }], claim)];
    const t = buildRoutes(order.map((i) => eps[i]), [model('a')], defaults);
    expect(t.byHost('ok.ns.example.test')?.name).toBe('ok');
  }
});

test('a DeployedModel that breaks a rule has its rules on its model route, and no destination', () => {
  const t = buildRoutes([], [model('tf-bad', { gmlTask: 'node_regression' }), model('tf')], defaults);
  const bad = t.model('ns', 'tf-bad')!;
  expect([bad.problems, bad.destination]).toEqual([['spec.modelSpec: gmlTask is required for framework graphstorm and allowed for no other framework'], undefined]);
  expect(t.model('ns', 'tf')!.problems).toEqual([]);
  expect(JSON.parse(errorBody(invalidManifest('DeployedModel', 'ns', 'tf-bad', bad.problems), 'tfserving')))
    .toEqual({ error: 'DeployedModel tf-bad in namespace ns breaks a rule of its manifest: spec.modelSpec: gmlTask is required for framework graphstorm and allowed for no other framework' });
});
