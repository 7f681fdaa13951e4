// The gRPC surface's way into the REST surface: a Unix socket in a folder of its own (mode 0700)
// whose connections are handed to the gateway's HTTP server as its own, so that each gRPC call is
// made as the REST call it names and meets the same route table, gate, limits, metrics, streams and
// drain. The server knows these connections (a call on one is `viaGrpc`): a stream it has to cut ends
// with the STREAM_ERROR_TRAILER instead of an error event, which gRPC could not tell from the model's.
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request, type IncomingMessage, type ClientRequest, type Server } from 'node:http';
import { createServer, type Server as NetServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The trailer of a REST answer on the hop whose stream the gateway cut: the percent-encoded JSON `{status, message}`. */
export const STREAM_ERROR_TRAILER = 'x-predictgate-stream-error';

export interface HopRequest {
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
}

export class Hop {
  private readonly mine = new WeakSet<Socket>();
  private readonly agent = new Agent({ keepAlive: true, scheduling: 'lifo' });

  private constructor(private readonly listener: NetServer, private readonly dir: string, private readonly path: string) {}

  /** Opens the hop into `http`: its socket listens, and what connects to it is served by `http`. */
  static async open(http: Server): Promise<Hop> {
    const dir = mkdtempSync(join(tmpdir(), 'predictgate-grpc-'));
    const path = join(dir, 'rest.sock');
    const listener = createServer();
    const hop = new Hop(listener, dir, path);
    listener.on('connection', (socket: Socket) => {
      hop.mine.add(socket);
      http.emit('connection', socket);
    });
    await new Promise<void>((resolve, reject) => {
      listener.once('error', reject);
      listener.listen(path, () => {
        listener.off('error', reject);
        resolve();
      });
    });
    return hop;
  }

  /** Whether a connection of the HTTP server came by the hop. */
  owns(socket: Socket): boolean {
    return this.mine.has(socket);
  }

  /** Sends one REST call; the answer's head arrives with 'response'. */
  send(r: HopRequest): ClientRequest {
    const headers: Record<string, string> = { ...r.headers, te: 'trailers' };
    if (r.body !== undefined) headers['content-length'] = String(r.body.length);
    const req = request({ socketPath: this.path, agent: this.agent, method: r.method, path: r.path, headers });
    req.end(r.body);
    return req;
  }

  /** Stops taking connections; those open end with their calls (the HTTP server's drain closes them). */
  async close(): Promise<void> {
    this.agent.destroy();
    await new Promise<void>((resolve) => this.listener.close(() => resolve()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The answer's body, read whole up to `limit` bytes (past it: the first `limit`, and `cut`). */
export function readAnswer(res: IncomingMessage, limit: number): Promise<{ body: Buffer; cut: boolean }> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let bytes = 0;
    res.on('data', (chunk: Buffer) => {
      if (bytes >= limit) return;
      parts.push(chunk);
      bytes += chunk.length;
      if (bytes >= limit) {
        res.destroy();
        resolve({ body: Buffer.concat(parts, bytes).subarray(0, limit), cut: true });
      }
    });
    res.once('end', () => resolve({ body: Buffer.concat(parts, bytes), cut: false }));
    res.once('aborted', () => reject(new Error('the answer broke off')));
    res.once('error', reject);
  });
}
