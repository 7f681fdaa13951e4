// GraphStorm real-time inference (gs-realtime-v0.1): checking a request payload against the spec
// before it reaches the model, and checking and shaping the model's answer into the spec's response
// body. Each refusal carries the spec's status code through the error catalog: 400 JSON format, 401
// missing field, 402 missing value, 403 target node_type not in the graph, 404 target node_id not in
// the graph, 411 no graph can be built, 421 gml_task not the model's task. Messages name the path.
import type { GmlTask } from '../api/types.js';
import { ApiError, type ErrorCode } from '../errors.js';
import { parseJson, stringifyJson } from './json.js';
import { parseBody, refuseDeepNesting } from './prepare.js';

export const GS_PAYLOAD_VERSION = 'gs-realtime-v0.1';

/** A target node of the payload, in payload order. */
export interface GraphTarget {
  node_type: string;
  node_id: string;
}

type Json = Record<string, unknown>;

function fail(code: ErrorCode, path: string, what: string): never {
  throw new ApiError(code, `${path}: ${what}`);
}

function kindOf(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'list' : typeof v === 'object' ? 'object' : typeof v;
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The value of a required field: 401 when absent, 402 when null. */
function required(obj: Json, key: string, path: string): unknown {
  if (!Object.prototype.hasOwnProperty.call(obj, key)) fail('graph_missing_field', `${path}${key}`, 'required field is missing');
  const v = obj[key];
  if (v === null) fail('graph_missing_value', `${path}${key}`, 'has no value (null)');
  return v;
}

/** A required non-empty string field. */
function text(obj: Json, key: string, path: string): string {
  const v = required(obj, key, path);
  if (typeof v !== 'string') fail('invalid_payload', `${path}${key}`, `expected a string, got ${kindOf(v)}`);
  if (v === '') fail('graph_missing_value', `${path}${key}`, 'has no value (empty string)');
  return v;
}

/** A required list field; `nonEmpty` makes [] a 402. */
function list(obj: Json, key: string, path: string, nonEmpty: boolean): unknown[] {
  const v = required(obj, key, path);
  if (!Array.isArray(v)) fail('invalid_payload', `${path}${key}`, `expected a list, got ${kindOf(v)}`);
  if (nonEmpty && v.length === 0) fail('graph_missing_value', `${path}${key}`, 'has no value (empty list)');
  return v;
}

function object(obj: Json, key: string, path: string): Json {
  const v = required(obj, key, path);
  if (!isObject(v)) fail('invalid_payload', `${path}${key}`, `expected an object, got ${kindOf(v)}`);
  return v;
}

/** Feature names of a node or edge, sorted and joined (for the per-type consistency rule); null values are 402. */
function featureNames(item: Json, path: string): string {
  const features = object(item, 'features', path);
  const names = Object.keys(features);
  for (const name of names) {
    if (features[name] === null) fail('graph_missing_value', `${path}features.${name}`, 'has no value (null)');
  }
  return names.sort().join(', ');
}

/** First place each type's feature names were seen, to report a mismatch against. */
class FeatureSets {
  private readonly seen = new Map<string, { names: string; path: string }>();

  /** `kind` is node or edge: its type field is `${kind}_type`. */
  constructor(private readonly kind: 'node' | 'edge') {}

  /** `path` is the node's or edge's own path, e.g. graph.nodes[3]. */
  check(type: string, names: string, path: string): void {
    const first = this.seen.get(type);
    if (!first) {
      this.seen.set(type, { names, path });
    } else if (first.names !== names) {
      fail('graph_construction', `${path}.features`, `feature names [${names}] differ from [${first.names}] of ${this.kind}_type ${type} at ${first.path}; every ${this.kind} of one ${this.kind}_type must have the same feature names`);
    }
  }
}

/**
 * Checks a gs-realtime-v0.1 payload for a model of task `task`. Returns its targets (for checking
 * the answer), or throws the ApiError whose status is the spec's status code.
 */
export function checkGraphStormPayload(raw: Buffer, task: GmlTask, maxDepth: number): GraphTarget[] {
  refuseDeepNesting(raw, maxDepth);
  const body = parseBody(raw, false);
  if (!isObject(body)) fail('invalid_payload', 'body', `expected a JSON object, got ${kindOf(body)}`);
  for (const key of ['version', 'gml_task', 'graph', 'targets']) required(body, key, '');
  const version = text(body, 'version', '');
  if (version !== GS_PAYLOAD_VERSION) fail('invalid_payload', 'version', `"${version}" is not supported; expected "${GS_PAYLOAD_VERSION}"`);
  const gmlTask = text(body, 'gml_task', '');
  if (gmlTask !== task) fail('graph_task_mismatch', 'gml_task', `"${gmlTask}" does not match the deployed model's task "${task}"`);
  const graph = object(body, 'graph', '');
  const nodes = list(graph, 'nodes', 'graph.', true);
  const edges = list(graph, 'edges', 'graph.', false);
  const targets = list(body, 'targets', '', true);

  // node type -> node id -> where it is listed
  const byType = new Map<string, Map<string, string>>();
  const nodeFeatures = new FeatureSets('node');
  nodes.forEach((node, i) => {
    const path = `graph.nodes[${i}].`;
    if (!isObject(node)) fail('invalid_payload', `graph.nodes[${i}]`, `expected a node object, got ${kindOf(node)}`);
    const type = text(node, 'node_type', path);
    const id = text(node, 'node_id', path);
    nodeFeatures.check(type, featureNames(node, path), `graph.nodes[${i}]`);
    let ids = byType.get(type);
    if (!ids) byType.set(type, (ids = new Map()));
    const before = ids.get(id);
    if (before !== undefined) fail('graph_construction', `graph.nodes[${i}]`, `node ${type}/${id} is listed twice (first at ${before})`);
    ids.set(id, `graph.nodes[${i}]`);
  });

  const edgeFeatures = new FeatureSets('edge');
  edges.forEach((edge, i) => {
    const path = `graph.edges[${i}].`;
    if (!isObject(edge)) fail('invalid_payload', `graph.edges[${i}]`, `expected an edge object, got ${kindOf(edge)}`);
    const edgeType = required(edge, 'edge_type', path);
    if (!Array.isArray(edgeType) || edgeType.length !== 3 || edgeType.some((t) => typeof t !== 'string')) {
      fail('invalid_payload', `${path}edge_type`, 'expected a list of three strings [source node type, edge type, destination node type]');
    }
    const [srcType, relation, destType] = edgeType as string[];
    if (!srcType || !relation || !destType) fail('graph_missing_value', `${path}edge_type`, 'has an empty string');
    const src = text(edge, 'src_node_id', path);
    const dest = text(edge, 'dest_node_id', path);
    edgeFeatures.check(`[${srcType}, ${relation}, ${destType}]`, featureNames(edge, path), `graph.edges[${i}]`);
    if (!byType.get(srcType)?.has(src)) fail('graph_construction', `${path}src_node_id`, `node ${srcType}/${src} is not in graph.nodes`);
    if (!byType.get(destType)?.has(dest)) fail('graph_construction', `${path}dest_node_id`, `node ${destType}/${dest} is not in graph.nodes`);
  });

  return targets.map((target, i) => {
    const path = `targets[${i}].`;
    if (!isObject(target)) fail('invalid_payload', `targets[${i}]`, `expected a node object, got ${kindOf(target)}`);
    const type = text(target, 'node_type', path);
    const id = text(target, 'node_id', path);
    const ids = byType.get(type);
    if (!ids) fail('graph_unknown_node_type', `${path}node_type`, `"${type}" is the node_type of no node in graph.nodes (node types: ${[...byType.keys()].join(', ')})`);
    if (!ids.has(id)) fail('graph_unknown_node_id', `${path}node_id`, `"${id}" is not a node of type "${type}" in graph.nodes`);
    return { node_type: type, node_id: id };
  });
}

function badAnswer(modelId: string, what: string): never {
  throw new ApiError('bad_upstream_response', `deployed model ${modelId} ${what}`);
}

/**
 * The response body for a model's 2xx answer: GraphStorm's body with the gateway's request id as
 * request_uid, and exactly one result (with a `predictions` list) per target. A model answer that
 * reports a non-200 status_code is passed on as that error.
 */
export function shapeGraphStormAnswer(answer: Buffer, targets: readonly GraphTarget[], requestId: string, modelId: string): string {
  let parsed: unknown;
  try {
    parsed = parseJson(answer.toString('utf8'), true);
  } catch {
    badAnswer(modelId, 'answered with a body that is not JSON');
  }
  if (!isObject(parsed)) badAnswer(modelId, `answered with ${kindOf(parsed)}, expected a GraphStorm response object`);
  const status = parsed.status_code;
  if (status !== undefined && status !== 200) {
    const code = typeof status === 'number' && Number.isInteger(status) && status >= 400 && status < 600 ? status : 500;
    const error = typeof parsed.error === 'string' && parsed.error !== '' ? parsed.error : `deployed model ${modelId} reported status_code ${String(status)}`;
    throw new ApiError('upstream_error', error, code);
  }
  const data = parsed.data;
  const results = isObject(data) ? data.results : undefined;
  if (!Array.isArray(results)) badAnswer(modelId, 'answered without a data.results list');
  const wanted = new Set(targets.map((t) => `${t.node_type}/${t.node_id}`));
  const answered = new Set<string>();
  results.forEach((r, i) => {
    if (!isObject(r) || typeof r.node_type !== 'string' || typeof r.node_id !== 'string' || !Array.isArray(r.predictions)) {
      badAnswer(modelId, `answered data.results[${i}] without node_type, node_id and a predictions list`);
    }
    const key = `${r.node_type}/${r.node_id}`;
    if (!wanted.has(key)) badAnswer(modelId, `answered data.results[${i}] for ${key}, which is not a target`);
    answered.add(key);
  });
  for (const key of wanted) {
    if (!answered.has(key)) badAnswer(modelId, `answered no result for target ${key}; expected one per target`);
  }
  const message = typeof parsed.message === 'string' && parsed.message !== '' ? parsed.message : 'Request processed successfully.';
  return `{"status_code":200,"request_uid":${JSON.stringify(requestId)},"message":${JSON.stringify(message)},"error":"","data":{"results":${stringifyJson(results)}}}`;
}
