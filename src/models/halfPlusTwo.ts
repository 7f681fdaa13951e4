// The bundled `half_plus_two` model (y = 0.5 * x + 2) speaking TensorFlow Serving's REST API.
// Owns: routes (model status, metadata, predict, classify, regress), the request checks TF Serving
// makes (row/columnar tensors, dense shapes, tf.Example features) with TF Serving's error messages
// and HTTP statuses, and the answers. A real upstream for the gateway's TF Serving dialect tests.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { JsonSyntaxError, parseJson, stringifyJson } from '../payload/json.js';

export const HALF_PLUS_TWO_MODEL_NAME = 'half_plus_two';
const VERSION = 1;
const LABELS: Record<string, number> = { stable: VERSION };
const MAX_BODY_BYTES = 64 * 1024 * 1024;
const FLOAT_MAX = 3.4028234663852886e38;
/**
 * Deepest nesting of a request document, its members at level 1: twice what the gateway's default
 * MAX_JSON_DEPTH lets through, and far from what would overflow the stack.
 */
const MAX_DEPTH = 128;

const PREDICT = 'tensorflow/serving/predict';
const REGRESS = 'tensorflow/serving/regress';
const CLASSIFY = 'tensorflow/serving/classify';
const DEFAULT_SIGNATURE = 'serving_default';

type DType = 'float' | 'string';
interface TensorSpec { name: string; dtype: DType; tensorName: string; shape: number[] | null }
interface Signature { method: string; input: TensorSpec; output: TensorSpec }

// Signatures of the model, as GetModelMetadata reports them. One input and one output each.
const SIGNATURES: Record<string, Signature> = {
  [DEFAULT_SIGNATURE]: {
    method: PREDICT,
    input: { name: 'x', dtype: 'float', tensorName: 'x:0', shape: [-1] },
    output: { name: 'y', dtype: 'float', tensorName: 'y:0', shape: [-1] },
  },
  [REGRESS]: {
    method: REGRESS,
    input: { name: 'inputs', dtype: 'string', tensorName: 'tf_example:0', shape: null },
    output: { name: 'outputs', dtype: 'float', tensorName: 'y:0', shape: [-1] },
  },
  [CLASSIFY]: {
    method: CLASSIFY,
    input: { name: 'inputs', dtype: 'string', tensorName: 'tf_example:0', shape: null },
    output: { name: 'scores', dtype: 'float', tensorName: 'y:0', shape: [-1] },
  },
};

/** A failed call: HTTP status plus the message TF Serving would put in `{"error": ...}`. */
class TfError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}
const invalid = (message: string): TfError => new TfError(400, message);
const notFound = (message: string): TfError => new TfError(404, message);

const model = (x: number): number => 0.5 * x + 2;

// ---------------------------------------------------------------------------------------------
// HTTP plumbing

function sendJson(res: ServerResponse, status: number, text: string): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: ServerResponse, err: TfError): void {
  sendJson(res, err.status, JSON.stringify({ error: err.message }));
}

/** Reads the body as UTF-8 text; rejects with a 413 TfError past MAX_BODY_BYTES. */
function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        req.off('data', onData);
        req.resume(); // drain the rest
        reject(new TfError(413, `request body exceeds ${MAX_BODY_BYTES} bytes`));
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

// Route patterns follow TF Serving's (case-insensitive literals, exact model name).
const PREDICT_RE = /^\/v1\/models\/([^/:]+)(?:\/versions\/(\d+)|\/labels\/([^/:]+))?:(classify|regress|predict)$/i;
const STATUS_RE = /^\/v1\/models(?:\/([^/:]+))?(?:\/versions\/(\d+)|\/labels\/([^/:]+))?(\/metadata)?$/i;

interface ModelSpec { name: string; version?: string; label?: string }

/** Handles one request. Never throws; every failure becomes a JSON error. */
export function handleHalfPlusTwo(req: IncomingMessage, res: ServerResponse): void {
  route(req, res).catch((err: unknown) => {
    if (err instanceof TfError) sendError(res, err);
    else sendError(res, new TfError(500, err instanceof Error ? err.message : String(err)));
  });
}

async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const method = req.method ?? 'GET';
  const path = (req.url ?? '/').split('?')[0];
  const predict = method === 'POST' ? PREDICT_RE.exec(path) : null;
  if (predict) {
    const spec: ModelSpec = { name: predict[1], version: predict[2], label: predict[3] };
    const body = await readBody(req);
    const verb = predict[4].toLowerCase();
    const out = verb === 'predict' ? predictCall(spec, body) : classifyOrRegress(spec, body, verb);
    sendJson(res, 200, stringifyJson(out));
    return;
  }
  const status = method === 'GET' ? STATUS_RE.exec(path) : null;
  req.resume();
  if (status) {
    const spec: ModelSpec = { name: status[1] ?? '', version: status[2], label: status[3] };
    sendJson(res, 200, JSON.stringify(status[4] ? metadata(spec) : modelStatus(spec)));
    return;
  }
  if (!/^\/v1\//i.test(path)) throw notFound(`Not found: ${method} ${path}`);
  throw invalid(`Malformed request: ${method} ${path}`);
}

// ---------------------------------------------------------------------------------------------
// Servable resolution

function parseVersion(text: string): number {
  const v = Number(text);
  if (!Number.isSafeInteger(v)) throw invalid(`Failed to convert version: ${text} to numeric.`);
  return v;
}

/** Resolves the servable a predict/classify/regress/metadata call names; 404 when absent. */
function resolveServable(spec: ModelSpec): number {
  if (spec.label !== undefined) {
    // TF Serving answers INVALID_ARGUMENT (400) for an unknown label; this model answers 404,
    // like every other servable miss.
    if (spec.name !== HALF_PLUS_TWO_MODEL_NAME || !Object.hasOwn(LABELS, spec.label)) {
      throw notFound(`Unrecognized servable version label: ${spec.label}`);
    }
    return LABELS[spec.label];
  }
  if (spec.version !== undefined) {
    const v = parseVersion(spec.version);
    if (spec.name !== HALF_PLUS_TWO_MODEL_NAME || v !== VERSION) {
      throw notFound(`Servable not found for request: Specific(${spec.name}, ${v})`);
    }
    return v;
  }
  if (spec.name !== HALF_PLUS_TWO_MODEL_NAME) throw notFound(`Servable not found for request: Latest(${spec.name})`);
  return VERSION;
}

/** GetModelStatus. Its misses read like TF Serving's GetModelStatusImpl, not like a servable lookup. */
function modelStatus(spec: ModelSpec): unknown {
  if (spec.name === '') throw invalid('Missing model name in request.');
  let version = VERSION;
  if (spec.label !== undefined) {
    version = resolveServable(spec);
  } else if (spec.version !== undefined) {
    version = parseVersion(spec.version);
    if (spec.name !== HALF_PLUS_TWO_MODEL_NAME || version !== VERSION) {
      throw notFound(`Could not find version ${version} of model ${spec.name}`);
    }
  } else if (spec.name !== HALF_PLUS_TWO_MODEL_NAME) {
    throw notFound(`Could not find any versions of model ${spec.name}`);
  }
  return {
    model_version_status: [
      { version: String(version), state: 'AVAILABLE', status: { error_code: 'OK', error_message: '' } },
    ],
  };
}

function tensorInfo(t: TensorSpec): unknown {
  return {
    dtype: t.dtype === 'float' ? 'DT_FLOAT' : 'DT_STRING',
    tensor_shape:
      t.shape === null
        ? { dim: [], unknown_rank: true }
        : { dim: t.shape.map((size) => ({ size: String(size), name: '' })), unknown_rank: false },
    name: t.tensorName,
  };
}

function metadata(spec: ModelSpec): unknown {
  if (spec.name === '') throw invalid('Missing model name in request.');
  const version = resolveServable(spec);
  const defs: Record<string, unknown> = {};
  for (const [key, sig] of Object.entries(SIGNATURES)) {
    defs[key] = {
      inputs: { [sig.input.name]: tensorInfo(sig.input) },
      outputs: { [sig.output.name]: tensorInfo(sig.output) },
      method_name: sig.method,
    };
  }
  return {
    model_spec: { name: HALF_PLUS_TWO_MODEL_NAME, signature_name: '', version: String(version) },
    metadata: { signature_def: { signature_def: defs } },
  };
}

// ---------------------------------------------------------------------------------------------
// JSON request document (TF Serving's ParseJson / FillSignature)

type JsonObject = Record<string, unknown>;
const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);
const isBase64Object = (v: unknown): boolean =>
  isObject(v) && Object.keys(v).length === 1 && typeof v.b64 === 'string';

/** JSON text of a value for error messages, bounded in length. */
function show(v: unknown): string {
  const text = v === undefined ? 'undefined' : stringifyJson(v);
  return text.length > 256 ? `${text.slice(0, 256)}...` : text;
}

function jsonType(v: unknown): string {
  if (v === null) return 'Null';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (Array.isArray(v)) return 'Array';
  if (typeof v === 'object') return 'Object';
  if (typeof v === 'string') return 'String';
  return 'Number';
}

function parseDocument(body: string): JsonObject {
  if (body.length === 0) throw invalid('JSON Parse error: The document is empty');
  let doc: unknown;
  try {
    doc = parseJson(body, true);
  } catch (err) {
    throw invalid(`JSON Parse error: ${err instanceof JsonSyntaxError ? err.message : String(err)}`);
  }
  // The checks below (and the error messages, which print the document) recurse into it.
  if (deeperThan(doc, MAX_DEPTH)) throw invalid(`JSON Parse error: the document nests deeper than ${MAX_DEPTH} levels`);
  if (!isObject(doc)) throw invalid(`JSON Value: ${show(doc)} Is not object`);
  return doc;
}

/** Whether lists and objects nest more than `limit` levels deep in `v`, its members at level 1 (walked with a stack of its own). */
function deeperThan(v: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[v, 0]];
  while (stack.length) {
    const [x, depth] = stack.pop()!;
    if (typeof x !== 'object' || x === null) continue;
    if (depth > limit) return true;
    for (const item of Array.isArray(x) ? x : Object.values(x)) if (typeof item === 'object' && item !== null) stack.push([item, depth + 1]);
  }
  return false;
}

function signatureName(doc: JsonObject): string {
  const name = doc.signature_name;
  if (name === undefined) return '';
  if (typeof name !== 'string') {
    throw invalid(`JSON Value: ${show(doc)} not formatted correctly. 'signature_name' key must be a string value.`);
  }
  return name;
}

// ---------------------------------------------------------------------------------------------
// Tensors (TF Serving's GetDenseTensorShape / FillTensorProto)

function denseShape(v: unknown): number[] {
  const shape: number[] = [];
  let cur = v;
  while (Array.isArray(cur)) {
    shape.push(cur.length);
    if (cur.length === 0) break;
    cur = cur[0];
  }
  return shape;
}

const shapeText = (shape: number[]): string => `[${shape.join(',')}]`;

function checkValue(v: unknown, dtype: DType): void {
  if (dtype === 'float') {
    if (typeof v !== 'number') {
      throw invalid(`JSON Value: ${show(v)} Type: ${jsonType(v)} is not of expected type: float`);
    }
    if (Number.isFinite(v) && Math.abs(v) > FLOAT_MAX) {
      throw invalid(`Cannot convert JSON value: ${show(v)} to float without loss of precision.`);
    }
  } else if (isObject(v)) {
    if (!isBase64Object(v)) throw invalid(`JSON Value: ${show(v)} not formatted correctly for base64 data`);
  } else if (typeof v !== 'string') {
    throw invalid(`JSON Value: ${show(v)} Type: ${jsonType(v)} is not of expected type: string`);
  }
}

/** Checks that `v` is a dense tensor of `shape`; returns its element count. */
function fillTensor(v: unknown, level: number, shape: number[], dtype: DType): number {
  const rank = shape.length;
  if (!Array.isArray(v)) {
    if (level !== rank) {
      throw invalid(
        `JSON Value: ${show(v)} found at incorrect level: ${level + 1} in the JSON DOM. Expected at level: ${rank}`,
      );
    }
    checkValue(v, dtype);
    return 1;
  }
  if (level >= rank) throw invalid(`Encountered list at unexpected level: ${level} expected < ${rank}`);
  if (v.length !== shape[level]) {
    throw invalid(
      `Encountered list at unexpected size: ${v.length} at level: ${level} expected size: ${shape[level]}`,
    );
  }
  let count = 0;
  for (const item of v) count += fillTensor(item, level + 1, shape, dtype);
  return count;
}

function checkTensor(v: unknown, dtype: DType): { shape: number[]; size: number } {
  const shape = denseShape(v);
  return { shape, size: fillTensor(v, 0, shape, dtype) };
}

/** Applies the model elementwise over a (nested) list of numbers. */
function applyModel(v: unknown): unknown {
  return Array.isArray(v) ? v.map(applyModel) : model(v as number);
}

function rejectStringTensor(values: unknown[]): never {
  // The only string inputs are serialized tf.Example protos, which JSON callers cannot produce
  // here; TF Serving's ParseExample fails the same way on text that is not a serialized proto.
  const first = values.flat(Infinity).find((v) => typeof v === 'string');
  throw invalid(`Could not parse example input, value: '${String(first ?? '')}'`);
}

// ---------------------------------------------------------------------------------------------
// Predict

function predictCall(spec: ModelSpec, body: string): unknown {
  const doc = parseDocument(body);
  const requested = signatureName(doc);
  resolveServable(spec);
  const sigName = requested === '' ? DEFAULT_SIGNATURE : requested;
  const sig = Object.hasOwn(SIGNATURES, sigName) ? SIGNATURES[sigName] : undefined;
  if (!sig) throw invalid(`Serving signature name: "${sigName}" not found in signature def`);

  const hasInstances = Object.hasOwn(doc, 'instances');
  const hasInputs = Object.hasOwn(doc, 'inputs');
  if (hasInstances && hasInputs) {
    throw invalid(
      `JSON Value: ${show(doc)} Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist `,
    );
  }
  if (hasInstances) {
    const rows = rowTensors(doc, sig.input);
    if (sig.input.dtype === 'string') rejectStringTensor(rows);
    return { predictions: rows.map(applyModel) };
  }
  if (hasInputs) {
    const tensor = columnarTensor(doc.inputs, sig.input);
    if (sig.input.dtype === 'string') rejectStringTensor([tensor]);
    return { outputs: applyModel(tensor) };
  }
  throw invalid("Missing 'inputs' or 'instances' key");
}

/** Row form: validates `instances` and returns one input tensor per instance. */
function rowTensors(doc: JsonObject, input: TensorSpec): unknown[] {
  const instances = doc.instances;
  if (!Array.isArray(instances)) throw invalid(`JSON Value: ${show(doc)} Excepting 'instances' to be an list/array`);
  if (instances.length === 0) throw invalid(`JSON Value: ${show(doc)} No values in 'instances' array`);
  const isElementObject = (v: unknown): v is JsonObject => isObject(v) && !isBase64Object(v);
  const objects = isElementObject(instances[0]);
  let first: { shape: number[]; size: number } | undefined;
  const add = (item: unknown): void => {
    const t = checkTensor(item, input.dtype);
    if (!first) first = t;
    else if (first.size !== t.size) throw invalid(`Expecting tensor size: ${first.size} but got: ${t.size}`);
    else if (shapeText(first.shape) !== shapeText(t.shape)) {
      throw invalid(`Expecting shape ${shapeText(first.shape)} but got: ${shapeText(t.shape)}`);
    }
  };
  const rows: unknown[] = [];
  instances.forEach((elem: unknown, i) => {
    if (objects) {
      if (!isElementObject(elem)) throw invalid(`Expecting object but got list at item ${i} of input list`);
      for (const key of Object.keys(elem)) {
        try {
          if (key !== input.name) throw invalid(`JSON object: does not have named input: ${key}`);
          add(elem[key]);
        } catch (err) {
          throw wrap(err, `Failed to process element: ${i} key: ${key} of 'instances' list. Error: `);
        }
      }
      if (!Object.hasOwn(elem, input.name) || Object.keys(elem).length !== 1) {
        throw invalid(
          `Failed to process element: ${i} of 'instances' list. JSON object: ${show(elem)} keys must be equal to: ${input.name}`,
        );
      }
      rows.push(elem[input.name]);
    } else {
      if (isElementObject(elem)) throw invalid(`Expecting value/list but got object at item ${i} of input list`);
      try {
        add(elem);
      } catch (err) {
        throw wrap(err, `Failed to process element: ${i} of 'instances' list. Error: `);
      }
      rows.push(elem);
    }
  });
  return rows;
}

function wrap(err: unknown, prefix: string): unknown {
  return err instanceof TfError ? invalid(`${prefix}INVALID_ARGUMENT: ${err.message}`) : err;
}

/** Columnar form: `inputs` is the single input's value, or an object naming it. */
function columnarTensor(inputs: unknown, input: TensorSpec): unknown {
  let value = inputs;
  if (isObject(inputs) && !isBase64Object(inputs)) {
    if (!Object.hasOwn(inputs, input.name)) throw invalid(`Missing named input: ${input.name} in 'inputs' object.`);
    value = inputs[input.name];
  }
  checkTensor(value, input.dtype);
  return value;
}

// ---------------------------------------------------------------------------------------------
// Classify and regress (tf.Example features; the model parses x: float[1], x2: float[1] = 0)

type FeatureKind = 'float' | 'int64' | 'bytes';
interface Feature { kind: FeatureKind | null; values: unknown[] }
type Example = Map<string, Feature>;

function featureValueKind(name: string, v: unknown): FeatureKind {
  if (typeof v === 'number') {
    if (Number.isFinite(v) && Math.abs(v) > FLOAT_MAX) {
      throw invalid(`Cannot convert JSON value: ${show(v)} to float without loss of precision.`);
    }
    return 'float'; // JSON.parse cannot tell 1 from 1.0; every number is taken as a float
  }
  if (typeof v === 'boolean') return 'int64';
  if (typeof v === 'string' || isBase64Object(v)) return 'bytes';
  throw invalid(`Feature: ${name} has element with unexpected JSON type: ${jsonType(v)}`);
}

function makeExample(v: unknown): Example {
  if (!isObject(v)) throw invalid(`Example must be JSON object but got JSON ${jsonType(v)}`);
  const example: Example = new Map();
  for (const [name, content] of Object.entries(v)) {
    const feature: Feature = { kind: null, values: [] };
    for (const item of Array.isArray(content) ? content : [content]) {
      const kind = featureValueKind(name, item);
      if (feature.kind !== null && feature.kind !== kind) {
        throw invalid(`Unexpected element type in feature: ${name} expecting type: ${feature.kind}`);
      }
      feature.kind = kind;
      feature.values.push(item);
    }
    example.set(name, feature);
  }
  return example;
}

/** The model's ParseExample: reads `x` (required) and `x2` (default 0) as float[1]. */
function parseFeatureX(example: Example, index: number): number {
  for (const [name, required] of [['x', true], ['x2', false]] as const) {
    const f = example.get(name);
    if (!f || f.values.length === 0) {
      if (required) throw invalid(`Name: <unknown>, Feature: ${name} (data type: float) is required but could not be found.`);
      continue;
    }
    if (f.kind !== 'float') {
      throw invalid(
        `Name: <unknown>, Key: ${name}, Index: ${index}.  Data types don't match. Data type: ${f.kind} but expected type: float`,
      );
    }
    if (f.values.length !== 1) {
      throw invalid(
        `Name: <unknown>, Key: ${name}, Index: ${index}.  Number of float values != expected.  Values size: ${f.values.length} but output shape: [1]`,
      );
    }
  }
  return example.get('x')?.values[0] as number;
}

function classifyOrRegress(spec: ModelSpec, body: string, verb: string): unknown {
  const doc = parseDocument(body);
  const requested = signatureName(doc);
  const context = Object.hasOwn(doc, 'context') ? makeExample(doc.context) : undefined;
  const examples = doc.examples;
  if (!Object.hasOwn(doc, 'examples')) {
    throw invalid(`JSON Value: ${show(doc)} When method is ${verb}, key 'examples' is expected and was not found`);
  }
  if (!Array.isArray(examples)) throw invalid(`JSON Value: ${show(doc)} Expecting 'examples' value to be an list/array`);
  if (examples.length === 0) throw invalid(`JSON Value: ${show(doc)} 'examples' value is an empty array`);
  const parsed = examples.map(makeExample);

  resolveServable(spec);
  const sigName = requested === '' ? DEFAULT_SIGNATURE : requested;
  const sig = Object.hasOwn(SIGNATURES, sigName) ? SIGNATURES[sigName] : undefined;
  if (!sig) throw invalid(`No signature was found with the name: ${sigName}`);
  const wanted = verb === 'regress' ? REGRESS : CLASSIFY;
  if (sig.method !== wanted) {
    const kind = verb === 'regress' ? 'regression' : 'classification';
    throw invalid(`Expected ${kind} signature method_name to be ${wanted}. Was: ${sig.method}`);
  }

  const ys = parsed.map((example, i) => {
    // Context features are merged under each example's own (the example wins, as in a proto merge).
    const merged: Example = new Map([...(context ?? new Map<string, Feature>()), ...example]);
    return model(parseFeatureX(merged, i));
  });
  return { results: verb === 'regress' ? ys : ys.map((y) => [['', y]]) };
}
