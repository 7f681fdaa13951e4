// Active health checks in local mode, against a real model process frozen with SIGSTOP (it still
// accepts connections: the kernel does, while the process answers nothing): with calls flowing, the
// gateway's checks take the frozen replica out of rotation and every later call goes to the live
// one; SIGCONT brings it back and both take calls again. Local mode's own readiness checks run
// every 10 minutes here, so the replica stays in the status throughout by construction: only the
// gateway's checks act. Calls that were on the frozen replica fail at their 1 s deadline.
import { startLocal, ready, faultyYaml, faultyModelCalls, endpointYaml, post, type LocalHarness } from '../helpers/local.js';
import { metricValue } from '../helpers/metrics.js';
import { pidListeningOn } from '../helpers/procs.js';

let h: LocalHarness;
let frozenPid: number | undefined;

beforeAll(async () => {
  h = await startLocal({
    'pair.yaml': `${faultyYaml('pair', 'none', { replicas: 2, serving: { timeoutSeconds: 1 } })}---\n${endpointYaml('pair', [{ model: 'pair' }])}`,
  }, { settings: { healthIntervalMs: 600_000, healthCheckIntervalMs: 200, healthCheckTimeoutMs: 1000, unhealthyThreshold: 2 } });
  await h.until((x) => ready(x, 'Endpoint', 'default/pair') && x.model('default/pair')?.status?.replicaAddresses?.length === 2, 'pair Ready with 2 replicas');
});

afterAll(async () => {
  if (frozenPid !== undefined) process.kill(frozenPid, 'SIGCONT');
  await h?.stop();
});

const metric = (name: string): Promise<number> => metricValue(h.url('/metrics'), name);
const served = async (port: number): Promise<number> => (await faultyModelCalls(`http://127.0.0.1:${port}`)).predicts;

/** Sends calls one after another until `done` holds; returns each call's status. */
async function callUntil(done: () => Promise<boolean>): Promise<number[]> {
  const statuses: number[] = [];
  const deadline = Date.now() + 30_000;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out; statuses so far: ${statuses.join(',')}`);
    statuses.push((await post(h.vertex('pair'), '{"instances": [1]}')).status);
  }
  return statuses;
}

test('a frozen replica is out of rotation while calls flow, every later call is answered by the other, and it is back after SIGCONT', async () => {
  const [a, b] = h.model('default/pair')!.status!.replicaAddresses!.map((u) => Number(new URL(u).port));
  frozenPid = pidListeningOn(a);
  expect(frozenPid).toBeDefined();
  process.kill(frozenPid!, 'SIGSTOP');

  // Until the checks catch it, a call that lands on the frozen replica fails at its deadline (504).
  const during = await callUntil(async () => (await metric('predictgate_upstream_unhealthy_replicas')) === 1);
  expect(during.filter((s) => s !== 200 && s !== 504)).toEqual([]);

  const before = await served(b);
  for (let i = 0; i < 50; i++) expect((await post(h.vertex('pair'), `{"instances": [${i}]}`)).status).toBe(200);
  expect((await served(b)) - before).toBe(50);

  process.kill(frozenPid!, 'SIGCONT');
  frozenPid = undefined;
  await callUntil(async () => (await metric('predictgate_upstream_unhealthy_replicas')) === 0);
  const back = [await served(a), await served(b)];
  for (let i = 0; i < 100; i++) expect((await post(h.vertex('pair'), `{"instances": [${i}]}`)).status).toBe(200);
  // Both take calls again (one at a time, so the random draw alone decides: far from all on one).
  const shares = [(await served(a)) - back[0], (await served(b)) - back[1]];
  expect(Math.min(...shares)).toBeGreaterThan(20);
  expect(await metric('predictgate_upstream_health_checks_failed_total')).toBeGreaterThanOrEqual(2);
});
