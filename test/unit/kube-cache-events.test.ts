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
  const expected = EVENTS_IN_FLIGHT + EVENTS_QUEUED;
  const held: ServerResponse[] = [];
  let received = 0;
  let open = 0;
  let maxOpen = 0;
  let allReceived!: () => void;
  const done = new Promise<void>((resolve) => (allReceived = resolve));
  // The server holds each request until a full batch of EVENTS_IN_FLIGHT is open, then answers them
  // all: more at once than the recorder allows would show as more open at once.
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    maxOpen = Math.max(maxOpen, ++open);
    res.on('finish', () => open--);
    req.resume();
    req.on('end', () => {
      received++;
      held.push(res);
      if (held.length === EVENTS_IN_FLIGHT || received === expected) {
        for (const r of held.splice(0)) r.writeHead(201, { 'content-type': 'application/json' }).end('{"kind":"Event","apiVersion":"v1","metadata":{"name":"e"}}');
      }
      if (received === expected) allReceived();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  try {
    const kc = new KubeConfig();
    kc.loadFromOptions({ clusters: [{ name: 'c', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }], users: [{ name: 'u' }], contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x' });
    const events = kubeEvents(kc, silentLogger(), () => new Date(0));
    const dm = { apiVersion: 'prediction.predictgate.dev/v1', kind: 'DeployedModel', metadata: { name: 'm', namespace: 'ns' }, spec: {} } as unknown as DeployedModel;
    for (let i = 0; i < expected + 5; i++) events.record(dm, { type: 'Normal', reason: 'Ready', message: `${i}` });
    // The first EVENTS_IN_FLIGHT went at once, EVENTS_QUEUED wait, the last 5 were dropped.
    expect(events.counts()).toEqual({ inFlight: EVENTS_IN_FLIGHT, waiting: EVENTS_QUEUED, dropped: 5 });
    await done;
    expect([received, maxOpen]).toEqual([expected, EVENTS_IN_FLIGHT]);
  } finally {
    for (const res of held.splice(0)) res.destroy();
    await new Promise((r) => server.close(r));
  }
}, 120_000);
