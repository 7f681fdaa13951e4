// The hostile corpus: body number `index` of corpus `seed` is drawn from its own generator (seeded
// from the two), so any body can be made again alone: its family (by weight, among the families
// that fit), its route, a valid body of that route, the family's mutation, and how it is sent
// (headers, Content-Length or chunked).
import { emit } from './tree.js';
import { Rand, mix } from './rand.js';
import { validBody } from './bases.js';
import { LEXICAL } from './lexical.js';
import { STRUCTURAL } from './structural.js';
import { TARGETS, type Target } from './targets.js';
import type { Family } from './place.js';

export const FAMILIES: readonly Family[] = [...STRUCTURAL, ...LEXICAL];

export interface HostileCase {
  seed: number;
  index: number;
  family: string;
  target: Target;
  body: Buffer;
  headers: Record<string, string>;
  /** Sent in chunks without a Content-Length. */
  chunks: Buffer[] | null;
}

/** Body number `index` of corpus `seed`. `only` limits the families drawn from (by name). */
export function hostileCase(seed: number, index: number, only?: readonly string[]): HostileCase {
  const r = new Rand(mix(seed, index));
  const families = only ? FAMILIES.filter((f) => only.includes(f.name)) : FAMILIES;
  const family = r.weighted(families.map((f) => [f, f.weight] as const));
  const targets = TARGETS.filter((t) => family.applies?.(t) ?? true);
  const target = r.pick(targets);
  const made = family.make(r, target, validBody(r, target));
  const body = Buffer.isBuffer(made.body) ? made.body : emit(made.body);
  const headers: Record<string, string> = {};
  const given = made.headers ?? {};
  const type = 'content-type' in given ? given['content-type'] : 'application/json';
  if (type !== null) headers['content-type'] = type;
  for (const [k, v] of Object.entries(given)) if (k !== 'content-type' && v !== null) headers[k] = v;
  if (target.host) headers.host = target.host;
  const chunked = made.chunked ?? r.chance(0.08);
  return { seed, index, family: family.name, target, body, headers, chunks: chunked ? split(r, body) : null };
}

/** A body cut into chunks of random sizes (at least one chunk, possibly empty ones). */
function split(r: Rand, body: Buffer): Buffer[] {
  const chunks: Buffer[] = [];
  for (let at = 0; at < body.length;) {
    const n = r.chance(0.2) ? r.between(1, 8) : r.between(1, 64 * 1024);
    chunks.push(body.subarray(at, at + n));
    at += n;
  }
  return chunks.length ? chunks : [body];
}

/** The names of the families, in their order. */
export const FAMILY_NAMES = FAMILIES.map((f) => f.name);
