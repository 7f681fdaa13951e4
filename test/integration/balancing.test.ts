// Calls across the replicas of one deployed model (local mode in-process, faulty models as real
// child processes, each counting the calls it served): two live replicas share the calls evenly,
// and a replica that refuses connections while it is still in the status costs no call, whichever
// place it has in the replica list and whichever transport carries the call (the retry on another
// replica). Ready replicas are checked only every 10 minutes here, so a replica that stopped
// listening stays in the status for the whole test by construction.
import { startLocal, ready, faultyYaml, endpointYaml, post, type LocalHarness } from '../helpers/local.js';
import { refuseConnections } from '../helpers/procs.js';

let h: LocalHarness;
const MODELS = ['pair', 'first-dead', 'last-dead'];

beforeAll(async () => {
  const files: Record<string, string> = {};
  for (const m of MODELS) files[`${m}.yaml`] = `${faultyYaml(m, 'none', { replicas: 2 })}---\n${endpointYaml(m, [{ model: m }])}`;
  h = await startLocal(files, { settings: { healthIntervalMs: 600_000 } });
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
async function served(port: number): Promise<number> {
  return ((await (await fetch(`http://127.0.0.1:${port}/calls`)).json()) as { predicts: number }).predicts;
}

const answer = (model: string, predictions: unknown[]): string =>
  JSON.stringify({ predictions, deployedModelId: model, modelDisplayName: model });

test('two live replicas take the same share of sequential calls', async () => {
  const [a, b] = ports('pair');
  const before = [await served(a), await served(b)];
  for (let i = 0; i < 20; i++) {
    const r = await post(h.vertex('pair'), `{"instances": [${i}]}`);
    expect([r.status, r.text]).toEqual([200, answer('pair', [i])]);
  }
  // One call at a time: the pool turns to the next replica on every call.
  expect([(await served(a)) - before[0], (await served(b)) - before[1]]).toEqual([10, 10]);
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
])('a replica that refuses connections while still in the status (%s of two) costs no call: each is retried on the other', async (_place, model, dead) => {
  const addresses = h.model(`default/${model}`)!.status!.replicaAddresses!;
  const replicaPorts = ports(model);
  const live = replicaPorts[1 - dead];
  await refuseConnections(replicaPorts[dead]);
  const before = await served(live);
  for (const [what, verb, body, expected] of CALLS) {
    // Two calls in a row: the pool starts one of them on each replica, so one starts on the dead one.
    for (let i = 0; i < 2; i++) {
      const r = await post(h.vertex(model, verb), body);
      expect([what, r.status, r.text]).toEqual([what, 200, expected(model)]);
    }
  }
  expect((await served(live)) - before).toBe(2 * CALLS.length);
  // Nothing waited for the dead replica to leave: it is still there.
  expect(h.model(`default/${model}`)?.status).toMatchObject({ replicaAddresses: addresses, readyReplicas: 2 });
});
