// The runtime settings the product ships: the environment variables the image sets on the `predictgate`
// command (NODE_OPTIONS, GLIBC_TUNABLES: `ENV` lines of the Dockerfile's final stage), which the chart's
// defaults repeat (test/unit/runtime-settings.test.ts holds them equal), and what the chart adds from a
// component's values (the heap sized from the container's memory limit). The bench runs the gateway with
// exactly these, unless a BENCH_GATEWAY_* variable replaces one for an experiment (then it says so).

import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';

/** The environment variables that make up the runtime settings, in the order they are reported. */
const RUNTIME_VARS = ['NODE_OPTIONS', 'GLIBC_TUNABLES'] as const;
export type RuntimeVar = (typeof RUNTIME_VARS)[number];
/** A runtime setting's value; absent when the image does not set it. */
export type RuntimeEnv = Partial<Record<RuntimeVar, string>>;

/** `ENV NAME=value` or `ENV NAME="value"` (one variable per line) of the Dockerfile's last stage. */
export function parseDockerfileEnv(text: string): Record<string, string> {
  const stages = text.split(/^FROM\s/m);
  const last = stages[stages.length - 1];
  const env: Record<string, string> = {};
  for (const line of last.split('\n')) {
    const m = /^ENV\s+([A-Za-z_][A-Za-z0-9_]*)=(?:"([^"\\]*)"|(\S*))\s*$/.exec(line);
    if (m) env[m[1]] = m[2] ?? m[3];
    else if (/^ENV\s/.test(line)) throw new Error(`Dockerfile: expected "ENV NAME=value" or ENV NAME="value", got ${JSON.stringify(line)}`);
  }
  return env;
}

/**
 * The Node major version a Dockerfile's last stage starts from (`FROM node:24-...`, or `FROM ${BASE}`
 * with `ARG BASE=node:24-...` before the first FROM: the argument's default), or null when it names none.
 */
export function dockerfileNodeMajor(text: string): number | null {
  const args = new Map([...text.split(/^FROM\s/m)[0].matchAll(/^ARG\s+([A-Za-z_][A-Za-z0-9_]*)=(\S+)/gm)].map((m) => [m[1], m[2]]));
  const froms = [...text.matchAll(/^FROM\s+(\S+)/gm)].map((m) => m[1].replace(/\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?/g, (_, name: string) => args.get(name) ?? ''));
  const m = froms.length > 0 ? /^node:(\d+)/.exec(froms[froms.length - 1]) : null;
  return m ? Number(m[1]) : null;
}

/** The Node major version of the image's last stage (the repository root's Dockerfile), or null when it names none. */
export function imageNodeMajor(root: string): number | null {
  return dockerfileNodeMajor(fs.readFileSync(path.join(root, 'Dockerfile'), 'utf8'));
}

/** The runtime settings the image ships (repository root's Dockerfile). */
export function shippedRuntime(root: string): RuntimeEnv {
  const env = parseDockerfileEnv(fs.readFileSync(path.join(root, 'Dockerfile'), 'utf8'));
  const out: RuntimeEnv = {};
  for (const v of RUNTIME_VARS) if (env[v] !== undefined) out[v] = env[v];
  return out;
}

/**
 * The shipped settings with each `${prefix}${NAME}` variable of `source` (e.g. BENCH_GATEWAY_NODE_OPTIONS)
 * put in NAME's place; an empty one removes the setting. Returns the settings and the names replaced.
 */
export function overrideRuntime(shipped: RuntimeEnv, source: NodeJS.ProcessEnv, prefix: string): { env: RuntimeEnv; replaced: RuntimeVar[] } {
  const env: RuntimeEnv = { ...shipped };
  const replaced: RuntimeVar[] = [];
  for (const v of RUNTIME_VARS) {
    const value = source[`${prefix}${v}`];
    if (value === undefined) continue;
    replaced.push(v);
    if (value === '') delete env[v];
    else env[v] = value;
  }
  return { env, replaced };
}

/** `base` with the runtime variables set to `settings` and every one not in it removed. */
export function withRuntime(base: NodeJS.ProcessEnv, settings: RuntimeEnv): NodeJS.ProcessEnv {
  const env = { ...base };
  for (const v of RUNTIME_VARS) {
    if (settings[v] === undefined) delete env[v];
    else env[v] = settings[v];
  }
  return env;
}

/** `NODE_OPTIONS="..." GLIBC_TUNABLES=...`, or "none" when no setting is set. */
export function describeRuntime(settings: RuntimeEnv): string {
  const parts = RUNTIME_VARS.filter((v) => settings[v] !== undefined).map((v) => `${v}=${JSON.stringify(settings[v])}`);
  return parts.length > 0 ? parts.join(' ') : 'none (Node and glibc defaults)';
}

/** A Kubernetes quantity of bytes (`384Mi`, `1Gi`, `500M`, `128974848`, `1e9`) as a number of bytes. */
export function quantityBytes(quantity: string | number): number {
  const m = /^(\d+(?:\.\d+)?(?:[eE]\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$/.exec(String(quantity).trim());
  if (!m) throw new Error(`not a quantity of bytes: ${JSON.stringify(quantity)}`);
  const binary: Record<string, number> = { Ki: 1, Mi: 2, Gi: 3, Ti: 4, Pi: 5, Ei: 6 };
  const decimal: Record<string, number> = { k: 1, M: 2, G: 3, T: 4, P: 5, E: 6 };
  const unit = m[2] ?? '';
  const scale = unit in binary ? 1024 ** binary[unit] : unit in decimal ? 1000 ** decimal[unit] : 1;
  return Math.ceil(Number(m[1]) * scale);
}

/** A component's values that make up its NODE_OPTIONS in the chart. */
export interface NodeOptionValues {
  nodeOptions?: string;
  heapPercent?: number;
}

/**
 * The NODE_OPTIONS the chart renders from a component's values: `predictgate.nodeOptions` in the
 * chart's templates/_helpers.tpl (the chart's test holds the two equal).
 */
export function chartNodeOptions(values: NodeOptionValues): string {
  const options = values.nodeOptions ?? '';
  const percent = Math.trunc(values.heapPercent ?? 0);
  if (percent <= 0 || /--max[-_]old[-_]space[-_]size/.test(options)) return options;
  return `${options} --max-old-space-size-percentage=${percent}`.trim();
}

/** A component as the chart runs it by default: its runtime settings and its container's memory limit. */
export interface ChartRuntime {
  env: RuntimeEnv;
  /** resources.limits.memory in bytes, or null when the chart sets none. */
  memoryLimitBytes: number | null;
}

/** The chart's defaults (charts/predictgate/values.yaml) for `component`. */
export function chartRuntime(root: string, component: 'gateway' | 'controller'): ChartRuntime {
  const values = parse(fs.readFileSync(path.join(root, 'charts/predictgate/values.yaml'), 'utf8')) as Record<string, NodeOptionValues & { glibcTunables?: string; resources?: { limits?: { memory?: string | number } } }>;
  const v = values[component];
  const env: RuntimeEnv = {};
  const nodeOptions = chartNodeOptions(v);
  if (nodeOptions !== '') env.NODE_OPTIONS = nodeOptions;
  if (v.glibcTunables) env.GLIBC_TUNABLES = v.glibcTunables;
  const limit = v.resources?.limits?.memory;
  return { env, memoryLimitBytes: limit === undefined ? null : quantityBytes(limit) };
}
