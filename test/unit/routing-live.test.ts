// The live routing table (liveRoutes): after any sequence of changes to Endpoints, DeployedModels
// and their Services' addresses, its lookups answer what buildRoutes over the same objects answers;
// a change rebuilds only the routes it touches.
import { buildRoutes, liveRoutes, type RouteSource, type LiveReplicaAddresses, type RoutingTable } from '../../src/gateway/routing.js';
import { keyOf, type DeployedModel, type Endpoint } from '../../src/api/types.js';

const READY = [{ type: 'Ready', status: 'True' as const, reason: 'Ready', message: 'DeployedModel is ready', lastTransitionTime: 'x' }];
const defaults = { domain: 'example.test', timeoutMs: 60_000, maxRequestBytes: 1000, streamTimeoutMs: 1_800_000, streamIdleTimeoutMs: 60_000, coldStartQueue: 1000 };

type Event = { kind: 'DeployedModel' | 'Endpoint'; key: string } | undefined;

/** A store as the gateway sees one: objects replaced on every change, one event per change. */
class Source implements RouteSource {
  readonly eps = new Map<string, Endpoint>();
  readonly dms = new Map<string, DeployedModel>();
  private readonly listeners: ((e: Event) => void)[] = [];
  listEndpoints(): Endpoint[] { return [...this.eps.values()]; }
  listDeployedModels(): DeployedModel[] { return [...this.dms.values()]; }
  getEndpoint(key: string): Endpoint | undefined { return this.eps.get(key); }
  getDeployedModel(key: string): DeployedModel | undefined { return this.dms.get(key); }
  onChange(l: (e: Event) => void): void { this.listeners.push(l); }
  emit(e: Event): void { for (const l of this.listeners) l(e); }
  put(obj: Endpoint | DeployedModel): void {
    const key = keyOf(obj.metadata);
    if (obj.kind === 'Endpoint') this.eps.set(key, obj);
    else this.dms.set(key, obj);
    this.emit({ kind: obj.kind, key });
  }
  remove(kind: 'Endpoint' | 'DeployedModel', key: string): void {
    (kind === 'Endpoint' ? this.eps : this.dms).delete(key);
    this.emit({ kind, key });
  }
}

class Replicas implements LiveReplicaAddresses {
  readonly addrs = new Map<string, readonly string[]>();
  private readonly listeners: ((key?: string) => void)[] = [];
  addressesOf(ns: string, service: string): readonly string[] | undefined { return this.addrs.get(`${ns}/${service}`); }
  onChange(l: (key?: string) => void): void { this.listeners.push(l); }
  set(key: string, addrs: readonly string[] | undefined, announce: 'key' | 'none' = 'key'): void {
    if (addrs) this.addrs.set(key, addrs);
    else this.addrs.delete(key);
    for (const l of this.listeners) l(announce === 'key' ? key : undefined);
  }
}

/** A small seeded generator (mulberry32), so a failure can be replayed. */
function seeded(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const MODELS = ['a', 'b', 'c', 'd'];
const ENDPOINTS = ['e0', 'e1', 'e2', 'e3', 'e4'];
const NAMESPACES = ['ns', 'other'];

function model(rand: () => number, name: string, ns: string): DeployedModel {
  return {
    apiVersion: 'prediction.predictgate.dev/v1', kind: 'DeployedModel',
    metadata: { name, namespace: ns },
    spec: {
      id: rand() < 0.2 ? 'shared-id' : undefined,
      allowedNamespaces: rand() < 0.3 ? ['ns', 'other'] : undefined,
      serving: rand() < 0.3 ? { timeoutSeconds: 3 } : undefined,
      modelSpec: { framework: rand() < 0.5 ? 'pytorch' : 'tensorflow', modelVersionID: String(Math.floor(rand() * 3)), containerSpec: { predictRoute: '/p' } },
    },
    status: { conditions: rand() < 0.7 ? READY : [], address: `http://${name}.${ns}`, replicaAddresses: rand() < 0.5 ? [`http://${name}-0`] : undefined },
  };
}

function endpoint(rand: () => number, name: string, ns: string): Endpoint {
  const n = Math.floor(rand() * 4);
  const picks = Array.from({ length: n }, () => MODELS[Math.floor(rand() * MODELS.length)]);
  const split = n === 0 ? [] : rand() < 0.8 ? picks.map((_, i) => (i === 0 ? 100 : 0)) : picks.map(() => 40); // 40s: an invalid sum
  return {
    apiVersion: 'prediction.predictgate.dev/v1', kind: 'Endpoint',
    metadata: { name, namespace: ns },
    spec: { destinations: picks.map((m, i) => ({ serviceRef: { name: m, namespace: rand() < 0.2 ? 'other' : undefined }, trafficPercentage: n === 1 && rand() < 0.5 ? undefined : split[i] })) },
    // Sometimes a status claiming another Endpoint's FQDN.
    status: rand() < 0.3 ? { endpointFQDN: `e0.ns.${defaults.domain}` } : undefined,
  };
}

function sameLookups(live: RoutingTable, fresh: RoutingTable): void {
  for (const ns of NAMESPACES) {
    for (const e of ENDPOINTS) {
      expect(live.byName(ns, e)).toEqual(fresh.byName(ns, e));
      const host = `${e}.${ns}.${defaults.domain}`;
      expect([host, live.byHost(host)]).toEqual([host, fresh.byHost(host)]);
    }
    for (const m of MODELS) expect(live.model(ns, m)).toEqual(fresh.model(ns, m));
  }
}

test('after every change of a random sequence, the live table answers what a full build answers', () => {
  for (const seed of [1, 2, 3, 4, 5]) {
    const rand = seeded(seed);
    const source = new Source();
    const replicas = new Replicas();
    const live = liveRoutes(source, defaults, replicas);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];
    for (let step = 0; step < 300; step++) {
      const r = rand();
      const ns = pick(NAMESPACES);
      if (r < 0.35) source.put(endpoint(rand, pick(ENDPOINTS), ns));
      else if (r < 0.6) source.put(model(rand, pick(MODELS), ns));
      else if (r < 0.7) source.remove('Endpoint', `${ns}/${pick(ENDPOINTS)}`);
      else if (r < 0.78) source.remove('DeployedModel', `${ns}/${pick(MODELS)}`);
      else if (r < 0.95) replicas.set(`${ns}/${pick(MODELS)}`, rand() < 0.3 ? undefined : rand() < 0.2 ? [] : [`http://10.0.0.${Math.floor(rand() * 9)}:8080`]);
      else replicas.set(`${ns}/${pick(MODELS)}`, [`http://10.1.0.${step}:8080`], 'none');
      // Lookups after most changes, sometimes only after several.
      if (rand() < 0.7) sameLookups(live(), buildRoutes(source.listEndpoints(), source.listDeployedModels(), defaults, replicas));
    }
    sameLookups(live(), buildRoutes(source.listEndpoints(), source.listDeployedModels(), defaults, replicas));
  }
});

test('a change rebuilds the routes it touches and keeps every other route as it was', () => {
  const rand = seeded(9);
  const source = new Source();
  const replicas = new Replicas();
  const live = liveRoutes(source, defaults, replicas);
  const ready = (name: string): DeployedModel => ({ ...model(rand, name, 'ns'), spec: { modelSpec: { framework: 'pytorch', containerSpec: { predictRoute: '/p' } } }, status: { conditions: READY, address: `http://${name}` } });
  const ep = (name: string, m: string): Endpoint => ({ apiVersion: 'prediction.predictgate.dev/v1', kind: 'Endpoint', metadata: { name, namespace: 'ns' }, spec: { destinations: [{ serviceRef: { name: m } }] } });
  for (const m of ['a', 'b']) source.put(ready(m));
  source.put(ep('to-a', 'a'));
  source.put(ep('to-b', 'b'));
  const before = { a: live().byName('ns', 'to-a'), b: live().byName('ns', 'to-b'), modelB: live().model('ns', 'b') };
  expect(before.a!.destinations[0].upstreams).toEqual(['http://a']);

  replicas.set('ns/a', ['http://10.0.0.1:8080']);
  const after = live();
  expect(after.byName('ns', 'to-a')!.destinations[0].upstreams).toEqual(['http://10.0.0.1:8080']);
  expect(after.byName('ns', 'to-b')).toBe(before.b);
  expect(after.model('ns', 'b')).toBe(before.modelB);

  source.put(ep('to-b', 'a'));
  expect(live().byName('ns', 'to-b')!.destinations[0].deployedModelId).toBe('a');
  expect(live().byName('ns', 'to-a')).toBe(after.byName('ns', 'to-a'));
  source.remove('DeployedModel', 'ns/a');
  expect(live().byName('ns', 'to-a')!.allDeployedModelIds).toEqual([]);
  expect(live().byName('ns', 'to-b')!.allDeployedModelIds).toEqual([]);
  expect(live().byHost('TO-B.ns.example.test:443')?.name).toBe('to-b');
});
