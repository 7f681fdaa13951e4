// Checking and shaping a model's predict answer, on bytes: it must be a JSON object with one
// prediction per instance (or `outputs` for TF columnar calls); the gateway's fields
// (deployedModelId, model, modelDisplayName, modelVersionId) are spliced in. Also: the message
// to pass on from a model's error answer.
import { ApiError } from '../errors.js';
import { JsonSyntaxError } from './json.js';
import { scanObject, type Member } from './scan.js';
import type { PredictShape } from './validate.js';

const OURS = new Set(['deployedModelId', 'model', 'modelDisplayName', 'modelVersionId']);
const COMMA = Buffer.from(',');
const CLOSE = Buffer.from('}');

export interface ShapeOptions {
  maxDepth: number;
  modelId: string;
  /** The list holding one entry per instance: `predictions` (default), or `explanations` for explain. */
  listKey?: 'predictions' | 'explanations';
}

/**
 * Returns the answer to send as parts to write in order (slices of the model's answer and the
 * spliced fields: nothing is copied), or throws ApiError naming what was wrong with the answer.
 */
export function shapePredictAnswer(body: Buffer, shape: PredictShape, fields: Buffer, opts: ShapeOptions): Buffer[] {
  const list = opts.listKey ?? 'predictions';
  const entry = list === 'predictions' ? 'prediction' : 'explanation';
  let scan;
  try {
    scan = scanObject(body, { allowNonFinite: true, maxDepth: opts.maxDepth, elementsOf: list });
  } catch (err) {
    const why = err instanceof JsonSyntaxError ? err.message : 'unreadable';
    throw new ApiError('bad_upstream_response', `deployed model ${opts.modelId} answered with a body that is not a JSON object (${why})`);
  }
  const { members, elements, close } = scan;
  const has = (k: string): Member | undefined => members.find((m) => m.key === k);
  for (const k of [list, 'outputs', 'error']) {
    if (members.filter((m) => m.key === k).length > 1) {
      throw new ApiError('bad_upstream_response', `deployed model ${opts.modelId} answered with "${k}" twice`);
    }
  }
  const errorMember = has('error');
  if (errorMember && !has(list) && !has('outputs')) {
    const message = clip(messageFromJsonValue(body.subarray(errorMember.start, errorMember.end)));
    throw new ApiError('upstream_error', message === '' ? `deployed model ${opts.modelId} reported an error without a message` : message);
  }
  if (shape.instanceCount === null) {
    if (!has('outputs') && !has(list)) {
      throw new ApiError('bad_upstream_response', `deployed model ${opts.modelId} answered without "outputs" or "${list}"`);
    }
  } else if (elements === null) {
    throw new ApiError('bad_upstream_response', `deployed model ${opts.modelId} answered without a "${list}" list`);
  } else if (elements.length !== shape.instanceCount) {
    throw new ApiError('bad_upstream_response',
      `deployed model ${opts.modelId} returned ${elements.length} ${entry}${elements.length === 1 ? '' : 's'} for ${shape.instanceCount} instance${shape.instanceCount === 1 ? '' : 's'}; expected exactly one per instance`);
  }
  if (!members.some((m) => OURS.has(m.key))) {
    const head = body.subarray(0, close);
    return members.length ? [head, COMMA, fields, CLOSE] : [head, fields, CLOSE];
  }
  // The model set some of our fields itself: rebuild the object from its other members.
  const parts: Buffer[] = [Buffer.from('{')];
  for (const m of members) {
    if (OURS.has(m.key)) continue;
    parts.push(Buffer.from(`${JSON.stringify(m.key)}:`), body.subarray(m.start, m.end), COMMA);
  }
  parts.push(fields, CLOSE);
  return parts;
}

function messageFromJsonValue(raw: Buffer): string {
  try {
    const v: unknown = JSON.parse(raw.toString('utf8'));
    if (typeof v === 'string') return v;
    if (v && typeof v === 'object' && typeof (v as { message?: unknown }).message === 'string') return (v as { message: string }).message;
    return JSON.stringify(v);
  } catch {
    return raw.toString('utf8', 0, 500);
  }
}

const MAX_MESSAGE = 1000;

/**
 * The message of a model's error answer, passed on as the model wrote it: `{"error": "..."}` (TF Serving, GDC), `{"error": {...,
 * "message"}}` (google.rpc), `{"message"}` / `{"detail"}` (KServe, FastAPI), or a short plain text.
 * HTML bodies are summarised, never passed on.
 */
export function upstreamErrorMessage(status: number, contentType: string | undefined, body: Buffer, modelId: string): string {
  const prefix = `deployed model ${modelId} answered HTTP ${status}`;
  const text = body.toString('utf8', 0, Math.min(body.length, 64 * 1024)).trim();
  if (text === '') return `${prefix} with an empty body`;
  if (/html/i.test(contentType ?? '') || text.startsWith('<')) return `${prefix} with an HTML page`;
  try {
    const v = JSON.parse(text) as Record<string, unknown>;
    for (const k of ['error', 'message', 'detail']) {
      const m = v?.[k];
      if (typeof m === 'string') return clip(m);
      if (m && typeof m === 'object' && typeof (m as { message?: unknown }).message === 'string') return clip((m as { message: string }).message);
    }
    return clip(text);
  } catch {
    return clip(text);
  }
}

function clip(s: string): string {
  return s.length > MAX_MESSAGE ? `${s.slice(0, MAX_MESSAGE)}…` : s;
}
