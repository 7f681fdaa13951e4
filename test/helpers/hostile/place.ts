// Where in a valid body a mutation lands: a random value slot (any, a leaf, a string, a number),
// an object to add a member to, or the body's main field (instances, inputs, graph, examples,
// httpBody); and the shape of one family's output. Shared by the structural and lexical families.
import { Obj, Raw, slots, objects, type Node, type Slot } from './tree.js';
import type { Rand } from './rand.js';
import type { Target } from './targets.js';

/** What a family makes: the body, and how it is sent. */
export interface Made {
  /** A tree (serialised by the corpus) or the bytes themselves. */
  body: Node | Buffer;
  /** Headers besides the defaults (`content-type: application/json`); a null value leaves a default out. */
  headers?: Record<string, string | null>;
  /** Sent without a Content-Length, in chunks. */
  chunked?: boolean;
}

export interface Family {
  name: string;
  /** How often it is drawn, relative to the others. */
  weight: number;
  /** The targets it makes sense for (default: all). */
  applies?(t: Target): boolean;
  make(r: Rand, t: Target, valid: Node): Made;
}

const isLeaf = (n: Node): boolean => !(Array.isArray(n) || n instanceof Obj);

/** A random slot whose value passes `pred`, or undefined. */
export function pickSlot(r: Rand, root: Node, pred: (n: Node, s: Slot) => boolean = () => true): Slot | undefined {
  const all = slots(root).filter((s) => pred(s.get(), s));
  return all.length ? r.pick(all) : undefined;
}

/** Puts `v` in a random leaf slot (strings and numbers first when asked), else in place of the main field; returns the body. */
export function placeAtLeaf(r: Rand, root: Node, v: Node, prefer?: 'string' | 'number'): Node {
  const preferred = prefer && pickSlot(r, root, (n) => typeof n === prefer);
  const slot = preferred || pickSlot(r, root, isLeaf);
  if (slot) slot.set(v);
  else setMain(root, v);
  return root;
}

/** Puts `v` anywhere: a random slot, or (a quarter of the time) the main field. */
export function placeAnywhere(r: Rand, root: Node, v: Node): Node {
  const slot = r.chance(0.25) ? undefined : pickSlot(r, root);
  if (slot) slot.set(v);
  else setMain(root, v);
  return root;
}

const MAIN = ['instances', 'inputs', 'graph', 'examples', 'httpBody'];

/** The entry of the body's main field, when it has one. */
export function mainEntry(root: Node): [string | Raw, Node] | undefined {
  return root instanceof Obj ? root.entries.find(([k]) => typeof k === 'string' && MAIN.includes(k)) : undefined;
}

export function setMain(root: Node, v: Node): void {
  const e = mainEntry(root);
  if (e) e[1] = v;
}

/** A random object of the tree (the root included). */
export function pickObject(r: Rand, root: Node): Obj | undefined {
  const all = objects(root);
  return all.length ? r.pick(all) : undefined;
}

/** A string written with bytes of our choosing between its quotes. */
export function rawString(inner: Buffer | string): Raw {
  return new Raw(Buffer.concat([Buffer.from('"'), typeof inner === 'string' ? Buffer.from(inner, 'utf8') : inner, Buffer.from('"')]));
}
