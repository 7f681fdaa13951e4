// GraphStorm real-time inference (gs-realtime-v0.1): checking a request payload against the spec
// before it reaches the model, and checking and shaping the model's answer into the spec's response
// body. Each refusal carries the spec's status code through the error catalog: 400 JSON format, 401
// missing field, 402 missing value, 403 target node_type not in the graph, 404 target node_id not in
// the graph, 411 no graph can be built, 421 gml_task not the model's task. Messages name the path.
import type { GmlTask } from '../api/types.js';
import { ApiError, type ErrorCode } from '../errors.js';
import { parseJson, stringifyJson } from './json.js';
import { parseBody } from './prepare.js';
import { kindOf } from './instances.js';

export const GS_PAYLOAD_VERSION = 'gs-realtime-v0.1';

/** A target node of the payload, in payload order. */
export interface GraphTarget {
  node_type: string;
  node_id: string;
}

/** A node of graph.nodes, as checked. */
export interface GraphNode extends GraphTarget {
  features: Record<string, unknown>;
}

/** An edge of graph.edges, as checked. */
export interface GraphEdge {
  edge_type: [string, string, string];
  src_node_id: string;
  dest_node_id: string;
  features: Record<string, unknown>;
}

/** A payload that passed every check. */
export interface CheckedGraphPayload {
  nodes: GraphNode[];
  edges: GraphEdge[];
  targets: GraphTarget[];
}

type Json = Record<string, unknown>;

/** Whether `v` nests objects and lists more than `levelsLeft` deep (recursion bounded by the limit). */
function tooDeep(v: unknown, levelsLeft: number): boolean {
  if (typeof v !== 'object' || v === null) return false;
  if (levelsLeft <= 0) return true;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const x: unknown = v[i];
      if (typeof x === 'object' && x !== null && tooDeep(x, levelsLeft - 1)) return true;
    }
    return false;
  }
  for (const k in v as Json) {
    const x = (v as Json)[k];
    if (typeof x === 'object' && x !== null && tooDeep(x, levelsLeft - 1)) return true;
  }
  return false;
}

function fail(code: ErrorCode, path: string, what: string): never {
  throw new ApiError(code, `${path}: ${what}`);
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// Paths are built only when a check fails: `prefix` is the list or object holding the field
// ('' at the top, 'graph.nodes', ...) and `index` the item's position in it, or -1.
function at(prefix: string, index: number, key: string): string {
  return index < 0 ? `${prefix}${key}` : `${prefix}[${index}].${key}`;
}

/** The value of a required field: 401 when absent, 402 when null. */
function required(obj: Json, key: string, prefix: string, index: number): unknown {
  const v = obj[key];
  if (v === undefined || !Object.prototype.hasOwnProperty.call(obj, key)) fail('graph_missing_field', at(prefix, index, key), 'required field is missing');
  if (v === null) fail('graph_missing_value', at(prefix, index, key), 'has no value (null)');
  return v;
}

/** A required non-empty string field. */
function text(obj: Json, key: string, prefix: string, index: number): string {
  const v = required(obj, key, prefix, index);
  if (typeof v !== 'string') fail('invalid_payload', at(prefix, index, key), `expected a string, got ${kindOf(v)}`);
  if (v === '') fail('graph_missing_value', at(prefix, index, key), 'has no value (empty string)');
  return v;
}

/** A required list field; `nonEmpty` makes [] a 402. */
function list(obj: Json, key: string, prefix: string, nonEmpty: boolean): unknown[] {
  const v = required(obj, key, prefix, -1);
  if (!Array.isArray(v)) fail('invalid_payload', at(prefix, -1, key), `expected a list, got ${kindOf(v)}`);
  if (nonEmpty && v.length === 0) fail('graph_missing_value', at(prefix, -1, key), 'has no value (empty list)');
  return v;
}

function object(obj: Json, key: string, prefix: string, index: number): Json {
  const v = required(obj, key, prefix, index);
  if (!isObject(v)) fail('invalid_payload', at(prefix, index, key), `expected an object, got ${kindOf(v)}`);
  return v;
}

/**
 * The per-type feature rule: every node of a node_type (edge of an edge_type) has the same feature
 * names as the first one seen, and no feature value is null (402).
 */
class FeatureSets {
  private readonly seen = new Map<string, { names: string[]; set: Set<string>; index: number }>();

  /** `prefix` is graph.nodes or graph.edges; its items' type field is `${kind}_type`. */
  constructor(private readonly prefix: string, private readonly kind: 'node' | 'edge') {}

  check(item: Json, type: string, index: number): void {
    const features = object(item, 'features', this.prefix, index);
    const names = Object.keys(features);
    for (let i = 0; i < names.length; i++) {
      if (features[names[i]] === null) fail('graph_missing_value', at(this.prefix, index, `features.${names[i]}`), 'has no value (null)');
    }
    const first = this.seen.get(type);
    if (!first) {
      this.seen.set(type, { names, set: new Set(names), index });
      return;
    }
    let same = names.length === first.names.length;
    for (let i = 0; same && i < names.length; i++) same = first.set.has(names[i]);
    if (!same) {
      const list = (xs: string[]): string => [...xs].sort().join(', ');
      fail('graph_construction', at(this.prefix, index, 'features'), `feature names [${list(names)}] differ from [${list(first.names)}] of ${this.kind}_type ${type} at ${this.prefix}[${first.index}]; every ${this.kind} of one ${this.kind}_type must have the same feature names`);
    }
  }
}

/**
 * Checks a gs-realtime-v0.1 payload for a model of task `task`. Returns its graph and targets (the
 * gateway checks the answer against the targets; the bundled model computes on the graph), or
 * throws the ApiError whose status is the spec's status code.
 */
export function checkGraphStormPayload(raw: Buffer, task: GmlTask, maxDepth: number): CheckedGraphPayload {
  // JSON.parse is iterative (any depth is safe to parse); the depth limit is then checked on the
  // tree, which costs a fraction of the byte scanner predict uses before its recursive validator.
  const body = parseBody(raw, false);
  if (!isObject(body)) fail('invalid_payload', 'body', `expected a JSON object, got ${kindOf(body)}`);
  if (tooDeep(body, maxDepth)) fail('invalid_payload', 'body', `nesting deeper than ${maxDepth} levels`);
  for (const key of ['version', 'gml_task', 'graph', 'targets']) required(body, key, '', -1);
  const version = text(body, 'version', '', -1);
  if (version !== GS_PAYLOAD_VERSION) fail('invalid_payload', 'version', `"${version}" is not supported; expected "${GS_PAYLOAD_VERSION}"`);
  const gmlTask = text(body, 'gml_task', '', -1);
  if (gmlTask !== task) fail('graph_task_mismatch', 'gml_task', `"${gmlTask}" does not match the deployed model's task "${task}"`);
  const graph = object(body, 'graph', '', -1);
  const nodes = list(graph, 'nodes', 'graph.', true);
  const edges = list(graph, 'edges', 'graph.', false);
  const targets = list(body, 'targets', '', true);

  // node type -> node id -> its index in graph.nodes
  const byType = new Map<string, Map<string, number>>();
  const nodeFeatures = new FeatureSets('graph.nodes', 'node');
  for (let i = 0; i < nodes.length; i++) {
    const node = nodes[i];
    if (!isObject(node)) fail('invalid_payload', `graph.nodes[${i}]`, `expected a node object, got ${kindOf(node)}`);
    const type = text(node, 'node_type', 'graph.nodes', i);
    const id = text(node, 'node_id', 'graph.nodes', i);
    nodeFeatures.check(node, type, i);
    let ids = byType.get(type);
    if (!ids) byType.set(type, (ids = new Map()));
    const before = ids.get(id);
    if (before !== undefined) fail('graph_construction', `graph.nodes[${i}]`, `node ${type}/${id} is listed twice (first at graph.nodes[${before}])`);
    ids.set(id, i);
  }

  const edgeFeatures = new FeatureSets('graph.edges', 'edge');
  for (let i = 0; i < edges.length; i++) {
    const edge = edges[i];
    if (!isObject(edge)) fail('invalid_payload', `graph.edges[${i}]`, `expected an edge object, got ${kindOf(edge)}`);
    const edgeType = required(edge, 'edge_type', 'graph.edges', i);
    if (!Array.isArray(edgeType) || edgeType.length !== 3 || typeof edgeType[0] !== 'string' || typeof edgeType[1] !== 'string' || typeof edgeType[2] !== 'string') {
      fail('invalid_payload', `graph.edges[${i}].edge_type`, 'expected a list of three strings [source node type, edge type, destination node type]');
    }
    const [srcType, relation, destType] = edgeType as [string, string, string];
    if (!srcType || !relation || !destType) fail('graph_missing_value', `graph.edges[${i}].edge_type`, 'has an empty string');
    const src = text(edge, 'src_node_id', 'graph.edges', i);
    const dest = text(edge, 'dest_node_id', 'graph.edges', i);
    edgeFeatures.check(edge, `[${srcType}, ${relation}, ${destType}]`, i);
    if (!byType.get(srcType)?.has(src)) fail('graph_construction', `graph.edges[${i}].src_node_id`, `node ${srcType}/${src} is not in graph.nodes`);
    if (!byType.get(destType)?.has(dest)) fail('graph_construction', `graph.edges[${i}].dest_node_id`, `node ${destType}/${dest} is not in graph.nodes`);
  }

  const seen = new Map<string, number>();
  const checkedTargets = targets.map((target, i) => {
    if (!isObject(target)) fail('invalid_payload', `targets[${i}]`, `expected a node object, got ${kindOf(target)}`);
    const type = text(target, 'node_type', 'targets', i);
    const id = text(target, 'node_id', 'targets', i);
    const ids = byType.get(type);
    if (!ids) fail('graph_unknown_node_type', `targets[${i}].node_type`, `"${type}" is the node_type of no node in graph.nodes (node types: ${[...byType.keys()].join(', ')})`);
    if (!ids.has(id)) fail('graph_unknown_node_id', `targets[${i}].node_id`, `"${id}" is not a node of type "${type}" in graph.nodes`);
    const key = nodeKey(type, id);
    const first = seen.get(key);
    if (first !== undefined) fail('invalid_payload', `targets[${i}]`, `node ${type}/${id} is already a target (targets[${first}]); each result answers one target`);
    seen.set(key, i);
    return { node_type: type, node_id: id };
  });
  return { nodes: nodes as GraphNode[], edges: edges as GraphEdge[], targets: checkedTargets };
}

/** One key per node: a type or id may itself hold a `/`. */
function nodeKey(type: string, id: string): string {
  return `${type}\u0000${id}`;
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
  // key → the node's name in messages
  const wanted = new Map(targets.map((t) => [nodeKey(t.node_type, t.node_id), `${t.node_type}/${t.node_id}`]));
  const answered = new Set<string>();
  results.forEach((r, i) => {
    if (!isObject(r) || typeof r.node_type !== 'string' || typeof r.node_id !== 'string' || !Array.isArray(r.predictions)) {
      badAnswer(modelId, `answered data.results[${i}] without node_type, node_id and a predictions list`);
    }
    const key = nodeKey(r.node_type, r.node_id);
    const name = `${r.node_type}/${r.node_id}`;
    if (!wanted.has(key)) badAnswer(modelId, `answered data.results[${i}] for ${name}, which is not a target`);
    if (answered.has(key)) badAnswer(modelId, `answered data.results[${i}] for ${name} a second time; expected one result per target`);
    answered.add(key);
  });
  for (const [key, name] of wanted) {
    if (!answered.has(key)) badAnswer(modelId, `answered no result for target ${name}; expected one per target`);
  }
  const message = typeof parsed.message === 'string' && parsed.message !== '' ? parsed.message : 'Request processed successfully.';
  return `{"status_code":200,"request_uid":${JSON.stringify(requestId)},"message":${JSON.stringify(message)},"error":"","data":{"results":${stringifyJson(results)}}}`;
}
