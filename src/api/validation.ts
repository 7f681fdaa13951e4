// Validation of DeployedModel and Endpoint manifests: the structural schema (ajv, compiled once;
// the same rules the CRDs carry) and the cross-field rules the CRDs express in CEL (traffic sums to
// 100, no duplicate destinations, minReplicaCount <= maxReplicaCount). Messages name the field.
import { Ajv, type ErrorObject } from 'ajv';
import { FRAMEWORKS, type DeployedModel, type Endpoint } from './types.js';

const NAME = { type: 'string', minLength: 1, maxLength: 253, pattern: '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$' };
const SERVING = {
  type: 'object',
  additionalProperties: false,
  properties: {
    timeoutSeconds: { type: 'number', exclusiveMinimum: 0, maximum: 3600 },
    maxRequestBytes: { type: 'integer', minimum: 1, maximum: 1073741824 },
  },
};
const ROUTE = { type: 'string', minLength: 1, maxLength: 1024, pattern: '^/' };

export const DEPLOYED_MODEL_SPEC_SCHEMA = {
  type: 'object',
  required: ['modelSpec'],
  additionalProperties: false,
  properties: {
    id: { type: 'string', minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9][-A-Za-z0-9_.]*$' },
    endpointPath: { type: 'string', maxLength: 1024 },
    allowedNamespaces: { type: 'array', items: NAME, maxItems: 256 },
    modelSpec: {
      type: 'object',
      required: ['framework', 'containerSpec'],
      additionalProperties: false,
      properties: {
        framework: { enum: FRAMEWORKS },
        modelDisplayName: { type: 'string', maxLength: 128 },
        modelVersionID: { type: 'string', maxLength: 128 },
        model: { type: 'string', maxLength: 1024 },
        artifactLocation: { type: 'string', maxLength: 2048 },
        containerSpec: {
          type: 'object',
          additionalProperties: false,
          properties: {
            image: { type: 'string', maxLength: 1024 },
            command: { type: 'array', items: { type: 'string' } },
            args: { type: 'array', items: { type: 'string' } },
            env: {
              type: 'array',
              items: {
                type: 'object', required: ['name'], additionalProperties: false,
                properties: { name: { type: 'string', minLength: 1, maxLength: 256 }, value: { type: 'string' } },
              },
            },
            ports: {
              type: 'array', maxItems: 1,
              items: {
                type: 'object', required: ['containerPort'], additionalProperties: false,
                properties: { containerPort: { type: 'integer', minimum: 1, maximum: 65535 }, name: { type: 'string', maxLength: 15 } },
              },
            },
            predictRoute: ROUTE,
            healthRoute: ROUTE,
          },
        },
      },
    },
    dedicatedResources: {
      type: 'object',
      additionalProperties: false,
      properties: {
        resources: { type: 'object' },
        minReplicaCount: { type: 'integer', minimum: 0, maximum: 1000 },
        maxReplicaCount: { type: 'integer', minimum: 1, maximum: 1000 },
        autoscaling: { type: 'object' },
      },
    },
    serving: SERVING,
  },
} as const;

export const ENDPOINT_SPEC_SCHEMA = {
  type: 'object',
  required: ['destinations'],
  additionalProperties: false,
  properties: {
    createDns: { type: 'boolean' },
    destinations: {
      type: 'array',
      maxItems: 100,
      items: {
        type: 'object',
        required: ['serviceRef'],
        additionalProperties: false,
        properties: {
          serviceRef: {
            type: 'object', required: ['name'], additionalProperties: false,
            properties: { kind: { enum: ['DeployedModel'] }, name: NAME, namespace: NAME },
          },
          trafficPercentage: { type: 'integer', minimum: 0, maximum: 100 },
        },
      },
    },
    serving: SERVING,
  },
} as const;

const ajv = new Ajv({ allErrors: false, strict: false });
const checkModelSpec = ajv.compile(DEPLOYED_MODEL_SPEC_SCHEMA);
const checkEndpointSpec = ajv.compile(ENDPOINT_SPEC_SCHEMA);

function describe(e: ErrorObject): string {
  const path = `spec${e.instancePath.replace(/\/(\d+)/g, '[$1]').replace(/\//g, '.')}`;
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required': return `${path}.${String(p.missingProperty)}: required`;
    case 'additionalProperties': return `${path}.${String(p.additionalProperty)}: unknown field`;
    case 'enum': return `${path}: must be one of ${(p.allowedValues as unknown[]).join(', ')}`;
    default: return `${path}: ${e.message ?? 'invalid'}`;
  }
}

/** Problems with a DeployedModel's spec, empty when valid. */
export function deployedModelProblems(dm: DeployedModel): string[] {
  if (!checkModelSpec(dm.spec)) return [describe(checkModelSpec.errors![0])];
  const r = dm.spec.dedicatedResources;
  const problems: string[] = [];
  if (r?.minReplicaCount !== undefined && r.maxReplicaCount !== undefined && r.minReplicaCount > r.maxReplicaCount) {
    problems.push(`spec.dedicatedResources: minReplicaCount (${r.minReplicaCount}) must not exceed maxReplicaCount (${r.maxReplicaCount})`);
  }
  return problems;
}

/** Problems with an Endpoint's spec, empty when valid. */
export function endpointProblems(ep: Endpoint): string[] {
  if (!checkEndpointSpec(ep.spec)) return [describe(checkEndpointSpec.errors![0])];
  const problems: string[] = [];
  const ds = ep.spec.destinations;
  const ns = ep.metadata.namespace ?? 'default';
  const seen = new Set<string>();
  for (const d of ds) {
    const key = `${d.serviceRef.namespace ?? ns}/${d.serviceRef.name}`;
    if (seen.has(key)) problems.push(`spec.destinations: DeployedModel ${key} is listed twice`);
    seen.add(key);
  }
  if (ds.some((d) => d.trafficPercentage !== undefined)) {
    const sum = ds.reduce((s, d) => s + (d.trafficPercentage ?? 0), 0);
    if (sum !== 100) problems.push(`spec.destinations: trafficPercentage values add up to ${sum}, expected 100`);
  } else if (ds.length > 1) {
    problems.push('spec.destinations: with more than one destination, each needs a trafficPercentage (they must add up to 100)');
  }
  return problems;
}
