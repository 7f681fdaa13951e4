// The routing table: which destinations are routable (and to which replica addresses: pods from EndpointSlices, else the status), limits precedence,
// and weighted picking with an injected random source. Also the Vertex Endpoint resource built from the same objects.
import { buildRoutes, pickDestination, hostWithoutPort } from '../../src/gateway/routing.js';
import type { DeployedModel, Endpoint } from '../../src/api/types.js';
import { endpointResource } from '../../src/gateway/endpointResource.js';
import { endpointStatus } from '../../src/controller/endpoint.js';
import { callableAddresses, type EndpointSlice } from '../../src/store/endpointSlices.js';

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

const defaults = { domain: 'example.test', timeoutMs: 60_000, maxRequestBytes: 1000, streamTimeoutMs: 1_800_000, streamIdleTimeoutMs: 60_000, coldStartQueue: 1000 };

test('ready destinations with traffic are routable, with their upstreams and answer fields', () => {
  const t = buildRoutes([endpoint('e', [['a', 70], ['b', 30], ['c', 0]])], [model('a'), model('b', { ready: false }), model('c')], defaults);
  const r = t.byName('ns', 'e')!;
  expect(r.destinations.map((d) => d.deployedModelId)).toEqual(['a']);
  expect(r.allDeployedModelIds).toEqual(['a', 'b', 'c']);
  expect(r.notReady).toEqual(new Map([['b', 'is not Ready']]));
  expect(r.destinations[0]).toMatchObject({ framework: 'pytorch', predictRoute: '/p', upstreams: ['http://a-0', 'http://a-1'], weight: 70, modelKey: 'ns/a' });
  expect(r.destinations[0].responseFields.toString()).toBe('"deployedModelId":"a","modelDisplayName":"a display","modelVersionId":"7"');
  expect(r.destinations[0].answerHeaders).toEqual({ 'X-Vertex-AI-Endpoint-Id': 'e', 'X-Vertex-AI-Deployed-Model-Id': 'a', 'X-Vertex-AI-Model': 'a', 'X-Vertex-AI-Model-Version-Id': '7' });
  expect(pickDestination(r, () => 0.99)?.deployedModelId).toBe('a');
});

test('a model\'s pods from its Service\'s EndpointSlices win over its status; none callable is not routable (and says so); no slice known, the status', () => {
  const pods = new Map<string, readonly string[]>([['ns/a', ['http://10.0.0.5:8080', 'http://10.0.0.6:8080']], ['ns/b', []]]);
  const replicas = { addressesOf: (ns: string, svc: string) => pods.get(`${ns}/${svc}`) };
  const t = buildRoutes([endpoint('e', [['a', 50], ['b', 25], ['c', 25]])], [model('a'), model('b'), model('c')], defaults, replicas);
  const ds = t.byName('ns', 'e')!.destinations;
  expect(ds.map((d) => [d.deployedModelId, d.upstreams])).toEqual([['a', ['http://10.0.0.5:8080', 'http://10.0.0.6:8080']], ['c', ['http://c-0', 'http://c-1']]]);
  expect(t.model('ns', 'b')?.destination).toBeUndefined();
  // Why b takes no call: Ready, but no pod of it is.
  expect(t.byName('ns', 'e')!.notReady).toEqual(new Map([['b', 'is Ready, but none of its replicas is ready to take calls']]));
  expect(t.model('ns', 'b')?.notReady).toBe('is Ready, but none of its replicas is ready to take calls');
  // UPSTREAM_RESOLVE rewrites pod addresses like any other.
  const resolved = buildRoutes([endpoint('e', [['a', 100]])], [model('a')], { ...defaults, resolve: (u: string) => u.replace('10.0.0.5:8080', '127.0.0.1:9') }, replicas);
  expect(resolved.byName('ns', 'e')!.destinations[0].upstreams).toEqual(['http://127.0.0.1:9', 'http://10.0.0.6:8080']);
});

test('the callable endpoints of a slice: ready (or unset) and not terminating, on its http port', () => {
  const slice = (over: Partial<EndpointSlice>): EndpointSlice => ({
    metadata: { name: 's', namespace: 'ns', labels: { 'kubernetes.io/service-name': 'a' } },
    addressType: 'IPv4',
    ports: [{ name: 'metrics', port: 9090 }, { name: 'http', port: 8080 }],
    endpoints: [
      { addresses: ['10.0.0.1'], conditions: { ready: true } },
      { addresses: ['10.0.0.2'], conditions: {} },
      { addresses: ['10.0.0.3'], conditions: { ready: false } },
      { addresses: ['10.0.0.4'], conditions: { ready: false, terminating: true } },
      { addresses: ['10.0.0.5'], conditions: { ready: true, terminating: true } },
      { addresses: [] },
    ],
    ...over,
  });
  expect(callableAddresses(slice({}))).toEqual(['http://10.0.0.1:8080', 'http://10.0.0.2:8080']);
  expect(callableAddresses(slice({ addressType: 'IPv6', endpoints: [{ addresses: ['fd00::1'] }] }))).toEqual(['http://[fd00::1]:8080']);
  // One port of another name is the Service's port all the same; none, or several without http, are not callable.
  expect(callableAddresses(slice({ ports: [{ name: 'web', port: 80 }] }))).toEqual(['http://10.0.0.1:80', 'http://10.0.0.2:80']);
  expect(callableAddresses(slice({ ports: null }))).toEqual([]);
  expect(callableAddresses(slice({ ports: [{ name: 'a', port: 1 }, { name: 'b', port: 2 }] }))).toEqual([]);
  expect(callableAddresses(slice({ endpoints: null }))).toEqual([]);
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

test('a DeployedModel in another namespace is routed only when it allows the Endpoint namespace; the route says why not', () => {
  const t = buildRoutes([endpoint('e', [['x', undefined, 'other']]), endpoint('f', [['y', undefined, 'other']]), endpoint('g', [['gone', undefined, 'other']])], [model('x', { ns: 'other' }), model('y', { ns: 'other', allowed: ['ns'] })], defaults);
  expect(t.byName('ns', 'e')!.destinations).toEqual([]);
  expect(t.byName('ns', 'e')!.unresolved).toEqual(['DeployedModel other/x does not allow Endpoints of namespace ns (spec.allowedNamespaces)']);
  expect(t.byName('ns', 'f')!.destinations).toHaveLength(1);
  expect(t.byName('ns', 'f')!.unresolved).toEqual([]);
  expect(t.byName('ns', 'g')!.unresolved).toEqual(['DeployedModel other/gone does not exist']);
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

test('a model that is not Ready says why with its Ready condition\'s message, else its reason', () => {
  const withCondition = (name: string, reason: string, message = ''): DeployedModel => ({ ...model(name), status: { conditions: [{ type: 'Ready', status: 'False', reason, message, lastTransitionTime: 'x' }] } });
  const t = buildRoutes([endpoint('e', [['a', 50], ['b', 50]])], [withCondition('a', 'Unavailable', '0 of 2 replicas available'), withCondition('b', 'Progressing')], defaults);
  expect(t.byName('ns', 'e')!.notReady).toEqual(new Map([['a', 'is not Ready: 0 of 2 replicas available'], ['b', 'is not Ready (Progressing)']]));
});
