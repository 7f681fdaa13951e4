// Starting against the Kubernetes API: which kubeconfig counts as none (client-node's made-up
// localhost:8080) and which is the user's, the backoff figures, the wait for an apiserver with an
// injected sleeper (every try and its log line), and the /version probe against real HTTP servers.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { NO_CLUSTER, loadKubeConfig } from '../../src/kube/client.js';
import { BACKOFF_BASE_MS, BACKOFF_MAX_MS, versionProbe, waitForApiserver } from '../../src/kube/backoff.js';
import { backoffMs } from '../../src/backoff.js';
import type { Logger } from '../../src/log.js';

let scratch: string;
const saved = { KUBECONFIG: process.env.KUBECONFIG, HOME: process.env.HOME };
beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'predictgate-kube-start-'));
});
afterEach(() => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('loadKubeConfig', () => {
  test("with no KUBECONFIG, no ~/.kube/config and no service account it refuses the library's localhost:8080", () => {
    delete process.env.KUBECONFIG;
    process.env.HOME = scratch; // no .kube in it
    // What the library itself does there, which loadKubeConfig must not take for a cluster.
    const fallback = new KubeConfig();
    fallback.loadFromDefault();
    expect(fallback.getCurrentCluster()).toEqual({ name: 'cluster', server: 'http://localhost:8080' });
    expect(() => loadKubeConfig()).toThrow(NO_CLUSTER);
  });

  test('a kubeconfig that names http://localhost:8080 itself is a cluster', () => {
    const file = join(scratch, 'local-8080.yaml');
    writeFileSync(
      file,
      'apiVersion: v1\nkind: Config\nclusters:\n- name: cluster\n  cluster: {server: "http://localhost:8080"}\nusers:\n- name: user\n  user: {}\ncontexts:\n- name: dev\n  context: {cluster: cluster, user: user}\ncurrent-context: dev\n',
    );
    process.env.KUBECONFIG = file;
    expect(loadKubeConfig().getCurrentCluster()?.server).toBe('http://localhost:8080');
  });
});

test('backoff doubles from 500 ms and stops at 30 s', () => {
  expect([1, 2, 3, 4, 5, 6, 7, 8, 100].map((n) => backoffMs(n, BACKOFF_BASE_MS, BACKOFF_MAX_MS))).toEqual([500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  expect(BACKOFF_MAX_MS).toBe(30_000);
  expect([1, 2, 3].map((n) => backoffMs(n, 100, 250))).toEqual([100, 200, 250]);
});

/** A Logger that keeps what it is given. */
function recordingLogger(): { logger: Logger; lines: [string, object, string][] } {
  const lines: [string, object, string][] = [];
  const at = (level: string) => (obj: object, msg: string) => void lines.push([level, obj, msg]);
  const logger: Logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error'), isLevelEnabled: () => true, child: () => logger };
  return { logger, lines };
}

test('waitForApiserver tries until the apiserver answers: one line per failed try with the address and the next delay', async () => {
  const { logger, lines } = recordingLogger();
  const slept: number[] = [];
  let tries = 0;
  const refused = Object.assign(new Error('request to https://10.0.0.1:6443/version failed, reason: connect ECONNREFUSED 10.0.0.1:6443'), { code: 'ECONNREFUSED' });
  const failed = await waitForApiserver({
    server: 'https://10.0.0.1:6443',
    probe: async () => {
      tries++;
      if (tries <= 8) throw refused;
    },
    logger,
    sleep: async (ms) => void slept.push(ms),
  });
  expect(failed).toBe(8);
  expect(tries).toBe(9);
  expect(slept).toEqual([500, 1000, 2000, 4000, 8000, 16000, 30000, 30000]);
  const warn = (ms: number, text: string): [string, object, string] => [
    'warn',
    { server: 'https://10.0.0.1:6443', retryInMs: ms, err: 'connect ECONNREFUSED 10.0.0.1:6443' },
    `Kubernetes API at https://10.0.0.1:6443 unreachable (connect ECONNREFUSED 10.0.0.1:6443); next try in ${text}`,
  ];
  expect(lines).toEqual([
    warn(500, '500 ms'),
    warn(1000, '1 s'),
    warn(2000, '2 s'),
    warn(4000, '4 s'),
    warn(8000, '8 s'),
    warn(16000, '16 s'),
    warn(30000, '30 s'),
    warn(30000, '30 s'),
    ['info', { server: 'https://10.0.0.1:6443', failedTries: 8 }, 'Kubernetes API at https://10.0.0.1:6443 reached'],
  ]);
});

test('an apiserver that answers at once is not logged', async () => {
  const { logger, lines } = recordingLogger();
  expect(await waitForApiserver({ server: 'https://a', probe: async () => 'v1', logger, sleep: async () => {} })).toBe(0);
  expect(lines).toEqual([]);
});

describe('versionProbe', () => {
  const servers: Server[] = [];
  afterAll(async () => {
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  });

  /** An HTTP server on loopback answering with `handler`, and a kubeconfig for it. */
  async function apiserver(handler: Parameters<typeof createServer>[1]): Promise<{ kc: KubeConfig; paths: string[] }> {
    const paths: string[] = [];
    const s = createServer((req, res) => {
      paths.push(req.url ?? '');
      handler!(req, res);
    });
    servers.push(s);
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `http://127.0.0.1:${(s.address() as { port: number }).port}`, skipTLSVerify: true }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    return { kc, paths };
  }

  test('an apiserver that answers /version is reached', async () => {
    const { kc, paths } = await apiserver((_req, res) => void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ major: '1', minor: '33', gitVersion: 'v1.33.0' })));
    await expect(versionProbe(kc)()).resolves.toBeUndefined();
    expect(paths).toEqual(['/version']);
  });

  test('any HTTP answer counts as reached: a refused credential is for the caches to report', async () => {
    const { kc } = await apiserver((_req, res) => void res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'Status', code: 401, message: 'Unauthorized' })));
    await expect(versionProbe(kc)()).resolves.toBeUndefined();
  });

  test('an apiserver that takes no connection, or never answers, is unreachable', async () => {
    const { kc: silent } = await apiserver(() => {});
    await expect(versionProbe(silent, 50)()).rejects.toThrow('no answer within 0.05 s');
    const closed = await apiserver(() => {});
    const s = servers.pop()!;
    await new Promise((r) => s.close(r));
    await expect(versionProbe(closed.kc)()).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });
});
