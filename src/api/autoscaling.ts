// How a DeployedModel's replicas follow the calls: its dedicatedResources read into one policy
// (targets, bounds, scale-to-zero periods, defaults filled in), which the gateway (what to count, when
// to hold a call) and the autoscaler (what to decide) share, and the demand a gateway reports. Pure.
import type { DeployedModel } from './types.js';

/** What one gateway replica reports of one model's calls (gateway/demand.ts counts it). */
export interface ModelDemand {
  /** Calls in flight now (waiting in the queue and held for a wake included). */
  inFlight: number;
  /** Calls that arrived, since the gateway started. */
  requestsTotal: number;
  /** The integral of inFlight over time, in call-seconds, since the gateway started. */
  callSecondsTotal: number;
  /**
   * The gateway's monotonic clock when the counters were read, in seconds: they are differenced over
   * the gateway's own time, so that the controller's timing of its reads adds no error (absent from
   * gateways older than the field: then the controller's time between its reads is used).
   */
  clockSeconds?: number;
}

/** What one gateway replica answers at GET /stats/demand. */
export interface DemandReport {
  /** Per model (namespace/name) whose replicas follow the calls. */
  models: Record<string, ModelDemand>;
  /** Per model replica address (http://ip:port) with calls on it now, how many: any model's. */
  replicas: Record<string, number>;
  /** Calls held for a model at zero since the gateway started (GET /stats/demand?heldAfter=N waits for more than N). */
  held: number;
}

/** Vertex AI's default for both scaleToZeroSpec periods. */
export const DEFAULT_SCALE_TO_ZERO_PERIOD_SECONDS = 3600;

export interface ScaleToZeroPolicy {
  /** No call for this long: down to zero. */
  idleMs: number;
  /** Up at least this long after waking from zero. */
  minScaleupMs: number;
}

export interface RequestAutoscaling {
  /** Calls in flight per replica; undefined when only the rate is a target. */
  targetConcurrency: number | undefined;
  targetRequestsPerSecond: number | undefined;
  min: number;
  max: number;
  /** Set when the model may go to zero replicas. */
  scaleToZero: ScaleToZeroPolicy | undefined;
}

/** "1800s" or "1.5s" (google.protobuf.Duration's JSON form, as the CRD checks it) in milliseconds. */
export function durationMs(text: string | undefined, fallbackSeconds: number): number {
  if (text === undefined) return fallbackSeconds * 1000;
  return Math.round(Number(text.slice(0, -1)) * 1000);
}

/**
 * The request autoscaling of a valid DeployedModel, or undefined when its replicas do not follow the
 * calls (a fixed count, or CPU through an HPA).
 */
export function requestAutoscalingOf(dm: DeployedModel): RequestAutoscaling | undefined {
  const r = dm.spec.dedicatedResources;
  const a = r?.autoscaling;
  const zero = r?.scaleToZeroSpec;
  if (a?.targetConcurrency === undefined && a?.targetRequestsPerSecond === undefined && !zero) return undefined;
  const min = r?.minReplicaCount ?? 1;
  const max = Math.max(r?.maxReplicaCount ?? min, min, 1);
  const rateOnly = a?.targetConcurrency === undefined && a?.targetRequestsPerSecond !== undefined;
  return {
    targetConcurrency: rateOnly ? undefined : (a?.targetConcurrency ?? dm.spec.serving?.maxConcurrency ?? 1),
    targetRequestsPerSecond: a?.targetRequestsPerSecond,
    min,
    max,
    scaleToZero: zero && min === 0
      ? { idleMs: durationMs(zero.idleScaledownPeriod, DEFAULT_SCALE_TO_ZERO_PERIOD_SECONDS), minScaleupMs: durationMs(zero.minScaleupPeriod, DEFAULT_SCALE_TO_ZERO_PERIOD_SECONDS) }
      : undefined,
  };
}
