// Hostile request bodies against `predictgate local` as a process (test/helpers/hostile/): a seeded
// sample of the corpus across every route and framework, where no body may crash the gateway or a
// model, get a 5xx, or get an error that is not one JSON body of the route's dialect, and the
// gateway's heap (read from its /metrics once it settles, nothing forced: session.ts) comes back to
// within 10 % of a warm-up baseline; then fixed examples of the families, each with the answer it must get.
import { Pool } from 'undici';
import { startHostileGateway, type HostileGateway } from '../helpers/hostile/gateway.js';
import { send } from '../helpers/hostile/runner.js';
import { runHostile } from '../helpers/hostile/session.js';
import { shippedRuntime } from '../bench/runtime.js';
import { ROOT } from '../helpers/local.js';
import { answerProblems } from '../helpers/hostile/check.js';
import { FAMILY_NAMES, type HostileCase } from '../helpers/hostile/corpus.js';
import { violationList, heapRatio } from '../helpers/hostile/report.js';
import { MAX_REQUEST_BYTES, TARGETS } from '../helpers/hostile/targets.js';

const SEED = 20261202;
const SAMPLE = 4000;

let gw: HostileGateway;
let pool: Pool;

beforeAll(async () => {
  // The gateway as the image runs it (NODE_OPTIONS and GLIBC_TUNABLES of the Dockerfile).
  gw = await startHostileGateway(shippedRuntime(ROOT));
  pool = new Pool(gw.base, { connections: 4 });
}, 60_000);

afterAll(async () => {
  await pool?.close();
  await gw?.stop();
});

test(`a sample of ${SAMPLE} hostile bodies (seed ${SEED}): no crash, no 5xx, every error one JSON body of its route's dialect, and the heap back within 10 % of the warm-up's`, async () => {
  const run = await runHostile(gw, { seed: SEED, bodies: SAMPLE, concurrency: 16, windowBodies: 500 });
  const { record } = run;
  // A body over MAX_REQUEST_BYTES is refused with a 413 and the connection closed unread, and its
  // client may see the close before the answer (counted apart, runner.ts); every other call is answered.
  const summary = { alive: run.alive, modelRestarts: run.modelRestarts, serverErrors: record.serverErrors, nonJsonErrors: record.nonJsonErrors, badSuccesses: record.badSuccesses, unanswered: record.noAnswer - record.refusedUnread };
  expect([summary, violationList(record)]).toEqual([{ alive: true, modelRestarts: [], serverErrors: 0, nonJsonErrors: 0, badSuccesses: 0, unanswered: 0 }, 'No violations.']);
  expect(record.bodies).toBeGreaterThanOrEqual(SAMPLE);
  // Every family had its share.
  expect(FAMILY_NAMES.filter((f) => !(record.byFamily[f]?.bodies > 0))).toEqual([]);
  expect(heapRatio(run)).toBeLessThan(1.1);
}, 600_000);

/** Sends one body to the route named `target`; the answer, and what check.ts finds wrong with it (nothing, here). */
async function call(target: string, body: string | Buffer, opts: { headers?: Record<string, string>; chunked?: boolean } = {}): Promise<{ status: number; json: unknown; text: string; problems: string[] }> {
  const t = TARGETS.find((x) => x.name === target);
  if (!t) throw new Error(`no target ${target}`);
  const buf = typeof body === 'string' ? Buffer.from(body) : body;
  const headers = { 'content-type': 'application/json', ...(t.host ? { host: t.host } : {}), ...opts.headers };
  const c: HostileCase = { seed: 0, index: 0, family: 'fixed', target: t, body: buf, headers, chunks: opts.chunked ? [buf.subarray(0, 10), buf.subarray(10)] : null };
  const a = await send(pool, c);
  const text = a.body.toString('utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: a.status, json, text, problems: a.status === 0 ? [a.error ?? 'no answer'] : answerProblems(c, a) };
}

const vertex = (code: number, status: string, message: string | RegExp): unknown => ({ error: { code, status, message: message instanceof RegExp ? expect.stringMatching(message) : message } });
const deep = (n: number, leaf = '1'): string => '['.repeat(n) + leaf + ']'.repeat(n);

describe('fixed examples of the families', () => {
  test('__proto__ keys are own members, never prototypes: refused where a field is unknown, carried where any value goes, and nothing is polluted', async () => {
    let r = await call('vertex predict pytorch', '{"__proto__": {"data": "p"}, "instances": [1]}');
    expect([r.status, r.json, r.problems]).toEqual([400, vertex(400, 'INVALID_ARGUMENT', 'body: unknown field "__proto__"; expected "instances" and optionally "parameters"'), []]);
    r = await call('vertex predict pytorch', '{"instances": [{"__proto__": {"data": "p"}, "a": 1}, {"constructor": {"prototype": {"data": 1}}}]}');
    expect([r.status, r.text]).toEqual([200, '{"predictions":[{"__proto__":{"data":"p"},"a":1},{"constructor":{"prototype":{"data":1}}}],"deployedModelId":"echo","modelDisplayName":"echo"}']);
    // Had Object.prototype gained `data`, {"a": 1} would count as wrapped and go to echo unwrapped.
    r = await call('vertex predict pytorch', '{"instances": [{"a": 1}]}');
    expect([r.status, r.text]).toEqual([200, '{"predictions":[{"a":1}],"deployedModelId":"echo","modelDisplayName":"echo"}']);
    // A GraphStorm field under __proto__ is not the field.
    r = await call('vertex predict graphstorm', '{"version": "gs-realtime-v0.1", "gml_task": "node_classification", "__proto__": {"graph": {"nodes": [], "edges": []}}, "targets": []}');
    expect([r.status, (r.json as { error: string }).error, r.problems]).toEqual([401, 'graph: required field is missing', []]);
  });

  test('lone surrogates: an escaped one is valid JSON grammar (RFC 8259) and is carried; raw surrogate bytes are invalid UTF-8, read as U+FFFD', async () => {
    let r = await call('vertex predict pytorch', '{"instances": [{"data": "a\\ud800b"}]}');
    expect([r.status, r.text]).toEqual([200, '{"predictions":["a\\ud800b"],"deployedModelId":"echo","modelDisplayName":"echo"}']);
    r = await call('vertex predict pytorch', Buffer.concat([Buffer.from('{"instances": [{"data": "a'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('b"}]}')]));
    expect([r.status, r.text]).toEqual([200, '{"predictions":["a\ufffd\ufffd\ufffdb"],"deployedModelId":"echo","modelDisplayName":"echo"}']);
  });

  test('nesting: an instance nested MAX_JSON_DEPTH levels passes, one more is refused before parsing, at any depth (classify and regress too); models refuse what rawPredict passes them', async () => {
    let r = await call('vertex predict tensorflow', `{"instances": [${deep(64)}]}`);
    expect([r.status, r.text]).toEqual([200, `{"predictions":[${deep(64, '2.5')}],"deployedModelId":"hpt","modelDisplayName":"hpt"}`]);
    for (const n of [65, 100_000]) {
      r = await call('vertex predict tensorflow', `{"instances": [${deep(n)}]}`);
      expect([n, r.status, r.json]).toEqual([n, 400, vertex(400, 'INVALID_ARGUMENT', 'body: nesting deeper than 64 levels')]);
    }
    r = await call('gdc predict graphstorm', `{"version": ${deep(100_000, '"x"')}}`);
    expect([r.status, (r.json as { error: string }).error]).toEqual([400, 'body: nesting deeper than 64 levels']);
    r = await call('vertex rawPredict pytorch', `{"instances": [{"data": ${deep(100_000)}}]}`);
    expect([r.status, r.json]).toEqual([400, { error: 'the instances nest too deeply to be answered' }]);
    r = await call('vertex rawPredict tensorflow', `{"examples": [{"x": 1}], "x": ${deep(100_000)}}`);
    expect([r.status, r.json]).toEqual([400, { error: 'JSON Parse error: the document nests deeper than 128 levels' }]);
    // The TF Serving surface checks classify and regress bodies itself, as it checks predict.
    for (const target of ['tfserving classify', 'tfserving regress']) {
      r = await call(target, `{"examples": [{"x": 1}], "x": ${deep(100_000)}}`);
      expect([target, r.status, r.json]).toEqual([target, 400, { error: 'body: nesting deeper than 64 levels' }]);
    }
  });

  test('numbers: NaN and Infinity tokens are TF Serving JSON where TF reads them and invalid elsewhere; leading zeros are invalid; -0 is a number', async () => {
    let r = await call('tfserving predict', '{"instances": [NaN, Infinity, -Infinity, -0, 1]}');
    expect([r.status, r.text]).toEqual([200, '{"predictions":[NaN,Infinity,-Infinity,2,2.5]}']);
    r = await call('vertex predict tensorflow', '{"instances": [01]}');
    expect([r.status, r.json]).toEqual([400, vertex(400, 'INVALID_ARGUMENT', /^invalid JSON: /)]);
    r = await call('vertex predict graphstorm', '{"version": "gs-realtime-v0.1", "gml_task": NaN}');
    expect([r.status, (r.json as { status_code: number }).status_code, (r.json as { error: string }).error]).toEqual([400, 400, expect.stringMatching(/^invalid JSON: /)]);
  });

  test('not JSON at all: truncated, empty, white space only, a BOM, trailing garbage, two values', async () => {
    const invalid = vertex(400, 'INVALID_ARGUMENT', /^invalid JSON: /);
    for (const body of ['{"instances": [1, 2', '\ufeff{"instances": [1]}', '{"instances": [1]} x', '{"instances": [1]}{"instances": [2]}', '{"instances": [1]}\u0000']) {
      const r = await call('vertex predict tensorflow', body);
      expect([JSON.stringify(body), r.status, r.json]).toEqual([JSON.stringify(body), 400, invalid]);
    }
    for (const body of ['', ' \n\t\r ']) {
      const r = await call('gdc predict pytorch', body);
      expect([r.status, r.json]).toEqual([400, { error: 'request body is empty; expected a JSON object' }]);
    }
  });

  test('duplicate keys: the last one wins, as in the model\'s own parser', async () => {
    const r = await call('vertex predict tensorflow', '{"instances": ["a"], "instances": [2]}');
    expect([r.status, r.text]).toEqual([200, '{"predictions":[3],"deployedModelId":"hpt","modelDisplayName":"hpt"}']);
  });

  test('wrong types, b64 values, _bytes names, TorchServe data, named inputs and parameters are refused with the path', async () => {
    const cases: [string, string, string][] = [
      ['vertex predict pytorch', '{"instances": {"a": 1}}', 'instances: expected a list, got object'],
      ['vertex predict pytorch', '{"instances": "x"}', 'instances: expected a list, got string'],
      ['vertex predict pytorch', '{"instances": [{"b64": 5}]}', 'instances[0].b64: expected a base64 string, got number'],
      ['vertex predict pytorch', '{"instances": [{"data": {"b64": "aGVs bG8="}}]}', 'instances[0].data.b64: expected valid base64 (RFC 4648 standard or URL-safe alphabet, optional padding)'],
      ['vertex predict tensorflow', '{"instances": [{"x_bytes": "aGVsbG8="}]}', 'instances[0].x_bytes: expected {"b64": string} (names ending in _bytes carry binary data), got string'],
      ['vertex predict tensorflow', '{"instances": [{"x": [1, 2]}, {"x": [1]}]}', 'instances[1].x: expected a list of 2 numbers like instances[0].x, got a list of 1 number (named inputs share their 0th dimension and shape across instances)'],
      ['vertex predict tensorflow', '{"instances": [1], "inputs": [1]}', 'body: "instances" (row form) and "inputs" (columnar form) must not both be given; send one of them'],
      ['vertex predict tensorflow', '{"instances": [1], "parameters": "p"}', 'parameters: expected a JSON object or null, got string'],
    ];
    for (const [target, body, message] of cases) {
      const r = await call(target, body);
      expect([body, r.status, r.json, r.problems]).toEqual([body, 400, vertex(400, 'INVALID_ARGUMENT', message), []]);
    }
    // TorchServe reads `body` when there is no `data`: so does echo.
    const r = await call('vertex predict pytorch', '{"instances": [{"body": 5}, {"data": 6}]}');
    expect([r.status, r.text]).toEqual([200, '{"predictions":[5,6],"deployedModelId":"echo","modelDisplayName":"echo"}']);
  });

  test('GraphStorm graphs that cannot be built get the spec\'s status codes in GraphStorm\'s body', async () => {
    const graph = (edges: string, targets = '[{"node_type": "author", "node_id": "a0"}]', task = 'node_classification', nodes = '[{"node_type": "author", "node_id": "a0", "features": {"f": 1}}]'): string =>
      `{"version": "gs-realtime-v0.1", "gml_task": "${task}", "graph": {"nodes": ${nodes}, "edges": ${edges}}, "targets": ${targets}}`;
    const cases: [string, number, string][] = [
      [graph('[{"edge_type": ["author", "writes", "paper"], "src_node_id": "a0", "dest_node_id": "p9", "features": {}}]'), 411, 'graph.edges[0].dest_node_id: node paper/p9 is not in graph.nodes'],
      [graph('[]', undefined, undefined, '[{"node_type": "author", "node_id": "a0", "features": {}}, {"node_type": "author", "node_id": "a0", "features": {}}]'), 411, 'graph.nodes[1]: node author/a0 is listed twice (first at graph.nodes[0])'],
      [graph('[]', '[{"node_type": "author"}]'), 401, 'targets[0].node_id: required field is missing'],
      [graph('[]', '[{"node_type": "venue", "node_id": "v"}]'), 403, 'targets[0].node_type: "venue" is the node_type of no node in graph.nodes (node types: author)'],
      [graph('[]', undefined, 'node_regression'), 421, 'gml_task: "node_regression" does not match the deployed model\'s task "node_classification"'],
    ];
    for (const [body, status, error] of cases) {
      const r = await call('gdc predict graphstorm', body);
      expect([r.status, r.json, r.problems]).toEqual([status, { status_code: status, request_uid: expect.any(String), message: '', error, data: {} }, []]);
    }
  });

  test('explain\'s members: a raw control character in deployedModelId is invalid JSON, an unknown id a 400', async () => {
    let r = await call('vertex explain pytorch', '{"instances": [1], "deployedModelId": "echo\t"}');
    expect([r.status, r.json]).toEqual([400, vertex(400, 'INVALID_ARGUMENT', 'invalid JSON at byte 43: a raw control character in the string deployedModelId (write it as a \\u escape)')]);
    r = await call('gdc explain pytorch', '{"instances": [1], "deployedModelId": "nope"}');
    expect([r.status, r.problems]).toEqual([400, []]);
  });

  test('rawPredict\'s HttpBody form refuses a contentType that cannot be a header', async () => {
    const r = await call('vertex rawPredict HttpBody', '{"httpBody": {"contentType": "text/plain\\ud800", "data": "AA=="}}');
    expect([r.status, r.json]).toEqual([400, vertex(400, 'INVALID_ARGUMENT', 'httpBody.contentType: "text/plain\\ud800" is not a valid Content-Type header value (printable ASCII only)')]);
  });

  test('headers: the Content-Type of a checked call is not read; a gzip body is inflated, one that is not gzip is refused, other codings too', async () => {
    let r = await call('vertex predict tensorflow', '{"instances": [2]}', { headers: { 'content-type': 'text/plain' } });
    expect([r.status, r.text]).toEqual([200, '{"predictions":[3],"deployedModelId":"hpt","modelDisplayName":"hpt"}']);
    const { gzipSync } = await import('node:zlib');
    r = await call('vertex predict tensorflow', gzipSync('{"instances": [2]}'), { headers: { 'content-encoding': 'gzip' } });
    expect([r.status, r.text]).toEqual([200, '{"predictions":[3],"deployedModelId":"hpt","modelDisplayName":"hpt"}']);
    r = await call('vertex predict tensorflow', '{"instances": [2]}', { headers: { 'content-encoding': 'gzip' } });
    expect([r.status, r.json]).toEqual([400, vertex(400, 'INVALID_ARGUMENT', 'request body of 18 bytes is too short to be gzip data (Content-Encoding: gzip)')]);
    r = await call('tfserving predict', '{"instances": [2]}', { headers: { 'content-encoding': 'br' } });
    expect([r.status, r.json]).toEqual([415, { error: 'Content-Encoding "br" is not taken here: send the body as it is, or compressed with Content-Encoding: gzip' }]);
  });

  test('a body just over maxRequestBytes is a 413, with a Content-Length or chunked', async () => {
    const body = Buffer.from(`{"instances": ["${'z'.repeat(MAX_REQUEST_BYTES + 1 - 19)}"]}`);
    expect(body.length).toBe(MAX_REQUEST_BYTES + 1);
    let r = await call('vertex predict pytorch', body);
    expect([r.status, r.json]).toEqual([413, vertex(413, 'INVALID_ARGUMENT', `request body of ${MAX_REQUEST_BYTES + 1} bytes is larger than the limit of ${MAX_REQUEST_BYTES} bytes`)]);
    r = await call('tfserving predict', body, { chunked: true });
    expect([r.status, r.json]).toEqual([413, { error: `request body is larger than the limit of ${MAX_REQUEST_BYTES} bytes` }]);
  });
});
