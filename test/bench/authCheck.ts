// `npm run bench:auth`: what a remembered decision costs a call with --auth kubernetes, in one process.
// A control plane of its own answers the first TokenReview and SubjectAccessReview of a real
// ServiceAccount token (authCluster.ts); then the gate's check of that token, answered from memory, is
// timed over many calls, against the open gate of --auth none. Prints µs per check, median of rounds.
import type { IncomingMessage } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { KubernetesGate } from '../../src/gateway/auth/kubernetes.js';
import { kubeReviewer } from '../../src/gateway/auth/reviews.js';
import { OPEN_GATE, type Gate } from '../../src/gateway/auth/gate.js';
import { endpointCallAccess } from '../../src/gateway/auth/access.js';
import { startAuthCluster } from './authCluster.js';

const CHECKS = Number(process.env.BENCH_ITERATIONS ?? 200_000);
const ROUNDS = 5;

function timeChecks(gate: Gate, req: IncomingMessage): number {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < CHECKS; i++) {
    const who = gate.check(req, endpointCallAccess('predict', 'default', 'bench-echo'));
    if (who instanceof Promise) throw new Error('a check was not answered from memory');
  }
  return Number(process.hrtime.bigint() - t0) / CHECKS / 1000;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'predictgate-bench-auth-'));
  const cluster = await startAuthCluster(dir, () => {});
  try {
    const kc = new KubeConfig();
    kc.loadFromFile(cluster.env.KUBECONFIG);
    const gate = new KubernetesGate({ reviewer: kubeReviewer(kc), audiences: [], allowTtlMs: 300_000, denyTtlMs: 30_000, cacheSize: 10_000, reviewsPerSecond: 100 });
    const req = { headers: { authorization: cluster.headers.authorization } } as unknown as IncomingMessage;
    const t0 = performance.now();
    const who = await gate.check(req, endpointCallAccess('predict', 'default', 'bench-echo'));
    const firstMs = performance.now() - t0;
    const remembered: number[] = [];
    const open: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      remembered.push(timeChecks(gate, req));
      open.push(timeChecks(OPEN_GATE, req));
    }
    const token = cluster.headers.authorization.length - 'Bearer '.length;
    console.log(`Node ${process.version}; a ServiceAccount token of ${token} characters (${who.user}); ${ROUNDS} rounds of ${CHECKS} checks\n`);
    console.log('| check | µs per call (median of rounds) | rounds |');
    console.log('| --- | ---: | --- |');
    console.log(`| first call: TokenReview and SubjectAccessReview | ${(firstMs * 1000).toFixed(0)} | 1 |`);
    console.log(`| remembered (--auth kubernetes) | ${median(remembered).toFixed(2)} | ${remembered.map((x) => x.toFixed(2)).join(', ')} |`);
    console.log(`| open gate (--auth none) | ${median(open).toFixed(3)} | ${open.map((x) => x.toFixed(3)).join(', ')} |`);
  } finally {
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
