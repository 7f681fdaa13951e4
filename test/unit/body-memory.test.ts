// The body memory budget and buffer pool (gateway/bodyMemory.ts): admission in arrival order, a
// call larger than the budget running alone, leases that end while waiting or after their client
// left giving everything back, and pooled buffers reused only when nothing refers to them any more.
import { BodyMemory, POOLED_MIN_BYTES } from '../../src/gateway/bodyMemory.js';

const MB = 1024 * 1024;

/** Lets queued promise callbacks run. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

test('calls are admitted while they fit, then in arrival order as room is given back', async () => {
  const m = new BodyMemory(4 * MB);
  const a = m.lease();
  const b = m.lease();
  const c = m.lease();
  await a.admitRequest(1 * MB); // reserves 2 MB (request + expected answer)
  await b.admitRequest(1 * MB);
  expect(m.stats()).toEqual({ reservedBytes: 4 * MB, waiting: 0 });
  const order: string[] = [];
  const cDone = c.admitRequest(1 * MB).then(() => order.push('c'));
  const d = m.lease();
  const dDone = d.admitRequest(16).then(() => order.push('d'));
  await settle();
  // d is small enough to fit nowhere either, and waits behind c: first come, first served.
  expect(m.stats()).toEqual({ reservedBytes: 4 * MB, waiting: 2 });
  a.end(true);
  await cDone;
  await settle();
  expect(order).toEqual(['c']);
  b.end(true);
  await dDone;
  expect(order).toEqual(['c', 'd']);
  c.end(true);
  d.end(true);
  expect(m.stats()).toEqual({ reservedBytes: 0, waiting: 0 });
});

test('a call larger than the whole budget runs alone: it waits for the others, never refused', async () => {
  const m = new BodyMemory(1 * MB);
  const small = m.lease();
  await small.admitRequest(1000);
  const big = m.lease();
  let admitted = false;
  const bigDone = big.admitRequest(8 * MB).then(() => (admitted = true));
  await settle();
  expect(admitted).toBe(false);
  small.end(true);
  await bigDone;
  expect(m.stats()).toEqual({ reservedBytes: 16 * MB, waiting: 0 });
  big.end(true);
  expect(m.stats().reservedBytes).toBe(0);
});

test('a lease ended while waiting (its client left) leaves the queue and fails as client_closed', async () => {
  const m = new BodyMemory(2 * MB);
  const holder = m.lease();
  await holder.admitRequest(1 * MB);
  const gone = m.lease();
  const waiting = gone.admitRequest(1 * MB);
  await settle();
  expect(m.stats().waiting).toBe(1);
  gone.end(false);
  await expect(waiting).rejects.toMatchObject({ code: 'client_closed' });
  expect(m.stats()).toEqual({ reservedBytes: 2 * MB, waiting: 0 });
  holder.end(false);
  expect(m.stats().reservedBytes).toBe(0);
  await expect(m.lease().admitRequest(1)).resolves.toBeUndefined();
});

test('growing a reservation after the lease ended reserves nothing (a late model answer)', async () => {
  const m = new BodyMemory(8 * MB);
  const l = m.lease();
  await l.admitRequest(1 * MB);
  l.cover(3 * MB);
  expect(m.stats().reservedBytes).toBe(3 * MB);
  l.end(false);
  l.cover(5 * MB);
  expect(m.stats().reservedBytes).toBe(0);
  expect(l.bufferFor(1 * MB)).toBeUndefined();
});

test('large bodies get pooled buffers, reused once the answer was delivered, never while still being sent', () => {
  const m = new BodyMemory(64 * MB);
  const first = m.lease();
  expect(first.bufferFor(POOLED_MIN_BYTES - 1)).toBeUndefined();
  const req = first.bufferFor(MB + 1)!;
  const answer = first.bufferFor(MB)!;
  expect([req.length, answer.length]).toEqual([MB + 64 * 1024, MB]);
  first.sendingStarted(req.subarray(0, MB + 1));
  first.end(true);
  const second = m.lease();
  // The answer buffer comes back; the request buffer (its write never completed) was dropped.
  expect(second.bufferFor(MB)!.buffer).toBe(answer.buffer);
  expect(second.bufferFor(MB + 1)!.buffer).not.toBe(req.buffer);
  second.end(false);
  const third = m.lease();
  expect(third.bufferFor(MB)!.buffer).not.toBe(answer.buffer);
});

test('a sent request buffer is recycled; the pool keeps at most the budget', () => {
  const m = new BodyMemory(2 * MB);
  const l = m.lease();
  const a = l.bufferFor(MB)!;
  const b = l.bufferFor(MB)!;
  const c = l.bufferFor(MB)!;
  l.sendingStarted(a);
  l.sendingDone(a);
  l.end(true);
  const next = m.lease();
  const got = [next.bufferFor(MB)!, next.bufferFor(MB)!, next.bufferFor(MB)!].map((x) => x.buffer);
  // Two of the three were kept (2 MB), the third is new.
  expect(got.filter((x) => [a.buffer, b.buffer, c.buffer].includes(x))).toHaveLength(2);
});
