// Test helpers for the real control plane (test/cluster/): API clients and kubectl on the test
// kubeconfig, a namespace per suite, manifests moved into it, `predictgate controller` and
// `predictgate gateway` as processes, and the part of kube-controller-manager the tests play
// (marking a Deployment's replicas available).
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { AppsV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { PooledKubeConfig } from '../../src/kube/client.js';
import { parseAllDocuments, stringify } from 'yaml';
import { GROUP, VERSION, type DeployedModel, type Endpoint } from '../../src/api/types.js';
import { spawnPredictgate, type PredictgateProcess, type SpawnOptions } from './procs.js';

export function testKubeconfig(): string {
  const path = process.env.PREDICTGATE_TEST_KUBECONFIG;
  if (!path) throw new Error('PREDICTGATE_TEST_KUBECONFIG is not set: the cluster suites run under jest\'s global setup (npm test), which starts the control plane');
  return path;
}

export interface Clients {
  kc: KubeConfig;
  core: CoreV1Api;
  apps: AppsV1Api;
  custom: CustomObjectsApi;
}

export function clients(kubeconfig = testKubeconfig()): Clients {
  const kc = new PooledKubeConfig();
  kc.loadFromFile(kubeconfig);
  return { kc, core: kc.makeApiClient(CoreV1Api), apps: kc.makeApiClient(AppsV1Api), custom: kc.makeApiClient(CustomObjectsApi) };
}

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command-line tool to its end: exit code, stdout, stderr (never rejects on a non-zero exit). */
export function runTool(bin: string, args: string[], opts: { env?: NodeJS.ProcessEnv; input?: string } = {}): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(bin, args, { env: { ...process.env, ...opts.env }, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
    if (opts.input !== undefined) child.stdin!.end(opts.input);
  });
}

/** The real kubectl on the test kubeconfig. */
export function kubectl(args: string[], opts: { input?: string; kubeconfig?: string } = {}): Promise<Run> {
  return runTool('kubectl', args, { input: opts.input, env: { KUBECONFIG: opts.kubeconfig ?? testKubeconfig() } });
}

/** kubectl that must succeed. */
export async function kubectlOk(args: string[], opts: { input?: string; kubeconfig?: string } = {}): Promise<string> {
  const r = await kubectl(args, opts);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
  return r.stdout;
}

export async function applyCrds(kubeconfig?: string): Promise<void> {
  await kubectlOk(['apply', '--server-side', '--force-conflicts', '-f', 'crds/'], { kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=30s', 'crd/deployedmodels.prediction.predictgate.dev', 'crd/endpoints.prediction.predictgate.dev'], { kubeconfig });
}

export async function newNamespace(c: Clients, prefix: string): Promise<string> {
  const name = `${prefix}-${randomBytes(3).toString('hex')}`;
  await c.core.createNamespace({ body: { metadata: { name } } });
  return name;
}

/** Deletes a namespace (without a namespace controller it stays Terminating; its objects are gone from the tests' view by name anyway). */
export async function deleteNamespace(c: Clients, name: string): Promise<void> {
  await c.core.deleteNamespace({ name }).catch((err: unknown) => process.stderr.write(`could not delete namespace ${name}: ${String(err)}\n`));
}

/** Manifests with every object, and every serviceRef that named `from`, moved into namespace `to`. */
export function inNamespace(yamlText: string, to: string, from = 'default'): string {
  return parseAllDocuments(yamlText)
    .map((d) => d.toJS() as Record<string, any>)
    .filter((o) => o)
    .map((o) => {
      o.metadata.namespace = to;
      for (const dest of o.spec?.destinations ?? []) if ((dest.serviceRef.namespace ?? from) === from) dest.serviceRef.namespace = to;
      return stringify(o);
    })
    .join('---\n');
}

export function getModel(c: Clients, namespace: string, name: string): Promise<DeployedModel> {
  return c.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: 'deployedmodels', name }) as Promise<DeployedModel>;
}

export function getEndpoint(c: Clients, namespace: string, name: string): Promise<Endpoint> {
  return c.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: 'endpoints', name }) as Promise<Endpoint>;
}

/**
 * Polls `check` until it returns a value other than undefined/false (the apiserver is eventually
 * consistent and has no event for "the controller is done": this is what `kubectl wait` does too).
 */
export async function waitFor<T>(check: () => Promise<T | undefined | false>, what: string, timeoutMs = 30_000, pollMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastErr: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      lastErr = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastErr ? `: ${String((lastErr as Error).message ?? lastErr)}` : ''}`);
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

export function conditionOf(obj: DeployedModel | Endpoint | undefined, type: string): { status: string; reason: string; message: string } | undefined {
  return obj?.status?.conditions?.find((c) => c.type === type);
}

/**
 * Plays kube-controller-manager: the Deployment's current generation has `available` of its replicas
 * ready and available. `known` gives its generation and replicas when the caller watches it (no read then).
 */
export async function setAvailable(c: Clients, namespace: string, name: string, available: number, known?: { generation: number; replicas: number }): Promise<void> {
  const d = known ? { metadata: { generation: known.generation }, spec: { replicas: known.replicas } } : await c.apps.readNamespacedDeployment({ name, namespace });
  const replicas = d.spec?.replicas ?? 1;
  const cond = available > 0
    ? { type: 'Available', status: 'True', reason: 'MinimumReplicasAvailable', message: 'Deployment has minimum availability.' }
    : { type: 'Available', status: 'False', reason: 'MinimumReplicasUnavailable', message: 'Deployment does not have minimum availability.' };
  await c.apps.patchNamespacedDeploymentStatus(
    {
      name,
      namespace,
      body: [{ op: 'add', path: '/status', value: { observedGeneration: d.metadata?.generation, replicas, updatedReplicas: replicas, readyReplicas: available, availableReplicas: available, unavailableReplicas: Math.max(0, replicas - available), conditions: [cond] } }],
    },
  );
}

export interface ClusterProcess {
  proc: PredictgateProcess;
  port: number;
  metrics(): Promise<string>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

async function started(proc: PredictgateProcess, msg: string): Promise<ClusterProcess> {
  let line: Record<string, unknown>;
  try {
    line = await proc.waitForLog((l) => l.msg === msg, msg, 30_000);
  } catch (err) {
    proc.child.kill('SIGKILL'); // a process that did not start must not linger with its watches and Lease
    throw err;
  }
  const port = line.port as number;
  return {
    proc,
    port,
    metrics: async () => (await fetch(`http://127.0.0.1:${port}/metrics`)).text(),
    async stop(signal = 'SIGTERM') {
      if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill(signal);
      // A graceful stop that hangs (an unreachable apiserver) ends with SIGKILL, never a hung suite.
      const timer = setTimeout(() => proc.child.kill('SIGKILL'), 20_000);
      try {
        return await proc.exited;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** `predictgate controller` on the test cluster, watching `namespaces`, its Lease in the first one. */
export function startController(namespaces: string[], env: Record<string, string> = {}, options: SpawnOptions = {}): Promise<ClusterProcess> {
  const proc = spawnPredictgate(['controller'], {
    KUBECONFIG: env.KUBECONFIG ?? testKubeconfig(),
    WATCH_NAMESPACES: namespaces.join(','),
    LEADER_ELECTION_NAMESPACE: namespaces[0],
    ...env,
  }, options);
  return started(proc, 'controller started');
}

/**
 * `predictgate gateway` on the test cluster. Callers are let in without a token (PREDICT_AUTH=none)
 * unless `env` says otherwise: the suites about who may call (cluster-auth) ask for kubernetes.
 */
export function startClusterGateway(namespaces: string[], env: Record<string, string> = {}, options: SpawnOptions = {}): Promise<ClusterProcess> {
  const proc = spawnPredictgate(['gateway'], { KUBECONFIG: env.KUBECONFIG ?? testKubeconfig(), WATCH_NAMESPACES: namespaces.join(','), PREDICT_AUTH: 'none', ...env }, options);
  return started(proc, 'gateway listening');
}
