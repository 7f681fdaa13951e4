// The routing table: which destinations are routable, limits precedence, lookups by name and Host,
// and weighted picking with an injected random source. Also the Vertex Endpoint resource built from the same objects.
import { buildRoutes, pickDestination, hostWithoutPort } from '../../src/gateway/routing.js';
import type { DeployedModel, Endpoint } from '../../src/api/types.js';
import { endpointResource } from '../../src/gateway/endpointResource.js';
import { endpointStatus } from '../../src/controller/endpoint.js';

const READY = [{ type: 'Ready', status: 'True' as const, reason: 'Ready', message: 'DeployedModel is ready', lastTransitionTime: 'x' }];

function model(name: string, opts: { ready?: boolean; ns?: string; serving?: DeployedModel['spec']['serving']; allowed?: string[]; id?: string } = {}): DeployedModel {
  return {
    apiVersion: 'prediction.predictgate.dev/v1', kind: 'DeployedModel',
    metadata: { name, namespace: opts.ns ?? 'ns' },
    spec: { id: opts.id, allowedNamespaces: opts.allowed, serving: opts.serving, modelSpec: { framework: 'pytorch', modelDisplayName: `${name} display`, modelVersionID: '7', containerSpec: { predictRoute: '/p' } } },
    status: { conditions: opts.ready === false ? [] : READY, address: `http://${name}`, replicaAddresses: [`http://${name}-0`, `http://${name}-1`] },
  };
}

function endpoint(name: string, dests: [string, number | undefined, string?][], serving?: Endpoint['spec']['serving']): Endpoint {
  return { apiVersion: 'prediction.predictgate.dev/v1', kind: 'Endpoint', metadata: { name, namespace: 'ns' }, spec: { serving, destinations: dests.map(([n, t, ns]) => ({ serviceRef: { name: n, namespace: ns }, trafficPercentage: t })) } };
}

const defaults = { domain: 'example.test', timeoutMs: 60_000, maxRequestBytes: 1000 };

test('ready destinations with traffic are routable, with their upstreams and answer fields', () => {
  const t = buildRoutes([endpoint('e', [['a', 70], ['b', 30], ['c', 0]])], [model('a'), model('b', { ready: false }), model('c')], defaults);
  const r = t.byName('ns', 'e')!;
  expect(r.destinations.map((d) => d.deployedModelId)).toEqual(['a']);
  expect(r.allDeployedModelIds).toEqual(['a', 'b', 'c']);
  expect(r.destinations[0]).toMatchObject({ framework: 'pytorch', predictRoute: '/p', upstreams: ['http://a-0', 'http://a-1'], weight: 70, modelKey: 'ns/a' });
  expect(r.destinations[0].responseFields.toString()).toBe('"deployedModelId":"a","modelDisplayName":"a display","modelVersionId":"7"');
  expect(r.destinations[0].answerHeaders).toEqual({ 'X-Vertex-AI-Endpoint-Id': 'e', 'X-Vertex-AI-Deployed-Model-Id': 'a', 'X-Vertex-AI-Model': 'a', 'X-Vertex-AI-Model-Version-Id': '7' });
  expect(pickDestination(r, () => 0.99)?.deployedModelId).toBe('a');
});

test('lookups by Host ignore case and port', () => {
  const t = buildRoutes([endpoint('e', [['a', undefined]])], [model('a')], defaults);
  expect(t.byHost('E.ns.Example.Test:8080')?.name).toBe('e');
  expect(t.byHost('e.ns.example.test')?.name).toBe('e');
  expect(t.byHost('other')).toBeUndefined();
  expect(hostWithoutPort('[::1]:80')).toBe('[::1]');
});

test('limits: DeployedModel overrides Endpoint overrides defaults', () => {
  const t = buildRoutes([endpoint('e', [['a', 50], ['b', 50]], { timeoutSeconds: 5 })], [model('a', { serving: { maxRequestBytes: 9 } }), model('b', { serving: { timeoutSeconds: 0.5 } })], defaults);
  const [a, b] = t.byName('ns', 'e')!.destinations;
  expect([a.timeoutMs, a.maxRequestBytes]).toEqual([5000, 9]);
  expect([b.timeoutMs, b.maxRequestBytes]).toEqual([500, 1000]);
});

test('a DeployedModel in another namespace is routed only when it allows the Endpoint namespace', () => {
  const t = buildRoutes([endpoint('e', [['x', undefined, 'other']]), endpoint('f', [['y', undefined, 'other']])], [model('x', { ns: 'other' }), model('y', { ns: 'other', allowed: ['ns'] })], defaults);
  expect(t.byName('ns', 'e')!.destinations).toEqual([]);
  expect(t.byName('ns', 'f')!.destinations).toHaveLength(1);
});

test('picking follows the weights over the Ready destinations', () => {
  const t = buildRoutes([endpoint('e', [['a', 60], ['b', 30], ['c', 10]])], [model('a'), model('b'), model('c')], defaults);
  const r = t.byName('ns', 'e')!;
  const counts: Record<string, number> = {};
  for (let i = 0; i < 1000; i++) {
    const id = pickDestination(r, () => (i + 0.5) / 1000)!.deployedModelId;
    counts[id] = (counts[id] ?? 0) + 1;
  }
  expect(counts).toEqual({ a: 600, b: 300, c: 100 });
  const partial = buildRoutes([endpoint('e', [['a', 60], ['b', 30], ['c', 10]])], [model('a', { ready: false }), model('b'), model('c')], defaults).byName('ns', 'e')!;
  expect(partial.totalWeight).toBe(40);
  expect(pickDestination(partial, () => 0.7)!.deployedModelId).toBe('b');
  expect(pickDestination(partial, () => 0.8)!.deployedModelId).toBe('c');
});

describe('the Vertex Endpoint resource (GET .../endpoints/E)', () => {
  const place = { project: 'ns', location: 'us-central1' };
  const lookup = (models: DeployedModel[]) => (key: string) => models.find((m) => `${m.metadata.namespace}/${m.metadata.name}` === key);

  test('names every resolvable deployed model with its traffic; missing and refused ones are left out', () => {
    const a = model('a', { id: 'model-a' });
    a.metadata.creationTimestamp = '2026-11-30T10:00:00Z';
    a.spec.modelSpec.model = 'projects/ns/locations/us-central1/models/m1';
    a.spec.dedicatedResources = { minReplicaCount: 1, maxReplicaCount: 3 };
    a.status = { ...a.status, readyReplicas: 2 };
    const other = model('x', { ns: 'elsewhere' });
    const ep = endpoint('e', [['a', 80], ['gone', 10], ['x', 10, 'elsewhere']]);
    ep.metadata.creationTimestamp = '2026-11-30T09:00:00Z';
    ep.metadata.resourceVersion = '42';
    expect(endpointResource(ep, lookup([a, other]), place)).toEqual({
      name: 'projects/ns/locations/us-central1/endpoints/e',
      displayName: 'e',
      deployedModels: [{
        id: 'model-a', model: 'projects/ns/locations/us-central1/models/m1', modelVersionId: '7', displayName: 'a display',
        createTime: '2026-11-30T10:00:00Z', dedicatedResources: { minReplicaCount: 1, maxReplicaCount: 3 },
        status: { message: 'DeployedModel is ready', lastUpdateTime: 'x', availableReplicaCount: 2 },
      }],
      trafficSplit: { 'model-a': 80 },
      etag: '42',
      createTime: '2026-11-30T09:00:00Z',
      dedicatedEndpointEnabled: false,
    });
  });

  test('two deployed models with one id add up in the split, as the router sends each its share under that id', () => {
    const a = model('a', { id: 'shared' });
    const b = model('b', { id: 'shared' });
    const ep = endpoint('e', [['a', 30], ['b', 50], ['c', 20]]);
    const r = endpointResource(ep, lookup([a, b, model('c')]), place);
    expect(r.trafficSplit).toEqual({ shared: 80, c: 20 });
    expect(r.deployedModels.map((m) => m.id)).toEqual(['shared', 'shared', 'c']);
    // The Endpoint's status says the same (one function for both).
    expect(endpointStatus(ep, lookup([a, b, model('c')]), 'example.test', new Date(0)).trafficSplit).toEqual(r.trafficSplit);
    const counts: Record<string, number> = {};
    const route = buildRoutes([ep], [a, b, model('c')], defaults).byName('ns', 'e')!;
    for (let i = 0; i < 100; i++) {
      const id = pickDestination(route, () => (i + 0.5) / 100)!.deployedModelId;
      counts[id] = (counts[id] ?? 0) + 1;
    }
    expect(counts).toEqual(r.trafficSplit);
  });

  test('a lone destination without a percentage has 100; serving.timeoutSeconds is the inference timeout', () => {
    const r = endpointResource(endpoint('e', [['a', undefined]], { timeoutSeconds: 30 }), lookup([model('a')]), place);
    expect(r.trafficSplit).toEqual({ a: 100 });
    expect(r.clientConnectionConfig).toEqual({ inferenceTimeout: '30s' });
  });
});
