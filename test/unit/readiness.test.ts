// /readyz before the routing table has its objects: local mode answers 503 "starting" until its
// manifests are loaded (a manifest that is a named pipe holds the load until the test writes it), and
// the cluster gateway until its caches hold their first list (a stand-in apiserver on loopback holds
// the lists until the test lets them go). Both listen first, so a probe sees the 503, then 200.
import { execFileSync } from 'node:child_process';
import { mkdtemp, open, rename, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { loadConfig, type Config } from '../../src/config.js';
import { silentLogger } from '../../src/log.js';
import { runLocal } from '../../src/local/run.js';
import { runClusterGateway } from '../../src/gateway/run.js';
import { freePort } from '../../src/workload/ports.js';
import { endpointYaml } from '../helpers/local.js';

// Readiness is not about who may call: no caller checks (the cluster gateway's default asks a cluster).
const settings = (port: number): Config => ({ ...loadConfig([], {}).config, host: '127.0.0.1', port, logLevel: 'silent', auth: 'none' });

/**
 * GET /readyz once the port answers (polled until then, for at most 20 s): its status and body.
 * A refused connection means the server is not listening yet.
 */
async function readyz(port: number): Promise<{ status: number; body: unknown }> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/readyz`);
      return { status: res.status, body: await res.json() };
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`nothing answered on port ${port} within 20 s: ${String(err)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

test('local mode answers /readyz 503 "starting" until its manifests are loaded, then 200 "ready"', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'predictgate-ready-'));
  const manifest = join(dir, 'e.yaml');
  // Reading a named pipe waits for a writer: the load stops there until the test writes.
  execFileSync('mkfifo', [manifest]);
  const yaml = endpointYaml('e', [{ model: 'absent' }]);
  let written = false;
  /** Lets the load go on: opens the pipe, puts a plain file with the same text in its place (any later reload reads that), then writes the manifest into the pipe. */
  const write = async (): Promise<void> => {
    if (written) return;
    written = true;
    const pipe = await open(manifest, 'w');
    await writeFile(join(dir, '.e.next'), yaml);
    await rename(join(dir, '.e.next'), manifest);
    await pipe.writeFile(yaml);
    await pipe.close();
  };
  const port = await freePort();
  const starting = runLocal({ dir, config: settings(port), logger: silentLogger() });
  try {
    expect(await readyz(port)).toEqual({ status: 503, body: { status: 'starting' } });
    await write();
    await starting;
    expect(await readyz(port)).toEqual({ status: 200, body: { status: 'ready' } });
    expect((await starting).store.listEndpoints().map((e) => e.metadata.name)).toEqual(['e']);
  } finally {
    // Whatever failed, the load is let go (a read left waiting on the pipe would hold the process).
    await write();
    await (await starting).stop();
    await rm(dir, { recursive: true, force: true });
  }
});

/** A stand-in for the apiserver: answers lists of DeployedModels, Endpoints and EndpointSlices (empty) once released, and holds watches open. */
async function heldApiserver(): Promise<{ kubeConfig: KubeConfig; listsWaiting(n: number): Promise<void>; release(): void; close(): Promise<void> }> {
  const held: ServerResponse[] = [];
  let released = false;
  let onList = (): void => undefined;
  const answer = (req: IncomingMessage, res: ServerResponse): void => {
    const plural = /\/(deployedmodels|endpoints|endpointslices)(?:\?|$)/.exec(req.url ?? '')?.[1];
    const [apiVersion, kind] = plural === 'endpointslices' ? ['discovery.k8s.io/v1', 'EndpointSliceList'] : ['prediction.predictgate.dev/v1', plural === 'endpoints' ? 'EndpointList' : 'DeployedModelList'];
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ apiVersion, kind, metadata: { resourceVersion: '1' }, items: [] }));
  };
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (!/^\/apis\/(prediction\.predictgate\.dev\/v1\/(deployedmodels|endpoints)|discovery\.k8s\.io\/v1\/endpointslices)$/.test(url.pathname)) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"kind":"Status","code":404}');
      return;
    }
    if (url.searchParams.get('watch') === 'true') {
      // A watch with nothing to tell: open until the client goes.
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('');
      return;
    }
    if (released) return answer(req, res);
    held.push(res);
    onList();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'held', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
    users: [{ name: 'test', token: 'test' }],
    contexts: [{ name: 'held', cluster: 'held', user: 'test' }],
    currentContext: 'held',
  });
  return {
    kubeConfig,
    listsWaiting: (n) => new Promise((resolve) => {
      onList = () => {
        if (held.length >= n) resolve();
      };
      onList();
    }),
    release() {
      released = true;
      for (const res of held.splice(0)) answer(res.req, res);
    },
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

test('the cluster gateway answers /readyz 503 "starting" until its caches hold their first list, then 200 "ready"', async () => {
  const api = await heldApiserver();
  const port = await freePort();
  const running = runClusterGateway({ kc: api.kubeConfig, config: settings(port), logger: silentLogger() });
  try {
    // The three lists (DeployedModels, Endpoints, EndpointSlices) asked for and held: the caches cannot be synced.
    await api.listsWaiting(3);
    expect(await readyz(port)).toEqual({ status: 503, body: { status: 'starting' } });
    api.release();
    await running;
    expect(await readyz(port)).toEqual({ status: 200, body: { status: 'ready' } });
  } finally {
    api.release();
    await (await running).stop();
    await api.close();
  }
});
