// Loopback ports for processes this one starts (model replicas; the tests' control plane). A port
// is chosen here, then a child process binds it a few hundred milliseconds later. If the port came
// from the kernel's ephemeral range (what `listen(0)` picks), an outgoing connection made in that gap
// (a health check, a pooled call, a watch) can take the same number as its local port, and the child
// then fails with EADDRINUSE for as long as that connection lives. So ports are drawn at random from
// below the ephemeral range, where the kernel never assigns one on its own, and probed before use.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** Lowest port handed out: clear of the well-known and most registered service ports. */
const LOWEST = 20_000;
const PROBES = 64;
/** Ports handed out recently, so two replicas starting at once never get the same one. */
const recent: number[] = [];
const RECENT_MAX = 512;

let cached: [number, number] | null | undefined;

/** Parses the kernel file's "LOW HIGH" (null when it is not a range). */
export function parseEphemeralRange(text: string): [number, number] | null {
  const [lo, hi] = text.trim().split(/\s+/).map(Number);
  return Number.isInteger(lo) && Number.isInteger(hi) && lo > 0 && lo <= hi ? [lo, hi] : null;
}

/** The kernel's ephemeral range on Linux, read once (null elsewhere: fall back to `listen(0)`). */
export function ephemeralRange(): [number, number] | null {
  if (cached !== undefined) return cached;
  try {
    cached = parseEphemeralRange(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8'));
  } catch {
    cached = null;
  }
  return cached;
}

/** Resolves to `port` if a listener can bind it on 127.0.0.1 now, else to 0 (`port` 0: any port). */
function probe(port: number): Promise<number> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(0));
    srv.listen({ port, host: '127.0.0.1' }, () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === 'object' && addr ? addr.port : 0));
    });
  });
}

/** A free loopback port below the ephemeral range when there are 1000 ports or more below it, else any free one. */
export async function freePort(random: () => number = Math.random): Promise<number> {
  const eph = ephemeralRange();
  if (eph && eph[0] - LOWEST >= 1000) {
    for (let i = 0; i < PROBES; i++) {
      const candidate = LOWEST + Math.floor(random() * (eph[0] - LOWEST));
      if (recent.includes(candidate)) continue;
      // Held while probing, so a concurrent call cannot draw it too.
      remember(candidate);
      if ((await probe(candidate)) === candidate) return candidate;
      forget(candidate);
    }
  }
  const port = await probe(0);
  if (port === 0) throw new Error('no free loopback port');
  return remember(port);
}

function forget(port: number): void {
  const i = recent.lastIndexOf(port);
  if (i >= 0) recent.splice(i, 1);
}

function remember(port: number): number {
  recent.push(port);
  if (recent.length > RECENT_MAX) recent.shift();
  return port;
}
