// Connection limits of the gateway's listeners (the HTTP port, and the gRPC port with it): at most
// `total` open connections, and at most `perClient` from one remote address, counted across both.
// An HTTP connection over a limit is answered at once with a canned 503 JSON error and Connection:
// close, its request (if it sends one) read and dropped, and it is closed when the client closes or
// after REFUSED_LINGER_MS; so the process never runs out of file descriptors and the refused client
// reads why instead of meeting a reset. A gRPC connection over a limit is closed at once (its client
// sees UNAVAILABLE and retries by its policy). The default total is derived from the process's soft
// limit on open files (Linux: /proc/self/limits).
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { ApiError } from '../errors.js';
import { canned } from './strictHttp.js';

/** How long a refused connection is kept open for its client to read the refusal. */
export const REFUSED_LINGER_MS = 2000;
/** Refused connections kept open at once; past this many, a refused connection is closed at once. */
export const REFUSED_LINGER_MAX = 256;
/** The default total when the open-files limit cannot be read. */
export const FALLBACK_MAX_CONNECTIONS = 4096;
/** Descriptors kept for everything but client connections (listeners, files, the Kubernetes watches, probes). */
export const RESERVED_DESCRIPTORS = 256;

/**
 * The default connection limit: half of what the process's soft open-files limit leaves after
 * RESERVED_DESCRIPTORS (a call in flight holds its client's connection and one to a model). From
 * `limitsText` (the text of /proc/self/limits); FALLBACK_MAX_CONNECTIONS when it is not there.
 */
export function defaultMaxConnections(limitsText: string | undefined): number {
  const m = limitsText === undefined ? null : /^Max open files\s+(\S+)/m.exec(limitsText);
  if (m === null) return FALLBACK_MAX_CONNECTIONS;
  const soft = m[1] === 'unlimited' ? Infinity : Number(m[1]);
  if (!Number.isFinite(soft)) return 65536;
  return Math.max(16, Math.floor((soft - RESERVED_DESCRIPTORS) / 2));
}

/** The text of /proc/self/limits (Linux), undefined elsewhere. */
export function readProcessLimits(): string | undefined {
  try {
    return readFileSync('/proc/self/limits', 'utf8');
  } catch {
    return undefined;
  }
}

export interface ConnectionLimitOptions {
  total: number;
  /** 0: no limit per address. */
  perClient: number;
  /** What the limit is called in the refusal (the setting a user can raise). */
  totalName: string;
  perClientName: string;
}

export interface ConnectionStats {
  open: number;
  refusedTotal: number;
  refusedPerClient: number;
}

/** Counts a server's connections and refuses those over its limits. */
export class ConnectionLimit {
  private open = 0;
  private readonly byClient = new Map<string, number>();
  private readonly refused = new WeakSet<Socket>();
  private lingering = 0;
  readonly stats: ConnectionStats = { open: 0, refusedTotal: 0, refusedPerClient: 0 };

  constructor(private readonly opts: ConnectionLimitOptions) {}

  /** Counts `server`'s connections; this runs before Node's own handling of each one. */
  attach(server: Server): void {
    server.prependListener('connection', (socket: Socket) => void this.admit(socket, (sock, err) => this.linger(sock, err)));
  }

  /** Whether a connection was refused (its requests must be left unanswered: the refusal is its answer). */
  isRefused(socket: Socket): boolean {
    return this.refused.has(socket);
  }

  /**
   * Counts a new connection (until it closes) and returns true, or, over a limit, marks it refused,
   * counts the refusal, hands it to `refuse` with the reason and returns false.
   */
  admit(socket: Socket, refuse: (socket: Socket, err: ApiError) => void): boolean {
    const { total, perClient } = this.opts;
    // A Unix socket (the gRPC surface's hop, grpc/hop.ts) has no address: it counts in the total only.
    const local = socket.remoteAddress === undefined;
    const addr = socket.remoteAddress ?? '';
    const mine = this.byClient.get(addr) ?? 0;
    const over = (counter: 'refusedTotal' | 'refusedPerClient', message: string): false => {
      this.stats[counter]++;
      this.refused.add(socket);
      socket.on('error', () => undefined);
      refuse(socket, new ApiError('too_many_connections', message));
      return false;
    };
    if (this.open >= total) return over('refusedTotal', `the gateway has ${total} connections open, its limit (${this.opts.totalName}); retry later`);
    if (perClient > 0 && !local && mine >= perClient) return over('refusedPerClient', `the address ${addr} has ${perClient} connections open to the gateway, its limit per client (${this.opts.perClientName}); reuse them or retry later`);
    this.open++;
    this.stats.open = this.open;
    this.byClient.set(addr, mine + 1);
    socket.once('close', () => {
      this.open--;
      this.stats.open = this.open;
      const n = (this.byClient.get(addr) ?? 1) - 1;
      if (n === 0) this.byClient.delete(addr);
      else this.byClient.set(addr, n);
    });
    return true;
  }

  /** An HTTP refusal: the canned 503, the connection kept for its client to read it (at most REFUSED_LINGER_MAX at once). */
  private linger(socket: Socket, err: ApiError): void {
    if (this.lingering >= REFUSED_LINGER_MAX) {
      socket.destroy();
      return;
    }
    this.lingering++;
    const timer = setTimeout(() => socket.destroy(), REFUSED_LINGER_MS).unref();
    socket.once('close', () => {
      this.lingering--;
      clearTimeout(timer);
    });
    socket.end(canned(err, 'vertex', 'Retry-After: 1\r\n').text);
  }
}
