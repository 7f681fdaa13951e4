// The gRPC surface (GRPC_PORT) in local mode, called by the Node Vertex client (@google-cloud/aiplatform)
// over gRPC, its default transport, and by a bare grpc-js client where a test needs to hold the
// stream's reading: Predict, Explain, RawPredict and StreamRawPredict on v1 and v1beta1 against the
// shipped samples (half-plus-two, echo, the canary split, tiny-llm), the errors as gRPC statuses with the REST
// surface's messages, pinning by metadata, and, against the scripted streaming model
// (test/helpers/streamModel.ts), the stream faults: a model failing before its first byte or in the
// middle, a stream going quiet, a client cancelling, a model's queue full (429), a slow reader held
// back through HTTP/2 and TCP, and a drain ending a running stream with UNAVAILABLE; and the gRPC
// port's connections counted with the HTTP port's against the gateway's connection limits.
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { helpers, v1, v1beta1, type protos } from '@google-cloud/aiplatform';
import { startLocal, ready, deployedModelYaml, endpointYaml, ROOT, type LocalHarness } from '../helpers/local.js';
import { heldBacklog, until } from '../helpers/rawHttp.js';
import { freePort } from '../../src/workload/ports.js';
import { HttpBody, RawPredictRequest, StreamRawPredictRequest, type HttpBodyMessage, type RawPredictRequestMessage } from '../../src/gateway/grpc/proto.js';

type IValue = protos.google.protobuf.IValue;
type ClientOptions = NonNullable<ConstructorParameters<typeof v1.PredictionServiceClient>[0]>;
type V1Client = InstanceType<typeof v1.PredictionServiceClient>;

const STREAM_MODEL = join(ROOT, 'dist/test/helpers/streamModel.js');
const sample = (file: string): string => readFileSync(join(ROOT, 'crds/samples', file), 'utf8');
const value = (x: unknown): IValue => helpers.toValue(x as object) as IValue;
const endpointName = (name: string): string => `projects/default/locations/local/endpoints/${name}`;
/** A caller that never looks up credentials: the channel is plaintext, and tokens go as metadata. */
const NO_AUTH = { getUniverseDomain: async (): Promise<string> => 'googleapis.com', getClient: async (): Promise<object> => ({}) };

let h: LocalHarness;
let port = 0;
const clients: { close(): Promise<void> }[] = [];

function client<T extends typeof v1.PredictionServiceClient | typeof v1beta1.PredictionServiceClient>(Client: T, p = port): InstanceType<T> {
  const c = new Client({ apiEndpoint: '127.0.0.1', port: p, sslCreds: grpc.credentials.createInsecure(), auth: NO_AUTH as unknown as ClientOptions['auth'] }) as InstanceType<T>;
  clients.push(c);
  return c;
}

const smYaml = (name: string, serving?: Record<string, number>): string =>
  deployedModelYaml({ name, command: ['node', STREAM_MODEL], predictRoute: '/v1/chat/completions', serving });

beforeAll(async () => {
  port = await freePort();
  h = await startLocal({
    'half-plus-two.yaml': sample('half-plus-two.yaml'),
    'echo.yaml': sample('echo.yaml'),
    'traffic-split.yaml': sample('traffic-split.yaml'),
    'tiny-llm.yaml': sample('tiny-llm.yaml'),
    'stream.yaml': [
      smYaml('sm'),
      smYaml('one-at-a-time', { maxConcurrency: 1, maxQueuedCalls: 0 }),
      endpointYaml('llm', [{ model: 'sm' }]),
      endpointYaml('quiet', [{ model: 'sm' }], 'default', { streamIdleTimeoutSeconds: 1 }),
      endpointYaml('busy', [{ model: 'one-at-a-time' }]),
    ].join('---\n'),
  }, { settings: { grpcPort: port, maxJsonDepth: 16 } });
  await h.until((x) => ['half-plus-two', 'echo', 'half-plus-two-split', 'tiny-llm', 'llm', 'quiet', 'busy'].every((e) => ready(x, 'Endpoint', `default/${e}`)), 'the endpoints Ready', 60_000);
}, 90_000);

afterAll(async () => {
  for (const c of clients) await c.close();
  await h?.stop();
});

const modelAddress = (key: string): string => h.model(key)?.status?.replicaAddresses?.[0] as string;
interface ModelCalls { started: number; finished: number; clientClosed: number; backlog: number }
const modelCalls = async (key = 'default/sm'): Promise<ModelCalls> => (await fetch(`${modelAddress(key)}/calls`)).json() as Promise<ModelCalls>;
const script = (s: Record<string, unknown>): { contentType: string; data: Buffer } => ({ contentType: 'application/json', data: Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], stream: true, ...s })) });
const text = (parts: { data?: Uint8Array | string | null }[]): string => parts.map((p) => Buffer.from(p.data as Uint8Array).toString('utf8')).join('');

type Part = protos.google.api.IHttpBody | HttpBodyMessage;
interface Ending { parts: Part[]; error: grpc.ServiceError | undefined }

/** A stream read part by part: `first()` waits for its first part, `rest()` for its end (error undefined: OK). */
function reading(stream: AsyncIterable<Part>): { first(): Promise<void>; rest(): Promise<Ending> } {
  const it = stream[Symbol.asyncIterator]();
  const parts: Part[] = [];
  let error: grpc.ServiceError | undefined;
  const step = async (): Promise<boolean> => {
    try {
      const n = await it.next();
      if (n.done) return false;
      parts.push(n.value);
      return true;
    } catch (err) {
      error = err as grpc.ServiceError;
      return false;
    }
  };
  return {
    async first() {
      if (!(await step())) throw new Error(`the stream ended before its first part: ${error?.message ?? 'OK'}`);
    },
    async rest() {
      while (await step());
      return { parts, error };
    },
  };
}

/** A bare grpc-js client of the gateway (closed after the suite). */
function bare(p = port): grpc.Client {
  const raw = new grpc.Client(`127.0.0.1:${p}`, grpc.credentials.createInsecure());
  clients.push({ close: async () => raw.close() });
  return raw;
}

/** StreamRawPredict from a bare grpc-js client: the stream of HttpBody messages. */
function bareStream(endpoint: string, body: { contentType: string; data: Buffer }): grpc.ClientReadableStream<HttpBodyMessage> {
  const request: RawPredictRequestMessage = { endpoint: endpointName(endpoint), http_body: { content_type: body.contentType, data: body.data } };
  return bare().makeServerStreamRequest('/google.cloud.aiplatform.v1.PredictionService/StreamRawPredict', StreamRawPredictRequest.encode, HttpBody.decode, request);
}

/** The parts of a stream until it ends, and how it ended (undefined: OK). */
const drain = (stream: AsyncIterable<Part>): Promise<Ending> => reading(stream).rest();

describe('the Node client over gRPC, on the samples', () => {
  test('Predict (v1 and v1beta1): the predictions as Values, the deployed model and its version', async () => {
    for (const c of [client(v1.PredictionServiceClient), client(v1beta1.PredictionServiceClient)]) {
      const [resp] = await c.predict({ endpoint: endpointName('half-plus-two'), instances: [1, 2, 5].map(value) });
      expect((resp.predictions ?? []).map((p) => p.numberValue)).toEqual([2.5, 3, 4.5]);
      expect(resp).toMatchObject({ deployedModelId: 'half-plus-two', modelDisplayName: 'half-plus-two', modelVersionId: '1' });
    }
  });

  test('Predict with structs, lists, strings, booleans and nulls: they reach the model as the JSON they stand for', async () => {
    // The echo of tiny-llm's route would not do: half-plus-two refuses what is not a number, naming the path.
    const c = client(v1.PredictionServiceClient);
    const err = await c.predict({ endpoint: endpointName('half-plus-two'), instances: [value(1), value({ x: [true, null, 'a'] })] }).catch((e: grpc.ServiceError) => e);
    expect(err).toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    expect((err as grpc.ServiceError).details).toMatch(/^instances\[1\]/);
  });

  test('a pinned call goes to the deployed model its metadata names, whatever the split says', async () => {
    const c = client(v1.PredictionServiceClient);
    for (let i = 0; i < 5; i++) {
      const [resp] = await c.predict({ endpoint: endpointName('half-plus-two-split'), instances: [value(1)] }, { otherArgs: { headers: { 'x-predictgate-deployed-model-id': 'half-plus-two-canary' } } });
      expect(resp).toMatchObject({ deployedModelId: 'half-plus-two-canary', modelVersionId: '2' });
    }
  });

  test('Explain (v1 and v1beta1): the model\'s explanations as Explanation messages, with the predictions and the deployed model', async () => {
    for (const c of [client(v1.PredictionServiceClient), client(v1beta1.PredictionServiceClient)]) {
      const [resp] = await c.explain({ endpoint: endpointName('echo'), instances: [value(1.5), value(4)] });
      expect(resp.deployedModelId).toBe('echo');
      expect((resp.predictions ?? []).map((p) => p.numberValue)).toEqual([1.5, 4]);
      expect((resp.explanations ?? []).map((e) => (e.attributions ?? []).map((a) => ({ out: a.instanceOutputValue, index: a.outputIndex, data: a.featureAttributions?.structValue?.fields?.data?.numberValue })))).toEqual([
        [{ out: 1.5, index: [0], data: 1 }],
        [{ out: 4, index: [0], data: 1 }],
      ]);
    }
  });

  test('Explain\'s deployed_model_id picks the deployed model; one the Endpoint lacks is INVALID_ARGUMENT naming it', async () => {
    const c = client(v1.PredictionServiceClient);
    const [resp] = await c.explain({ endpoint: endpointName('echo'), instances: [value(2)], deployedModelId: 'echo' });
    expect(resp.deployedModelId).toBe('echo');
    await expect(c.explain({ endpoint: endpointName('echo'), instances: [value(2)], deployedModelId: 'nope' })).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT, details: 'deployedModelId: endpoint echo has no deployed model "nope"; its deployed models: echo',
    });
  });

  test('RawPredict: the model\'s bytes and content type as one HttpBody', async () => {
    const c = client(v1.PredictionServiceClient);
    const [resp] = await c.rawPredict({ endpoint: endpointName('half-plus-two'), httpBody: { contentType: 'application/json', data: Buffer.from('{"instances":[1,5]}') } });
    expect(resp.contentType).toMatch(/^application\/json/);
    expect(JSON.parse(Buffer.from(resp.data as Uint8Array).toString('utf8'))).toEqual({ predictions: [2.5, 4.5] });
  });

  test('StreamRawPredict on tiny-llm: the events part by part as the model makes them, then OK', async () => {
    for (const c of [client(v1.PredictionServiceClient), client(v1beta1.PredictionServiceClient)]) {
      const body = { messages: [{ role: 'user', content: 'Say hi' }], stream: true, max_tokens: 3 };
      const { parts, error } = await drain(c.streamRawPredict({ endpoint: endpointName('tiny-llm'), httpBody: { contentType: 'application/json', data: Buffer.from(JSON.stringify(body)) } }));
      expect(error).toBeUndefined();
      // tiny-llm writes each event apart, 20 ms after the last: each is its own part.
      expect(parts.length).toBeGreaterThanOrEqual(4);
      expect(parts.every((p) => (p as protos.google.api.IHttpBody).contentType === 'text/event-stream')).toBe(true);
      const events = text(parts).split('\n\n').filter((e) => e !== '');
      expect(events[events.length - 1]).toBe('data: [DONE]');
      const content = events.slice(0, -1).map((e) => (JSON.parse(e.slice('data: '.length)) as { choices: { delta: { content?: string } }[] }).choices[0].delta.content ?? '').join('');
      expect(content).toBe('You said: Say');
    }
  });

  test('the calls are counted by method and status code', async () => {
    const metrics = await (await fetch(h.url('/metrics'))).text();
    expect(metrics).toMatch(/^predictgate_grpc_calls_total\{method="Predict",code="OK"\} [1-9]\d*$/m);
    expect(metrics).toMatch(/^predictgate_grpc_calls_total\{method="StreamRawPredict",code="OK"\} [1-9]\d*$/m);
  });
});

describe('errors are one gRPC status with the REST surface\'s message', () => {
  let c: V1Client;
  beforeAll(() => {
    c = client(v1.PredictionServiceClient);
  });

  test('an Endpoint that does not exist: NOT_FOUND', async () => {
    await expect(c.predict({ endpoint: endpointName('nope'), instances: [value(1)] })).rejects.toMatchObject({ code: grpc.status.NOT_FOUND, details: 'endpoint nope not found in project default' });
  });

  test('an endpoint that is not an Endpoint\'s name: INVALID_ARGUMENT naming the field', async () => {
    await expect(c.rawPredict({ endpoint: 'endpoints/half-plus-two', httpBody: { data: Buffer.from('{}') } })).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT, details: 'endpoint: expected projects/{project}/locations/{location}/endpoints/{endpoint}, got "endpoints/half-plus-two"',
    });
  });

  test('a number JSON cannot carry, and nesting past MAX_JSON_DEPTH (16 here): INVALID_ARGUMENT at its path', async () => {
    await expect(c.predict({ endpoint: endpointName('half-plus-two'), instances: [value(1), { numberValue: NaN }] })).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: 'instances[1]: NaN is not a number JSON can carry' });
    const nested = (levels: number): IValue => {
      let v: IValue = { numberValue: 1 };
      for (let i = 0; i < levels; i++) v = { listValue: { values: [v] } };
      return v;
    };
    await expect(c.predict({ endpoint: endpointName('half-plus-two'), instances: [nested(20)] })).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: `instances[0]${'[0]'.repeat(16)}: nesting deeper than 16 levels` });
  });

  test('a request message protobuf cannot read: INVALID_ARGUMENT saying why', async () => {
    // Field 1 as a varint whose last byte never comes.
    const raw = bare();
    const err = await new Promise<grpc.ServiceError | null>((resolve) => {
      raw.makeUnaryRequest('/google.cloud.aiplatform.v1.PredictionService/Predict', (b: Buffer) => b, (b: Buffer) => b, Buffer.from([0x08, 0xff, 0xff, 0xff]), (e) => resolve(e));
    });
    expect(err).toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: expect.stringMatching(/^the request is not a valid PredictRequest message \(index out of range/) });
  });

  test('a method the gateway does not serve: UNIMPLEMENTED', async () => {
    await expect(c.directPredict({ endpoint: endpointName('half-plus-two'), inputs: [] })).rejects.toMatchObject({ code: grpc.status.UNIMPLEMENTED });
  });

  // The failures before the first part are read with a bare grpc-js client: the Node client's stream
  // passes an error on about 7 s after it came (retry-request's wait for a first answer).
  test('a model failing before its first byte: its status\'s code and its message', async () => {
    const { parts, error } = await drain(bareStream('llm', script({ then: 'fail503' })));
    expect(parts).toEqual([]);
    expect(error).toMatchObject({ code: grpc.status.UNAVAILABLE, details: 'deployed model sm answered 503: the model is overloaded' });
  });

  test('a model\'s queue full (maxConcurrency, maxQueuedCalls 0): RESOURCE_EXHAUSTED with Retry-After in the trailing metadata', async () => {
    const holding = reading(c.streamRawPredict({ endpoint: endpointName('busy'), httpBody: script({ events: 1, then: 'hold' }) }));
    await holding.first();
    const { error } = await drain(bareStream('busy', script({ events: 1 })));
    expect(error).toMatchObject({ code: grpc.status.RESOURCE_EXHAUSTED });
    expect(error?.details).toMatch(/^deployed model one-at-a-time has its 1 calls in flight/);
    expect(error?.metadata.get('retry-after')).toEqual([expect.stringMatching(/^\d+$/)]);
    await fetch(`${modelAddress('default/one-at-a-time')}/release`);
    expect((await holding.rest()).error).toBeUndefined();
  });
});

describe('streams', () => {
  let c: V1Client;
  beforeAll(() => {
    c = client(v1.PredictionServiceClient);
  });

  test('a model that resets mid-stream: the parts it sent, then UNAVAILABLE, never OK', async () => {
    for (const contentType of ['text/event-stream', 'application/x-ndjson']) {
      const { parts, error } = await drain(c.streamRawPredict({ endpoint: endpointName('llm'), httpBody: script({ events: 2, then: 'reset', contentType }) }));
      expect(text(parts)).toContain('tok1');
      expect(error).toMatchObject({ code: grpc.status.UNAVAILABLE, details: expect.stringMatching(/^deployed model sm closed the connection in the middle of its streamed answer/) });
    }
  });

  test('a stream that goes quiet longer than streamIdleTimeoutSeconds: DEADLINE_EXCEEDED saying so', async () => {
    const { parts, error } = await drain(c.streamRawPredict({ endpoint: endpointName('quiet'), httpBody: script({ events: 1, then: 'stall' }) }));
    expect(text(parts)).toContain('tok0');
    expect(error).toMatchObject({ code: grpc.status.DEADLINE_EXCEEDED, details: 'deployed model sm sent nothing for 1 s in the middle of its streamed answer (streamIdleTimeoutSeconds)' });
  });

  test('a client that cancels mid-stream closes the model\'s call', async () => {
    const before = (await modelCalls()).clientClosed;
    const stream = c.streamRawPredict({ endpoint: endpointName('llm'), httpBody: script({ events: 1, then: 'hold' }) });
    const r = reading(stream);
    await r.first();
    stream.cancel();
    expect((await r.rest()).error).toMatchObject({ code: grpc.status.CANCELLED });
    await until(async () => (await modelCalls()).clientClosed === before + 1, 'the model to see its connection close');
    await until(async () => /^predictgate_streams_in_flight\{[^}]*endpoint="llm"[^}]*\} 0$/m.test(await (await fetch(h.url('/metrics'))).text()), 'no stream in flight');
  });

  test('a running stream\'s request message counts in the body budget (BUFFERED_BODY_BYTES) until the stream ends', async () => {
    const reserved = async (): Promise<number> => Number(/^predictgate_body_memory_reserved_bytes (\d+)/m.exec(await (await fetch(h.url('/metrics'))).text())?.[1] ?? NaN);
    await until(async () => (await reserved()) === 0, 'no body held before the stream');
    const body = script({ events: 1, then: 'hold', note: 'x'.repeat(300_000) });
    const stream = c.streamRawPredict({ endpoint: endpointName('llm'), httpBody: body });
    const r = reading(stream);
    await r.first();
    // The REST call gave its own share back once the model had its body; the gRPC side's message is still held.
    expect(await reserved()).toBeGreaterThanOrEqual(body.data.length);
    stream.cancel();
    expect((await r.rest()).error).toMatchObject({ code: grpc.status.CANCELLED });
    await until(async () => (await reserved()) === 0, 'the message given back when the stream ended');
  });

  test('a reader that does not read holds the model back (HTTP/2 flow control, then TCP); it gets every byte once it reads', async () => {
    // 64 MiB of events (1,024 of 64 KiB) to a bare grpc-js client whose stream is paused.
    const EVENTS = 1024;
    {
      const stream = bareStream('llm', script({ events: EVENTS, pad: 64 * 1024 }));
      stream.pause();
      const last = await heldBacklog(() => modelCalls());
      expect(last).toBeGreaterThan((EVENTS * 64 * 1024) / 2);
      let received = '';
      let tokens = 0;
      const ended = new Promise<grpc.StatusObject>((resolve) => stream.once('status', resolve));
      stream.on('data', (m: HttpBodyMessage) => {
        received += Buffer.from(m.data as Uint8Array).toString('utf8');
        // Counted as the text comes, keeping only an unfinished event.
        const cut = received.lastIndexOf('\n\n');
        tokens += (received.slice(0, cut + 2).match(/"content":"tok\d+x/g) ?? []).length;
        received = received.slice(cut + 2);
      });
      stream.resume();
      expect((await ended).code).toBe(grpc.status.OK);
      expect(tokens).toBe(EVENTS);
    }
  });
});

describe('a drain', () => {
  let d: LocalHarness;
  let dPort = 0;
  beforeAll(async () => {
    dPort = await freePort();
    d = await startLocal({ 'm.yaml': [smYaml('sm'), endpointYaml('llm', [{ model: 'sm' }])].join('---\n') }, { settings: { drainSeconds: 1, grpcPort: dPort } });
    await d.until((x) => ready(x, 'Endpoint', 'default/llm'), 'the endpoint Ready');
  });

  test('lets a stream run to its deadline, then ends it with UNAVAILABLE (shutting_down), not OK', async () => {
    const c = client(v1.PredictionServiceClient, dPort);
    const r = reading(c.streamRawPredict({ endpoint: endpointName('llm'), httpBody: script({ events: 1, then: 'hold' }) }));
    await r.first();
    const stopped = d.stop();
    const { parts, error } = await r.rest();
    await stopped;
    expect(text(parts)).toContain('tok0');
    expect(error).toMatchObject({ code: grpc.status.UNAVAILABLE, details: expect.stringMatching(/^the gateway is shutting down and its drain time ran out before this stream ended/) });
  });
});

describe('connection limits', () => {
  let c: LocalHarness;
  let cPort = 0;
  beforeAll(async () => {
    cPort = await freePort();
    c = await startLocal({ 'half-plus-two.yaml': sample('half-plus-two.yaml') }, { settings: { grpcPort: cPort, maxConnectionsPerClient: 2 } });
    await c.until((x) => ready(x, 'Endpoint', 'default/half-plus-two'), 'the endpoint Ready');
  });
  afterAll(async () => {
    await c?.stop();
  });

  /** A grpc-js client on a connection of its own (no subchannel shared with the other clients). */
  const own = (options: grpc.ChannelOptions = {}): grpc.Client => new grpc.Client(`127.0.0.1:${cPort}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1, ...options });
  const rawPredict = (x: grpc.Client): Promise<HttpBodyMessage> => new Promise((resolve, reject) => {
    const request: RawPredictRequestMessage = { endpoint: endpointName('half-plus-two'), http_body: { content_type: 'application/json', data: Buffer.from('{"instances": [1]}') } };
    x.makeUnaryRequest('/google.cloud.aiplatform.v1.PredictionService/RawPredict', RawPredictRequest.encode, HttpBody.decode, request, (err, res) => (err ? reject(err) : resolve(res as HttpBodyMessage)));
  });
  /** One HTTP call on a connection of its own, closed after it (no keep-alive pool holding a connection of 127.0.0.1 open). */
  const call = (method: 'GET' | 'POST', path: string, body?: string): Promise<{ status: number; text: string }> => new Promise((resolve, reject) => {
    const req = httpRequest(c.url(path), { method, agent: false, headers: body === undefined ? {} : { 'content-type': 'application/json' } }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (b: Buffer) => parts.push(b));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(body);
  });
  const refusedPerClient = async (): Promise<number> => Number(/^predictgate_connections_refused_total\{limit="per_client"\} (\d+)/m.exec((await call('GET', '/metrics')).text)?.[1] ?? NaN);

  test('a gRPC connection past MAX_CONNECTIONS_PER_CLIENT is closed (UNAVAILABLE), counted with the HTTP port\'s; a freed slot takes the next', async () => {
    const before = await refusedPerClient();
    const [a, b] = [own(), own()];
    try {
      // 127.0.0.1's two connections: one per gRPC client.
      for (const x of [a, b]) expect(Buffer.from((await rawPredict(x)).data as Uint8Array).toString('utf8')).toContain('"predictions"');
      // A grpc-js channel refused a connection tries again after its backoff, even once closed: a
      // long backoff keeps this one from taking the slot that is freed below.
      const third = own({ 'grpc.initial_reconnect_backoff_ms': 600_000, 'grpc.max_reconnect_backoff_ms': 600_000 });
      try {
        await expect(rawPredict(third)).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
      } finally {
        third.close();
      }
      // The HTTP port counts the same connections: an HTTP call from the same address is refused too.
      const http = await call('POST', '/v1/projects/default/locations/local/endpoints/half-plus-two:predict', '{"instances": [1]}');
      expect(http.status).toBe(503);
      expect(JSON.parse(http.text)).toMatchObject({ error: { status: 'UNAVAILABLE', message: 'the address 127.0.0.1 has 2 connections open to the gateway, its limit per client (MAX_CONNECTIONS_PER_CLIENT); reuse them or retry later' } });
      // Once a's connection has closed, a new gRPC connection is let in.
      a.close();
      const next = own();
      try {
        await until(() => rawPredict(next).then(() => true, () => false), 'a gRPC call on a new connection once one closed');
      } finally {
        next.close();
      }
    } finally {
      a.close();
      b.close();
    }
    // Each refusal counted: the third gRPC connection's and the HTTP call's at least (the new client may have met the limit before a's close was seen).
    let after = NaN;
    await until(async () => (after = await refusedPerClient().catch(() => NaN)) >= before + 2, 'the refusals counted');
    expect(after).toBeGreaterThanOrEqual(before + 2);
  });
});
