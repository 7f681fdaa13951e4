// Local mode over time: manifest edits take effect without a restart (and a rollout drops no call,
// with traffic flowing until the old replica has exited), a model process that dies makes its
// DeployedModel not Ready until it is restarted, and SIGTERM drains in-flight calls before the
// process exits: /readyz says "draining" meanwhile, a call still in flight when DRAIN_SECONDS runs
// out is cut, and a second signal exits at once.
import { Agent, request as httpRequest } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLocal, ready, faultyYaml, endpointYaml, post, type LocalHarness } from '../helpers/local.js';
import { connectionsRefused, pidListeningOn, spawnLocal, type LocalProcess } from '../helpers/procs.js';
import { findCondition } from '../../src/api/conditions.js';
import { isAlive } from '../cluster/controlPlane.js';

/** Polls `check` every 20 ms until it holds; fails after `timeoutMs` saying what it waited for. */
async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const answer = (id: string, predictions: unknown[]): string => JSON.stringify({ predictions, deployedModelId: id, modelDisplayName: 'm' });

describe('local mode follows its folder', () => {
  let h: LocalHarness;
  beforeAll(async () => {
    // Version 1 answers after 1 s: a call sent to it is still there when the rollout retires it.
    h = await startLocal({ 'm.yaml': `${faultyYaml('m', 'slow', { id: 'v1', env: { FAULT_DELAY_MS: '1000' } })}---\n${endpointYaml('m', [{ model: 'm' }])}` });
    await h.until((x) => ready(x, 'Endpoint', 'default/m'), 'endpoint m Ready');
  });
  afterAll(() => h?.stop());

  test('an edited manifest rolls out with traffic flowing until the old replica has exited, and no call fails', async () => {
    const [oldAddress] = h.model('default/m')!.status!.replicaAddresses!;
    const oldPid = pidListeningOn(Number(new URL(oldAddress).port))!;
    expect(isAlive(oldPid)).toBe(true);
    /** before: sent before the edit; after: sent once the old process had exited. */
    let phase = 'before' as 'before' | 'rolling' | 'after';
    const calls: { status: number; text: string; phase: typeof phase }[] = [];
    // Four callers, one call at a time each. Until version 2 is ready every call goes to version 1
    // and takes 1 s there, so when it retires, calls are in flight on it. Each caller goes on until
    // the old process has exited, then makes one more call.
    const caller = async (): Promise<void> => {
      for (let sent = phase; ; sent = phase) {
        const r = await post(h.vertex('m'), '{"instances": [1]}');
        calls.push({ status: r.status, text: r.text, phase: sent });
        if (sent === 'after') return;
      }
    };
    await until(() => h.mode.calls().inFlight === 0, 'no call in flight');
    const traffic = Array.from({ length: 4 }, caller);
    await until(() => h.mode.calls().inFlight === 4, 'four calls in flight on version 1');
    phase = 'rolling';
    await h.write('m.yaml', `${faultyYaml('m', 'none', { id: 'v2', replicas: 2 })}---\n${endpointYaml('m', [{ model: 'm' }])}`);
    await until(() => !isAlive(oldPid), 'the old replica to exit (retired 2 s after it left the status)');
    phase = 'after';
    await Promise.all(traffic);
    expect(calls.filter((c) => c.status !== 200)).toEqual([]);
    expect(calls.filter((c) => c.phase === 'before').map((c) => c.text)).toEqual(Array(4).fill(answer('v1', [1])));
    expect(calls.filter((c) => c.phase === 'after').map((c) => c.text)).toEqual(Array(4).fill(answer('v2', [1])));
    expect(h.model('default/m')?.metadata.generation).toBe(2);
    expect(h.model('default/m')?.status).toMatchObject({ readyReplicas: 2, replicaAddresses: [expect.any(String), expect.any(String)] });
    expect(h.model('default/m')?.status?.replicaAddresses).not.toContain(oldAddress);
  });

  test('a model process that dies goes not Ready, is restarted with backoff, and serves again', async () => {
    const before = h.model('default/m')!.status!.replicaAddresses!;
    const port = Number(new URL(before[0]).port);
    const pid = pidListeningOn(port)!;
    expect(isAlive(pid)).toBe(true);
    process.kill(pid, 'SIGKILL');
    await h.until((x) => (x.model('default/m')?.status?.readyReplicas ?? 0) < 2, 'the killed replica reported not ready');
    // The other replica keeps the model Ready and serves meanwhile (the retry on a replica that is
    // gone but still in the status: balancing.test.ts).
    const during = await post(h.vertex('m'), '{"instances": [1]}');
    expect([during.status, during.text]).toEqual([200, answer('v2', [1])]);
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
    expect(r.json()).toEqual({ error: { code: 503, status: 'UNAVAILABLE', message: expect.stringMatching(/^endpoint m has no Ready deployed model with traffic \(deployed models: v3; v3 is not Ready: replica 0 exited on signal SIGKILL; restarting in \d+\.\d s \(restart 1\)\)$/) } });
    await h.until((x) => ready(x, 'Endpoint', 'default/m'), 'endpoint Ready again');
    const again = await post(h.vertex('m'), '{"instances": [1]}');
    expect([again.status, again.text]).toEqual([200, answer('v3', [1])]);
  });

  test('a manifest that breaks a rule shows as InvalidSpec; a broken YAML file keeps the last good objects', async () => {
    await h.write('bad.yaml', `${faultyYaml('bad', 'none')}---\n${endpointYaml('bad', [{ model: 'bad', traffic: 60 }, { model: 'm', traffic: 30 }])}`);
    await h.until((x) => ready(x, 'Endpoint', 'default/bad', 'False') && ready(x, 'DeployedModel', 'default/bad'), 'bad endpoint evaluated');
    expect(findCondition(h.endpoint('default/bad')?.status?.conditions, 'EndpointReady')).toMatchObject({ reason: 'InvalidSpec', message: 'spec.destinations: trafficPercentage values must add up to 100' });
    await h.write('bad.yaml', 'kind: [unclosed');
    await h.mode.store.reload();
    // Still there, as it was: its spec and its verdict.
    expect(h.endpoint('default/bad')?.spec.destinations.map((d) => [d.serviceRef.name, d.trafficPercentage])).toEqual([['bad', 60], ['m', 30]]);
    expect(findCondition(h.endpoint('default/bad')?.status?.conditions, 'EndpointReady')).toMatchObject({ reason: 'InvalidSpec', message: 'spec.destinations: trafficPercentage values must add up to 100' });
  });

  test('a mistyped Endpoint is reported, refused with its rule, and never takes the process down', async () => {
    const typo = endpointYaml('typo', [{ model: 'm' }]).replace('serviceRef:', 'serviceref:');
    await h.write('typo.yaml', typo);
    await h.mode.store.reload();
    await h.until((x) => ready(x, 'Endpoint', 'default/typo', 'False'), 'typo endpoint evaluated');
    expect(findCondition(h.endpoint('default/typo')?.status?.conditions, 'EndpointReady')).toMatchObject({ reason: 'InvalidSpec', message: 'spec.destinations[0].serviceRef: required' });
    const r = await post(h.vertex('typo'), '{"instances": [1]}');
    expect([r.status, r.json()]).toEqual([400, { error: { code: 400, message: 'endpoint typo in project default breaks a rule of its manifest: spec.destinations[0].serviceRef: required', status: 'FAILED_PRECONDITION' } }]);
    const m = await post(h.vertex('m'), '{"instances": [1]}');
    expect([m.status, m.text]).toEqual([200, answer('v3', [1])]);
  });
});

describe('SIGTERM', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'predictgate-drain-'));
    await writeFile(join(dir, 'slow.yaml'), `${faultyYaml('slow', 'slow', { env: { FAULT_DELAY_MS: '1500' } })}---\n${endpointYaml('slow', [{ model: 'slow' }])}`);
    await writeFile(join(dir, 'quick.yaml'), `${faultyYaml('quick', 'none')}---\n${endpointYaml('quick', [{ model: 'quick' }])}`);
    // Answers after 10 minutes, within its timeout: a call that outlives any drain here.
    await writeFile(join(dir, 'stuck.yaml'), `${faultyYaml('stuck', 'slow', { env: { FAULT_DELAY_MS: '600000' }, serving: { timeoutSeconds: 900 } })}---\n${endpointYaml('stuck', [{ model: 'stuck' }])}`);
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  interface Running {
    p: LocalProcess;
    port: number;
    base: string;
    predict(endpoint: string): string;
    /** The port of the endpoint's model process (its one replica). */
    modelPort(name: string): number;
  }

  /** `predictgate local` on the folder, once both endpoints are Ready (status API). */
  async function start(env: Record<string, string> = {}): Promise<Running> {
    const p = spawnLocal(dir, env);
    running.push(p);
    const port = (await p.waitForLog((l) => l.msg === 'gateway listening', 'listening')).port as number;
    const base = `http://127.0.0.1:${port}`;
    for (const name of ['slow', 'stuck', 'quick']) {
      await until(async () => {
        const ep = await (await fetch(`${base}/apis/prediction.predictgate.dev/v1/namespaces/default/endpoints/${name}`)).json();
        return findCondition(ep.status?.conditions, 'EndpointReady')?.status === 'True';
      }, `endpoint ${name} Ready`);
    }
    const modelPort = (name: string): number => {
      const line = p.logs().find((l) => l.msg === 'listening' && l.model === `default/${name}`);
      if (!line) throw new Error(`no listening line from model ${name}`);
      return (line.child as { port: number }).port;
    };
    return { p, port, base, modelPort, predict: (endpoint) => `${base}/v1/projects/default/locations/local/endpoints/${endpoint}:predict` };
  }

  const running: LocalProcess[] = [];
  afterEach(async () => {
    // Whatever failed: two signals (the second exits at once and takes the model processes with
    // it); a process that still does not exit is killed, and its models by their ports.
    for (const p of running.splice(0)) {
      if (p.child.exitCode !== null || p.child.signalCode !== null) continue;
      p.child.kill('SIGTERM');
      await p.waitForLog((l) => l.msg === 'SIGTERM: draining', 'draining', 5000).catch(() => undefined);
      p.child.kill('SIGINT');
      if (await exitsWithin(p, 10_000)) continue;
      for (const l of p.logs()) {
        const pid = l.msg === 'listening' && typeof l.port === 'number' ? pidListeningOn(l.port) : undefined;
        if (pid !== undefined) process.kill(pid, 'SIGKILL');
      }
      p.child.kill('SIGKILL');
      await p.exited;
    }
  });

  /** Whether the process exits within `ms`. */
  const exitsWithin = (p: LocalProcess, ms: number): Promise<boolean> => {
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([p.exited.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms)))]).finally(() => clearTimeout(timer));
  };

  /** Resolves once the gateway counts `n` calls in flight (polled on /metrics). */
  const inFlight = (base: string, n: number): Promise<void> =>
    until(async () => new RegExp(`^predictgate_requests_in_flight ${n}$`, 'm').test(await (await fetch(`${base}/metrics`)).text()), `${n} calls in flight`);

  test('drains in-flight calls (all answered 200, each with Connection: close), still serves new connections the same way, exits 0, stops its models', async () => {
    const { p, base, predict, modelPort } = await start();
    const calls = Array.from({ length: 8 }, () => post(predict('slow'), '{"instances": [1, 2]}'));
    await inFlight(base, 8);
    p.child.kill('SIGTERM');
    await p.waitForLog((l) => l.msg === 'SIGTERM: draining', 'draining');
    // A connection that arrives while draining (a load balancer not yet told) is served, and told to end.
    const late = await fetch(`${base}/healthz`);
    expect([late.status, late.headers.get('connection'), await late.json()]).toEqual([200, 'close', { status: 'ok' }]);
    const results = await Promise.all(calls);
    expect(results.map((r) => [r.status, r.headers.get('connection'), r.text])).toEqual(Array(8).fill([200, 'close', '{"predictions":[1,2],"deployedModelId":"slow","modelDisplayName":"slow"}']));
    await p.waitForLog((l) => l.msg === 'stopped', 'the last log line, flushed before exit');
    expect(await p.exited).toBe(0);
    expect(pidListeningOn(modelPort('slow'))).toBeUndefined();
    expect(pidListeningOn(modelPort('stuck'))).toBeUndefined();
  });

  test('a call still unanswered when DRAIN_SECONDS runs out gets 503 shutting_down, not a silent close; the process exits 0 all the same and stops its models', async () => {
    const { p, base, predict, modelPort } = await start({ DRAIN_SECONDS: '1' });
    const call = post(predict('stuck'), '{"instances": [1]}', { 'x-request-id': 'stuck-call' });
    await inFlight(base, 1);
    p.child.kill('SIGTERM');
    await p.waitForLog((l) => l.msg === 'stopped', 'stopped once the drain ran out');
    expect(await p.exited).toBe(0);
    // The model would have answered in 10 minutes: the gateway answered in its place.
    const r = await call;
    expect([r.status, r.headers.get('connection'), r.headers.get('x-request-id'), r.json()]).toEqual([503, 'close', 'stuck-call', {
      error: { code: 503, status: 'UNAVAILABLE', message: 'the gateway is shutting down and its drain time ran out before this call was answered; retry it' },
    }]);
    expect(pidListeningOn(modelPort('stuck'))).toBeUndefined();
  });

  test('SIGTERM under keep-alive load loses no call: each of 16 connections gets Connection: close on its next answer and ends there', async () => {
    const { p, predict } = await start();
    const agent = new Agent({ keepAlive: true, maxSockets: 16 });
    const url = new URL(predict('quick'));
    let ok = 0;
    let toldToClose = 0;
    const failures: string[] = [];
    /** One client connection: calls in a row until an answer says the connection ends (then a load balancer would send it elsewhere). */
    const client = async (): Promise<void> => {
      for (;;) {
        const r = await new Promise<{ status: number; connection?: string }>((resolve, reject) => {
          const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
            res.resume();
            res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection }));
            res.on('error', reject);
          });
          req.on('error', reject);
          req.end('{"instances": [1]}');
        }).catch((err: NodeJS.ErrnoException) => ({ status: 0, connection: err.code ?? err.message }));
        if (r.status === 200) ok++;
        else failures.push(`${r.status} ${r.connection}`);
        if (r.connection === 'close' && r.status === 200) toldToClose++;
        if (r.connection === 'close' || r.status === 0) return;
      }
    };
    const clients = Array.from({ length: 16 }, client);
    try {
      await until(async () => ok >= 500, '500 calls answered before the signal');
      p.child.kill('SIGTERM');
      await Promise.all(clients);
    } finally {
      agent.destroy();
    }
    expect(failures).toEqual([]);
    await p.waitForLog((l) => l.msg === 'stopped', 'stopped once every connection ended');
    expect(await p.exited).toBe(0);
    // Every connection ended on an answer that said so, none on a reset.
    expect(toldToClose).toBe(16);
  });

  test('/readyz answers 503 "draining" while a drain waits; a second signal exits at once (1) and kills the models', async () => {
    const { p, port, base, predict, modelPort } = await start({ DRAIN_SECONDS: '600' });
    // Sent before the drain, but for its last line: a connection with a request under way stays open.
    const probe = await pendingReadyz(port);
    const call = post(predict('stuck'), '{"instances": [1]}').catch((err: unknown) => err);
    await inFlight(base, 1);
    p.child.kill('SIGTERM');
    await p.waitForLog((l) => l.msg === 'SIGTERM: draining', 'draining');
    expect(await probe.finish()).toEqual({ status: 503, body: { status: 'draining' } });
    p.child.kill('SIGTERM');
    await p.waitForLog((l) => l.msg === 'SIGTERM again: exiting now', 'the second signal');
    expect(await exitsWithin(p, 10_000)).toBe(true);
    expect(p.child.exitCode).toBe(1);
    expect(await call).toMatchObject({ message: 'fetch failed', cause: { code: 'UND_ERR_SOCKET' } });
    // The model processes went with it (killed with their groups as the process exited).
    await connectionsRefused(modelPort('stuck'));
    await connectionsRefused(modelPort('slow'));
  });
});

/**
 * A GET /readyz sent but for the blank line that ends its headers; `finish` sends that and reads
 * the answer's status and JSON body.
 */
async function pendingReadyz(port: number): Promise<{ finish(): Promise<{ status: number; body: unknown }> }> {
  const socket: Socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let text = '';
  socket.on('data', (d: Buffer) => (text += d.toString()));
  socket.write('GET /readyz HTTP/1.1\r\nHost: gateway\r\n');
  return {
    finish: () => new Promise((resolve, reject) => {
      const done = (): void => {
        const end = text.indexOf('\r\n\r\n');
        const length = /\r\ncontent-length: (\d+)\r\n/i.exec(text)?.[1];
        if (end < 0 || length === undefined || text.length < end + 4 + Number(length)) return;
        socket.destroy();
        resolve({ status: Number(text.split(' ')[1]), body: JSON.parse(text.slice(end + 4, end + 4 + Number(length))) });
      };
      socket.on('data', done);
      socket.once('close', () => reject(new Error(`connection closed; got ${JSON.stringify(text)}`)));
      socket.write('\r\n');
    }),
  };
}
