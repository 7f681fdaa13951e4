// Test harness for local mode in-process: writes manifests into a temp folder, starts runLocal on
// a free port, and waits for conditions by listening to the store (no sleeps). Also knows where
// the bundled and faulty model commands are.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request as httpRequest } from 'node:http';
import { loadConfig, type Config } from '../../src/config.js';
import { silentLogger } from '../../src/log.js';
import { runLocal, type LocalMode } from '../../src/local/run.js';
import type { DeployedModel, Endpoint } from '../../src/api/types.js';
import { findCondition } from '../../src/api/conditions.js';

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const BIN = join(ROOT, 'bin/predictgate.js');
export const FAULTY = join(ROOT, 'dist/test/helpers/faultyModel.js');

export interface LocalHarness {
  mode: LocalMode;
  dir: string;
  base: string;
  url(path: string): string;
  vertex(endpoint: string, verb?: string, project?: string): string;
  write(file: string, yaml: string): Promise<void>;
  /** Resolves once `pred` holds for the store's objects; re-checked on every store change. */
  until(pred: (h: LocalHarness) => boolean, what: string, timeoutMs?: number): Promise<void>;
  model(key: string): DeployedModel | undefined;
  endpoint(key: string): Endpoint | undefined;
  stop(): Promise<void>;
}

export interface HarnessOptions {
  settings?: Partial<Config>;
  random?: () => number;
  clock?: () => Date;
  /** The monotonic clock (ms) of the autoscaler and the gateway's demand counters. */
  now?: () => number;
}

export async function startLocal(files: Record<string, string>, opts: HarnessOptions = {}): Promise<LocalHarness> {
  const dir = await mkdtemp(join(tmpdir(), 'predictgate-test-'));
  for (const [f, text] of Object.entries(files)) await writeFile(join(dir, f), text);
  // Local mode's own defaults (auth none among them), as `predictgate local` has them.
  const { config } = loadConfig([], {}, 'local');
  const mode = await runLocal({
    dir,
    config: { ...config, port: 0, logLevel: 'silent', healthIntervalMs: 200, ...opts.settings },
    logger: silentLogger(),
    random: opts.random,
    clock: opts.clock,
    now: opts.now,
  });
  const base = `http://127.0.0.1:${mode.port}`;
  const h: LocalHarness = {
    mode,
    dir,
    base,
    url: (path) => base + path,
    vertex: (endpoint, verb = 'predict', project = 'default') => `${base}/v1/projects/${project}/locations/local/endpoints/${endpoint}:${verb}`,
    write: (file, yaml) => writeFile(join(dir, file), yaml),
    model: (key) => mode.store.getDeployedModel(key),
    endpoint: (key) => mode.store.getEndpoint(key),
    until(pred, what, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        let done = false;
        const check = (): void => {
          if (done) return;
          let ok = false;
          try {
            ok = pred(h);
          } catch {
            ok = false;
          }
          if (ok) {
            done = true;
            clearTimeout(timer);
            resolve();
          }
        };
        const timer = setTimeout(() => {
          if (!done) {
            done = true;
            reject(new Error(`timed out after ${timeoutMs} ms waiting for: ${what}\n${notReady(h)}`));
          }
        }, timeoutMs);
        mode.store.onChange(check);
        check();
      });
    },
    async stop() {
      await mode.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
  return h;
}

/** What a timed-out wait saw: every object whose primary condition is not True, with its message. */
function notReady(h: LocalHarness): string {
  const lines: string[] = [];
  const objects = [
    ...h.mode.store.listDeployedModels().map((o) => ['DeployedModel', 'Ready', o] as const),
    ...h.mode.store.listEndpoints().map((o) => ['Endpoint', 'EndpointReady', o] as const),
  ];
  for (const [kind, type, o] of objects) {
    const c = findCondition(o.status?.conditions, type);
    const stale = o.status?.observedGeneration !== o.metadata.generation;
    if (c?.status !== 'True' || stale) {
      lines.push(`  ${kind} ${o.metadata.namespace}/${o.metadata.name}: ${c ? `${c.status} ${c.reason}: ${c.message}` : 'no condition'}${stale ? ' (status not of the current generation)' : ''}`);
    }
  }
  return lines.length > 0 ? `not ready:\n${lines.join('\n')}` : 'every object Ready';
}

/** A clock for the autoscaler and the gateway's demand (`now`): real time plus what the test adds. */
export function testClock(): { now: () => number; advance(ms: number): void } {
  let offset = 0;
  return { now: () => performance.now() + offset, advance: (ms) => void (offset += ms) };
}

/**
 * Brings a model that scales on calls to zero by the clock: the autoscaler watches it first (it
 * scales down only what it has watched for a stable window), then the clock moves past the default
 * 60 s window, and the model's status says ScaledToZero.
 */
export async function scaledToZeroByClock(h: LocalHarness, clock: { advance(ms: number): void }, key: string, what = 'the model at zero'): Promise<void> {
  await h.mode.autoscaler.afterNextTick();
  clock.advance(61_000);
  await h.mode.autoscaler.afterNextTick();
  await h.until((x) => x.model(key)?.status?.replicas === 0 && x.model(key)?.status?.primaryCondition?.reason === 'ScaledToZero', what);
}

export function ready(h: LocalHarness, kind: 'DeployedModel' | 'Endpoint', key: string, status: 'True' | 'False' = 'True'): boolean {
  const obj = kind === 'DeployedModel' ? h.model(key) : h.endpoint(key);
  const type = kind === 'DeployedModel' ? 'Ready' : 'EndpointReady';
  const c = findCondition(obj?.status?.conditions, type);
  return c?.status === status && obj?.status?.observedGeneration === obj?.metadata.generation;
}

export interface ModelManifest {
  name: string;
  namespace?: string;
  framework?: string;
  /** graphstorm models: their task. */
  gmlTask?: string;
  /** What local mode runs (the image's entrypoint in a cluster when none). */
  command?: string[];
  args?: string[];
  /** The container image, for a cluster. */
  image?: string;
  env?: Record<string, string>;
  predictRoute?: string;
  healthRoute?: string;
  replicas?: number;
  serving?: Record<string, number>;
  id?: string;
  /** modelSpec.openai (the container speaks the OpenAI API): its fields, none for the defaults. */
  openai?: Record<string, string>;
}

export function deployedModelYaml(m: ModelManifest): string {
  const env = Object.entries(m.env ?? {}).map(([k, v]) => `        - name: ${k}\n          value: ${JSON.stringify(v)}`).join('\n');
  return `apiVersion: prediction.predictgate.dev/v1
kind: DeployedModel
metadata:
  name: ${m.name}
  namespace: ${m.namespace ?? 'default'}
spec:
${m.id ? `  id: ${m.id}\n` : ''}  modelSpec:
    framework: ${m.framework ?? 'custom'}
${m.gmlTask ? `    gmlTask: ${m.gmlTask}\n` : ''}    modelDisplayName: ${m.name}
    containerSpec:
${m.image ? `      image: ${m.image}\n` : ''}${m.command ? `      command: ${JSON.stringify(m.command)}\n` : ''}${m.args ? `      args: ${JSON.stringify(m.args)}\n` : ''}${env ? `      env:\n${env}\n` : ''}      predictRoute: ${m.predictRoute ?? '/predict'}
      healthRoute: ${m.healthRoute ?? '/health'}
${m.openai ? `    openai: ${JSON.stringify(m.openai)}\n` : ''}  dedicatedResources:
    minReplicaCount: ${m.replicas ?? 1}
    maxReplicaCount: ${Math.max(1, m.replicas ?? 1)}
${m.serving ? `  serving:\n${Object.entries(m.serving).map(([k, v]) => `    ${k}: ${v}`).join('\n')}\n` : ''}`;
}

export function endpointYaml(name: string, destinations: { model: string; traffic?: number; namespace?: string }[], namespace = 'default', serving?: Record<string, number>): string {
  return `apiVersion: prediction.predictgate.dev/v1
kind: Endpoint
metadata:
  name: ${name}
  namespace: ${namespace}
spec:
  destinations:
${destinations.map((d) => `    - serviceRef:\n        kind: DeployedModel\n        name: ${d.model}\n${d.namespace ? `        namespace: ${d.namespace}\n` : ''}${d.traffic !== undefined ? `      trafficPercentage: ${d.traffic}\n` : ''}`).join('')}${serving ? `  serving:\n${Object.entries(serving).map(([k, v]) => `    ${k}: ${v}`).join('\n')}\n` : ''}`;
}

/** A faulty model manifest (test/helpers/faultyModel.ts) with the given fault. */
export function faultyYaml(name: string, fault: string, extra: Partial<ModelManifest> = {}): string {
  return deployedModelYaml({ name, command: ['node', FAULTY], healthRoute: '/health', ...extra, env: { FAULT: fault, ...(extra.env ?? {}) } });
}

/** What a faulty model replica at base URL `address` has done (its GET /calls): predicts served, calls held. */
export async function faultyModelCalls(address: string): Promise<{ predicts: number; held: number }> {
  return (await (await fetch(`${address}/calls`)).json()) as { predicts: number; held: number };
}

export async function post(url: string, body: string | Buffer | Uint8Array, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; text: string; json: () => unknown }> {
  const res = await fetch(url, { method: 'POST', body: typeof body === 'string' ? body : new Uint8Array(body), headers: { 'content-type': 'application/json', ...headers } });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: () => JSON.parse(text) };
}

/** A POST through node:http (fetch cannot set Host); `chunked` sends the body without a length. */
export function rawRequest(url: string, body: Buffer, headers: Record<string, string>, chunked = false): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'POST', headers: chunked ? headers : { ...headers, 'content-length': String(body.length) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
      res.on('aborted', () => reject(new Error('response aborted')));
    });
    req.on('error', reject);
    if (chunked) {
      for (let i = 0; i < body.length; i += 65536) req.write(body.subarray(i, i + 65536));
      req.end();
    } else {
      req.end(body);
    }
  });
}

/**
 * Polls a gateway's /metrics until `line` matches (metrics are counted when a call ends, which a
 * client that left cannot observe); fails after `timeoutMs` with the lines that were there.
 */
export async function metricLine(h: Pick<LocalHarness, 'url'>, line: RegExp, timeoutMs = 20_000): Promise<{ match: RegExpExecArray; text: string }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = await (await fetch(h.url('/metrics'))).text();
    const match = line.exec(text);
    if (match) return { match, text };
    if (Date.now() > deadline) {
      throw new Error(`no metric line matching ${line} within ${timeoutMs} ms; requests counted:\n${text.split('\n').filter((l) => l.startsWith('predictgate_requests_total')).join('\n')}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}
