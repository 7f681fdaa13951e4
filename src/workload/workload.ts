// The WorkloadBackend seam: how a DeployedModel's container runs. Local mode runs processes on
// loopback; cluster mode (later) applies Deployments and Services. The reconciler computes a
// WorkloadSpec (pure) and reads back a WorkloadObservation; it never knows which backend it has.

export interface WorkloadSpec {
  /** namespace/name of the DeployedModel. */
  key: string;
  command: string[];
  args: string[];
  env: Record<string, string>;
  replicas: number;
  predictRoute: string;
  healthRoute: string;
  /** Port the container listens on (the backend may choose its own in local mode). */
  port: number;
}

export interface WorkloadObservation {
  /** Replicas asked for. */
  replicas: number;
  /** Replicas running (any state). */
  runningReplicas: number;
  readyReplicas: number;
  /** Base URLs of ready replicas. */
  addresses: string[];
  /** Service address when there is one (cluster), else undefined. */
  serviceAddress?: string;
  /** True while the current spec has not been rolled out to every replica. */
  progressing: boolean;
  /** Why replicas are not ready, when something failed (exit code, failing health check). */
  failure?: string;
}

export interface WorkloadBackend {
  /** Makes the workload match the spec (idempotent). */
  apply(spec: WorkloadSpec): Promise<void>;
  observe(key: string): WorkloadObservation | undefined;
  delete(key: string): Promise<void>;
  /** Called with the key whenever an observation changes. */
  onChange(listener: (key: string) => void): void;
  stop(): Promise<void>;
}
