// The bundled `graphstorm` model: a GraphStorm-style real-time inference server (SageMaker contract).
// Owns: GET /ping, and POST /invocations taking a gs-realtime-v0.1 payload (checked with the same
// spec rules as the gateway, payload/graphstorm.ts) and answering GraphStorm's response body with
// one result per target. Its task comes from GRAPHSTORM_TASK (default node_classification). The
// "model" is arithmetic on the target's features and degree, deterministic so tests can check it:
// node_classification answers logits [mean feature value, degree]; node_regression answers
// [mean feature value + degree]. A feature that is not a number, a list of numbers or text fails
// graph construction (status_code 411), as a DGL conversion would.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { GML_TASKS, type GmlTask } from '../api/types.js';
import { ApiError } from '../errors.js';
import { checkGraphStormPayload, type CheckedGraphPayload } from '../payload/graphstorm.js';

export const GRAPHSTORM_INVOCATIONS_PATH = '/invocations';
export const GRAPHSTORM_PING_PATH = '/ping';
const MAX_BODY_BYTES = 64 * 1024 * 1024;
const MAX_DEPTH = 64;

/** The task this server's model was trained for, from GRAPHSTORM_TASK. */
export function graphStormTaskFromEnv(env: NodeJS.ProcessEnv): GmlTask {
  const task = env.GRAPHSTORM_TASK?.trim() || 'node_classification';
  if (!(GML_TASKS as readonly string[]).includes(task)) {
    throw new Error(`GRAPHSTORM_TASK must be one of ${GML_TASKS.join(', ')}, got "${task}"`);
  }
  return task as GmlTask;
}

function send(res: ServerResponse, status: number, requestUid: string, fields: { message?: string; error?: string; data?: unknown }): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify({ status_code: status, request_uid: requestUid, message: fields.message ?? '', error: fields.error ?? '', data: fields.data ?? {} });
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

/** Handler for the model's task. Never throws. */
export function graphStormHandler(task: GmlTask): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const method = req.method ?? 'GET';
    const path = (req.url ?? '/').split('?')[0];
    const header = req.headers['x-request-id'];
    const requestUid = typeof header === 'string' && header !== '' ? header : randomUUID();
    if (path === GRAPHSTORM_INVOCATIONS_PATH && method === 'POST') {
      invoke(req, res, task, requestUid);
      return;
    }
    req.resume();
    if (path === GRAPHSTORM_PING_PATH && method === 'GET') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ status: 'Healthy', task }));
    } else {
      send(res, 404, requestUid, { error: `no route for ${method} ${path}; predictions are POST ${GRAPHSTORM_INVOCATIONS_PATH}` });
    }
  };
}

function invoke(req: IncomingMessage, res: ServerResponse, task: GmlTask, requestUid: string): void {
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (c: Buffer) => {
    size += c.length;
    if (size > MAX_BODY_BYTES) {
      send(res, 413, requestUid, { error: `payload larger than ${MAX_BODY_BYTES} bytes` });
      req.destroy();
      return;
    }
    chunks.push(c);
  });
  req.on('error', () => res.destroy());
  req.on('end', () => {
    try {
      const results = predict(checkGraphStormPayload(Buffer.concat(chunks), task, MAX_DEPTH), task);
      send(res, 200, requestUid, { message: 'Request processed successfully.', data: { results } });
    } catch (err) {
      if (err instanceof ApiError) send(res, err.httpStatus, requestUid, { error: err.message });
      else send(res, 500, requestUid, { error: 'internal server error' });
    }
  });
}

/** The mean of a feature value's numbers: a number, a (nested) list of numbers, or text (its length / 10). */
function featureValue(v: unknown, where: string): number[] {
  if (typeof v === 'number') return [v];
  if (typeof v === 'string') return [v.length / 10];
  if (Array.isArray(v)) return v.flatMap((x) => featureValue(x, where));
  const kind = v === null ? 'null' : typeof v === 'object' ? 'an object' : `a ${typeof v}`;
  throw new ApiError('graph_construction', `${where}: ${kind} cannot be a feature tensor; features are numbers, lists of numbers or text`);
}

const round = (x: number): number => Math.round(x * 1e4) / 1e4;

function predict({ nodes, edges, targets }: CheckedGraphPayload, task: GmlTask): unknown[] {
  return targets.map((t) => {
    const node = nodes.find((n) => n.node_type === t.node_type && n.node_id === t.node_id)!;
    const values = Object.entries(node.features).flatMap(([name, v]) => featureValue(v, `node ${t.node_type}/${t.node_id} feature ${name}`));
    const mean = values.length ? values.reduce((a, b) => a + b, 0) / values.length : 0;
    const degree = edges.filter((e) => (e.edge_type[0] === t.node_type && e.src_node_id === t.node_id) || (e.edge_type[2] === t.node_type && e.dest_node_id === t.node_id)).length;
    const predictions = task === 'node_classification' ? [round(mean), degree] : [round(mean + degree)];
    return { node_type: t.node_type, node_id: t.node_id, predictions };
  });
}
