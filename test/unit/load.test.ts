// Load-aware picks: reading vLLM's and llama.cpp's load from their metrics, the pick by queue and
// cache pressure, and the scraper's freshness rule (a stale or missing report means least-request),
// on an injected clock and scrape; prefix affinity: the prompt's block keys, the index of their holders, and its
// picks while the holder has room.
import { LoadScraper, parseLoad, pickByLoad, type Load, type LoadTarget } from '../../src/gateway/upstream/load.js';
import { FULL_KV_CACHE, MAX_PREFIX_BLOCKS, PrefixIndex, prefixKeys } from '../../src/gateway/upstream/affinity.js';

const VLLM = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
vllm:num_requests_waiting{engine="1",model_name="m"} 1.0
vllm:num_requests_waiting_by_reason{reason="capacity"} 99
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.5
`;

test.each([
  ['vLLM (engines added up, the larger cache share)', VLLM, { waiting: 3, running: 3, kvCache: 0.5 }],
  ['older vLLM', 'vllm:num_requests_running 1\nvllm:num_requests_waiting 0\nvllm:gpu_cache_usage_perc 0.9\n', { waiting: 0, running: 1, kvCache: 0.9 }],
  ['llama.cpp', '# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 2\nllamacpp:requests_deferred 4\n', { waiting: 4, running: 2, kvCache: undefined }],
  ['no load metrics', 'predictgate_model_requests_total{route="predict",code="200"} 3\n', undefined],
  ['a broken value', 'vllm:num_requests_running x\nvllm:num_requests_waiting 1\n', undefined],
])('%s', (_what, text, expected) => {
  expect(parseLoad(text)).toEqual(expected);
});

const load = (waiting: number, running = 0, kvCache?: number): Load => ({ waiting, running, kvCache });

test('the pick: least queued (the calls sent since the report counted), then cache pressure, then fewer running', () => {
  expect(pickByLoad([{ address: 'a', load: load(3), sentSince: 0 }, { address: 'b', load: load(0), sentSince: 0 }])).toBe('b');
  // b looked idle, but two calls went to it since its report.
  expect(pickByLoad([{ address: 'a', load: load(1), sentSince: 0 }, { address: 'b', load: load(0), sentSince: 2 }])).toBe('a');
  // Same queue: the emptier cache.
  expect(pickByLoad([{ address: 'a', load: load(1, 0, 0.9), sentSince: 0 }, { address: 'b', load: load(1, 0, 0.2), sentSince: 0 }])).toBe('b');
  // A full cache outweighs a short queue difference.
  expect(pickByLoad([{ address: 'a', load: load(0, 0, 0.95), sentSince: 0 }, { address: 'b', load: load(1, 0, 0), sentSince: 0 }])).toBe('b');
  expect(pickByLoad([{ address: 'a', load: load(0, 4), sentSince: 0 }, { address: 'b', load: load(0, 1), sentSince: 0 }])).toBe('b');
  expect(pickByLoad([])).toBeUndefined();
});

test('the scraper: fresh reports pick by load; a stale or missing one falls back; three reads without a report slow a replica\'s pace; a replica gone is forgotten', async () => {
  let now = 0;
  const reports = new Map<string, string | undefined>([['http://a', 'vllm:num_requests_running 1\nvllm:num_requests_waiting 5\n'], ['http://b', 'vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n']]);
  const scraped: string[] = [];
  let targets: LoadTarget[] = [{ address: 'http://a', path: '/metrics', model: 'm' }, { address: 'http://b', path: '/metrics', model: 'm' }];
  const outstanding = new Map<string, number>();
  const scraper = new LoadScraper(() => targets, { outstanding: (a) => outstanding.get(a) ?? 0, lastUsed: (a) => (a === 'http://a' ? now : -Infinity) }, { intervalMs: 100, staleMs: 400, timeoutMs: 100 }, () => now, async (t) => {
    scraped.push(t.address + t.path);
    return reports.get(t.address);
  });
  const all = (): boolean => true;
  expect(scraper.pick(['http://a', 'http://b'], all)).toBeUndefined();
  scraper.tick();
  await new Promise(setImmediate);
  expect(scraped).toEqual(['http://a/metrics', 'http://b/metrics']);
  expect(scraper.pick(['http://a', 'http://b'], all)).toBe('http://b');
  // b out of rotation: a is the only candidate.
  expect(scraper.pick(['http://a', 'http://b'], (x) => x !== 'http://b')).toBe('http://a');
  // Not due yet: nothing asked again.
  now = 50;
  scraper.tick();
  expect(scraped).toHaveLength(2);
  // b stops reporting: its report ages, and the pick falls back once it is stale.
  reports.set('http://b', undefined);
  now = 150;
  scraper.tick();
  await new Promise(setImmediate);
  expect(scraper.pick(['http://a', 'http://b'], all)).toBe('http://b');
  now = 500;
  expect(scraper.pick(['http://a', 'http://b'], all)).toBeUndefined();
  expect(scraper.stats).toMatchObject({ loadPicksTotal: 3, fallbackPicksTotal: 2, reportsTotal: 3, scrapesFailedTotal: 1 });
  // A replica without a usable report three times in a row is asked at the slow pace (every 10 s), a
  // reporting one at the fast (b took no call itself: its model did, through a). Once or twice is a
  // late answer: still the fast pace.
  for (const t of [500, 600, 700, 800]) {
    now = t;
    scraper.tick();
    await new Promise(setImmediate);
  }
  expect(scraped.filter((s) => s.startsWith('http://b'))).toHaveLength(4);
  expect(scraped.filter((s) => s.startsWith('http://a'))).toHaveLength(6);
  expect(scraper.stats.scrapesFailedTotal).toBe(3);
  // a leaves the model: forgotten, and never asked again.
  targets = [{ address: 'http://b', path: '/metrics', model: 'm' }];
  now = 20_000;
  scraper.tick();
  await new Promise(setImmediate);
  expect(scraped.filter((s) => s.startsWith('http://a'))).toHaveLength(6);
  await scraper.stop();
});

test('prefix keys: one per whole block, each standing for the prompt up to its end, and per model', () => {
  const system = 'You are a helpful assistant. '.repeat(20); // 580 characters
  const a = prefixKeys('ns/m', [`${system}Question one?`], 256);
  const b = prefixKeys('ns/m', [`${system}Another, longer question about something else entirely?`], 256);
  expect(a).toHaveLength(2);
  expect(b).toHaveLength(2);
  // The first two blocks are the system prompt in both.
  expect(b).toEqual(a);
  // A prompt that differs in its first block shares no key, though its later blocks are the same.
  expect(prefixKeys('ns/m', [`X${system.slice(1)}Question one?`], 256).filter((k) => a.includes(k))).toEqual([]);
  // Another model's replicas never share a key.
  expect(prefixKeys('ns/other', [`${system}Question one?`], 256).filter((k) => a.includes(k))).toEqual([]);
  expect(prefixKeys('ns/m', ['short'], 256)).toEqual([]);
  expect(prefixKeys('ns/m', [system], 0)).toEqual([]);
  expect(prefixKeys('ns/m', ['x'.repeat(100_000)], 256)).toHaveLength(MAX_PREFIX_BLOCKS);
  // The parts are read as one text: where they are cut does not matter.
  expect(prefixKeys('ns/m', ['You are a ', 'helpful assistant. ', system.slice(29), 'Question one?'], 256)).toEqual(a);
  expect(prefixKeys('ns/m', system.split(''), 256)).toEqual(a);
});

test('the prefix index: the holder of the longest known prefix, while it has room', () => {
  const index = new PrefixIndex();
  const keys = prefixKeys('m', ['p'.repeat(1024)], 256);
  const room = (queueA: number, queueB: number, kvB?: number) => [
    { address: 'a', queue: queueA, kvCache: undefined },
    { address: 'b', queue: queueB, kvCache: kvB },
  ];
  expect(index.preferred(keys, room(0, 0))).toBeUndefined();
  // One holder a key: the replica the prompt last went to. b took the whole prompt, then a its first two blocks.
  index.record(keys, 'b');
  index.record(keys.slice(0, 2), 'a');
  // b holds the longest prefix (four blocks): b, while its queue is no longer than a's and its cache has room.
  expect(index.longest(keys, ['a', 'b'])).toEqual({ address: 'b', blocks: 4 });
  expect(index.preferred(keys, room(0, 0))).toBe('b');
  expect(index.preferred(keys, room(3, 3))).toBe('b');
  expect(index.preferred(keys, room(0, 1))).toBeUndefined();
  expect(index.preferred(keys, room(0, 0, FULL_KV_CACHE))).toBeUndefined();
  // b out of the candidates: a's two blocks are the longest left.
  expect(index.longest(keys, ['a'])).toEqual({ address: 'a', blocks: 2 });
  expect(index.preferred(keys, [{ address: 'a', queue: 0, kvCache: undefined }])).toBe('a');
});

test('the scraper with a prompt prefix: a tie goes to the holder, a queued holder loses the call and the prefix', async () => {
  const reports = new Map<string, string>([['http://a', 'vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n'], ['http://b', 'vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n']]);
  const targets: LoadTarget[] = [{ address: 'http://a', path: '/metrics', model: 'm' }, { address: 'http://b', path: '/metrics', model: 'm' }];
  let now = 0;
  const scraper = new LoadScraper(() => targets, { outstanding: () => 0, lastUsed: () => now }, { intervalMs: 100, staleMs: 400, timeoutMs: 100 }, () => now, async (t) => reports.get(t.address));
  const report = async (): Promise<void> => {
    now += 100;
    scraper.tick();
    await new Promise(setImmediate);
  };
  await report();
  const all = (): boolean => true;
  const both = ['http://a', 'http://b'];
  const keys = prefixKeys('m', ['s'.repeat(600)], 256);
  // a is busy generating: the tie on the queue goes to fewer running, b, which now holds the prefix.
  reports.set('http://a', 'vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n');
  await report();
  expect(scraper.pick(both, all, keys)).toBe('http://b');
  // Both idle: by load alone the first listed (a); the prefix sends it to b.
  reports.set('http://a', 'vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n');
  await report();
  expect(scraper.pick(both, all)).toBe('http://a');
  expect(scraper.pick(both, all, keys)).toBe('http://b');
  // b queues: no room; the call and the prefix go to a.
  reports.set('http://b', 'vllm:num_requests_running 1\nvllm:num_requests_waiting 2\n');
  await report();
  expect(scraper.pick(both, all, keys)).toBe('http://a');
  reports.set('http://b', 'vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n');
  await report();
  expect(scraper.pick(both, all, keys)).toBe('http://a');
  expect(scraper.stats).toMatchObject({ loadPicksTotal: 3, prefixPicksTotal: 2 });
  await scraper.stop();
});
