// Table tests of the pure parts of the cluster mode, without a network: the Kubernetes objects a
// WorkloadSpec becomes and what an observed Deployment means, the CRD schema conversion for ajv,
// UPSTREAM_RESOLVE, which condition changes raise Events, status comparison, and the new settings.
import { ANNOTATION_HASH, desiredObjects, observeObjects, type KubeObject } from '../../src/workload/kubeObjects.js';
import type { WorkloadSpec } from '../../src/workload/workload.js';
import { toJsonSchema } from '../../src/api/crds.js';
import { parseResolve } from '../../src/gateway/routing.js';
import { transitionEvent } from '../../src/controller/events.js';
import { deployedModelStatus } from '../../src/controller/deployedModel.js';
import { sameStatus } from '../../src/api/status.js';
import { deployedModelProblems } from '../../src/api/validation.js';
import { loadConfig } from '../../src/config.js';
import { PendingWrites, WRITE_TRUST_MS, caughtUp } from '../../src/kube/pendingWrites.js';
import type { Condition, DeployedModel } from '../../src/api/types.js';

const spec = (over: Partial<WorkloadSpec> = {}): WorkloadSpec => ({
  key: 'ns/m',
  command: ['serve'],
  args: [],
  env: { AIP_HTTP_PORT: '9000' },
  replicas: 2,
  predictRoute: '/p',
  healthRoute: '/h',
  port: 9000,
  image: 'img:1',
  owner: { name: 'm', uid: 'uid-1' },
  ...over,
});

describe('desiredObjects', () => {
  test('a Deployment with the container contract, probe, owner and labels; a Service; no HPA at min = max', () => {
    const { deployment, service, hpa } = desiredObjects(spec({ resources: { requests: { cpu: '100m' } } }));
    expect(hpa).toBeNull();
    expect(deployment.metadata).toMatchObject({
      name: 'm',
      namespace: 'ns',
      labels: { 'app.kubernetes.io/managed-by': 'predictgate', 'prediction.predictgate.dev/deployed-model': 'm' },
      ownerReferences: [{ apiVersion: 'prediction.predictgate.dev/v1', kind: 'DeployedModel', name: 'm', uid: 'uid-1', controller: true, blockOwnerDeletion: true }],
    });
    expect(deployment.spec).toMatchObject({ replicas: 2, selector: { matchLabels: { 'prediction.predictgate.dev/deployed-model': 'm' } } });
    const container = (deployment.spec as any).template.spec.containers[0];
    expect(container).toEqual({
      name: 'model',
      image: 'img:1',
      command: ['serve'],
      env: [{ name: 'AIP_HTTP_PORT', value: '9000' }],
      ports: [{ name: 'http', containerPort: 9000, protocol: 'TCP' }],
      startupProbe: { httpGet: { path: '/h', port: 'http' }, periodSeconds: 1, timeoutSeconds: 1, failureThreshold: 3600 },
      readinessProbe: { httpGet: { path: '/h', port: 'http' }, periodSeconds: 5, timeoutSeconds: 5, failureThreshold: 3 },
      lifecycle: { preStop: { sleep: { seconds: 10 } } },
      resources: { requests: { cpu: '100m' } },
    });
    expect(service.spec).toEqual({ type: 'ClusterIP', selector: { 'prediction.predictgate.dev/deployed-model': 'm' }, ports: [{ name: 'http', port: 9000, targetPort: 'http', protocol: 'TCP' }] });
  });

  test('above minReplicaCount an HPA owns the replica count', () => {
    const { deployment, hpa } = desiredObjects(spec({ maxReplicas: 5, targetCPUUtilizationPercentage: 75 }));
    expect((deployment.spec as { replicas?: number }).replicas).toBeUndefined();
    expect(hpa?.spec).toEqual({
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'm' },
      minReplicas: 2,
      maxReplicas: 5,
      metrics: [{ type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 75 } } }],
    });
    expect(desiredObjects(spec({ maxReplicas: 5 })).hpa?.spec?.metrics).toEqual([{ type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 60 } } }]);
  });

  test('minReplicaCount 0 stops the model: no HPA (it cannot scale from zero), zero replicas', () => {
    const { deployment, hpa } = desiredObjects(spec({ replicas: 0, maxReplicas: 3 }));
    expect(hpa).toBeNull();
    expect((deployment.spec as { replicas?: number }).replicas).toBe(0);
  });

  test('the applied hash is stable for the same spec and moves with any change', () => {
    const h = (s: WorkloadSpec): string | undefined => desiredObjects(s).deployment.metadata.annotations?.[ANNOTATION_HASH];
    expect(h(spec())).toMatch(/^[0-9a-f]{16}$/);
    expect(h(spec())).toBe(h(spec()));
    expect(h(spec({ image: 'img:2' }))).not.toBe(h(spec()));
    expect(h(spec({ env: { AIP_HTTP_PORT: '9000', X: '1' } }))).not.toBe(h(spec()));
  });
});

describe('observeObjects', () => {
  const deployment = (status: Record<string, unknown> | undefined, generation = 2, replicas = 2): KubeObject => ({
    apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'm', namespace: 'ns', generation }, spec: { replicas }, status,
  });
  const service: KubeObject = { apiVersion: 'v1', kind: 'Service', metadata: { name: 'm', namespace: 'ns' }, spec: { ports: [{ port: 9000 }] } };
  const available = { type: 'Available', status: 'False', reason: 'MinimumReplicasUnavailable', message: 'Deployment does not have minimum availability.' };

  test.each([
    ['not created yet', undefined, undefined, undefined],
    ['created, never observed', deployment(undefined), service, { replicas: 2, readyReplicas: 0, progressing: true, failure: undefined, serviceAddress: 'http://m.ns.svc:9000' }],
    ['rolling out', deployment({ observedGeneration: 2, replicas: 2, updatedReplicas: 1, availableReplicas: 1 }), service, { readyReplicas: 1, progressing: true, failure: undefined }],
    ['all available', deployment({ observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2 }), service, { readyReplicas: 2, progressing: false, failure: undefined }],
    ['none available', deployment({ observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 0, conditions: [available] }), service, { readyReplicas: 0, progressing: false, failure: '0 of 2 replicas available (MinimumReplicasUnavailable: Deployment does not have minimum availability.)', notYetAvailable: true }],
    ['stalled rollout', deployment({ observedGeneration: 2, updatedReplicas: 1, conditions: [{ type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded', message: 'ReplicaSet "m-1" has timed out progressing.' }] }), service, { progressing: true, failure: 'Deployment ProgressDeadlineExceeded: ReplicaSet "m-1" has timed out progressing.' }],
    ['pods refused', deployment({ observedGeneration: 2, updatedReplicas: 0, conditions: [{ type: 'ReplicaFailure', status: 'True', reason: 'FailedCreate', message: 'pods "m-x" is forbidden: exceeded quota' }] }), service, { failure: 'Deployment ReplicaFailure: pods "m-x" is forbidden: exceeded quota' }],
    ['no Service yet', deployment({ observedGeneration: 2, updatedReplicas: 2, availableReplicas: 2 }), undefined, { readyReplicas: 2, serviceAddress: undefined }],
  ])('%s', (_what, d, s, expected) => {
    const o = observeObjects(d, s);
    if (expected === undefined) expect(o).toBeUndefined();
    else expect(o).toMatchObject(expected);
  });

  test('a model with available replicas but no Service is not Ready yet', () => {
    const dm: DeployedModel = { apiVersion: 'prediction.predictgate.dev/v1', kind: 'DeployedModel', metadata: { name: 'm', namespace: 'ns', generation: 1 }, spec: { modelSpec: { framework: 'custom', containerSpec: { image: 'x' } } } };
    const noService = deployedModelStatus(dm, observeObjects(deployment({ observedGeneration: 2, updatedReplicas: 2, availableReplicas: 2 }), undefined), [], new Date(0));
    expect(noService.primaryCondition).toMatchObject({ reason: 'Progressing', message: 'replicas are ready; waiting for the model Service' });
    const withService = deployedModelStatus(dm, observeObjects(deployment({ observedGeneration: 2, updatedReplicas: 2, availableReplicas: 2 }), service), [], new Date(0));
    expect(withService).toMatchObject({ primaryCondition: { reason: 'Ready' }, address: 'http://m.ns.svc:9000' });
    expect(withService.replicaAddresses).toBeUndefined();
  });
});

describe('toJsonSchema', () => {
  test('Kubernetes OpenAPI becomes draft-07: exclusive bounds, no extensions or formats, unknown fields refused', () => {
    const out = toJsonSchema({
      type: 'object',
      description: 'd',
      'x-kubernetes-validations': [{ rule: 'true' }],
      properties: {
        t: { type: 'number', minimum: 0, exclusiveMinimum: true, maximum: 10 },
        when: { type: 'string', format: 'date-time' },
        // A property may be called like a keyword: it stays.
        format: { type: 'string', description: 'kept as a property' },
        m: { type: 'object', additionalProperties: { 'x-kubernetes-int-or-string': true, anyOf: [{ type: 'integer' }, { type: 'string' }] } },
      },
    });
    expect(out).toEqual({
      type: 'object',
      additionalProperties: false,
      properties: {
        t: { type: 'number', exclusiveMinimum: 0, maximum: 10 },
        when: { type: 'string' },
        format: { type: 'string' },
        m: { type: 'object', additionalProperties: { anyOf: [{ type: 'integer' }, { type: 'string' }] } },
      },
    });
  });

  test('local validation refuses a DeployedModel name that cannot name a Service, as the CRD does', () => {
    const dm = (name: string): DeployedModel => ({ apiVersion: 'prediction.predictgate.dev/v1', kind: 'DeployedModel', metadata: { name }, spec: { modelSpec: { framework: 'custom', containerSpec: {} } } });
    expect(deployedModelProblems(dm('ok-model-1'))).toEqual([]);
    for (const bad of ['9lives', 'a.b', 'x'.repeat(64), 'trailing-']) expect(deployedModelProblems(dm(bad))[0]).toMatch(/^metadata\.name: ".*" must be a DNS-1035 label/);
  });
});

describe('parseResolve', () => {
  test('rewrites matching host:port pairs only', () => {
    const r = parseResolve(['m.ns.svc:8080=127.0.0.1:4000', 'M2.ns.svc:80=127.0.0.1:4001'])!;
    expect(r('http://m.ns.svc:8080')).toBe('http://127.0.0.1:4000');
    expect(r('http://m2.ns.svc:80/x')).toBe('http://127.0.0.1:4001/x');
    expect(r('http://m.ns.svc:8081')).toBe('http://m.ns.svc:8081');
    expect(parseResolve([])).toBeUndefined();
  });

  test.each(['m.ns.svc=127.0.0.1:1', 'm:1=x', 'm:1=127.0.0.1:2=3', ''])('refuses %j', (bad) => {
    expect(() => parseResolve([bad])).toThrow(/UPSTREAM_RESOLVE: expected HOST:PORT=ADDRESS:PORT/);
  });
});

describe('transitionEvent', () => {
  const c = (status: 'True' | 'False', reason: string): Condition[] => [{ type: 'Ready', status, reason, message: `${reason}!`, lastTransitionTime: 't' }];
  test.each([
    ['first seen not ready', undefined, c('False', 'Progressing'), null],
    ['first seen ready', undefined, c('True', 'Ready'), { type: 'Normal', reason: 'Ready', message: 'Ready!' }],
    ['first seen invalid', undefined, c('False', 'InvalidSpec'), { type: 'Warning', reason: 'InvalidSpec', message: 'InvalidSpec!' }],
    ['becomes ready', c('False', 'Progressing'), c('True', 'Ready'), { type: 'Normal', reason: 'Ready', message: 'Ready!' }],
    ['stops being ready', c('True', 'Ready'), c('False', 'Unavailable'), { type: 'Warning', reason: 'Unavailable', message: 'Unavailable!' }],
    ['another not-ready step', c('False', 'Pending'), c('False', 'Progressing'), null],
    ['unchanged', c('True', 'Ready'), c('True', 'Ready'), null],
  ])('%s', (_what, prev, next, expected) => {
    expect(transitionEvent(prev, next, 'Ready')).toEqual(expected);
  });
});

test('sameStatus ignores key order (the apiserver sorts keys) and undefined members', () => {
  expect(sameStatus({ a: 1, b: { c: [{ x: 1, y: 2 }] } }, { b: { c: [{ y: 2, x: 1 }] }, a: 1, d: undefined })).toBe(true);
  expect(sameStatus({ a: [1, 2] }, { a: [2, 1] })).toBe(false);
  expect(sameStatus(undefined, {})).toBe(false);
});

test('cluster settings: lists and booleans from flags and the environment', () => {
  const { config } = loadConfig(['--namespaces', 'a, b,,c', '--upstream-resolve=m.ns.svc:80=127.0.0.1:1'], { LEADER_ELECTION: 'false' });
  expect(config).toMatchObject({ namespaces: ['a', 'b', 'c'], upstreamResolve: ['m.ns.svc:80=127.0.0.1:1'], leaderElection: false, leaseDurationSeconds: 15, resyncSeconds: 300 });
  expect(loadConfig([], {}).config.namespaces).toEqual([]);
  expect(() => loadConfig([], { LEADER_ELECTION: 'yes' })).toThrow('LEADER_ELECTION must be true or false, got "yes"');
});

describe('PendingWrites', () => {
  test('a write is served until the cache holds its version, the object is deleted, or it is too old', () => {
    let now = 0;
    const w = new PendingWrites<string>(() => now);
    w.wrote('k', '10', 'mine', '9');
    expect(w.pending('k', '9')).toBe('mine'); // the cache lags
    expect(w.pending('k', '10')).toBeUndefined(); // caught up: forgotten
    w.wrote('k', '12', 'again', '11');
    w.observed('k', '11', false);
    expect(w.pending('k', '11')).toBe('again'); // an older event does not clear it
    w.observed('k', '11', true);
    expect(w.pending('k', '11')).toBeUndefined(); // deleted
    w.wrote('k', '14', 'old', undefined);
    now = WRITE_TRUST_MS + 1;
    expect(w.pending('k', undefined)).toBeUndefined(); // never delivered, no longer trusted
    w.wrote('k', '20', 'seen', '20');
    expect(w.pending('k', '19')).toBeUndefined(); // the cache already had it: nothing remembered
  });

  test.each([[undefined, '5', false], ['5', '5', true], ['10', '9', true], ['9', '10', false], ['x', '10', true]] as const)('caughtUp(%s, %s) is %s', (cached, written, expected) => {
    expect(caughtUp(cached, written)).toBe(expected);
  });
});
