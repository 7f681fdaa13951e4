// Validation of predict bodies: the envelope by ajv schemas compiled once at load, then the
// instance rules of the DeployedModel's framework (instances.ts). Synchronous by design: the parsed
// tree must die before the caller awaits the upstream (see design.md, performance lessons).
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { ApiError } from '../errors.js';
import type { Framework } from '../api/types.js';
import { Path, TensorChecker, checkAnyValue, isNamedInputs, kindOf } from './instances.js';

const ajv = new Ajv({ allErrors: false, $data: false, strict: true });

const instancesSchema = { type: 'array', minItems: 1 };
/** PredictRequest.parameters: a JSON object; proto3 JSON clients may send null for "absent". */
const parametersSchema = { type: ['object', 'null'] };
/** PredictRequest.labels: the official clients send `"labels": {}`. */
const labelsSchema = { type: 'object', additionalProperties: { type: 'string', maxLength: 63 }, maxProperties: 64 };

/** Vertex predict for pytorch, custom and graphstorm-less frameworks: instances required. */
const vertexEnvelope = ajv.compile({
  type: 'object',
  required: ['instances'],
  additionalProperties: false,
  properties: { instances: instancesSchema, parameters: parametersSchema, labels: labelsSchema },
});

/** TensorFlow: row (`instances`) or columnar (`inputs`) form, optional `signature_name`. */
const tensorflowEnvelope = ajv.compile({
  type: 'object',
  additionalProperties: false,
  properties: {
    instances: instancesSchema,
    inputs: {},
    signature_name: { type: 'string', maxLength: 1024 },
    parameters: parametersSchema,
    labels: labelsSchema,
  },
});

const EXPECTED_FIELDS: Record<'vertex' | 'tensorflow', string> = {
  vertex: '"instances" and optionally "parameters"',
  tensorflow: '"instances" or "inputs", optionally "signature_name" and "parameters"',
};

/** Turns ajv's first error into a path-precise message. */
function describeAjvError(e: ErrorObject, body: unknown, fields: string): string {
  const path = e.instancePath === '' ? 'body' : e.instancePath.slice(1).replace(/\//g, '.');
  let actual: unknown = body;
  for (const seg of e.instancePath.split('/').slice(1)) actual = (actual as Record<string, unknown> | undefined)?.[seg.replace(/~1/g, '/').replace(/~0/g, '~')];
  switch (e.keyword) {
    case 'required':
      return `body: missing required field "${(e.params as { missingProperty: string }).missingProperty}"; expected ${fields}`;
    case 'additionalProperties':
      return `body: unknown field "${(e.params as { additionalProperty: string }).additionalProperty}"; expected ${fields}`;
    case 'type': {
      const want = (e.params as { type: string | string[] }).type;
      const name = (t: string): string => (t === 'array' ? 'a list' : t === 'object' ? 'a JSON object' : t === 'null' ? 'null' : `a ${t}`);
      const wantText = (Array.isArray(want) ? want : String(want).split(',')).map(name).join(' or ');
      return `${path}: expected ${wantText}, got ${kindOf(actual)}`;
    }
    case 'minItems':
      return `${path}: expected a non-empty list, got an empty list`;
    case 'maxLength':
      return `${path}: longer than ${(e.params as { limit: number }).limit} characters`;
    case 'maxProperties':
      return `${path}: more than ${(e.params as { limit: number }).limit} entries`;
    default:
      return `${path}: ${e.message ?? 'invalid'}`;
  }
}

function checkEnvelope(validate: ValidateFunction, body: unknown, fields: string): void {
  if (!validate(body)) throw new ApiError('invalid_payload', describeAjvError(validate.errors![0], body, fields));
}

/** The envelope schema's verdict without a message (the fast path's skeleton check). */
export function checkEnvelopeQuietly(framework: Framework, skeleton: Record<string, unknown>): boolean {
  return (framework === 'tensorflow' ? tensorflowEnvelope : vertexEnvelope)(skeleton);
}

export interface ValidationLimits {
  maxDepth: number;
}

/** What the adapter and the response check need to know about a valid predict body. */
export interface PredictShape {
  /** Number of instances (row form), or null for TF columnar `inputs`. */
  instanceCount: number | null;
  /** pytorch only: indexes of instances that are not yet `{"data": ...}`-wrapped. */
  unwrapped: number[];
}

const NO_INDEXES: number[] = [];

/**
 * Validates a parsed predict body for a framework. Throws ApiError('invalid_payload') naming the
 * path; returns the facts the adapter needs.
 */
export function validatePredictBody(body: unknown, framework: Framework, limits: ValidationLimits): PredictShape {
  if (framework === 'tensorflow') return validateTensorflow(body, limits);
  checkEnvelope(vertexEnvelope, body, EXPECTED_FIELDS.vertex);
  const instances = (body as { instances: unknown[] }).instances;
  let unwrapped = NO_INDEXES;
  const path = new Path('instances');
  for (let i = 0; i < instances.length; i++) {
    const inst = instances[i];
    path.push(i);
    checkAnyValue(inst, path, 1, limits.maxDepth);
    path.pop();
    if (framework === 'pytorch' && !isDataWrapped(inst)) {
      if (unwrapped === NO_INDEXES) unwrapped = [];
      unwrapped.push(i);
    }
  }
  const params = (body as { parameters?: unknown }).parameters;
  if (params !== undefined) checkAnyValue(params, new Path('parameters'), 1, limits.maxDepth);
  return { instanceCount: instances.length, unwrapped };
}

/** TorchServe's default handler reads `data` (or else `body`) from each instance. */
export function isDataWrapped(inst: unknown): boolean {
  return inst !== null && typeof inst === 'object' && !Array.isArray(inst) && ('data' in inst || 'body' in inst);
}

function validateTensorflow(body: unknown, limits: ValidationLimits): PredictShape {
  checkEnvelope(tensorflowEnvelope, body, EXPECTED_FIELDS.tensorflow);
  const b = body as { instances?: unknown[]; inputs?: unknown; parameters?: unknown };
  const hasInstances = b.instances !== undefined;
  const hasInputs = b.inputs !== undefined;
  if (hasInstances && hasInputs) {
    throw new ApiError('invalid_payload', 'body: "instances" (row form) and "inputs" (columnar form) must not both be given; send one of them');
  }
  if (!hasInstances && !hasInputs) {
    throw new ApiError('invalid_payload', `body: missing required field "instances"; expected ${EXPECTED_FIELDS.tensorflow}`);
  }
  const checker = new TensorChecker(limits);
  if (b.parameters !== undefined) checkAnyValue(b.parameters, new Path('parameters'), 1, limits.maxDepth);
  if (hasInstances) {
    checker.instances(b.instances!, new Path('instances'));
    return { instanceCount: b.instances!.length, unwrapped: NO_INDEXES };
  }
  const inputs = b.inputs;
  if (isNamedInputs(inputs)) checker.namedInputs(inputs as Record<string, unknown>, new Path('inputs'), 0);
  else checker.tensor(inputs, new Path('inputs'), 1, false);
  return { instanceCount: null, unwrapped: NO_INDEXES };
}
