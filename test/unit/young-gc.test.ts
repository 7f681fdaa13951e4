// Young collections paced by body bytes (gateway/youngGc.ts): one is asked for on the next turn of the
// event loop once the bytes noted since the last one reach the step, however many calls noted them;
// a step of 0, or no collector (node without --expose-gc), asks for none.
import { YoungCollections } from '../../src/gateway/youngGc.js';

const MB = 1024 * 1024;

/** Lets setImmediate callbacks run. */
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

test('a collection once the noted bytes reach the step, on the next turn, then counting starts over', async () => {
  let collections = 0;
  const young = new YoungCollections(4 * MB, () => collections++);
  expect(young.active).toBe(true);
  young.note(3 * MB);
  await turn();
  expect(collections).toBe(0);
  young.note(1 * MB);
  expect(collections).toBe(0); // never inside the caller's stack
  young.note(5 * MB); // already asked for: still one
  await turn();
  expect(collections).toBe(1);
  young.note(3 * MB);
  await turn();
  expect(collections).toBe(1);
  young.note(1 * MB);
  await turn();
  expect(collections).toBe(2);
});

test('no collections with a step of 0 or without a collector', async () => {
  let collections = 0;
  const off = new YoungCollections(0, () => collections++);
  off.note(100 * MB);
  await turn();
  expect(collections).toBe(0);
  expect(off.active).toBe(false);
  expect(new YoungCollections(4 * MB, null).active).toBe(false);
});
