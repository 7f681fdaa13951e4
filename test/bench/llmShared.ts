// What the parts of `npm run bench:llm` (llm.ts: the proxies part; llmPicks.ts: load-aware picks
// against least-request) share: their settings tables read from the environment, the streamed chat
// body, the tiny-llm sample as DeployedModel and Endpoint documents, the load generator (llmLoad.ts)
// copied and run as a process, the model processes a `predictgate local` started, stopping a process
// tree, number formats, sums of Prometheus series, and when a run writes the docs.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import type { LoadConfig, LoadResult } from './llmLoad.js';
import { descendants, readEnvVar } from './procfs.js';
import { Child, logTail, sleep, spawnPinned } from './procs.js';
import { RuntimeEnv, withRuntime } from './runtime.js';

export const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
export const log = (msg: string): void => void process.stderr.write(`${msg}\n`);

/** What every part of the bench runs with: where to put files, the CPUs, the gateway's runtime. */
export interface PartContext {
  tmp: string;
  logDir: string;
  loadCpu: number;
  serverCpu: number;
  runtime: RuntimeEnv;
  nodeFlags: string[];
  imageNode: number | null;
  /** The settings the parts share (the CPUs) have their defaults. */
  sharedDefault: boolean;
  started: Date;
}

/** A part's settings: environment variables with their defaults and meaning (also the docs' settings table). */
export type SettingsTable = Record<string, { def: number; help: string }>;

/** A setting's value: the variable when set (a number of 0 or more), else its default. */
export function readSetting<T extends SettingsTable>(table: T, name: keyof T & string): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return table[name].def;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a number of 0 or more, got "${raw}"`);
  return n;
}

/** True when every setting of `table` has its default value. */
export const allDefault = (table: SettingsTable): boolean => Object.keys(table).every((k) => readSetting(table, k) === table[k].def);

export function chatBody(maxTokens: number): string {
  return JSON.stringify({ model: 'tiny-llm', messages: [{ role: 'user', content: 'Say hello to the streaming benchmark' }], max_tokens: maxTokens, stream: true });
}

/** The sample's DeployedModel and Endpoint, renamed and with `env` on its container. */
export function sampleDocs(name: string, env: Record<string, string>): Record<string, any>[] {
  const text = fs.readFileSync(path.join(ROOT, 'crds', 'samples', 'tiny-llm.yaml'), 'utf8');
  const docs = parseAllDocuments(text).map((d) => d.toJS() as Record<string, any>);
  for (const d of docs) {
    d.metadata.name = name;
    if (d.kind === 'DeployedModel') {
      d.spec.modelSpec.containerSpec.env = Object.entries(env).map(([k, v]) => ({ name: k, value: v }));
    } else {
      for (const dest of d.spec.destinations) dest.serviceRef.name = name;
    }
  }
  return docs;
}

/**
 * A copy of the load generator (llmLoad.js and the procfs.js it imports) in the run's temp dir, so a
 * rebuild of dist/ during the run (npm run build deletes it first) does not break the cells.
 */
export function copyLoadGenerator(tmp: string): string {
  const dir = path.join(tmp, 'load');
  fs.mkdirSync(dir);
  for (const file of ['llmLoad.js', 'procfs.js']) fs.copyFileSync(path.join(ROOT, 'dist', 'test', 'bench', file), path.join(dir, file));
  fs.writeFileSync(path.join(dir, 'package.json'), '{"type": "module"}\n');
  return path.join(dir, 'llmLoad.js');
}

/** Runs the load generator once (pinned to the load CPU) and returns its result; bounded by `maxS`. */
export async function runLoad(name: string, c: Omit<LoadConfig, 'out'>, tmp: string, logDir: string, cpu: number, maxS: number): Promise<LoadResult> {
  const out = path.join(tmp, `${name}.json`);
  const child = spawnPinned(name, process.execPath, [path.join(tmp, 'load', 'llmLoad.js')], {
    cpu,
    env: withRuntime({ ...process.env, LLM_LOAD_CONFIG: JSON.stringify({ ...c, out }) }, {}),
    logDir,
  });
  await waitExit(child, `load generator ${name}`, maxS);
  if (!fs.existsSync(out)) throw new Error(`load generator ${name} wrote no result to ${out}; log:\n${logTail(child)}`);
  return JSON.parse(fs.readFileSync(out, 'utf8')) as LoadResult;
}

/** Until `child` (a process-group leader) exits with 0; killed with its group, and an error with its log, after `maxS` or on another exit. */
export async function waitExit(child: Child, what: string, maxS: number): Promise<void> {
  const deadline = Date.now() + maxS * 1000;
  while (!child.exited && Date.now() < deadline) await sleep(50);
  if (!child.exited) {
    process.kill(-child.pid, 'SIGKILL');
    throw new Error(`${what} did not finish within ${maxS} s; log ${child.logFile}:\n${logTail(child)}`);
  }
  if (child.exited.code !== 0) throw new Error(`${what} failed (${child.exited.code ?? child.exited.signal}); log ${child.logFile}:\n${logTail(child)}`);
}

/** A model process a gateway in local mode started. */
export interface ModelProcess {
  pid: number;
  port: number;
}

/**
 * The model processes of DeployedModel `name` under a gateway in local mode: its descendants with
 * AIP_DEPLOYED_MODEL_ID=name, one per port, in the order they were started (by pid: local mode
 * starts replica 0 first, and lists the replicas' addresses in that order).
 */
export function findModelProcesses(gatewayPid: number, name: string): ModelProcess[] {
  const byPort = new Map<number, ModelProcess>();
  for (const pid of descendants(gatewayPid)) {
    if (readEnvVar(pid, 'AIP_DEPLOYED_MODEL_ID') !== name) continue;
    const port = Number(readEnvVar(pid, 'AIP_HTTP_PORT'));
    if (port && !byPort.has(port)) byPort.set(port, { pid, port });
  }
  return [...byPort.values()].sort((a, b) => a.pid - b.pid);
}

const signal = (pid: number, sig: NodeJS.Signals): void => {
  try {
    process.kill(pid, sig);
  } catch {
    /* already gone */
  }
};

/** Stops a child and everything under it: SIGTERM to its group, up to `graceMs`, then SIGKILL to what is left. */
export async function stopTree(child: Child, graceMs = 5000): Promise<void> {
  const under = descendants(child.pid);
  signal(-child.pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (!child.exited && Date.now() < deadline) await sleep(50);
  for (const pid of [...under, ...descendants(child.pid)]) signal(pid, 'SIGKILL');
  signal(-child.pid, 'SIGKILL');
}

export const f = (n: number, digits = 2): string => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');
export const signed = (n: number, digits = 2): string => (Number.isFinite(n) ? `${n >= 0 ? '+' : '−'}${Math.abs(n).toFixed(digits)}` : 'n/a');

/** The sum of every series of `name` in a Prometheus text page whose labels contain `having` (e.g. `kind="load"`). */
export function seriesSum(text: string, name: string, having = ''): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name) || (line[name.length] !== '{' && line[name.length] !== ' ')) continue;
    const labels = line[name.length] === '{' ? line.slice(name.length, line.indexOf('}') + 1) : '';
    if (having !== '' && !labels.includes(having)) continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

/** The current load average (1, 5 and 15 minutes), as /proc/loadavg gives it. */
export const loadAverage = (): string => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

/** Why a part's table is not written into docs/performance.md (BENCH_WRITE_DOCS, settings, Node), or null when it is. */
export function docsSkipReason(isDefault: boolean, nodeFlags: readonly string[], imageNode: number | null): string | null {
  const why = settingsSkipReason(isDefault && nodeFlags.length === 0);
  if (why !== null || process.env.BENCH_WRITE_DOCS === '1') return why;
  const nodeMajor = Number(process.versions.node.split('.')[0]);
  if (nodeMajor !== imageNode) return `Node ${process.version} ran it and the image runs Node ${imageNode} (PATH="$(.ci/node)":$PATH npm run bench:llm)`;
  return null;
}

/** Why a run's table is not written into the docs as far as its settings go (BENCH_WRITE_DOCS, the defaults), or null. */
export function settingsSkipReason(isDefault: boolean): string | null {
  const write = process.env.BENCH_WRITE_DOCS;
  if (write === '1') return null;
  if (write === '0') return 'BENCH_WRITE_DOCS=0';
  if (!isDefault) return 'not a run with the defaults (BENCH_WRITE_DOCS=1 writes it anyway)';
  return null;
}
