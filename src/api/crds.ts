// The CRD manifests in crds/ (the truth for the resources' shape) as data: the objects themselves, for
// installing them, their schemas, and their spec schemas turned into JSON Schema for ajv, so local
// mode validates manifests by the very schema the apiserver enforces (cel.ts runs their CEL rules).
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

/** The folder holding the CRDs, next to package.json. */
export const CRD_DIR = new URL('../../../crds/', import.meta.url);
export const CRD_FILES = {
  DeployedModel: 'deployedmodels.prediction.predictgate.dev.yaml',
  Endpoint: 'endpoints.prediction.predictgate.dev.yaml',
} as const;

type Schema = Record<string, unknown>;

export function loadCrd(kind: keyof typeof CRD_FILES): Schema {
  return parse(readFileSync(new URL(CRD_FILES[kind], CRD_DIR), 'utf8')) as Schema;
}

/** The openAPIV3Schema of a CRD's (only) version. */
export function schemaOf(crd: Schema): Schema {
  return (crd.spec as { versions: { schema: { openAPIV3Schema: Schema } }[] }).versions[0].schema.openAPIV3Schema;
}

/** openAPIV3Schema.properties.spec of a CRD's (only) version. */
export function specSchemaOf(crd: Schema): Schema {
  return (schemaOf(crd).properties as Record<string, Schema>).spec;
}

/**
 * Structural OpenAPI v3 (Kubernetes flavour) to JSON Schema draft-07: boolean exclusiveMinimum becomes
 * numeric, Kubernetes extensions and formats are dropped, and objects with listed properties refuse
 * unknown fields (what `kubectl apply`'s strict field validation does against the apiserver).
 */
export function toJsonSchema(s: unknown): unknown {
  if (Array.isArray(s)) return s.map(toJsonSchema);
  if (s === null || typeof s !== 'object') return s;
  const src = s as Schema;
  const out: Schema = {};
  for (const [k, v] of Object.entries(src)) {
    if (k.startsWith('x-kubernetes-') || k === 'format' || k === 'description' || k === 'exclusiveMinimum') continue;
    out[k] = k === 'properties'
      ? Object.fromEntries(Object.entries(v as Schema).map(([name, p]) => [name, toJsonSchema(p)]))
      : toJsonSchema(v);
  }
  if (src.exclusiveMinimum === true) {
    out.exclusiveMinimum = src.minimum;
    delete out.minimum;
  }
  if (src.properties !== undefined && src.additionalProperties === undefined) out.additionalProperties = false;
  return out;
}
