// Every CEL rule (x-kubernetes-validations) of the CRDs in crds/, broken on the real kube-apiserver
// and in local mode's validation: for each rule a table holds manifests that break it and nothing
// else, the apiserver refuses each with one cause, and local mode reports the same field path and
// message. A rule added to a CRD without a manifest here fails the first test, so the two cannot drift.
import { ApiException } from '@kubernetes/client-node';
import { CRD_FILES, loadCrd, schemaOf } from '../../src/api/crds.js';
import { manifestProblems } from '../../src/api/validation.js';
import { GROUP, VERSION, type DeployedModel, type Endpoint, type ResourceKind } from '../../src/api/types.js';
import { applyCrds, clients, deleteNamespace, newNamespace, type Clients } from '../helpers/cluster.js';

let c: Clients;
let ns: string;

beforeAll(async () => {
  c = clients();
  await applyCrds();
  ns = await newNamespace(c, 'cel');
});

afterAll(async () => {
  await deleteNamespace(c, ns);
});

type Schema = Record<string, unknown>;

/** Every rule of a schema with the position that declares it. */
function rulesOf(schema: Schema, at: string): { at: string; rule: string }[] {
  const own = ((schema['x-kubernetes-validations'] as { rule: string }[] | undefined) ?? []).map((r) => ({ at, rule: r.rule.trim() }));
  const props = Object.entries((schema.properties as Record<string, Schema> | undefined) ?? {}).flatMap(([k, p]) => rulesOf(p, at ? `${at}.${k}` : k));
  const items = schema.items ? rulesOf(schema.items as Schema, `${at}[]`) : [];
  const extra = typeof schema.additionalProperties === 'object' ? rulesOf(schema.additionalProperties as Schema, `${at}[*]`) : [];
  return [...own, ...props, ...items, ...extra];
}

const KINDS = Object.keys(CRD_FILES) as ResourceKind[];
const RULES = KINDS.flatMap((kind) => rulesOf(schemaOf(loadCrd(kind)), '').map((r) => ({ kind, ...r })));

const MODEL_SPEC = { framework: 'custom', containerSpec: { image: 'x' } };
const dest = (name: string, trafficPercentage?: number, more: Record<string, string> = {}): Record<string, unknown> => ({ serviceRef: { name, ...more }, ...(trafficPercentage === undefined ? {} : { trafficPercentage }) });

const ZERO = { minReplicaCount: 0, autoscaling: { targetConcurrency: 2 } };

/**
 * Manifests breaking each rule, by kind and the rule's start, and by its position (`at`, as rulesOf
 * gives it) where rules of the same text sit at several places.
 */
const BREAKING: { kind: ResourceKind; rule: string; at?: string; what: string; name: string; spec: Record<string, unknown> }[] = [
  { kind: 'DeployedModel', rule: 'size(self.metadata.name) <= 63', what: 'a name starting with a digit', name: '9lives', spec: { modelSpec: MODEL_SPEC } },
  { kind: 'DeployedModel', rule: 'size(self.metadata.name) <= 63', what: 'a dotted name', name: 'a.b', spec: { modelSpec: MODEL_SPEC } },
  { kind: 'DeployedModel', rule: 'size(self.metadata.name) <= 63', what: 'a 64-letter name', name: 'x'.repeat(64), spec: { modelSpec: MODEL_SPEC } },
  { kind: 'DeployedModel', rule: "self.framework == 'graphstorm'", what: 'graphstorm without gmlTask', name: 'gs', spec: { modelSpec: { framework: 'graphstorm', containerSpec: { image: 'x' } } } },
  { kind: 'DeployedModel', rule: "self.framework == 'graphstorm'", what: 'gmlTask on a tensorflow model', name: 'tf', spec: { modelSpec: { framework: 'tensorflow', gmlTask: 'node_regression', containerSpec: { image: 'x' } } } },
  { kind: 'DeployedModel', rule: 'has(self.maxConcurrency)', what: 'a queue size without maxConcurrency', name: 'queue', spec: { modelSpec: MODEL_SPEC, serving: { maxQueuedCalls: 4 } } },
  { kind: 'DeployedModel', rule: 'has(self.maxConcurrency)', what: 'a queue timeout without maxConcurrency', name: 'queue-timeout', spec: { modelSpec: MODEL_SPEC, serving: { queueTimeoutSeconds: 2 } } },
  { kind: 'DeployedModel', rule: '!has(self.minReplicaCount)', what: 'minReplicaCount above maxReplicaCount', name: 'replicas', spec: { modelSpec: MODEL_SPEC, dedicatedResources: { minReplicaCount: 3, maxReplicaCount: 2 } } },
  { kind: 'DeployedModel', rule: '!has(self.autoscaling) || !has(self.autoscaling.targetCPUUtilizationPercentage)', what: 'a CPU target with targetConcurrency', name: 'cpu-and-calls', spec: { modelSpec: MODEL_SPEC, dedicatedResources: { minReplicaCount: 1, maxReplicaCount: 3, autoscaling: { targetCPUUtilizationPercentage: 60, targetConcurrency: 2 } } } },
  { kind: 'DeployedModel', rule: '!has(self.scaleToZeroSpec) || (has(self.minReplicaCount)', what: 'scaleToZeroSpec without minReplicaCount 0', name: 'zero-min', spec: { modelSpec: MODEL_SPEC, dedicatedResources: { minReplicaCount: 1, autoscaling: { targetConcurrency: 2 }, scaleToZeroSpec: {} } } },
  { kind: 'DeployedModel', rule: '!has(self.scaleToZeroSpec) || !has(self.autoscaling)', what: 'scaleToZeroSpec with a CPU target', name: 'zero-cpu', spec: { modelSpec: MODEL_SPEC, dedicatedResources: { minReplicaCount: 0, autoscaling: { targetCPUUtilizationPercentage: 60 }, scaleToZeroSpec: {} } } },
  { kind: 'DeployedModel', rule: '!(has(self.minReplicaCount) && self.minReplicaCount == 0', what: 'minReplicaCount 0 and targetConcurrency without scaleToZeroSpec', name: 'zero-stopped', spec: { modelSpec: MODEL_SPEC, dedicatedResources: { ...ZERO, maxReplicaCount: 2 } } },
  { kind: 'DeployedModel', rule: "duration(self) >= duration('1s')", at: 'spec.dedicatedResources.scaleToZeroSpec.minScaleupPeriod', what: 'a minScaleupPeriod under 1 s', name: 'zero-scaleup', spec: { modelSpec: MODEL_SPEC, dedicatedResources: { ...ZERO, scaleToZeroSpec: { minScaleupPeriod: '0.5s' } } } },
  { kind: 'DeployedModel', rule: "duration(self) >= duration('1s')", at: 'spec.dedicatedResources.scaleToZeroSpec.idleScaledownPeriod', what: 'an idleScaledownPeriod over 8 h', name: 'zero-idle', spec: { modelSpec: MODEL_SPEC, dedicatedResources: { ...ZERO, scaleToZeroSpec: { idleScaledownPeriod: '28801s' } } } },
  { kind: 'DeployedModel', rule: "!has(self.basePath)", what: 'an OpenAI base path ending in /', name: 'openai-slash', spec: { modelSpec: { ...MODEL_SPEC, openai: { basePath: '/v1/' } } } },
  { kind: 'DeployedModel', rule: "!has(self.basePath)", what: 'an OpenAI base path with an empty segment', name: 'openai-empty', spec: { modelSpec: { ...MODEL_SPEC, openai: { basePath: '/openai//v1' } } } },
  { kind: 'Endpoint', rule: 'self.size() <= 1', what: 'two destinations without percentages', name: 'split', spec: { destinations: [dest('a'), dest('b')] } },
  { kind: 'Endpoint', rule: '!self.exists(d, has(d.trafficPercentage))', what: 'percentages adding up to 90', name: 'sum', spec: { destinations: [dest('a', 70), dest('b', 20)] } },
  { kind: 'Endpoint', rule: '!self.exists(d, has(d.trafficPercentage))', what: 'a lone destination at 50', name: 'lone', spec: { destinations: [dest('a', 50)] } },
  { kind: 'Endpoint', rule: 'self.all(d, self.exists_one(', what: 'one model twice', name: 'dup', spec: { destinations: [dest('a', 50), dest('a', 50)] } },
  { kind: 'Endpoint', rule: 'self.all(d, self.exists_one(', what: 'one model twice, once with its kind', name: 'dup-kind', spec: { destinations: [dest('a', 50, { kind: 'DeployedModel' }), dest('a', 50)] } },
  { kind: 'Endpoint', rule: 'self.all(d, self.exists_one(', what: 'one model of another namespace twice', name: 'dup-ns', spec: { destinations: [dest('a', 40, { namespace: 'other' }), dest('b', 20), dest('a', 40, { namespace: 'other' })] } },
];

test('every CEL rule in crds/ has manifests that break it, and each manifest names a rule', () => {
  expect(RULES.length).toBeGreaterThanOrEqual(6);
  const names = (b: (typeof BREAKING)[number], r: (typeof RULES)[number]): boolean => b.kind === r.kind && r.rule.startsWith(b.rule) && (b.at === undefined || b.at === r.at);
  for (const r of RULES) expect([r.kind, r.at, r.rule, BREAKING.some((b) => names(b, r))]).toEqual([r.kind, r.at, r.rule, true]);
  for (const b of BREAKING) expect([b.what, RULES.filter((r) => names(b, r)).length]).toEqual([b.what, 1]);
});

interface Cause {
  reason?: string;
  message: string;
  field?: string;
}

/** What the apiserver says when creating `obj` (dry run: nothing is stored): its causes, or [] when it accepts it. */
async function apiserverCauses(kind: ResourceKind, obj: DeployedModel | Endpoint): Promise<Cause[]> {
  try {
    await c.custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: kind === 'Endpoint' ? 'endpoints' : 'deployedmodels', body: obj, dryRun: 'All' });
    return [];
  } catch (err) {
    if (!(err instanceof ApiException) || err.code !== 422) throw err;
    const status = JSON.parse(err.body as string) as { details?: { causes?: Cause[] } };
    return status.details?.causes ?? [];
  }
}

test.each(BREAKING.map((b) => [b.kind, b.what, b] as const))('%s with %s: the apiserver and local mode refuse it with the same field and message', async (kind, _what, b) => {
  const obj = { apiVersion: `${GROUP}/${VERSION}`, kind, metadata: { name: b.name, namespace: ns }, spec: b.spec } as unknown as DeployedModel | Endpoint;
  const causes = await apiserverCauses(kind, obj);
  // A CEL failure on an object or a list position reads "Invalid value: MESSAGE" (the value is not
  // printed); on a string or a number, "Invalid value: VALUE: MESSAGE" (VALUE as JSON).
  const invalid = (cause: Cause): string => {
    const message = cause.message.replace(/^Invalid value: /, '');
    const value = cause.field?.split('.').reduce<unknown>((v, k) => (v as Record<string, unknown> | undefined)?.[k], obj);
    const shown = typeof value === 'string' || typeof value === 'number' ? `${JSON.stringify(value)}: ` : undefined;
    return shown && message.startsWith(shown) ? message.slice(shown.length) : message;
  };
  const refused = causes.map((cause) => `${cause.field}: ${cause.reason === 'FieldValueInvalid' ? invalid(cause) : cause.message}`);
  expect(refused).toHaveLength(1);
  expect(manifestProblems(kind, obj)).toEqual(refused);
});

test('manifests that break no rule pass both', async () => {
  const ok: [ResourceKind, string, Record<string, unknown>][] = [
    ['DeployedModel', 'gs-ok', { modelSpec: { framework: 'graphstorm', gmlTask: 'node_classification', containerSpec: { image: 'x' } }, dedicatedResources: { minReplicaCount: 2, maxReplicaCount: 2 } }],
    ['DeployedModel', 'zero-ok', { modelSpec: MODEL_SPEC, dedicatedResources: { minReplicaCount: 0, maxReplicaCount: 3, autoscaling: { targetConcurrency: 2, targetRequestsPerSecond: 10 }, scaleToZeroSpec: { minScaleupPeriod: '300s', idleScaledownPeriod: '1.5s' } } }],
    ['Endpoint', 'split-ok', { destinations: [dest('a', 60), dest('a', 40, { namespace: 'other' }), dest('b', 0)] }],
    ['Endpoint', 'lone-ok', { destinations: [dest('a')] }],
  ];
  for (const [kind, name, spec] of ok) {
    const obj = { apiVersion: `${GROUP}/${VERSION}`, kind, metadata: { name, namespace: ns }, spec } as unknown as DeployedModel | Endpoint;
    expect([name, await apiserverCauses(kind, obj)]).toEqual([name, []]);
    expect([name, manifestProblems(kind, obj)]).toEqual([name, []]);
  }
});
