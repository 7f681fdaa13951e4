// The request shape of TF Serving's classify and regress (its REST API): a JSON object with
// `examples`, a non-empty list of objects of features, an optional `signature_name` (a string) and an
// optional `context` object of features shared by every example (a feature in `context` must not
// appear in an example). A feature's value is a number, a boolean, a string, {"b64": "..."} or a
// list of them, never null, a nested list or another object; its values are all strings (bytes) or
// all numbers and booleans. Each failure names its path: `examples[2]: expected an object, got number`.
import { ApiError } from '../errors.js';
import { isBase64, isObject, kindOf, Path } from './instances.js';
import { parseBody, refuseDeepNesting } from './prepare.js';

function fail(path: Path | string, message: string): never {
  throw new ApiError('invalid_payload', `${typeof path === 'string' ? path : path.text()}: ${message}`);
}

/** Checks a classify or regress body; throws the first rule it breaks. */
export function checkExamplesBody(raw: Buffer, verb: 'classify' | 'regress', maxDepth: number): void {
  refuseDeepNesting(raw, maxDepth);
  const body = parseBody(raw, true);
  if (!isObject(body)) fail('body', `expected a JSON object with "examples" (TF Serving's ${verb} request), got ${kindOf(body)}`);
  if (body.signature_name !== undefined && typeof body.signature_name !== 'string') fail('signature_name', `expected a string, got ${kindOf(body.signature_name)}`);
  let shared: Set<string> | undefined;
  if (body.context !== undefined) {
    if (!isObject(body.context)) fail('context', `expected an object of features, got ${kindOf(body.context)}`);
    checkFeatures(body.context, new Path('context'));
    shared = new Set(Object.keys(body.context));
  }
  const examples = body.examples;
  if (examples === undefined) fail('body', `"examples" is required (a list of objects of features; TF Serving's ${verb} request)`);
  if (!Array.isArray(examples)) fail('examples', `expected a list of objects, got ${kindOf(examples)}`);
  if (examples.length === 0) fail('examples', 'expected at least one example, got an empty list');
  const path = new Path('examples');
  for (let i = 0; i < examples.length; i++) {
    const example = examples[i];
    path.push(i);
    if (!isObject(example)) fail(path, `expected an object, got ${kindOf(example)}`);
    checkFeatures(example, path);
    if (shared) {
      for (const name in example) if (shared.has(name)) fail(path.text(name), 'this feature is also in context; a feature in context must not appear in an example');
    }
    path.pop();
  }
}

type ValueKind = 'bytes' | 'number';

/** Every feature of an example (or of the context). */
function checkFeatures(features: Record<string, unknown>, path: Path): void {
  for (const name in features) {
    path.push(name);
    const v = features[name];
    if (Array.isArray(v)) {
      let first: ValueKind | undefined;
      for (let j = 0; j < v.length; j++) {
        path.push(j);
        const kind = valueKind(v[j], path);
        if (first === undefined) first = kind;
        else if (kind !== first) fail(path, `expected ${first === 'bytes' ? 'a string' : 'a number'} like ${path.text().replace(/\[\d+\]$/, '[0]')}, got ${kindOf(v[j])} (a feature's values are all strings or all numbers)`);
        path.pop();
      }
    } else {
      valueKind(v, path);
    }
    path.pop();
  }
}

function valueKind(v: unknown, path: Path): ValueKind {
  if (typeof v === 'number' || typeof v === 'boolean') return 'number';
  if (typeof v === 'string') return 'bytes';
  if (isObject(v) && Object.keys(v).length === 1 && 'b64' in v) {
    if (typeof v.b64 !== 'string' || !isBase64(v.b64)) fail(path.text('b64'), 'expected valid base64 (RFC 4648 standard or URL-safe alphabet, optional padding)');
    return 'bytes';
  }
  fail(path, `expected a number, a string, {"b64": "..."} or a list of them, got ${Array.isArray(v) ? 'a nested list' : kindOf(v)}`);
}
