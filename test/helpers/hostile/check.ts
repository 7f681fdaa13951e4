// What every answer to a hostile body must be: never a 5xx; an error is one JSON body of the route's
// dialect (Vertex google.rpc.Status, GDC and TF Serving `{"error": "..."}`, GraphStorm's response body)
// with a JSON Content-Type; a success is JSON of the route's answer shape (TF Serving's NaN and
// Infinity tokens allowed). rawPredict passes the model's answer on unchanged, so there the model's
// own error body counts too, and echo's copy of the request is its success.
import { parseJson } from '../../../src/payload/json.js';
import type { HostileCase } from './corpus.js';
import type { AnswerDialect, Target } from './targets.js';

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

const RPC = new Set(['INVALID_ARGUMENT', 'NOT_FOUND', 'UNAVAILABLE', 'DEADLINE_EXCEEDED', 'INTERNAL', 'UNIMPLEMENTED', 'UNAUTHENTICATED', 'PERMISSION_DENIED', 'RESOURCE_EXHAUSTED', 'FAILED_PRECONDITION', 'ABORTED', 'CANCELLED', 'UNKNOWN']);

/** Whether `v` is an error body of `dialect` for HTTP status `status`. */
export function isDialectError(v: unknown, dialect: AnswerDialect, status: number): boolean {
  if (!isObject(v)) return false;
  switch (dialect) {
    case 'vertex': {
      const e = v.error;
      return isObject(e) && e.code === status && typeof e.message === 'string' && e.message !== '' && typeof e.status === 'string' && RPC.has(e.status) && Object.keys(v).length === 1;
    }
    case 'gdc':
    case 'tfserving':
      return typeof v.error === 'string' && v.error !== '';
    case 'graphstorm':
      return v.status_code === status && typeof v.error === 'string' && v.error !== '' && typeof v.request_uid === 'string' && isObject(v.data);
  }
}

/** The dialect a rawPredict target's model writes its own errors in. */
function modelDialect(t: Target): AnswerDialect | undefined {
  if (t.raw === 'graphstorm') return 'graphstorm';
  return t.raw ? 'tfserving' : undefined;
}

/** Whether `v` has the shape of a success of target `t`. */
function isSuccess(v: unknown, t: Target): boolean {
  if (!isObject(v)) return false;
  if (t.dialect === 'graphstorm' || t.raw === 'graphstorm') {
    return v.status_code === 200 && isObject(v.data) && Array.isArray(v.data.results);
  }
  if (t.body === 'httpbody') return typeof v.data === 'string' && typeof v.contentType === 'string';
  if (t.examples) return Array.isArray(v.results);
  if (t.explain) return Array.isArray(v.explanations) && typeof v.deployedModelId === 'string';
  if (t.raw || t.dialect === 'tfserving') return Array.isArray(v.predictions) || v.outputs !== undefined;
  // TF columnar calls (`inputs`) answer `outputs`.
  const columnar = (t.body === 'tf-predict' || t.body === 'custom-predict') && v.outputs !== undefined;
  return (Array.isArray(v.predictions) || columnar) && typeof v.deployedModelId === 'string';
}

function header(a: Answer, name: string): string | undefined {
  const v = a.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}

const JSON_TYPE = /^application\/json\s*(;|$)/i;

/** What is wrong with the answer to a case (nothing: an empty list). */
export function answerProblems(c: HostileCase, a: Answer): string[] {
  const t = c.target;
  const problems: string[] = [];
  if (a.status >= 500) problems.push(`HTTP ${a.status}`);
  const ok = a.status >= 200 && a.status < 300;
  // echo's rawPredict answers any body that is not its envelope with the same bytes and type.
  if (ok && t.raw === 'echo' && a.body.equals(c.body)) return problems;
  const type = header(a, 'content-type');
  if (type === undefined || !JSON_TYPE.test(type)) problems.push(`Content-Type ${type === undefined ? 'missing' : JSON.stringify(type)}`);
  let v: unknown;
  try {
    v = ok ? parseJson(a.body.toString('utf8'), true) : JSON.parse(a.body.toString('utf8'));
  } catch {
    problems.push(a.body.length === 0 ? 'empty body' : 'body is not JSON');
    return problems;
  }
  if (ok) {
    if (!isSuccess(v, t)) problems.push('a success without the route\'s answer shape');
    return problems;
  }
  const own = modelDialect(t);
  if (!isDialectError(v, t.dialect, a.status) && !(own && isDialectError(v, own, a.status))) problems.push(`an error body not in the ${t.dialect} dialect`);
  return problems;
}
