// Leader election on the real apiserver: of two controllers, one holds the Lease and reconciles, the
// other waits with warm caches. Killed without a goodbye (SIGKILL), the leader's Lease expires and the
// standby takes over; stopped gracefully (SIGTERM), the leader hands the Lease back at once. How long
// each took is read from the Lease's own times (the controllers write them), not from the test's clock.
import { CoordinationV1Api, type V1LeaseSpec } from '@kubernetes/client-node';
import { applyCrds, clients, deleteNamespace, kubectlOk, newNamespace, setAvailable, startController, waitFor, type Clients, type ClusterProcess } from '../helpers/cluster.js';

const LEASE_SECONDS = 3;
let c: Clients;
let ns: string;
const running: ClusterProcess[] = [];

function model(name: string): string {
  return JSON.stringify({ apiVersion: 'prediction.predictgate.dev/v1', kind: 'DeployedModel', metadata: { name, namespace: ns }, spec: { modelSpec: { framework: 'custom', containerSpec: { image: 'example/model:1' } } } });
}

async function start(): Promise<ClusterProcess> {
  const p = await startController([ns], { LEASE_DURATION_SECONDS: String(LEASE_SECONDS) });
  running.push(p);
  return p;
}

async function isLeader(p: ClusterProcess): Promise<boolean> {
  return /^predictgate_controller_leader 1$/m.test(await p.metrics());
}

async function reconciles(p: ClusterProcess): Promise<number> {
  return [...(await p.metrics()).matchAll(/^predictgate_reconcile_total\{[^}]*\} (\d+)/gm)].reduce((s, m) => s + Number(m[1]), 0);
}

async function lease(): Promise<V1LeaseSpec> {
  return (await c.kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: 'predictgate-controller', namespace: ns })).spec ?? {};
}

/** A Lease time (a MicroTime, which the client may leave a string) in milliseconds. */
function ms(t: unknown): number {
  return t instanceof Date ? t.getTime() : Date.parse(String(t));
}

async function reconciledBy(name: string): Promise<void> {
  await kubectlOk(['apply', '-f', '-'], { input: model(name) });
  await waitFor(async () => (await c.apps.readNamespacedDeployment({ name, namespace: ns })).metadata?.name, `Deployment ${name}`);
  await setAvailable(c, ns, name, 1);
  await kubectlOk(['wait', '--for=condition=Ready', '--timeout=30s', '-n', ns, `dm/${name}`]);
}

beforeAll(async () => {
  c = clients();
  await applyCrds();
  ns = await newNamespace(c, 'leader');
});

afterAll(async () => {
  for (const p of running) await p.stop('SIGKILL');
  await deleteNamespace(c, ns);
});

test('one of two controllers leads and reconciles; the other takes over when it dies or steps down', async () => {
  const first = await start();
  await waitFor(() => isLeader(first), 'the first controller to lead');
  const second = await start();
  await second.proc.waitForLog((l) => l.msg === 'caches synced', 'standby caches synced');

  await reconciledBy('one');
  expect(await isLeader(second)).toBe(false);
  expect(await reconciles(second)).toBe(0);

  // SIGKILL: no release; the standby waits out the lease from the dead leader's last renewal.
  await first.stop('SIGKILL');
  const last = await lease();
  const firstId = last.holderIdentity;
  expect(firstId).toEqual(expect.any(String));
  await second.proc.waitForLog((l) => l.msg === 'became leader', 'the standby to lead', 30_000);
  const taken = await lease();
  expect(taken.holderIdentity).not.toBe(firstId);
  expect(taken.leaseTransitions).toBe((last.leaseTransitions ?? 0) + 1);
  // Never before the lease ran out (no two leaders), and within one more retry period or so after:
  // the standby counts the lease from when it saw the last renewal, and tries every 0.4 s.
  const waited = ms(taken.acquireTime) - ms(last.renewTime);
  expect(waited).toBeGreaterThanOrEqual(LEASE_SECONDS * 1000);
  expect(waited).toBeLessThan((LEASE_SECONDS + 2) * 1000);
  await reconciledBy('two');
  expect(await reconciles(second)).toBeGreaterThan(0);

  // SIGTERM: the leader hands the Lease back, so a new standby takes it while it would still have held.
  const third = await start();
  await third.proc.waitForLog((l) => l.msg === 'caches synced', 'third controller synced');
  const held = await lease();
  expect(held.holderIdentity).toBe(taken.holderIdentity);
  expect(await second.stop('SIGTERM')).toBe(0);
  await third.proc.waitForLog((l) => l.msg === 'became leader', 'the third controller to lead', 30_000);
  const handed = await lease();
  expect([handed.holderIdentity === held.holderIdentity, handed.leaseTransitions]).toEqual([false, (held.leaseTransitions ?? 0) + 1]);
  expect(ms(handed.acquireTime) - ms(held.renewTime)).toBeLessThan(LEASE_SECONDS * 1000);
  await reconciledBy('three');
});
