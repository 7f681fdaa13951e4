// The CRDs' CEL rules (`x-kubernetes-validations`) evaluated the way kube-apiserver evaluates them:
// each rule at the schema position that declares it, for every value present there (list items and
// map values included), with `self` typed by the schema (integer fields are CEL ints, number fields
// doubles), the root's `metadata` reduced to name and generateName, and the failure reported at the
// rule's fieldPath with its messageExpression, else its message, else "failed rule: RULE".
// Transition rules (those naming oldSelf) need the stored object and are left to the apiserver.
import { celEnv, celMethod, CelScalar, isCelError, listType, parse, plan, type CelInput, type CelValue } from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';
import { RE2JS } from '@bufbuild/re2';

/** One CEL rule as a CRD declares it. */
export interface ValidationRule {
  rule: string;
  message?: string;
  messageExpression?: string;
  fieldPath?: string;
  /** How the apiserver labels the failure (Forbidden, Required value, ...); the message is the same. */
  reason?: string;
}

/** A rule that failed on a value: where (Kubernetes field path), why, and which rule. */
export interface RuleFailure {
  path: string;
  message: string;
  rule: string;
}

type Schema = Record<string, unknown>;
type Program = (bindings: { self: CelInput }) => CelValue | Error;

interface CompiledRule {
  source: ValidationRule;
  program: Program;
  messageProgram?: Program;
  /** The fieldPath's field names (`.metadata.name` is ['metadata', 'name']), none without one. */
  fieldPath: string[];
}

/** A schema position with what validating a value there needs. */
export interface RuleTree {
  type?: string;
  rules: CompiledRule[];
  properties: Map<string, RuleTree>;
  items?: RuleTree;
  additionalProperties?: RuleTree;
  /** The resource's root: `self.metadata` holds name and generateName only. */
  root: boolean;
  /** Whether this position or one below it declares a rule (else validation skips it). */
  hasRules: boolean;
}

/**
 * `sum()` of the Kubernetes CEL list library (the apiserver's environment adds it to standard CEL):
 * the sum of a list of ints or of doubles, 0 for an empty list.
 */
const sum = celMethod('sum', listType(CelScalar.DYN), [], CelScalar.DYN, function (this: Iterable<CelValue>) {
  let ints = 0n;
  let doubles = 0;
  let kind: 'int' | 'double' | undefined;
  for (const v of this) {
    const k = typeof v === 'bigint' ? 'int' : typeof v === 'number' ? 'double' : undefined;
    if (k === undefined || (kind !== undefined && k !== kind)) throw new Error('no such overload: sum() takes a list of ints or a list of doubles');
    kind = k;
    if (typeof v === 'bigint') ints += v;
    else doubles += v as number;
  }
  return kind === 'double' ? doubles : ints;
});

/** RE2 patterns of `matches`, compiled once each (the rules' patterns are constants; the cap bounds any that are not). */
const patterns = new Map<string, RE2JS>();
function compilePattern(p: string): RE2JS {
  let re = patterns.get(p);
  if (!re) {
    if (patterns.size >= 256) patterns.clear();
    patterns.set(p, (re = RE2JS.compile(p)));
  }
  return re;
}

/** Standard CEL with the extensions Kubernetes enables that the CRDs' rules use: strings and sum(). */
const ENV = celEnv({ funcs: [...strings, sum], re2: { compile: compilePattern } });

function compile(expr: string, what: string): Program {
  try {
    return plan(ENV, parse(expr)) as Program;
  } catch (err) {
    throw new Error(`cannot compile the ${what} ${JSON.stringify(expr)}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** The field names of a fieldPath in the forms the apiserver accepts: `.a.b`, `['a.b']`. */
function fieldNamesOf(fieldPath: string | undefined): string[] {
  const names: string[] = [];
  const re = /\.([^.[\]]+)|\['((?:[^'\\]|\\.)*)'\]/y;
  while (fieldPath && re.lastIndex < fieldPath.length) {
    const m = re.exec(fieldPath);
    if (!m) throw new Error(`cannot read the fieldPath ${JSON.stringify(fieldPath)}`);
    names.push(m[1] ?? m[2].replace(/\\(.)/g, '$1'));
  }
  return names;
}

/** A field path one field further down, as Kubernetes prints it (`spec.destinations`). */
function child(path: string, name: string): string {
  return path ? `${path}.${name}` : name;
}

/** Compiles every rule of a structural schema (a CRD version's openAPIV3Schema) once. */
export function compileRules(schema: Schema, root = true): RuleTree {
  const declared = (schema['x-kubernetes-validations'] as ValidationRule[] | undefined) ?? [];
  const rules = declared.filter((r) => !/\boldSelf\b/.test(r.rule)).map((r): CompiledRule => ({
    source: r,
    program: compile(r.rule, 'rule'),
    ...(r.messageExpression ? { messageProgram: compile(r.messageExpression, 'messageExpression') } : {}),
    fieldPath: fieldNamesOf(r.fieldPath),
  }));
  const properties = new Map<string, RuleTree>();
  for (const [name, p] of Object.entries((schema.properties as Record<string, Schema> | undefined) ?? {})) properties.set(name, compileRules(p, false));
  const items = schema.items ? compileRules(schema.items as Schema, false) : undefined;
  const additional = typeof schema.additionalProperties === 'object' ? compileRules(schema.additionalProperties as Schema, false) : undefined;
  const hasRules = rules.length > 0 || [...properties.values()].some((t) => t.hasRules) || !!items?.hasRules || !!additional?.hasRules;
  return { type: schema.type as string | undefined, rules, properties, items, additionalProperties: additional, root, hasRules };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Words CEL reserves; a property so named is `__word__` in rules (`self.__namespace__`). */
const RESERVED = new Set(['true', 'false', 'null', 'in', 'as', 'break', 'const', 'continue', 'else', 'for', 'function', 'if', 'import', 'let', 'loop', 'package', 'namespace', 'return', 'var', 'void', 'while']);

/**
 * A property name as rules spell it (the apiserver's escaping): reserved words as `__word__`, and
 * `__`, `.`, `-`, `/` as `__underscores__`, `__dot__`, `__dash__`, `__slash__`; undefined for a name
 * no rule can reach (it starts with a digit or holds another character).
 */
export function escapeName(name: string): string | undefined {
  if (RESERVED.has(name)) return `__${name}__`;
  if (!/^[a-zA-Z_.\-/][a-zA-Z0-9_.\-/]*$/.test(name)) return undefined;
  return name.replace(/__|[.\-/]/g, (s) => ({ __: '__underscores__', '.': '__dot__', '-': '__dash__', '/': '__slash__' })[s]!);
}

/**
 * A JSON value as the apiserver hands it to CEL: objects as maps (with their property names escaped;
 * a map's keys stay as they are), integers of `integer` fields (and of untyped ones) as ints, `number`
 * fields as doubles, whatever the JSON spelled.
 */
function toCel(v: unknown, t: RuleTree | undefined): CelInput {
  if (Array.isArray(v)) return v.map((x) => toCel(x, t?.items));
  if (isObject(v)) {
    const entries: [string, CelInput][] = [];
    for (const k of Object.keys(v)) {
      const property = t?.properties.get(k);
      const name = property ? escapeName(k) : k;
      if (name !== undefined && !(t?.root && k === 'metadata')) entries.push([name, toCel(v[k], property ?? t?.additionalProperties)]);
    }
    if (t?.root && isObject(v.metadata)) {
      const meta = new Map<string, CelInput>();
      for (const k of ['name', 'generateName']) if (typeof v.metadata[k] === 'string') meta.set(k, v.metadata[k] as string);
      entries.push(['metadata', meta]);
    }
    return new Map(entries);
  }
  if (typeof v === 'number') return t?.type !== 'number' && Number.isInteger(v) ? BigInt(v) : v;
  return v as CelInput;
}

function messageOf(r: CompiledRule, self: CelInput): string {
  if (r.messageProgram) {
    const m = r.messageProgram({ self });
    // The apiserver falls back to message when messageExpression fails or gives no one-line text.
    if (typeof m === 'string' && m.trim() && !m.includes('\n')) return m.trim();
  }
  return r.source.message?.trim() ? r.source.message.trim() : `failed rule: ${r.source.rule.trim()}`;
}

/** Every rule the value breaks, in schema order; `path` is the value's field path ('' at the root). */
export function checkRules(tree: RuleTree, value: unknown, path = ''): RuleFailure[] {
  if (value === null || value === undefined || !tree.hasRules) return [];
  const failures: RuleFailure[] = [];
  if (tree.rules.length) {
    const self = toCel(value, tree);
    for (const r of tree.rules) {
      const result = r.program({ self });
      if (result === true) continue;
      const rule = r.source.rule.trim();
      if (typeof result === 'boolean') {
        failures.push({ path: r.fieldPath.reduce(child, path), message: messageOf(r, self), rule });
      } else {
        // What the apiserver says of a rule that cannot be evaluated (an absent field, no such overload).
        const why = isCelError(result) ? result.message : `no such overload: the rule gives ${typeof result}, not bool`;
        failures.push({ path, message: `${why} evaluating rule: ${r.source.message?.trim() || rule}`, rule });
      }
    }
  }
  if (Array.isArray(value)) {
    if (tree.items) value.forEach((v, i) => failures.push(...checkRules(tree.items!, v, `${path}[${i}]`)));
  } else if (isObject(value)) {
    for (const [k, t] of tree.properties) if (Object.hasOwn(value, k)) failures.push(...checkRules(t, value[k], child(path, k)));
    if (tree.additionalProperties && !tree.properties.size) {
      for (const k of Object.keys(value)) failures.push(...checkRules(tree.additionalProperties, value[k], `${path}[${k}]`));
    }
  }
  return failures;
}
