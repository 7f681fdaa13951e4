// The JSON trees the hostile-body generators build and mutate, and their serialisation to bytes.
// Objects are lists of entries (so a tree can hold duplicate keys and keys like `__proto__` without
// touching a prototype), and a Raw node writes its bytes as they are (a NaN token, `1e999`, invalid
// UTF-8, a truncated value), which JSON.stringify cannot.

/** Bytes written into the body unchanged. */
export class Raw {
  readonly bytes: Buffer;
  constructor(bytes: Buffer | string) {
    this.bytes = typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : bytes;
  }
}

/** An object: its entries in order; a key may repeat, and may be raw bytes. */
export class Obj {
  constructor(public entries: [string | Raw, Node][] = []) {}
}

export type Node = null | boolean | number | string | Raw | Obj | Node[];

/** A plain JS value (from a literal or JSON.parse) as a tree. */
export function tree(v: unknown): Node {
  if (v === null || typeof v === 'boolean' || typeof v === 'number' || typeof v === 'string') return v;
  if (v instanceof Raw || v instanceof Obj) return v;
  if (Array.isArray(v)) return v.map(tree);
  if (typeof v === 'object') return new Obj(Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, tree(x)]));
  throw new Error(`no JSON for ${typeof v}`);
}

/** Writes a tree as JSON text (strings through JSON.stringify, so lone surrogates come out escaped). */
export function emit(n: Node): Buffer {
  const parts: Buffer[] = [];
  let text = '';
  const flush = (): void => {
    if (text !== '') parts.push(Buffer.from(text, 'utf8'));
    text = '';
  };
  const raw = (b: Buffer): void => {
    flush();
    parts.push(b);
  };
  // An explicit stack: trees nest up to 100,000 levels.
  const stack: (Node | { close: string } | { sep: string })[] = [n];
  while (stack.length) {
    const x = stack.pop()!;
    if (x === null || typeof x === 'boolean') text += String(x);
    else if (typeof x === 'number') text += Number.isFinite(x) ? JSON.stringify(x) : String(x);
    else if (typeof x === 'string') text += JSON.stringify(x);
    else if (x instanceof Raw) raw(x.bytes);
    else if (Array.isArray(x)) {
      text += '[';
      stack.push({ close: ']' });
      for (let i = x.length - 1; i >= 0; i--) {
        stack.push(x[i]);
        if (i > 0) stack.push({ sep: ',' });
      }
    } else if (x instanceof Obj) {
      text += '{';
      stack.push({ close: '}' });
      for (let i = x.entries.length - 1; i >= 0; i--) {
        const [k, v] = x.entries[i];
        stack.push(v);
        stack.push(k instanceof Raw ? new Raw(Buffer.concat([k.bytes, Buffer.from(':')])) : { sep: `${JSON.stringify(k)}:` });
        if (i > 0) stack.push({ sep: ',' });
      }
    } else if ('close' in x) text += x.close;
    else text += x.sep;
  }
  flush();
  return Buffer.concat(parts);
}

/** A place in a tree: a slot of an array or the value of an object entry. */
export interface Slot {
  get(): Node;
  set(v: Node): void;
  /** The containers above it, outermost first (its depth is their count). */
  depth: number;
}

/** Every value slot of a tree, in document order (the root itself is not a slot). */
export function slots(root: Node, limit = 10_000): Slot[] {
  const out: Slot[] = [];
  const walk = (n: Node, depth: number): void => {
    if (out.length >= limit) return;
    if (Array.isArray(n)) {
      for (let i = 0; i < n.length; i++) {
        out.push({ get: () => n[i], set: (v) => void (n[i] = v), depth: depth + 1 });
        walk(n[i], depth + 1);
      }
    } else if (n instanceof Obj) {
      for (const e of n.entries) {
        out.push({ get: () => e[1], set: (v) => void (e[1] = v), depth: depth + 1 });
        walk(e[1], depth + 1);
      }
    }
  };
  walk(root, 0);
  return out;
}

/** Every object of a tree, the root included, in document order. */
export function objects(root: Node): Obj[] {
  const out: Obj[] = [];
  const walk = (n: Node): void => {
    if (Array.isArray(n)) n.forEach(walk);
    else if (n instanceof Obj) {
      out.push(n);
      for (const e of n.entries) walk(e[1]);
    }
  };
  walk(root);
  return out;
}

/** The value of the first entry named `key` of an object node, or undefined. */
export function member(n: Node, key: string): Node | undefined {
  if (!(n instanceof Obj)) return undefined;
  return n.entries.find(([k]) => k === key)?.[1];
}

/** A deep copy (Raw bytes shared). */
export function clone(n: Node): Node {
  if (Array.isArray(n)) return n.map(clone);
  if (n instanceof Obj) return new Obj(n.entries.map(([k, v]) => [k, clone(v)]));
  return n;
}
