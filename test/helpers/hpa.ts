// The replicas of a DeployedModel scaled by a CPU HorizontalPodAutoscaler (the node tier's
// metrics-server feeds it), recorded over time while the caller drives load: HpaRecorder polls the
// model's Deployment (apps/v1: spec.replicas, the ready replicas) and its HPA (the replicas it
// wants, the CPU utilisation it saw) and keeps every change with a client-side timestamp, so a bench
// integrates replica-seconds over any span of the load. test/node/hpa.test.ts proves the HPA with it.
import { AutoscalingV2Api, type V1Deployment, type V2HorizontalPodAutoscaler } from '@kubernetes/client-node';
import { ReplicaSeries, type ReplicaPoint } from './replicaSeries.js';
import type { NodeShell } from './rollout.js';

/** The model's replicas at one moment (spec.replicas is what the HPA last wrote); `at` on the recorder's clock (performance.now() unless told). */
export interface HpaPoint extends ReplicaPoint {
  /** Wall-clock time of `at` (Date.now()), for logs. */
  wall: number;
  /** The HPA's status.desiredReplicas, and the average CPU utilisation (% of requests) it last saw; undefined before it has read metrics. */
  desired?: number;
  cpuPercent?: number;
}

export interface HpaRecorderOptions {
  /** Between two reads of the Deployment and the HPA (default 500 ms). */
  pollMs?: number;
  /** The clock of HpaPoint.at (default performance.now, the LoadDriver's). */
  now?: () => number;
}

/** Polls a model's Deployment and HPA (both named after the model) and keeps each change. */
export class HpaRecorder extends ReplicaSeries<HpaPoint> {
  /** Reads that failed (the apiserver busy, the HPA not made yet), with the last error. */
  readErrors = 0;
  lastError: string | undefined;
  private readonly pollMs: number;
  private readonly now: () => number;
  private readonly hpaApi: AutoscalingV2Api;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly shell: NodeShell, readonly namespace: string, readonly model: string, opts: HpaRecorderOptions = {}) {
    super(`${namespace}/${model}`, Math.min(opts.pollMs ?? 500, 250));
    this.pollMs = opts.pollMs ?? 500;
    this.now = opts.now ?? (() => performance.now());
    this.hpaApi = shell.kube.kc.makeApiClient(AutoscalingV2Api);
  }

  /** Takes the first reading, then polls until stop(). */
  async start(): Promise<void> {
    await this.read();
    const loop = async (): Promise<void> => {
      if (this.stopped) return;
      this.running = this.read();
      await this.running;
      if (!this.stopped) this.timer = setTimeout(() => void loop(), this.pollMs);
    };
    this.timer = setTimeout(() => void loop(), this.pollMs);
  }

  /** Stops polling (waits for a read in progress). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  private async read(): Promise<void> {
    try {
      const [d, h] = await Promise.all([
        this.shell.kube.apps.readNamespacedDeployment({ name: this.model, namespace: this.namespace }) as Promise<V1Deployment>,
        this.hpaApi.readNamespacedHorizontalPodAutoscaler({ name: this.model, namespace: this.namespace }).catch(() => undefined) as Promise<V2HorizontalPodAutoscaler | undefined>,
      ]);
      const cpu = h?.status?.currentMetrics?.find((m) => m.type === 'Resource' && m.resource?.name === 'cpu')?.resource?.current.averageUtilization;
      const point: HpaPoint = { at: this.now(), wall: Date.now(), spec: d.spec?.replicas ?? 1, ready: d.status?.readyReplicas ?? 0, desired: h?.status?.desiredReplicas, cpuPercent: cpu };
      const last = this.points.at(-1);
      if (!last || last.spec !== point.spec || last.ready !== point.ready || last.desired !== point.desired || last.cpuPercent !== point.cpuPercent) this.points.push(point);
    } catch (err) {
      this.readErrors++;
      this.lastError = (err as Error).message;
    }
  }

  /** The changes of spec.replicas, each with its time in seconds after `t0`, for a log line. */
  changes(t0: number): { seconds: number; spec: number; ready: number; desired?: number; cpuPercent?: number }[] {
    const out: { seconds: number; spec: number; ready: number; desired?: number; cpuPercent?: number }[] = [];
    let prev: HpaPoint | undefined;
    for (const p of this.since(t0)) {
      if (!prev || prev.spec !== p.spec || prev.ready !== p.ready) out.push({ seconds: Math.round((Math.max(p.at, t0) - t0) / 100) / 10, spec: p.spec, ready: p.ready, desired: p.desired, cpuPercent: p.cpuPercent });
      prev = p;
    }
    return out;
  }
}
