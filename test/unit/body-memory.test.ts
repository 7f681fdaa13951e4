// The body memory budget and buffer pool (gateway/bodyMemory.ts): large calls admitted in arrival
// order while they fit, small and chunked ones never held back but counted, a call larger than the
// budget running alone, a bounded wait (then overloaded), a client that leaves while waiting, late
// growth after the call ended, a request's share and buffer given back once it was sent (the wait for
// the model holds none), answers admitted ahead of waiting requests, and pooled buffers reused only
// when nothing refers to them any more; a full pool makes room for the sizes the traffic needs now.
import { BodyMemory, POOLED_MIN_BYTES, type BodyLease } from '../../src/gateway/bodyMemory.js';

const MB = 1024 * 1024;
const WAIT_MS = 60_000;

/** The call is over: its handler returned and its answer was delivered (or its connection closed). */
function over(lease: BodyLease, delivered: boolean): void {
  lease.handlerOver();
  lease.responseOver(delivered);
}

/**
 * Asks `m` for admission of `bytes` and checks that the call waits (it is in the queue at once);
 * `done` settles when it is admitted (wrapped: an awaited promise would wait for that).
 */
function waitingAdmission(m: BodyMemory, lease: BodyLease, bytes: number): { done: Promise<void> } {
  const before = m.stats().waiting;
  const done = lease.admitRequest(bytes, WAIT_MS);
  expect(m.stats().waiting).toBe(before + 1);
  return { done };
}

const overloaded = (budget: number, waitMs: number): object => ({
  code: 'overloaded',
  httpStatus: 503,
  message: `the gateway's memory for request and answer bodies (BUFFERED_BODY_BYTES, ${budget} bytes) stayed full for ${waitMs / 1000} s; retry later`,
});

test('large calls are admitted while they fit, then in arrival order; small ones never wait', async () => {
  const m = new BodyMemory(2 * MB);
  const [a, b, c] = [m.lease(), m.lease(), m.lease()];
  await a.admitRequest(1 * MB, WAIT_MS);
  await b.admitRequest(1 * MB, WAIT_MS);
  expect(m.stats()).toEqual({ reservedBytes: 2 * MB, waiting: 0 });
  const order: string[] = [];
  const cDone = c.admitRequest(1 * MB, WAIT_MS).then(() => order.push('c'));
  const d = m.lease();
  const dDone = d.admitRequest(POOLED_MIN_BYTES, WAIT_MS).then(() => order.push('d'));
  expect(m.stats()).toEqual({ reservedBytes: 2 * MB, waiting: 2 });
  // A small body (and a chunked one, counted as it arrives) goes at once, queue or not.
  const small = m.lease();
  await small.admitRequest(POOLED_MIN_BYTES - 1, WAIT_MS);
  const chunked = m.lease();
  await chunked.admitRequest(undefined, WAIT_MS);
  chunked.cover(3000);
  expect(m.stats()).toEqual({ reservedBytes: 2 * MB + POOLED_MIN_BYTES - 1 + 3000, waiting: 2 });
  over(small, true);
  over(chunked, true);
  over(a, true);
  await cDone;
  // d (256 KiB) does not fit beside b and c yet: first come, first served.
  expect(m.stats()).toEqual({ reservedBytes: 2 * MB, waiting: 1 });
  expect(order).toEqual(['c']);
  over(b, true);
  await dDone;
  expect(order).toEqual(['c', 'd']);
  over(c, true);
  over(d, true);
  expect(m.stats()).toEqual({ reservedBytes: 0, waiting: 0 });
});

test('a call larger than the whole budget runs alone: it waits for the others, never refused', async () => {
  const m = new BodyMemory(1 * MB);
  const other = m.lease();
  await other.admitRequest(512 * 1024, WAIT_MS);
  const big = m.lease();
  const { done: bigDone } = waitingAdmission(m, big, 8 * MB);
  over(other, true);
  await bigDone;
  expect(m.stats()).toEqual({ reservedBytes: 8 * MB, waiting: 0 });
  over(big, true);
  expect(m.stats().reservedBytes).toBe(0);
});

test('small bodies and answers in flight do not keep a body as large as the budget waiting', async () => {
  const m = new BodyMemory(1 * MB);
  const small = m.lease();
  await small.admitRequest(POOLED_MIN_BYTES - 1, WAIT_MS);
  small.cover(2 * POOLED_MIN_BYTES); // its answer
  const large = m.lease();
  await large.admitRequest(512 * 1024, WAIT_MS);
  const big = m.lease();
  const { done: bigDone } = waitingAdmission(m, big, 1 * MB);
  // The other large body goes: the small call still holds memory, and the big one goes all the same.
  over(large, true);
  await bigDone;
  expect(m.stats()).toEqual({ reservedBytes: 1 * MB + 2 * POOLED_MIN_BYTES, waiting: 0 });
  over(small, true);
  over(big, true);
  expect(m.stats()).toEqual({ reservedBytes: 0, waiting: 0 });
});

test('a call that waits too long is refused as overloaded and leaves the queue', async () => {
  const m = new BodyMemory(1 * MB);
  const holder = m.lease();
  await holder.admitRequest(1 * MB, WAIT_MS);
  const late = m.lease();
  await expect(late.admitRequest(1 * MB, 10)).rejects.toMatchObject(overloaded(1 * MB, 10));
  expect(m.stats()).toEqual({ reservedBytes: 1 * MB, waiting: 0 });
  over(late, false);
  over(holder, false);
  expect(m.stats().reservedBytes).toBe(0);
});

test('a client that leaves while its call waits: out of the queue, client_closed, nothing reserved', async () => {
  const m = new BodyMemory(2 * MB);
  const holder = m.lease();
  await holder.admitRequest(2 * MB, WAIT_MS);
  const gone = m.lease();
  const waiting = gone.admitRequest(1 * MB, WAIT_MS);
  expect(m.stats().waiting).toBe(1);
  gone.clientLeft();
  await expect(waiting).rejects.toMatchObject({ code: 'client_closed', httpStatus: 499, message: 'the client closed the connection while its call waited for memory' });
  over(gone, false);
  expect(m.stats()).toEqual({ reservedBytes: 2 * MB, waiting: 0 });
  over(holder, false);
  expect(m.stats().reservedBytes).toBe(0);
  await expect(m.lease().admitRequest(1 * MB, WAIT_MS)).resolves.toBeUndefined();
});

test('the reservation grows with what the call holds (its answer); nothing is reserved after it ended', async () => {
  const m = new BodyMemory(8 * MB);
  const l = m.lease();
  await l.admitRequest(1 * MB, WAIT_MS);
  l.cover(3 * MB);
  expect(m.stats().reservedBytes).toBe(3 * MB);
  over(l, false);
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
  over(first, true);
  const second = m.lease();
  // The answer buffer comes back; the request buffer (its write never completed) was dropped.
  expect(second.bufferFor(MB)!.buffer).toBe(answer.buffer);
  expect(second.bufferFor(MB + 1)!.buffer).not.toBe(req.buffer);
  over(second, false);
  const third = m.lease();
  expect(third.bufferFor(MB)!.buffer).not.toBe(answer.buffer);
});

test('the lease ends only when both its handler and its response are over, in either order', async () => {
  const m = new BodyMemory(8 * MB);
  const a = m.lease();
  await a.admitRequest(1 * MB, WAIT_MS);
  a.responseOver(false); // the client left while the handler still uses its buffers
  expect(m.stats().reservedBytes).toBe(1 * MB);
  a.handlerOver();
  expect(m.stats().reservedBytes).toBe(0);
  const b = m.lease();
  await b.admitRequest(1 * MB, WAIT_MS);
  const buf = b.bufferFor(MB)!;
  b.handlerOver();
  expect(m.stats().reservedBytes).toBe(1 * MB);
  b.responseOver(true);
  b.responseOver(false); // 'close' after 'finish' changes nothing
  expect(m.stats().reservedBytes).toBe(0);
  expect(m.lease().bufferFor(MB)!.buffer).toBe(buf.buffer);
});

test('a sent request buffer is recycled; the pool keeps at most the budget', () => {
  const m = new BodyMemory(2 * MB);
  const l = m.lease();
  const a = l.bufferFor(MB)!;
  const b = l.bufferFor(MB)!;
  const c = l.bufferFor(MB)!;
  l.sendingStarted(a);
  l.sendingDone(a);
  over(l, true);
  const next = m.lease();
  const got = [next.bufferFor(MB)!, next.bufferFor(MB)!, next.bufferFor(MB)!].map((x) => x.buffer);
  // Two of the three were kept (2 MB), the third is new.
  expect(got.filter((x) => [a.buffer, b.buffer, c.buffer].includes(x))).toHaveLength(2);
});

test('a full pool makes room for what the traffic needs now, dropping the longest-kept buffers first', () => {
  const K512 = 512 * 1024;
  const m = new BodyMemory(2 * MB);
  const before = m.lease();
  const small = [before.bufferFor(K512)!, before.bufferFor(K512)!, before.bufferFor(K512)!, before.bufferFor(K512)!];
  over(before, true); // the pool is full of 512 KiB buffers, given back in this order
  const one = m.lease();
  const big = one.bufferFor(MB)!; // none of them fits a megabyte
  expect(small.map((b) => b.buffer)).not.toContain(big.buffer);
  over(one, true); // kept: the two 512 KiB buffers given back last, and the megabyte
  const next = m.lease();
  /** Which of `bufs` each buffer is (by identity; -1: a new one). */
  const which = (bufs: Buffer[], got: Buffer[]): number[] => got.map((g) => bufs.findIndex((b) => b.buffer === g.buffer)).sort();
  expect(next.bufferFor(MB)!.buffer).toBe(big.buffer);
  expect(which(small, [next.bufferFor(K512)!, next.bufferFor(K512)!, next.bufferFor(K512)!])).toEqual([-1, 2, 3]);
  over(next, true);
  // Megabyte bodies from now on: the pool ends up holding megabytes only, reused call after call.
  const a = m.lease();
  const megabytes = [a.bufferFor(MB)!, a.bufferFor(MB)!];
  over(a, true);
  const b = m.lease();
  expect(which(megabytes, [b.bufferFor(MB)!, b.bufferFor(MB)!])).toEqual([0, 1]);
});

test('a call gives its request share back once the body went to the model: a waiting call goes while it waits', async () => {
  const m = new BodyMemory(1 * MB);
  const a = m.lease();
  await a.admitRequest(1 * MB, WAIT_MS);
  const b = m.lease();
  const { done: bDone } = waitingAdmission(m, b, 1 * MB);
  a.requestSent();
  await bDone;
  expect(m.stats()).toEqual({ reservedBytes: 1 * MB, waiting: 0 });
  // a's answer is counted on its own (never waited for), and given back when a is over.
  a.cover(2 * MB);
  expect(m.stats().reservedBytes).toBe(3 * MB);
  a.requestSent(); // a second word changes nothing
  over(a, true);
  expect(m.stats().reservedBytes).toBe(1 * MB);
  over(b, true);
  expect(m.stats()).toEqual({ reservedBytes: 0, waiting: 0 });
});

test('a sent request buffer goes back to the pool at once; one still being written when the answer came is dropped', () => {
  const m = new BodyMemory(64 * MB);
  const first = m.lease();
  const req = first.bufferFor(MB)!;
  first.sendingStarted(req);
  first.sendingDone(req);
  first.requestSent();
  // The call is still waiting for its answer, and its request buffer already serves another call.
  const second = m.lease();
  expect(second.bufferFor(MB)!.buffer).toBe(req.buffer);
  expect(first.bufferFor(MB)!.buffer).not.toBe(req.buffer);
  const late = m.lease();
  const unsent = late.bufferFor(MB)!;
  late.sendingStarted(unsent);
  late.requestSent(); // the model answered before the write completed
  late.sendingDone(unsent);
  over(late, true);
  expect(m.lease().bufferFor(MB)!.buffer).not.toBe(unsent.buffer);
  over(first, true);
  over(second, true);
});

test('a large answer waits for room too, ahead of the requests that wait', async () => {
  const m = new BodyMemory(1 * MB);
  const a = m.lease();
  await a.admitRequest(1 * MB, WAIT_MS);
  a.requestSent();
  const b = m.lease();
  await b.admitRequest(1 * MB, WAIT_MS);
  // a's answer (1 MB) does not fit beside b's request; c's request comes later and goes after it.
  const order: string[] = [];
  const aWait = a.admitAnswer(1 * MB, WAIT_MS);
  expect(aWait).toBeInstanceOf(Promise);
  const aAnswer = (aWait as Promise<void>).then(() => order.push('a answer'));
  const c = m.lease();
  const cRequest = c.admitRequest(1 * MB, WAIT_MS).then(() => order.push('c request'));
  expect(m.stats()).toEqual({ reservedBytes: 1 * MB, waiting: 2 });
  b.requestSent();
  await aAnswer;
  // c's request still waits behind a's answer.
  expect(m.stats()).toEqual({ reservedBytes: 1 * MB, waiting: 1 });
  expect(order).toEqual(['a answer']);
  // Small answers never wait, they are counted at once (nothing to await).
  expect(b.admitAnswer(1000, WAIT_MS)).toBeUndefined();
  expect(m.stats()).toEqual({ reservedBytes: 1 * MB + 1000, waiting: 1 });
  over(a, true);
  await cRequest;
  expect(order).toEqual(['a answer', 'c request']);
  over(b, true);
  over(c, true);
  expect(m.stats()).toEqual({ reservedBytes: 0, waiting: 0 });
});

test('an answer that waits too long fails the call as overloaded', async () => {
  const m = new BodyMemory(1 * MB);
  const holder = m.lease();
  await holder.admitRequest(1 * MB, WAIT_MS);
  const late = m.lease();
  await late.admitRequest(1000, WAIT_MS);
  late.requestSent();
  await expect(late.admitAnswer(1 * MB, 10)).rejects.toMatchObject(overloaded(1 * MB, 10));
  over(late, true);
  over(holder, true);
  expect(m.stats()).toEqual({ reservedBytes: 0, waiting: 0 });
});

test('a large body that would fit still waits behind the calls already waiting (arrival order)', async () => {
  const m = new BodyMemory(2 * MB);
  const holder = m.lease();
  await holder.admitRequest(1.5 * MB, WAIT_MS);
  const first = m.lease();
  const { done: firstDone } = waitingAdmission(m, first, 1 * MB);
  // 300 KiB fits beside the holder, but the 1 MB call came first.
  const second = m.lease();
  const { done: secondDone } = waitingAdmission(m, second, 300 * 1024);
  expect(m.stats()).toEqual({ reservedBytes: 1.5 * MB, waiting: 2 });
  over(holder, true);
  await firstDone;
  await secondDone;
  expect(m.stats()).toEqual({ reservedBytes: 1 * MB + 300 * 1024, waiting: 0 });
  over(first, true);
  over(second, true);
});

test('an answer that comes to wait after a request goes before it', async () => {
  const m = new BodyMemory(1 * MB);
  const holder = m.lease();
  await holder.admitRequest(1 * MB, WAIT_MS);
  const order: string[] = [];
  const r = m.lease();
  const request = r.admitRequest(1 * MB, WAIT_MS).then(() => order.push('request'));
  const a = m.lease();
  await a.admitRequest(1000, WAIT_MS);
  a.requestSent();
  const answer = (a.admitAnswer(1 * MB, WAIT_MS) as Promise<void>).then(() => order.push('answer'));
  expect(m.stats().waiting).toBe(2);
  over(holder, true);
  // Whichever is let in first.
  await Promise.race([answer, request]);
  expect([order, m.stats().waiting]).toEqual([['answer'], 1]);
  over(a, true);
  await request;
  expect(order).toEqual(['answer', 'request']);
  over(r, true);
  expect(m.stats()).toEqual({ reservedBytes: 0, waiting: 0 });
});
