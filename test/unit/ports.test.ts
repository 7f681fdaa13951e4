// Ports for child processes: drawn below the kernel's ephemeral range (where outgoing connections
// take their local ports), free when handed out, and never the same twice in a row. On a machine
// whose ephemeral range leaves less than 1000 ports above 20000, any free port is handed out.
import { createServer, type Server } from 'node:net';
import { ephemeralRange, freePort, parseEphemeralRange } from '../../src/workload/ports.js';

const range = ephemeralRange();
/** Whether this machine has room below its ephemeral range (else freePort falls back to listen(0)). */
const below = range !== null && range[0] - 20_000 >= 1000;

function listen(srv: Server, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => resolve(true));
  });
}

const close = (srv: Server): Promise<void> => new Promise((resolve) => srv.close(() => resolve()));

test('the ephemeral range is read from the kernel file; junk is no range', () => {
  expect(parseEphemeralRange('32768\t60999\n')).toEqual([32768, 60999]);
  expect(parseEphemeralRange('1024 65535')).toEqual([1024, 65535]);
  expect(parseEphemeralRange('')).toBeNull();
  expect(parseEphemeralRange('60999 32768')).toBeNull();
  expect(parseEphemeralRange('a b')).toBeNull();
});

// First in the file: no port handed out yet, so the drawn one is probed, not skipped as recent.
(below ? test : test.skip)('a port in use is probed and skipped: the next draw is taken (skipped without room below the ephemeral range)', async () => {
  const span = range![0] - 20_000;
  // Two neighbouring free ports; the first is held (as another process would), the second left free.
  const blocker = createServer();
  let held = 0;
  for (let p = 20_000 + 7919; held === 0 && p + 1 < range![0]; p += 101) {
    if (!(await listen(blocker, p))) continue;
    const probe = createServer();
    if (await listen(probe, p + 1)) {
      await close(probe);
      held = p;
    } else {
      await close(blocker);
    }
  }
  try {
    const draws = [(held - 20_000 + 0.5) / span, (held - 20_000 + 1.5) / span];
    expect(await freePort(() => draws.shift() ?? Math.random())).toBe(held + 1);
  } finally {
    await close(blocker);
  }
});

test('ports are bindable, differ across concurrent calls, and come from below the ephemeral range when there is room (range checked only then)', async () => {
  const ports = await Promise.all(Array.from({ length: 40 }, () => freePort()));
  expect(new Set(ports).size).toBe(ports.length);
  for (const p of ports) {
    expect(p).toBeGreaterThan(0);
    if (below) {
      expect(p).toBeLessThan(range![0]);
      expect(p).toBeGreaterThanOrEqual(20_000);
    }
  }
  const srv = createServer();
  expect(await listen(srv, ports[0])).toBe(true);
  await close(srv);
});
