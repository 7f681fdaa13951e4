// Validation of DeployedModel and Endpoint manifests: the structural schema (the CRDs' own, compiled
// once with ajv) and the cross-field rules the CRDs express in CEL (traffic sums to
// 100, no duplicate destinations, minReplicaCount <= maxReplicaCount, gmlTask exactly for graphstorm). Messages name the field.
import { Ajv, type ErrorObject } from 'ajv';
import type { DeployedModel, Endpoint } from './types.js';
import { loadCrd, specSchemaOf, toJsonSchema } from './crds.js';

export const DEPLOYED_MODEL_SPEC_SCHEMA = toJsonSchema(specSchemaOf(loadCrd('DeployedModel'))) as object;
export const ENDPOINT_SPEC_SCHEMA = toJsonSchema(specSchemaOf(loadCrd('Endpoint'))) as object;

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
  const name = dm.metadata.name;
  if (name.length > 63 || !/^[a-z]([-a-z0-9]*[a-z0-9])?$/.test(name)) {
    problems.push(`metadata.name: "${name}" must be a DNS-1035 label (at most 63 lowercase letters, digits or '-', starting with a letter and ending with a letter or digit): the model's Service takes this name`);
  }
  const m = dm.spec.modelSpec;
  if ((m.framework === 'graphstorm') !== (m.gmlTask !== undefined)) {
    problems.push('spec.modelSpec: gmlTask is required for framework graphstorm and allowed for no other framework');
  }
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
