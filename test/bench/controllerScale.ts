// The parts of `npm run bench:controller` that play the rest of a cluster at scale and watch what
// happens: the bench's own watches of Deployments, DeployedModels and Endpoints (when each object was
// created or turned Ready, as the watch delivered it), the EndpointSlice each model Service gets once
// its Deployment is available (written as the endpointslice controller would), pod IPs, a sampler of
// a process's RSS, and spreads of durations.
import { readFileSync } from 'node:fs';
import { DiscoveryV1Api, makeInformer, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';
import { GROUP, VERSION, type DeployedModel, type Endpoint } from '../../src/api/types.js';
import { SERVICE_NAME_LABEL } from '../../src/store/endpointSlices.js';
import { MANAGED_BY, MANAGED_BY_VALUE } from '../../src/workload/kubeObjects.js';
import type { Clients } from '../helpers/cluster.js';
import { percentile } from '../helpers/load.js';

/** The port the bench's models listen on in their pods (the container's `http` port). */
export const POD_PORT = 8080;

/**
 * A plausible pod IP for model `i`: 10.244.0.0/16, the usual pod CIDR (the test control plane's
 * Services take 10.0.0.0/16), never a network or broadcast address. The apiserver refuses loopback
 * and link-local endpoint addresses, so calls reach a real process through UPSTREAM_RESOLVE.
 */
export function podIp(i: number): string {
  if (i < 0 || i >= 250 * 250) throw new Error(`podIp: ${i} is out of range`);
  return `10.244.${Math.floor(i / 250)}.${(i % 250) + 2}`;
}

/** An EndpointSlice of Service `service` with one ready pod at `ip`, as the endpointslice controller writes one. */
export function sliceOf(namespace: string, service: string, ip: string): Record<string, unknown> {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: `${service}-bench`,
      namespace,
      // The labels the endpointslice controller puts on a slice, and the Service's own (so the
      // managed-by label the gateway's cache selects on).
      labels: { [SERVICE_NAME_LABEL]: service, 'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io', [MANAGED_BY]: MANAGED_BY_VALUE },
    },
    addressType: 'IPv4',
    endpoints: [{ addresses: [ip], conditions: { ready: true, serving: true, terminating: false }, targetRef: { kind: 'Pod', namespace, name: `${service}-pod` } }],
    ports: [{ name: 'http', port: POD_PORT, protocol: 'TCP' }],
  };
}

export async function writeSlice(c: Clients, namespace: string, service: string, ip: string): Promise<void> {
  await c.kc.makeApiClient(DiscoveryV1Api).createNamespacedEndpointSlice({ namespace, body: sliceOf(namespace, service, ip) as never });
}

const isTrue = (conds: { type: string; status: string }[] | undefined, type: string): boolean => conds?.some((x) => x.type === type && x.status === 'True') ?? false;

/**
 * The bench's own watches of one namespace: each Deployment's generation and replicas (so marking
 * it available needs no read), and when (ms since the epoch, as the watch delivered it to the
 * bench) each Deployment appeared and each DeployedModel / Endpoint first turned Ready / EndpointReady.
 */
export class Watcher {
  readonly deployments = new Map<string, { generation: number; replicas: number; seenAt: number }>();
  readonly modelReadyAt = new Map<string, number>();
  readonly endpointReadyAt = new Map<string, number>();
  private readonly informers: { stop(): Promise<void> }[] = [];
  private readonly waiters = new Set<() => void>();
  private readonly aborts = new Set<(err: Error) => void>();
  private aborted: Error | undefined;

  constructor(private readonly c: Clients, private readonly namespace: string) {}

  async start(): Promise<void> {
    const { c, namespace } = this;
    const watch = async <T extends KubernetesObject>(path: string, list: () => Promise<unknown>, on: (obj: T) => void): Promise<void> => {
      const informer = makeInformer<T>(c.kc, path, list as () => Promise<KubernetesListObject<T>>);
      informer.on('add', on);
      informer.on('update', on);
      // A watch that fails is started again: the bench must not miss a transition.
      informer.on('error', () => setTimeout(() => void informer.start().catch(() => {}), 500));
      this.informers.push(informer);
      await informer.start();
    };
    const ns = `/namespaces/${namespace}`;
    await watch<KubernetesObject & { spec?: { replicas?: number } }>(`/apis/apps/v1${ns}/deployments`, () => c.apps.listNamespacedDeployment({ namespace }), (d) => {
      const name = d.metadata!.name!;
      const seen = this.deployments.get(name);
      this.deployments.set(name, { generation: d.metadata!.generation ?? 1, replicas: d.spec?.replicas ?? 1, seenAt: seen?.seenAt ?? Date.now() });
      this.notify();
    });
    const custom = (plural: string) => () => c.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural });
    await watch<DeployedModel & KubernetesObject>(`/apis/${GROUP}/${VERSION}${ns}/deployedmodels`, custom('deployedmodels'), (dm) => {
      if (!this.modelReadyAt.has(dm.metadata.name) && isTrue(dm.status?.conditions, 'Ready')) this.modelReadyAt.set(dm.metadata.name, Date.now());
      this.notify();
    });
    await watch<Endpoint & KubernetesObject>(`/apis/${GROUP}/${VERSION}${ns}/endpoints`, custom('endpoints'), (ep) => {
      if (!this.endpointReadyAt.has(ep.metadata.name) && isTrue(ep.status?.conditions, 'EndpointReady')) this.endpointReadyAt.set(ep.metadata.name, Date.now());
      this.notify();
    });
  }

  private notify(): void {
    for (const w of [...this.waiters]) w();
  }

  /** Makes every wait, now and later, fail with `err` (a process the bench needs has exited). */
  abort(err: Error): void {
    this.aborted = err;
    for (const a of [...this.aborts]) a(err);
  }

  /** Resolves (with the time) once `check` holds, checked after every watch event; rejects after `timeoutMs` with `describe()`. */
  until(check: () => boolean, timeoutMs: number, describe: () => string): Promise<number> {
    return new Promise((resolve, reject) => {
      const end = (): void => {
        this.waiters.delete(done);
        this.aborts.delete(fail);
        clearTimeout(timer);
      };
      const done = (): void => {
        if (!check()) return;
        end();
        resolve(Date.now());
      };
      const fail = (err: Error): void => {
        end();
        reject(new Error(`${err.message}; meanwhile ${describe()}`));
      };
      const timer = setTimeout(() => fail(new Error(`timed out after ${timeoutMs / 1000} s`)), timeoutMs);
      this.waiters.add(done);
      this.aborts.add(fail);
      if (this.aborted) fail(this.aborted);
      else done();
    });
  }

  async stop(): Promise<void> {
    await Promise.all(this.informers.map((i) => i.stop()));
  }
}

/** VmRSS and VmHWM (the kernel's peak) of a process, in bytes. */
export function rssOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

/** Samples a process's RSS every `everyMs` until stopped: the highest sample, and the kernel's peak. */
export function sampleRss(pid: number, everyMs = 250): { max(): number; peak(): number; stop(): void } {
  let max = 0;
  let peak = 0;
  const take = (): void => {
    try {
      const r = rssOf(pid);
      max = Math.max(max, r.rss);
      peak = Math.max(peak, r.peak);
    } catch {
      // the process has exited
    }
  };
  take();
  const timer = setInterval(take, everyMs);
  return { max: () => (take(), max), peak: () => (take(), peak), stop: () => clearInterval(timer) };
}

/** "p50 X, p99 Y, max Z" of durations in ms, in `unit` (ms or s). */
export function spread(xs: readonly number[], unit: 'ms' | 's'): string {
  const f = (ms: number): string => (unit === 's' ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`);
  return `p50 ${f(percentile(xs, 0.5))}, p99 ${f(percentile(xs, 0.99))}, max ${f(Math.max(...xs))}`;
}

/** A gauge's value from a Prometheus text page (the first series of that name), or NaN. */
export function gauge(metrics: string, name: string): number {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(metrics);
  return m ? Number(m[1]) : NaN;
}
