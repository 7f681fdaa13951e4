// Load-aware picks through local mode, with two replicas of the bundled tiny-llm model (vLLM's load
// metrics): while one replica is busy with generations the gateway did not send (another gateway's,
// say: this gateway's own count of calls in flight knows nothing of them), calls through the gateway
// go to the other one, which least-request could not know to prefer (a call sent to the busy one
// would wait behind its queue and pass the Endpoint's 5 s deadline); and prefix affinity: calls that
// share a long system prompt stay on the replica that took it while it has room, and move when it queues.
import { startLocal, ready, deployedModelYaml, endpointYaml, type LocalHarness } from '../helpers/local.js';
import { until } from '../helpers/rawHttp.js';

const MODEL = deployedModelYaml({
  name: 'llm',
  command: ['predictgate', 'model', 'tiny-llm'],
  env: { TINY_LLM_MAX_RUNNING: '1', TINY_LLM_TOKEN_INTERVAL_MS: '10' },
  predictRoute: '/v1/chat/completions',
  openai: {},
  replicas: 2,
});

let h: LocalHarness;

beforeAll(async () => {
  h = await startLocal({ 'llm.yaml': `${MODEL}---\n${endpointYaml('llm', [{ model: 'llm' }], 'default', { streamTimeoutSeconds: 5 })}` }, { settings: { loadScrapeIntervalMs: 50 } });
  await h.until((x) => ready(x, 'Endpoint', 'default/llm') && h.model('default/llm')?.status?.replicaAddresses?.length === 2, 'both replicas Ready');
});

afterAll(async () => {
  await h?.stop();
});

const metricsOf = async (url: string): Promise<string> => (await fetch(`${url}/metrics`)).text();
const value = (text: string, line: RegExp): number => Number(line.exec(text)?.[1] ?? NaN);
/** The generations a replica finished, whatever their reason. */
const finished = async (address: string): Promise<number> => [...(await metricsOf(address)).matchAll(/^vllm:request_success_total\{[^}]*\} (\d+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
const chat = (maxTokens: number, stream = false): string => JSON.stringify({ model: 'tiny-llm', messages: [{ role: 'user', content: 'Say hi' }], max_tokens: maxTokens, stream });

test('calls go to the replica that reports no queue while the other is busy with calls from elsewhere', async () => {
  const [busy, idle] = h.model('default/llm')?.status?.replicaAddresses as string[];
  const call = async (): Promise<void> => {
    const res = await fetch(h.url('/v1/projects/default/locations/local/endpoints/llm/chat/completions'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat(2) });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  };
  // A call through the gateway: the model is in use, its replicas' load is read at the fast pace.
  await call();
  // Three long generations straight to one replica: one runs, two wait (TINY_LLM_MAX_RUNNING=1).
  const elsewhere = new AbortController();
  const long = [0, 1, 2].map(() => fetch(`${busy}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat(4096, true), signal: elsewhere.signal }).catch(() => undefined));
  try {
    await until(async () => value(await metricsOf(busy), /^vllm:num_requests_waiting\{[^}]*\} (\d+)$/m) === 2, 'the busy replica to report two waiting');
    // Both replicas read again since: the gateway's reports show the queue.
    const reports = value(await metricsOf(h.base), /^predictgate_upstream_load_reports_total (\d+)$/m);
    await until(async () => value(await metricsOf(h.base), /^predictgate_upstream_load_reports_total (\d+)$/m) >= reports + 2, 'the gateway to read both replicas again');
    const before = { busy: await finished(busy), idle: await finished(idle) };
    for (let i = 0; i < 10; i++) await call();
    expect({ busy: await finished(busy) - before.busy, idle: await finished(idle) - before.idle }).toEqual({ busy: 0, idle: 10 });
    const picks = await metricsOf(h.base);
    expect(value(picks, /^predictgate_upstream_load_picks_total\{kind="load"\} (\d+)$/m)).toBeGreaterThanOrEqual(10);
  } finally {
    elsewhere.abort();
    await Promise.all(long);
  }
});

test('calls that share a long system prompt go to the replica that took it, while it has room (prefix affinity)', async () => {
  const [first, second] = h.model('default/llm')?.status?.replicaAddresses as string[];
  const system = { role: 'system', content: 'You answer questions about the solar system, briefly and exactly. '.repeat(10) };
  const ask = async (question: string, messages = [system]): Promise<void> => {
    const body = JSON.stringify({ model: 'tiny-llm', messages: [...messages, { role: 'user', content: question }], max_tokens: 2 });
    const res = await fetch(h.url('/v1/projects/default/locations/local/endpoints/llm/chat/completions'), { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  };
  const reportsNow = async (): Promise<number> => value(await metricsOf(h.base), /^predictgate_upstream_load_reports_total (\d+)$/m);
  const readAgain = async (): Promise<void> => {
    const reports = await reportsNow();
    await until(async () => (await reportsNow()) >= reports + 2, 'the gateway to read both replicas again');
  };
  const prefixPicks = async (): Promise<number> => value(await metricsOf(h.base), /^predictgate_upstream_load_picks_total\{kind="prefix"\} (\d+)$/m);
  /** Generations straight to a replica, behind the gateway's back, until `stop`. */
  const occupy = (address: string, n: number): { stop: () => Promise<void> } => {
    const elsewhere = new AbortController();
    const calls = Array.from({ length: n }, () => fetch(`${address}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat(4096, true), signal: elsewhere.signal }).catch(() => undefined));
    return { stop: async () => void (elsewhere.abort(), await Promise.all(calls)) };
  };
  const running = async (address: string): Promise<number> => value(await metricsOf(address), /^vllm:num_requests_running\{[^}]*\} (\d+)$/m);
  const waiting = async (address: string): Promise<number> => value(await metricsOf(address), /^vllm:num_requests_waiting\{[^}]*\} (\d+)$/m);
  await ask('Warm up?', []);

  // The first replica generates for someone else: the tie on the queue (none) goes to fewer running,
  // the second, which from then on holds the system prompt.
  let other = occupy(first, 1);
  await until(async () => (await running(first)) === 1, 'the first replica to report a generation running');
  await readAgain();
  let before = { first: await finished(first), second: await finished(second) };
  await ask('Which planet is largest?');
  expect({ first: await finished(first) - before.first, second: await finished(second) - before.second }).toEqual({ first: 0, second: 1 });
  await other.stop();
  await until(async () => (await running(first)) === 0, 'the first replica to be idle');
  await readAgain();

  // Both idle: by load alone the tie would go to the first listed; the shared prefix keeps them on the second.
  const picks = await prefixPicks();
  before = { first: await finished(first), second: await finished(second) };
  for (const q of ['Which planet is smallest?', 'How many moons has Mars?', 'What is the hottest planet?', 'Which planet has rings?']) await ask(q);
  expect({ first: await finished(first) - before.first, second: await finished(second) - before.second }).toEqual({ first: 0, second: 4 });
  expect(await prefixPicks()).toBe(picks + 4);

  // The second replica queues (one running, two waiting): it has no room, and the prompt moves to the first.
  other = occupy(second, 3);
  try {
    await until(async () => (await waiting(second)) === 2, 'the second replica to report two waiting');
    await readAgain();
    before = { first: await finished(first), second: await finished(second) };
    await ask('Is Pluto a planet?');
    expect({ first: await finished(first) - before.first, second: await finished(second) - before.second }).toEqual({ first: 1, second: 0 });
  } finally {
    await other.stop();
  }
  await until(async () => (await running(second)) === 0 && (await waiting(second)) === 0, 'the second replica to be idle');
  await readAgain();
  before = { first: await finished(first), second: await finished(second) };
  await ask('What is the coldest planet?');
  expect({ first: await finished(first) - before.first, second: await finished(second) - before.second }).toEqual({ first: 1, second: 0 });
});
