// What the Kubernetes plumbing keeps and sends at scale: cached objects' managedFields cut down to
// who owns which fields two levels deep, and Events sent a few at a time, dropped past the queue.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { KubeConfig } from '@kubernetes/client-node';
import { compactManagedFields } from '../../src/kube/informer.js';
import { EVENTS_IN_FLIGHT, EVENTS_QUEUED, kubeEvents } from '../../src/kube/events.js';
import { silentLogger } from '../../src/log.js';
import type { DeployedModel } from '../../src/api/types.js';

test('managedFields keep each manager, operation and subresource and its fields two levels deep', () => {
  const obj = {
    metadata: {
      name: 'm',
      managedFields: [
        { manager: 'predictgate', operation: 'Apply', apiVersion: 'apps/v1', time: 't', fieldsType: 'FieldsV1', fieldsV1: { 'f:spec': { 'f:replicas': {}, 'f:template': { 'f:spec': { 'f:containers': { 'k:{"name":"model"}': { '.': {} } } } } }, 'f:metadata': { 'f:labels': { 'f:a': {} } } } },
        { manager: 'kube-controller-manager', operation: 'Update', subresource: 'status', fieldsV1: { 'f:status': { 'f:replicas': {} } } },
      ],
    },
    spec: { replicas: 1 },
  };
  expect(compactManagedFields(obj)).toBe(obj);
  expect(obj.metadata.managedFields).toEqual([
    { manager: 'predictgate', operation: 'Apply', fieldsV1: { 'f:spec': { 'f:replicas': {}, 'f:template': {} }, 'f:metadata': { 'f:labels': {} } } },
    { manager: 'kube-controller-manager', operation: 'Update', subresource: 'status', fieldsV1: { 'f:status': { 'f:replicas': {} } } },
  ]);
  expect(obj.spec).toEqual({ replicas: 1 });
  const bare = { metadata: { name: 'x' } };
  expect(compactManagedFields(bare)).toEqual({ metadata: { name: 'x' } });
});

test(`Events go ${EVENTS_IN_FLIGHT} at a time; past ${EVENTS_QUEUED} waiting, new ones are dropped`, async () => {
  const held: ServerResponse[] = [];
  let received = 0;
  let maxOpen = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on('end', () => {
      received++;
      held.push(res);
      maxOpen = Math.max(maxOpen, held.length);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  try {
    const kc = new KubeConfig();
    kc.loadFromOptions({ clusters: [{ name: 'c', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }], users: [{ name: 'u' }], contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x' });
    const events = kubeEvents(kc, silentLogger(), () => new Date(0));
    const dm = { apiVersion: 'prediction.predictgate.dev/v1', kind: 'DeployedModel', metadata: { name: 'm', namespace: 'ns' }, spec: {} } as unknown as DeployedModel;
    const total = EVENTS_IN_FLIGHT + EVENTS_QUEUED + 5;
    for (let i = 0; i < total; i++) events.record(dm, { type: 'Normal', reason: 'Ready', message: `${i}` });
    const answerAll = (): void => {
      for (const res of held.splice(0)) res.writeHead(201, { 'content-type': 'application/json' }).end('{"kind":"Event","apiVersion":"v1","metadata":{"name":"e"}}');
    };
    const deadline = Date.now() + 20_000;
    while (received < EVENTS_IN_FLIGHT + EVENTS_QUEUED && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 5));
      answerAll();
    }
    await new Promise((r) => setTimeout(r, 50));
    answerAll();
    // The first EVENTS_IN_FLIGHT went at once, EVENTS_QUEUED waited, the last 5 were dropped.
    expect([received, maxOpen]).toEqual([EVENTS_IN_FLIGHT + EVENTS_QUEUED, EVENTS_IN_FLIGHT]);
  } finally {
    for (const res of held.splice(0)) res.destroy();
    await new Promise((r) => server.close(r));
  }
});
