// The pace a request body must keep while the gateway reads it (BodyPace, on an injected clock): a
// pause longer than BODY_TIMEOUT_SECONDS, or less than BODY_MIN_BYTES_PER_SECOND over a window of
// that length, cuts the call; pauses the gateway causes itself do not count. And a slow large body
// gives the unread part of its body memory back (BodyLease.slowRequest), so a waiting call goes.
import { BodyPace, MEMORY_PACE_BYTES_PER_SECOND } from '../../src/gateway/bodyWatch.js';
import { BodyMemory } from '../../src/gateway/bodyMemory.js';

describe('BodyPace (10 s gap, 1024 bytes a second)', () => {
  const pace = () => new BodyPace(10_000, 1024, 0, 0);

  test('a body that keeps coming fast is never cut', () => {
    const p = pace();
    for (let t = 1; t <= 60; t++) expect(p.check(t * 1000, t * 100_000, true)).toBe('ok');
    expect(p.slow).toBe(false);
  });

  test('a body that stops for 10 s is stalled', () => {
    const p = pace();
    expect(p.check(1000, 50_000, true)).toBe('ok');
    for (let t = 2; t <= 10; t++) expect(p.check(t * 1000, 50_000, true)).toBe('ok');
    expect(p.check(11_000, 50_000, true)).toBe('stalled');
  });

  test('a byte every 9 s never pauses 10 s but is too slow over the window', () => {
    const p = pace();
    const verdicts: string[] = [];
    for (let t = 1; t <= 10; t++) verdicts.push(p.check(t * 1000, Math.floor(t / 9), true));
    expect(verdicts).toEqual([...Array(9).fill('ok'), 'too_slow']);
  });

  test('while the gateway itself holds the body back, nothing counts', () => {
    const p = pace();
    for (let t = 1; t <= 30; t++) expect(p.check(t * 1000, 0, false)).toBe('ok');
    expect(p.check(31_000, 20_000, true)).toBe('ok');
    expect(p.check(41_000, 20_000, true)).toBe('stalled');
  });

  test('0 bytes a second checks the pause only', () => {
    const p = new BodyPace(10_000, 0, 0, 0);
    for (let t = 1; t <= 100; t++) expect(p.check(t * 1000, Math.floor(t / 9), true)).toBe('ok');
  });

  test('slow: less than MEMORY_PACE_BYTES_PER_SECOND since the last check', () => {
    const p = pace();
    p.check(1000, MEMORY_PACE_BYTES_PER_SECOND, true);
    expect(p.slow).toBe(false);
    p.check(2000, MEMORY_PACE_BYTES_PER_SECOND + 100, true);
    expect(p.slow).toBe(true);
  });
});

test('a slow large request gives its unread share back: a call waiting for the budget goes', async () => {
  const memory = new BodyMemory(1024 * 1024);
  const trickler = memory.lease();
  await trickler.admitRequest(1024 * 1024, 60_000);
  trickler.cover(10);
  expect(memory.stats()).toEqual({ reservedBytes: 1024 * 1024, waiting: 0 });
  const other = memory.lease();
  let admitted = false;
  const waiting = other.admitRequest(512 * 1024, 60_000).then(() => (admitted = true));
  expect(memory.stats().waiting).toBe(1);
  trickler.slowRequest();
  await waiting;
  expect([admitted, memory.stats()]).toEqual([true, { reservedBytes: 10 + 512 * 1024, waiting: 0 }]);
  // What it sends later is counted as it arrives.
  trickler.cover(1000);
  expect(memory.stats().reservedBytes).toBe(1000 + 512 * 1024);
});
