// Calls across the replicas of one deployed model (local mode in-process, faulty models as real
// child processes, each counting the calls it served): two live replicas share the calls, and a
// replica that refuses connections while it is still in the status costs no call, whichever place
// it has in the replica list and whichever transport carries the call (the retry on another
// replica), until outlier detection takes it out of rotation. Ready replicas are checked only every
// 10 minutes here and the gateway's active checks are off, so a replica that stopped listening stays
// in the status and in rotation for the whole test by construction, until its calls eject it. The balancer's random source is the test's: `pick` steers its first choice.
import { startLocal, ready, faultyYaml, faultyModelCalls, endpointYaml, post, type LocalHarness } from '../helpers/local.js';
import { metricValue } from '../helpers/metrics.js';
import { refuseConnections } from '../helpers/procs.js';
import { prng } from '../helpers/expect.js';

/** A counter's value in the gateway's /metrics. */
const counter = (name: string): Promise<number> => metricValue(h.url('/metrics'), name);

let h: LocalHarness;
/**
 * What the harness's random source returns. The balancer draws two replicas of two by rank, so a
 * constant 0 makes it try the first replica of the status first, 0.99 the last; null: seeded.
 */
let steer: number | null = null;
const seeded = prng(11);
const MODELS = ['pair', 'first-dead', 'last-dead'];

beforeAll(async () => {
  const files: Record<string, string> = {};
  for (const m of MODELS) files[`${m}.yaml`] = `${faultyYaml(m, 'none', { replicas: 2 })}---\n${endpointYaml(m, [{ model: m }])}`;
  h = await startLocal(files, { settings: { healthIntervalMs: 600_000, healthCheckIntervalMs: 0 }, random: () => steer ?? seeded() });
  await h.until((x) => MODELS.every((m) => ready(x, 'Endpoint', `default/${m}`) && x.model(`default/${m}`)?.status?.replicaAddresses?.length === 2), 'every endpoint Ready with 2 replicas');
});

afterAll(async () => {
  await h?.stop();
});

/** The ports of a deployed model's replicas, in the status's order. */
function ports(model: string): number[] {
  return (h.model(`default/${model}`)?.status?.replicaAddresses ?? []).map((a) => Number(new URL(a).port));
}

/** How many predict calls the faulty model on `port` has served. */
const served = async (port: number): Promise<number> => (await faultyModelCalls(`http://127.0.0.1:${port}`)).predicts;

const answer = (model: string, predictions: unknown[]): string =>
  JSON.stringify({ predictions, deployedModelId: model, modelDisplayName: model });

test('two live replicas share 200 sequential calls, each within 15% of half', async () => {
  const [a, b] = ports('pair');
  const before = [await served(a), await served(b)];
  for (let i = 0; i < 200; i++) {
    const r = await post(h.vertex('pair'), `{"instances": [${i}]}`);
    expect([r.status, r.text]).toEqual([200, answer('pair', [i])]);
  }
  // One call at a time, so neither is ever busier: the draw alone decides.
  const shares = [(await served(a)) - before[0], (await served(b)) - before[1]];
  expect(shares[0] + shares[1]).toBe(200);
  for (const n of shares) expect(Math.abs(n - 100)).toBeLessThanOrEqual(15);
});

// Small bodies go through undici, larger ones and streamed rawPredict through node:http.
const LARGE = 'x'.repeat(40 * 1024);
const CALLS: [string, string, string, (model: string) => string][] = [
  ['small predict', 'predict', '{"instances": [1]}', (m) => answer(m, [1])],
  ['large predict', 'predict', JSON.stringify({ instances: [LARGE] }), (m) => answer(m, [LARGE])],
  ['streamed rawPredict', 'rawPredict', JSON.stringify({ instances: [LARGE] }), () => JSON.stringify({ predictions: [LARGE] })],
];

test.each([
  ['the first', 'first-dead', 0],
  ['the last', 'last-dead', 1],
])('a replica that refuses connections while still in the status (%s of two) costs no call: the first five are retried on the other, then it is out of rotation', async (_place, model, dead) => {
  const addresses = h.model(`default/${model}`)!.status!.replicaAddresses!;
  const replicaPorts = ports(model);
  const live = replicaPorts[1 - dead];
  await refuseConnections(replicaPorts[dead]);
  const before = { served: await served(live), retries: await counter('predictgate_upstream_retries_total'), ejections: await counter('predictgate_upstream_ejections_total') };
  // Every call's first choice is the dead replica, until it is ejected.
  steer = dead === 0 ? 0 : 0.99;
  try {
    for (const [what, verb, body, expected] of CALLS) {
      for (let i = 0; i < 2; i++) {
        const r = await post(h.vertex(model, verb), body);
        expect([what, r.status, r.text]).toEqual([what, 200, expected(model)]);
      }
    }
  } finally {
    steer = null;
  }
  expect((await served(live)) - before.served).toBe(2 * CALLS.length);
  // Five refused connections in a row eject it: the sixth call went straight to the live one.
  expect([(await counter('predictgate_upstream_retries_total')) - before.retries, (await counter('predictgate_upstream_ejections_total')) - before.ejections]).toEqual([5, 1]);
  // Nothing waited for the dead replica to leave the status: it is still there.
  expect(h.model(`default/${model}`)?.status).toMatchObject({ replicaAddresses: addresses, readyReplicas: 2 });
});
