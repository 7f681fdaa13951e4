// Slow clients against local mode with real model processes: a client that declares a 4 MiB body
// and sends a byte a second does not keep other large calls from the body memory (BUFFERED_BODY_BYTES
// = 4 MiB, the calls' timeout shorter than the trickler's life: every one of them succeeds), and is
// itself cut with a JSON 408 once it falls below BODY_MIN_BYTES_PER_SECOND; a body that stops, read
// whole (predict) or streamed (rawPredict), is cut with a 408 after BODY_TIMEOUT_SECONDS and its
// model call cancelled.
import { startLocal, ready, faultyYaml, endpointYaml, metricLine, faultyModelCalls, type LocalHarness } from '../helpers/local.js';
import { parseAnswer, rawClient, until, type RawClient } from '../helpers/rawHttp.js';

let h: LocalHarness;
const BODY_TIMEOUT_S = 4;
/** The large calls' timeout: shorter than the trickler lives, so waiting for it would fail them. */
const CALL_TIMEOUT_S = 2.5;

beforeAll(async () => {
  h = await startLocal({
    'echo.yaml': `${faultyYaml('echo', 'none')}---\n${endpointYaml('big', [{ model: 'echo' }], 'default', { timeoutSeconds: CALL_TIMEOUT_S })}---\n${endpointYaml('slow', [{ model: 'echo' }])}`,
  }, { settings: { bufferedBodyBytes: 4 * 1024 * 1024, bodyTimeoutSeconds: BODY_TIMEOUT_S, bodyMinBytesPerSecond: 1024, healthIntervalMs: 600_000 } });
  await h.until((x) => ready(x, 'Endpoint', 'default/big') && ready(x, 'Endpoint', 'default/slow'), 'the endpoints Ready');
});

afterAll(async () => {
  await h?.stop();
});

const port = (): number => Number(new URL(h.base).port);
const path = (endpoint: string, verb = 'predict'): string => new URL(h.vertex(endpoint, verb)).pathname;

/** A JSON predict body of exactly `bytes` bytes. */
function bodyOf(bytes: number): Buffer {
  const frame = '{"instances": [""]}';
  return Buffer.from(`{"instances": ["${'z'.repeat(bytes - frame.length)}"]}`);
}

/** Starts a POST with a declared length and sends only `first` of its body. */
async function partial(endpoint: string, verb: string, declared: number, first: string): Promise<RawClient> {
  const c = await rawClient(port());
  c.socket.write(`POST ${path(endpoint, verb)} HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n${first}`);
  return c;
}

test('a trickling client holds no large call back; it is cut with a 408 once too slow', async () => {
  const trickler = await partial('slow', 'predict', 4 * 1024 * 1024, '{');
  // The attack itself: one more byte each second, for as long as the connection lasts.
  const drip = setInterval(() => trickler.socket.writable && trickler.socket.write(' '), 1000);
  try {
    await until(() => h.mode.calls().inFlight === 1, 'the trickler\'s call in flight');
    // Admitted with its declared 4 MiB (the whole budget), it soon holds only the bytes it sent,
    // still in flight.
    const reserved = async (): Promise<number> => Number(/^predictgate_body_memory_reserved_bytes (\d+)$/m.exec(await (await fetch(h.url('/metrics'))).text())?.[1]);
    await until(async () => (await reserved()) < 1000 && h.mode.calls().inFlight === 1, 'the trickler to hold (almost) no body memory while in flight');
    // 16 calls of 1 MiB, 4 at a time, while it trickles.
    const body = bodyOf(1024 * 1024);
    const statuses: number[] = [];
    await Promise.all(Array.from({ length: 4 }, async () => {
      for (let i = 0; i < 4; i++) {
        const r = await fetch(h.vertex('big'), { method: 'POST', body: new Uint8Array(body), headers: { 'content-type': 'application/json' } });
        const text = await r.text();
        statuses.push(r.status === 200 && text.length > body.length ? 200 : r.status);
      }
    }));
    expect(statuses).toEqual(Array(16).fill(200));
    const { text } = await trickler.closed;
    const a = parseAnswer(text);
    expect([a.status, a.headers.connection, JSON.parse(a.body)]).toEqual([408, 'close', {
      error: { code: 408, status: 'DEADLINE_EXCEEDED', message: `the request body arrived slower than 1024 bytes a second over ${BODY_TIMEOUT_S} s (BODY_MIN_BYTES_PER_SECOND)` },
    }]);
  } finally {
    clearInterval(drip);
    trickler.socket.destroy();
  }
  await metricLine(h, /^(?=[\s\S]*^predictgate_body_memory_reserved_bytes 0$)(?=[\s\S]*^predictgate_requests_in_flight 0$)/m);
}, 30_000);

test('a body that stops, read whole or streamed, is cut with a 408 and its model call cancelled', async () => {
  const address = h.model('default/echo')!.status!.replicaAddresses![0];
  const before = await faultyModelCalls(address);
  // predict reads the body whole; rawPredict streams a body over 32 KiB to the model as it comes.
  const whole = await partial('slow', 'predict', 100_000, '{"instances": [');
  const streamed = await partial('slow', 'rawPredict', 1024 * 1024, 'x'.repeat(100 * 1024));
  const [a, b] = await Promise.all([whole.closed, streamed.closed]);
  const stalled = { error: { code: 408, status: 'DEADLINE_EXCEEDED', message: `the request body stopped arriving for ${BODY_TIMEOUT_S} s (BODY_TIMEOUT_SECONDS)` } };
  for (const { text } of [a, b]) {
    const answer = parseAnswer(text);
    expect([answer.status, answer.headers.connection, JSON.parse(answer.body)]).toEqual([408, 'close', stalled]);
  }
  // The model never got a whole body: the streamed call to it was cancelled, not left waiting.
  await metricLine(h, /^predictgate_requests_in_flight 0$/m);
  expect((await faultyModelCalls(address)).predicts).toBe(before.predicts);
  await metricLine(h, /^predictgate_requests_total\{[^}]*method="rawPredict",code="408"\} 1$/m);
}, 30_000);
