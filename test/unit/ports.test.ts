// Ports for child processes: drawn below the kernel's ephemeral range (where outgoing connections
// take their local ports), free when handed out, and never the same twice in a row.
import { createServer } from 'node:net';
import { ephemeralRange, freePort } from '../../src/workload/ports.js';

test('the ephemeral range is read from the kernel file; junk is no range', () => {
  expect(ephemeralRange('32768\t60999\n')).toEqual([32768, 60999]);
  expect(ephemeralRange('1024 65535')).toEqual([1024, 65535]);
  expect(ephemeralRange('')).toBeNull();
  expect(ephemeralRange('60999 32768')).toBeNull();
  expect(ephemeralRange('a b')).toBeNull();
});

test('ports come from below the ephemeral range, are bindable, and differ across concurrent calls', async () => {
  const ports = await Promise.all(Array.from({ length: 40 }, () => freePort()));
  expect(new Set(ports).size).toBe(ports.length);
  const range = ephemeralRange();
  expect(range).not.toBeNull(); // Linux: the suite runs there
  for (const p of ports) {
    expect(p).toBeLessThan(range![0]);
    expect(p).toBeGreaterThanOrEqual(20_000);
  }
  const srv = createServer();
  await new Promise<void>((resolve, reject) => srv.once('error', reject).listen(ports[0], '127.0.0.1', resolve));
  await new Promise((resolve) => srv.close(resolve));
});

test('a port in use is probed and skipped: the next draw is taken', async () => {
  const range = ephemeralRange();
  expect(range).not.toBeNull(); // Linux: the suite runs there
  const span = range![0] - 20_000;
  // Hold a port of our own choosing (not one freePort handed out, which it would skip unprobed).
  const blocker = createServer();
  let held = 0;
  for (let p = 20_000 + 7919; held === 0; p += 101) {
    held = await new Promise<number>((resolve) => blocker.once('error', () => resolve(0)).listen(p, '127.0.0.1', () => resolve(p)));
  }
  try {
    const draws = [(held - 20_000 + 0.5) / span, (held - 20_000 + 1.5) / span];
    const got = await freePort(() => draws.shift() ?? Math.random());
    expect(got).toBe(held + 1);
  } finally {
    await new Promise((resolve) => blocker.close(resolve));
  }
});
