// Validation of DeployedModel and Endpoint manifests by the CRDs in crds/, as the apiserver validates
// them: the structural schema (compiled once with ajv), then the CEL rules (cel.ts), so local mode
// refuses what `kubectl apply` refuses, with the same messages. Endpoints also get the one check no
// CRD rule can make (the same model named with and without the Endpoint's namespace). Messages name the field.
import { Ajv, type ErrorObject } from 'ajv';
import type { DeployedModel, Endpoint, ResourceKind } from './types.js';
import { loadCrd, schemaOf, specSchemaOf, toJsonSchema } from './crds.js';
import { checkRules, compileRules } from './cel.js';
import { destinationKey } from './references.js';

const CRDS = { DeployedModel: loadCrd('DeployedModel'), Endpoint: loadCrd('Endpoint') };
export const DEPLOYED_MODEL_SPEC_SCHEMA = toJsonSchema(specSchemaOf(CRDS.DeployedModel)) as object;
export const ENDPOINT_SPEC_SCHEMA = toJsonSchema(specSchemaOf(CRDS.Endpoint)) as object;

const ajv = new Ajv({ allErrors: false, strict: false });
const checkSpec = { DeployedModel: ajv.compile(DEPLOYED_MODEL_SPEC_SCHEMA), Endpoint: ajv.compile(ENDPOINT_SPEC_SCHEMA) };
const RULES = { DeployedModel: compileRules(schemaOf(CRDS.DeployedModel)), Endpoint: compileRules(schemaOf(CRDS.Endpoint)) };

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

/**
 * Verdicts by spec object: the stores replace an object on every change and never edit one in place,
 * so a routing table rebuilt after a status change does not evaluate the rules again.
 */
const verdicts = new WeakMap<object, { name: string; kind: string; problems: string[] }>();

/**
 * What the apiserver would refuse in a manifest of `kind`, empty when it is valid: the first schema
 * problem, else every CEL rule it breaks (`path: message`). Status is not looked at.
 */
export function manifestProblems(kind: ResourceKind, obj: DeployedModel | Endpoint): string[] {
  const spec: unknown = obj.spec;
  const known = typeof spec === 'object' && spec !== null ? verdicts.get(spec) : undefined;
  if (known && known.name === obj.metadata.name && known.kind === kind) return known.problems;
  const check = checkSpec[kind];
  let problems: string[];
  if (!check(spec)) problems = [describe(check.errors![0])];
  else {
    const { status: _status, ...manifest } = obj;
    problems = checkRules(RULES[kind], manifest).map((f) => `${f.path}: ${f.message}`);
  }
  if (typeof spec === 'object' && spec !== null) verdicts.set(spec, { name: obj.metadata.name, kind, problems });
  return problems;
}

/** Problems with a DeployedModel's manifest, empty when valid. */
export function deployedModelProblems(dm: DeployedModel): string[] {
  return manifestProblems('DeployedModel', dm);
}

/** Problems with an Endpoint's manifest, empty when valid. */
export function endpointProblems(ep: Endpoint): string[] {
  const problems = manifestProblems('Endpoint', ep);
  if (problems.length) return problems;
  const seen = new Set<string>();
  for (const d of ep.spec.destinations) {
    const key = destinationKey(ep, d);
    if (seen.has(key)) return [`spec.destinations: DeployedModel ${key} is listed twice`];
    seen.add(key);
  }
  return [];
}
