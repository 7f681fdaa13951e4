// A DeployedModel's dedicatedResources read as a request autoscaling policy (api/autoscaling.ts):
// which models follow the calls, the defaults filled in (targets, bounds, Vertex AI's 3600 s periods)
// and google.protobuf.Duration strings in milliseconds.
import { durationMs, requestAutoscalingOf, type RequestAutoscaling } from '../../src/api/autoscaling.js';
import type { DeployedModel, DeployedModelSpec } from '../../src/api/types.js';

const dm = (dedicatedResources: DeployedModelSpec['dedicatedResources'], serving?: DeployedModelSpec['serving']): DeployedModel => ({
  apiVersion: 'prediction.predictgate.dev/v1', kind: 'DeployedModel', metadata: { name: 'm', namespace: 'ns' },
  spec: { modelSpec: { framework: 'custom', containerSpec: { image: 'x' } }, dedicatedResources, ...(serving ? { serving } : {}) },
});
const HOUR = { idleMs: 3_600_000, minScaleupMs: 3_600_000 };

test.each<[string, DeployedModel, RequestAutoscaling | undefined]>([
  ['a fixed count', dm({ minReplicaCount: 2 }), undefined],
  ['CPU through an HPA', dm({ minReplicaCount: 1, maxReplicaCount: 4, autoscaling: { targetCPUUtilizationPercentage: 60 } }), undefined],
  ['scale to zero: targetConcurrency is serving.maxConcurrency', dm({ minReplicaCount: 0, scaleToZeroSpec: {} }, { maxConcurrency: 4 }),
    { targetConcurrency: 4, targetRequestsPerSecond: undefined, min: 0, max: 1, scaleToZero: HOUR }],
  ['scale to zero without maxConcurrency: targetConcurrency 1', dm({ minReplicaCount: 0, maxReplicaCount: 3, scaleToZeroSpec: { idleScaledownPeriod: '1.5s', minScaleupPeriod: '90s' } }),
    { targetConcurrency: 1, targetRequestsPerSecond: undefined, min: 0, max: 3, scaleToZero: { idleMs: 1500, minScaleupMs: 90_000 } }],
  ['a rate alone leaves targetConcurrency undefined', dm({ minReplicaCount: 1, maxReplicaCount: 4, autoscaling: { targetRequestsPerSecond: 5 } }),
    { targetConcurrency: undefined, targetRequestsPerSecond: 5, min: 1, max: 4, scaleToZero: undefined }],
  ['both targets; max defaults to min', dm({ minReplicaCount: 3, autoscaling: { targetConcurrency: 2, targetRequestsPerSecond: 5 } }),
    { targetConcurrency: 2, targetRequestsPerSecond: 5, min: 3, max: 3, scaleToZero: undefined }],
  ['min defaults to 1, and so does max', dm({ autoscaling: { targetConcurrency: 2 } }),
    { targetConcurrency: 2, targetRequestsPerSecond: undefined, min: 1, max: 1, scaleToZero: undefined }],
  ['scaleToZeroSpec counts only with minReplicaCount 0', dm({ minReplicaCount: 1, autoscaling: { targetConcurrency: 2 }, scaleToZeroSpec: {} }),
    { targetConcurrency: 2, targetRequestsPerSecond: undefined, min: 1, max: 1, scaleToZero: undefined }],
])('%s', (_what, model, policy) => {
  expect(requestAutoscalingOf(model)).toEqual(policy);
});

test('durationMs: Duration JSON strings in ms, the fallback in seconds when absent', () => {
  expect([durationMs('1.5s', 3600), durationMs('1800s', 3600), durationMs('28800s', 1), durationMs(undefined, 3600)]).toEqual([1500, 1_800_000, 28_800_000, 3_600_000]);
});
