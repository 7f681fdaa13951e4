// Table tests of the pure reconcile functions: desiredWorkload, deployedModelStatus and
// endpointStatus, with a fixed clock; models that scale on calls (to zero and back) included.
import { desiredWorkload, deployedModelStatus } from '../../src/controller/deployedModel.js';
import { endpointStatus } from '../../src/controller/endpoint.js';
import type { AutoscalingStatus, DeployedModel, Endpoint } from '../../src/api/types.js';
import type { WorkloadObservation } from '../../src/workload/workload.js';

const T0 = new Date('2026-01-19T01:18:30.123Z');
const T1 = new Date('2026-01-19T01:35:47.000Z');

function dm(over: Partial<DeployedModel['spec']> = {}, meta: Partial<DeployedModel['metadata']> = {}): DeployedModel {
  return {
    apiVersion: 'prediction.predictgate.dev/v1',
    kind: 'DeployedModel',
    metadata: { name: 'my-tf-model', namespace: 'ns', generation: 1, ...meta },
    spec: { modelSpec: { framework: 'tensorflow', containerSpec: { command: ['serve'], args: ['--x'], env: [{ name: 'A', value: '1' }] } }, ...over },
  };
}

/** A model that scales on calls and to zero after 600 s without one. */
const ZERO_SPEC: Partial<DeployedModel['spec']> = { dedicatedResources: { minReplicaCount: 0, maxReplicaCount: 3, autoscaling: { targetConcurrency: 2 }, scaleToZeroSpec: { idleScaledownPeriod: '600s' } } };

const obs = (o: Partial<WorkloadObservation>): WorkloadObservation => ({ replicas: 1, runningReplicas: 1, readyReplicas: 0, addresses: [], progressing: false, ...o });

describe('desiredWorkload', () => {
  test('carries the Vertex container contract and defaults', () => {
    expect(desiredWorkload(dm({ modelSpec: { framework: 'custom', artifactLocation: 's3://b/m', containerSpec: { command: ['serve'], env: [{ name: 'A', value: '1' }, { name: 'AIP_HTTP_PORT', value: 'ignored' }] } } }), 'ep1')).toEqual({
      key: 'ns/my-tf-model',
      command: ['serve'],
      args: [],
      env: { A: '1', AIP_MODE: 'PREDICTION', AIP_HTTP_PORT: '8080', AIP_PREDICT_ROUTE: '/predict', AIP_HEALTH_ROUTE: '/health', AIP_DEPLOYED_MODEL_ID: 'my-tf-model', AIP_ENDPOINT_ID: 'ep1', AIP_STORAGE_URI: 's3://b/m' },
      replicas: 1,
      predictRoute: '/predict',
      healthRoute: '/health',
      port: 8080,
    });
  });

  test('uses spec.id, routes, port and replica count when given', () => {
    const w = desiredWorkload(dm({ id: 'dm-7', dedicatedResources: { minReplicaCount: 3, maxReplicaCount: 5 }, modelSpec: { framework: 'tensorflow', containerSpec: { ports: [{ containerPort: 8501 }], predictRoute: '/v1/models/m:predict', healthRoute: '/v1/models/m' } } }), undefined);
    expect(w).toMatchObject({ replicas: 3, port: 8501, predictRoute: '/v1/models/m:predict', healthRoute: '/v1/models/m' });
    expect(w.env).toMatchObject({ AIP_DEPLOYED_MODEL_ID: 'dm-7', AIP_HTTP_PORT: '8501', AIP_PREDICT_ROUTE: '/v1/models/m:predict' });
    expect(w.env.AIP_ENDPOINT_ID).toBeUndefined();
  });

  test('a model scaled on calls starts with max(minReplicaCount, 1) replicas and is marked scaledByRequests', () => {
    expect(desiredWorkload(dm(ZERO_SPEC), undefined)).toMatchObject({ replicas: 1, scaledByRequests: true });
    expect(desiredWorkload(dm({ dedicatedResources: { minReplicaCount: 3, maxReplicaCount: 6, autoscaling: { targetRequestsPerSecond: 10 } } }), undefined)).toMatchObject({ replicas: 3, scaledByRequests: true });
    expect('scaledByRequests' in desiredWorkload(dm({ dedicatedResources: { minReplicaCount: 2 } }), undefined)).toBe(false);
  });
});

describe('deployedModelStatus', () => {
  test('ready: the GDC primaryCondition exactly, and a Ready condition', () => {
    const s = deployedModelStatus(dm(), obs({ readyReplicas: 1, addresses: ['http://127.0.0.1:1'] }), [], T0);
    expect(s.primaryCondition).toEqual({ firstObservedTime: '2026-01-19T01:18:30Z', lastUpdateTime: '2026-01-19T01:18:30Z', message: 'DeployedModel is ready', observedGeneration: 1, reason: 'Ready', resourceName: 'my-tf-model', type: 'DeployedModel' });
    expect(s.conditions).toEqual([{ type: 'Ready', status: 'True', reason: 'Ready', message: 'DeployedModel is ready', observedGeneration: 1, lastTransitionTime: '2026-01-19T01:18:30Z' }]);
    expect(s).toMatchObject({ observedGeneration: 1, deployedModelId: 'my-tf-model', address: 'http://127.0.0.1:1', replicaAddresses: ['http://127.0.0.1:1'], replicas: 1, readyReplicas: 1 });
  });

  test.each([
    ['invalid spec', [] as string[], obs({}), ['bad field'], 'InvalidSpec', 'bad field'],
    ['no workload yet', [], undefined, [], 'Pending', 'waiting for the workload to be created'],
    ['starting', [], obs({ progressing: true }), [], 'Progressing', 'waiting for replicas to become ready (0/1 ready)'],
    ['crashed', [], obs({ failure: 'replica 0 exited with code 1; restarting in 1.0 s (restart 1)' }), [], 'Unavailable', 'replica 0 exited with code 1; restarting in 1.0 s (restart 1)'],
    ['scaled to zero', [], obs({ replicas: 0, runningReplicas: 0 }), [], 'ScaledToZero', 'minReplicaCount is 0: no replica is running'],
  ])('not ready: %s', (_n, _x, o, problems, reason, message) => {
    const s = deployedModelStatus(dm(), o, problems, T0);
    expect(s.primaryCondition).toMatchObject({ reason, message });
    expect(s.conditions![0]).toMatchObject({ type: 'Ready', status: 'False', reason, message });
    expect(s.address).toBeUndefined();
  });

  test('a model scaled on calls at zero replicas is Ready (ScaledToZero), and so is one waking from zero (ScalingFromZero)', () => {
    const zero = deployedModelStatus(dm(ZERO_SPEC), obs({ replicas: 0, runningReplicas: 0 }), [], T0);
    const atZero = 'scaled to zero after at least 600 s without a call (idleScaledownPeriod); the next call wakes it and waits for a replica';
    expect(zero.primaryCondition).toMatchObject({ reason: 'ScaledToZero', message: atZero });
    expect(zero.conditions).toEqual([{ type: 'Ready', status: 'True', reason: 'ScaledToZero', message: atZero, observedGeneration: 1, lastTransitionTime: '2026-01-19T01:18:30Z' }]);
    expect([zero.replicas, zero.address]).toEqual([0, undefined]);
    // The autoscaler asked for one; it is starting. Its Service's address is not given out yet: calls wait.
    const waking = deployedModelStatus({ ...dm(ZERO_SPEC), status: zero }, obs({ replicas: 1, serviceAddress: 'http://m.ns.svc:8080' }), [], T1);
    expect(waking.conditions![0]).toMatchObject({ status: 'True', reason: 'ScalingFromZero', message: 'waking from zero: waiting for a replica (0/1 ready); calls wait for it', lastTransitionTime: '2026-01-19T01:18:30Z' });
    expect(waking.address).toBeUndefined();
    // A cluster's Deployment whose new pod is not ready yet: still the wake, still Ready (calls wait).
    const starting = deployedModelStatus({ ...dm(ZERO_SPEC), status: waking }, obs({ replicas: 1, failure: '0 of 1 replicas available (MinimumReplicasUnavailable: Deployment does not have minimum availability.)', notYetAvailable: true }), [], T1);
    expect(starting.conditions![0]).toMatchObject({ status: 'True', reason: 'ScalingFromZero' });
    const crashed = deployedModelStatus({ ...dm(ZERO_SPEC), status: waking }, obs({ replicas: 1, failure: 'replica 0 exited with code 1; restarting in 1.0 s (restart 1)' }), [], T1);
    expect(crashed.conditions![0]).toMatchObject({ status: 'False', reason: 'Unavailable' });
    const up = deployedModelStatus({ ...dm(ZERO_SPEC), status: waking }, obs({ replicas: 1, readyReplicas: 1, serviceAddress: 'http://m.ns.svc:8080' }), [], T1);
    expect([up.conditions![0].reason, up.address]).toEqual(['Ready', 'http://m.ns.svc:8080']);
  });

  test('minReplicaCount 0 without scaleToZeroSpec at zero replicas is a stopped model: not Ready', () => {
    const s = deployedModelStatus(dm({ dedicatedResources: { minReplicaCount: 0 } }), obs({ replicas: 0, runningReplicas: 0 }), [], T0);
    expect(s.conditions![0]).toMatchObject({ status: 'False', reason: 'ScaledToZero', message: 'minReplicaCount is 0: no replica is running' });
  });

  test('status.autoscaling carries the autoscaler\'s decision, kept until the next; none for a model not scaled on calls', () => {
    const scaled: AutoscalingStatus = { desiredReplicas: 0, lastScaleReason: 'ScaledToZero', lastScaleMessage: '1 → 0 replicas: no call for 600 s (idleScaledownPeriod 600 s)', lastScaleTime: '2026-01-19T01:18:30Z' };
    const s = deployedModelStatus(dm(ZERO_SPEC), obs({ replicas: 0, runningReplicas: 0 }), [], T0, scaled);
    expect(s.autoscaling).toEqual(scaled);
    expect(deployedModelStatus({ ...dm(ZERO_SPEC), status: s }, obs({ replicas: 0, runningReplicas: 0 }), [], T1).autoscaling).toEqual(scaled);
    expect(deployedModelStatus(dm({ dedicatedResources: { minReplicaCount: 2 } }), obs({ replicas: 2 }), [], T0, scaled).autoscaling).toBeUndefined();
  });

  test('firstObservedTime stays; lastUpdateTime and lastTransitionTime move only on change', () => {
    const first = deployedModelStatus(dm(), obs({ progressing: true }), [], T0);
    const same = deployedModelStatus({ ...dm(), status: first }, obs({ progressing: true }), [], T1);
    expect(same).toEqual(first);
    const ready = deployedModelStatus({ ...dm(), status: first }, obs({ readyReplicas: 1, addresses: ['http://a'] }), [], T1);
    expect(ready.primaryCondition).toMatchObject({ firstObservedTime: '2026-01-19T01:18:30Z', lastUpdateTime: '2026-01-19T01:35:47Z' });
    expect(ready.conditions![0].lastTransitionTime).toBe('2026-01-19T01:35:47Z');
    const regen = deployedModelStatus({ ...dm({}, { generation: 2 }), status: ready }, obs({ readyReplicas: 1, addresses: ['http://a'] }), [], new Date('2026-01-20T00:00:00Z'));
    expect(regen.conditions![0].lastTransitionTime).toBe('2026-01-19T01:35:47Z');
    expect(regen.primaryCondition).toMatchObject({ observedGeneration: 2, lastUpdateTime: '2026-01-20T00:00:00Z' });
  });
});

describe('endpointStatus', () => {
  const ready = (name: string, ns = 'ns', extra: Partial<DeployedModel['spec']> = {}): DeployedModel => ({
    ...dm(extra, { name, namespace: ns }),
    status: { conditions: [{ type: 'Ready', status: 'True', reason: 'Ready', message: 'DeployedModel is ready', lastTransitionTime: 'x' }] },
  });
  const notReady = (name: string): DeployedModel => ({
    ...dm({}, { name }),
    status: { conditions: [{ type: 'Ready', status: 'False', reason: 'Progressing', message: 'waiting for replicas to become ready (0/1 ready)', lastTransitionTime: 'x' }] },
  });
  const ep = (destinations: Endpoint['spec']['destinations']): Endpoint => ({ apiVersion: 'prediction.predictgate.dev/v1', kind: 'Endpoint', metadata: { name: 'e', namespace: 'ns', generation: 4 }, spec: { destinations } });
  const lookup = (...models: DeployedModel[]) => (key: string) => models.find((m) => `${m.metadata.namespace}/${m.metadata.name}` === key);

  test('ready: the reference EndpointReady condition, FQDN and split', () => {
    const s = endpointStatus(ep([{ serviceRef: { name: 'a' }, trafficPercentage: 80 }, { serviceRef: { name: 'b' }, trafficPercentage: 20 }]), lookup(ready('a'), ready('b', 'ns', { id: 'b-id' })), 'example.test', T0);
    expect(s.conditions).toEqual([{ type: 'EndpointReady', status: 'True', reason: 'ResourceReady', message: 'Endpoint Ready', observedGeneration: 4, lastTransitionTime: '2026-01-19T01:18:30Z' }]);
    expect(s).toMatchObject({ endpointFQDN: 'e.ns.example.test', observedGeneration: 4, trafficSplit: { a: 80, 'b-id': 20 } });
  });

  test.each([
    ['missing model', [{ serviceRef: { name: 'zz' } }], [], 'DeployedModelNotFound', 'DeployedModel ns/zz does not exist'],
    ['model not ready', [{ serviceRef: { name: 'a' }, trafficPercentage: 50 }, { serviceRef: { name: 'b' }, trafficPercentage: 50 }], [ready('a'), notReady('b')], 'DeployedModelNotReady', 'DeployedModel ns/b is not ready'],
    ['cross-namespace refused', [{ serviceRef: { name: 'x', namespace: 'other' } }], [ready('x', 'other')], 'CrossNamespaceRefused', 'DeployedModel other/x does not allow Endpoints of namespace ns (spec.allowedNamespaces)'],
    ['bad sum', [{ serviceRef: { name: 'a' }, trafficPercentage: 50 }], [ready('a')], 'InvalidSpec', 'spec.destinations: trafficPercentage values must add up to 100'],
    ['duplicate', [{ serviceRef: { name: 'a' }, trafficPercentage: 50 }, { serviceRef: { name: 'a', namespace: 'ns' }, trafficPercentage: 50 }], [ready('a')], 'InvalidSpec', 'spec.destinations: DeployedModel ns/a is listed twice'],
    ['empty', [], [], 'NoDestinations', 'spec.destinations is empty'],
  ])('not ready: %s', (_n, dests, models, reason, message) => {
    const s = endpointStatus(ep(dests as Endpoint['spec']['destinations']), lookup(...(models as DeployedModel[])), 'd', T0);
    expect(s.conditions![0]).toMatchObject({ type: 'EndpointReady', status: 'False', reason, message });
  });

  test('a destination scaled to zero does not block, and the message names it', () => {
    const atZero: DeployedModel = { ...dm(ZERO_SPEC, { name: 'z' }), status: deployedModelStatus(dm(ZERO_SPEC, { name: 'z' }), obs({ replicas: 0, runningReplicas: 0 }), [], T0) };
    const s = endpointStatus(ep([{ serviceRef: { name: 'a' }, trafficPercentage: 50 }, { serviceRef: { name: 'z' }, trafficPercentage: 50 }]), lookup(ready('a'), atZero), 'd', T0);
    expect(s.conditions![0]).toMatchObject({ type: 'EndpointReady', status: 'True', reason: 'ResourceReady', message: 'Endpoint Ready; scaled to zero, woken by the next call: DeployedModel ns/z' });
  });

  test('a 0% destination that is not ready does not block; an allowed cross-namespace model is followed', () => {
    const s = endpointStatus(ep([{ serviceRef: { name: 'a' }, trafficPercentage: 100 }, { serviceRef: { name: 'b' }, trafficPercentage: 0 }]), lookup(ready('a'), notReady('b')), 'd', T0);
    expect(s.conditions![0].status).toBe('True');
    const x = endpointStatus(ep([{ serviceRef: { name: 'x', namespace: 'other' } }]), lookup(ready('x', 'other', { allowedNamespaces: ['ns'] })), 'd', T0);
    expect(x.conditions![0]).toMatchObject({ status: 'True', reason: 'ResourceReady' });
  });
});
