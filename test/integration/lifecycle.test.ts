// Local mode over time: manifest edits take effect without a restart (and a rollout drops no call),
// a model process that dies makes its DeployedModel not Ready until it is restarted, and SIGTERM
// drains in-flight calls before the process exits.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLocal, ready, faultyYaml, endpointYaml, post, type LocalHarness } from '../helpers/local.js';
import { pidListeningOn, spawnLocal } from '../helpers/procs.js';
import { findCondition } from '../../src/api/conditions.js';

describe('local mode follows its folder', () => {
  let h: LocalHarness;
  beforeAll(async () => {
    h = await startLocal({ 'm.yaml': `${faultyYaml('m', 'none', { id: 'v1' })}---\n${endpointYaml('m', [{ model: 'm' }])}` });
    await h.until((x) => ready(x, 'Endpoint', 'default/m'), 'endpoint m Ready');
  });
  afterAll(() => h?.stop());

  test('an edited manifest rolls out with traffic flowing and no failed call', async () => {
    let stop = false;
    const statuses: number[] = [];
    const ids = new Set<string>();
    const traffic = (async () => {
      while (!stop) {
        const r = await post(h.vertex('m'), '{"instances": [1]}');
        statuses.push(r.status);
        if (r.status === 200) ids.add(JSON.parse(r.text).deployedModelId);
      }
    })();
    await h.write('m.yaml', `${faultyYaml('m', 'none', { id: 'v2', replicas: 2 })}---\n${endpointYaml('m', [{ model: 'm' }])}`);
    await h.until((x) => x.model('default/m')?.metadata.generation === 2 && ready(x, 'DeployedModel', 'default/m') && x.model('default/m')?.status?.readyReplicas === 2, 'generation 2 rolled out to 2 replicas');
    // Let traffic reach the new replicas before stopping it.
    for (let i = 0; i < 20; i++) await post(h.vertex('m'), '{"instances": [1]}').then((r) => statuses.push(r.status));
    stop = true;
    await traffic;
    expect(statuses.length).toBeGreaterThan(20);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(ids).toContain('v2');
    expect(h.model('default/m')?.status?.replicaAddresses).toHaveLength(2);
  });

  test('a model process that dies goes not Ready, is restarted with backoff, and serves again', async () => {
    const before = h.model('default/m')!.status!.replicaAddresses!;
    const port = Number(new URL(before[0]).port);
    const pid = pidListeningOn(port);
    expect(pid).toBeDefined();
    process.kill(pid!, 'SIGKILL');
    await h.until((x) => (x.model('default/m')?.status?.readyReplicas ?? 0) < 2, 'the killed replica reported not ready');
    // The other replica keeps the model Ready; calls keep working meanwhile (retry on connection refused).
    const during = await post(h.vertex('m'), '{"instances": [1]}');
    expect(during.status).toBe(200);
    await h.until((x) => x.model('default/m')?.status?.readyReplicas === 2, 'the replica restarted');
  });

  test('with its only replica dead the DeployedModel and its Endpoint go not Ready, then recover', async () => {
    await h.write('m.yaml', `${faultyYaml('m', 'none', { id: 'v3' })}---\n${endpointYaml('m', [{ model: 'm' }])}`);
    await h.until((x) => x.model('default/m')?.metadata.generation === 3 && x.model('default/m')?.status?.readyReplicas === 1 && x.model('default/m')?.status?.replicaAddresses?.length === 1, 'scaled to one replica');
    const port = Number(new URL(h.model('default/m')!.status!.replicaAddresses![0]).port);
    process.kill(pidListeningOn(port)!, 'SIGKILL');
    await h.until((x) => ready(x, 'DeployedModel', 'default/m', 'False') && ready(x, 'Endpoint', 'default/m', 'False'), 'model and endpoint not Ready');
    const dm = h.model('default/m')!;
    expect(dm.status?.primaryCondition?.reason).toBe('Unavailable');
    expect(dm.status?.primaryCondition?.message).toMatch(/^replica 0 exited on signal SIGKILL; restarting in \d+\.\d s \(restart 1\)$/);
    expect(findCondition(h.endpoint('default/m')?.status?.conditions, 'EndpointReady')).toMatchObject({ reason: 'DeployedModelNotReady', message: 'DeployedModel default/m is not ready' });
    const r = await post(h.vertex('m'), '{"instances": [1]}');
    expect(r.status).toBe(503);
    await h.until((x) => ready(x, 'Endpoint', 'default/m'), 'endpoint Ready again');
    expect((await post(h.vertex('m'), '{"instances": [1]}')).status).toBe(200);
  });

  test('a manifest that breaks a rule shows as InvalidSpec; a broken YAML file keeps the last good objects', async () => {
    await h.write('bad.yaml', `${faultyYaml('bad', 'none')}---\n${endpointYaml('bad', [{ model: 'bad', traffic: 60 }, { model: 'm', traffic: 30 }])}`);
    await h.until((x) => ready(x, 'Endpoint', 'default/bad', 'False') && ready(x, 'DeployedModel', 'default/bad'), 'bad endpoint evaluated');
    expect(findCondition(h.endpoint('default/bad')?.status?.conditions, 'EndpointReady')).toMatchObject({ reason: 'InvalidSpec', message: 'spec.destinations: trafficPercentage values must add up to 100' });
    await h.write('bad.yaml', 'kind: [unclosed');
    await h.mode.store.reload();
    expect(h.endpoint('default/bad')).toBeDefined();
  });

  test('a mistyped Endpoint is reported, refused with its rule, and never takes the process down', async () => {
    const typo = endpointYaml('typo', [{ model: 'm' }]).replace('serviceRef:', 'serviceref:');
    await h.write('typo.yaml', typo);
    await h.mode.store.reload();
    await h.until((x) => ready(x, 'Endpoint', 'default/typo', 'False'), 'typo endpoint evaluated');
    expect(findCondition(h.endpoint('default/typo')?.status?.conditions, 'EndpointReady')).toMatchObject({ reason: 'InvalidSpec', message: 'spec.destinations[0].serviceRef: required' });
    const r = await post(h.vertex('typo'), '{"instances": [1]}');
    expect([r.status, r.json()]).toEqual([400, { error: { code: 400, message: 'endpoint typo in project default breaks a rule of its manifest: spec.destinations[0].serviceRef: required', status: 'FAILED_PRECONDITION' } }]);
    expect((await post(h.vertex('m'), '{"instances": [1]}')).status).toBe(200);
  });
});

describe('SIGTERM', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'predictgate-drain-'));
    await writeFile(join(dir, 'slow.yaml'), `${faultyYaml('slow', 'slow', { env: { FAULT_DELAY_MS: '1500' } })}---\n${endpointYaml('slow', [{ model: 'slow' }])}`);
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  test('drains in-flight calls (all answered 200), refuses new connections, exits 0, stops its models', async () => {
    const p = spawnLocal(dir);
    try {
      const port = (await p.waitForLog((l) => l.msg === 'gateway listening', 'listening')).port as number;
      const base = `http://127.0.0.1:${port}`;
      const url = `${base}/v1/projects/default/locations/local/endpoints/slow:predict`;
      const modelLine = await p.waitForLog((l) => l.msg === 'listening' && typeof l.port === 'number' && l.model === 'default/slow', 'model listening');
      // Wait until the endpoint is routable (status API), then put 8 slow calls in flight.
      for (;;) {
        const ep = await (await fetch(`${base}/apis/prediction.predictgate.dev/v1/namespaces/default/endpoints/slow`)).json();
        if (findCondition(ep.status?.conditions, 'EndpointReady')?.status === 'True') break;
        await new Promise((r) => setImmediate(r));
      }
      const calls = Array.from({ length: 8 }, () => post(url, '{"instances": [1, 2]}'));
      for (;;) {
        const m = await (await fetch(`${base}/metrics`)).text();
        if (/predictgate_requests_in_flight 8$/m.test(m)) break;
      }
      p.child.kill('SIGTERM');
      await p.waitForLog((l) => l.msg === 'SIGTERM: draining', 'draining');
      await expect(fetch(`${base}/healthz`)).rejects.toThrow();
      const results = await Promise.all(calls);
      expect(results.map((r) => r.status)).toEqual(Array(8).fill(200));
      expect(results.every((r) => JSON.parse(r.text).predictions.length === 2)).toBe(true);
      await p.waitForLog((l) => l.msg === 'stopped', 'the last log line, flushed before exit');
      expect(await p.exited).toBe(0);
      expect(pidListeningOn((modelLine.child as { port: number }).port)).toBeUndefined();
    } finally {
      p.child.kill('SIGKILL');
    }
  });
});
