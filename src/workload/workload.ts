// The WorkloadBackend seam: how a DeployedModel's container runs. Local mode runs processes on
// loopback; cluster mode applies Deployments, Services and HPAs. The reconciler computes a
// WorkloadSpec (pure) and reads back a WorkloadObservation; it never knows which backend it has.
import type { ResourceRequirements } from '../api/types.js';

export interface WorkloadSpec {
  /** namespace/name of the DeployedModel. */
  key: string;
  command: string[];
  args: string[];
  env: Record<string, string>;
  /** Replicas to run; when `scaledByRequests`, only the first count (scale() decides after). */
  replicas: number;
  /** The request autoscaler owns the count (scale()); applying the spec again keeps it. */
  scaledByRequests?: boolean;
  predictRoute: string;
  healthRoute: string;
  /** Port the container listens on (the backend may choose its own in local mode). */
  port: number;
  /** The rest matters in a cluster only: the image, its resources, autoscaling, and the owner. */
  image?: string;
  resources?: ResourceRequirements;
  /** Above `replicas`, an autoscaler may scale up to this many. */
  maxReplicas?: number;
  targetCPUUtilizationPercentage?: number;
  /** The DeployedModel, for owner references (its children go when it goes). */
  owner?: { name: string; uid: string };
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
  /**
   * The failure says only that no replica is available yet, and nothing else reports one (a cluster's
   * Deployment with pods not ready and no failure condition of its own): for a model waking from zero
   * that is the wake under way, not a failure.
   */
  notYetAvailable?: boolean;
}

export interface WorkloadBackend {
  /** Makes the workload match the spec (idempotent). */
  apply(spec: WorkloadSpec): Promise<void>;
  observe(key: string): WorkloadObservation | undefined;
  /**
   * Sets the replica count of a workload whose spec is scaledByRequests (the request autoscaler). A
   * scale-down takes replicas without calls in flight (`inFlight`: per replica address) first.
   * Resolves to the count asked for now: more than `replicas` when replicas with calls were kept.
   * A backend without it runs such a workload at its spec's count.
   */
  scale?(key: string, replicas: number, inFlight: ReadonlyMap<string, number>): Promise<number>;
  /** Removes the workload: its addresses go at once, its processes or objects may take a while to stop. */
  delete(key: string): Promise<void>;
  /** Called with the key whenever an observation changes. */
  onChange(listener: (key: string) => void): void;
  stop(): Promise<void>;
}
