// GraphStorm real-time inference payloads (gs-realtime-v0.1): the spec's example shape is accepted,
// and every rule is broken once with its status code (400/401/402/403/404/411/421) and a message
// that names the path. Then the answer check: one result per target, request_uid, passed-on errors.
import { ApiError } from '../../src/errors.js';
import { checkGraphStormPayload, shapeGraphStormAnswer, type GraphTarget } from '../../src/payload/graphstorm.js';
import { thrownBy } from '../helpers/expect.js';

type Json = Record<string, unknown>;

/** The spec's example, filled in: two authors (a4444, a39), one paper, the author a39 as target. */
function example(): Json {
  return {
    version: 'gs-realtime-v0.1',
    gml_task: 'node_classification',
    graph: {
      nodes: [
        { node_type: 'author', node_id: 'a4444', features: { feat: [0.1, 0.2], name: 'Ada' } },
        { node_type: 'author', node_id: 'a39', features: { feat: [0.3, 0.4], name: 'Bob' } },
        { node_type: 'paper', node_id: 'p1', features: { title: 'Graph neural networks at scale' } },
      ],
      edges: [
        { edge_type: ['author', 'writing', 'paper'], src_node_id: 'a39', dest_node_id: 'p1', features: {} },
        { edge_type: ['author', 'writing', 'paper'], src_node_id: 'a4444', dest_node_id: 'p1', features: {} },
      ],
    },
    targets: [{ node_type: 'author', node_id: 'a39' }],
  };
}

function check(body: unknown, task: 'node_classification' | 'node_regression' = 'node_classification'): GraphTarget[] {
  return checkGraphStormPayload(Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)), task, 32).targets;
}

/** The example with `edit` applied to a copy. */
function edited(edit: (b: Json & { graph: { nodes: Json[]; edges: Json[] }; targets: Json[] }) => void): Json {
  const b = example() as Json & { graph: { nodes: Json[]; edges: Json[] }; targets: Json[] };
  edit(b);
  return b;
}

test('the spec example is accepted and its targets returned in order', () => {
  expect(check(example())).toEqual([{ node_type: 'author', node_id: 'a39' }]);
  const two = edited((b) => b.targets.push({ node_type: 'paper', node_id: 'p1', features: { title: 'ignored' } }));
  expect(check(two)).toEqual([{ node_type: 'author', node_id: 'a39' }, { node_type: 'paper', node_id: 'p1' }]);
  expect(check({ ...example(), gml_task: 'node_regression' }, 'node_regression')).toHaveLength(1);
  // A graph without edges, text features, unknown extra fields: all fine.
  expect(check(edited((b) => { b.graph.edges = []; b.extra = true; }))).toHaveLength(1);
});

const REFUSED: [string, unknown, number, string][] = [
  ['not JSON', '{"version": ', 400, 'invalid JSON'],
  ['a list', '[1]', 400, 'body: expected a JSON object, got list'],
  ['missing version', edited((b) => delete b.version), 401, 'version: required field is missing'],
  ['missing gml_task', edited((b) => delete b.gml_task), 401, 'gml_task: required field is missing'],
  ['missing graph', edited((b) => delete (b as Json).graph), 401, 'graph: required field is missing'],
  ['missing targets', edited((b) => delete (b as Json).targets), 401, 'targets: required field is missing'],
  ['missing graph.nodes', edited((b) => delete (b.graph as Json).nodes), 401, 'graph.nodes: required field is missing'],
  ['missing graph.edges', edited((b) => delete (b.graph as Json).edges), 401, 'graph.edges: required field is missing'],
  ['a node without node_id', edited((b) => delete b.graph.nodes[1].node_id), 401, 'graph.nodes[1].node_id: required field is missing'],
  ['a node without features', edited((b) => delete b.graph.nodes[2].features), 401, 'graph.nodes[2].features: required field is missing'],
  ['an edge without edge_type', edited((b) => delete b.graph.edges[0].edge_type), 401, 'graph.edges[0].edge_type: required field is missing'],
  ['an edge without dest_node_id', edited((b) => delete b.graph.edges[1].dest_node_id), 401, 'graph.edges[1].dest_node_id: required field is missing'],
  ['a target without node_type', edited((b) => delete b.targets[0].node_type), 401, 'targets[0].node_type: required field is missing'],
  ['version of another kind', edited((b) => (b.version = 1)), 400, 'version: expected a string, got number'],
  ['an unknown version', edited((b) => (b.version = 'gs-realtime-v9')), 400, 'version: "gs-realtime-v9" is not supported; expected "gs-realtime-v0.1"'],
  ['graph.nodes not a list', edited((b) => ((b.graph as Json).nodes = {})), 400, 'graph.nodes: expected a list, got object'],
  ['a node that is a string', edited((b) => (b.graph.nodes[0] = 'a1' as unknown as Json)), 400, 'graph.nodes[0]: expected a node object, got string'],
  ['a numeric node_id', edited((b) => (b.graph.nodes[0].node_id = 7)), 400, 'graph.nodes[0].node_id: expected a string, got number'],
  ['features that are a list', edited((b) => (b.graph.nodes[0].features = [1])), 400, 'graph.nodes[0].features: expected an object, got list'],
  ['an edge_type of two strings', edited((b) => (b.graph.edges[0].edge_type = ['author', 'paper'])), 400, 'graph.edges[0].edge_type: expected a list of three strings [source node type, edge type, destination node type]'],
  ['null version', edited((b) => (b.version = null)), 402, 'version: has no value (null)'],
  ['empty gml_task', edited((b) => (b.gml_task = '')), 402, 'gml_task: has no value (empty string)'],
  ['no nodes', edited((b) => (b.graph.nodes = [])), 402, 'graph.nodes: has no value (empty list)'],
  ['no targets', edited((b) => (b.targets = [])), 402, 'targets: has no value (empty list)'],
  ['an empty node_id', edited((b) => (b.graph.nodes[1].node_id = '')), 402, 'graph.nodes[1].node_id: has no value (empty string)'],
  ['a null feature value', edited((b) => ((b.graph.nodes[0].features as Json).feat = null)), 402, 'graph.nodes[0].features.feat: has no value (null)'],
  ['an empty edge type name', edited((b) => (b.graph.edges[0].edge_type = ['author', '', 'paper'])), 402, 'graph.edges[0].edge_type: has an empty string'],
  ['a target node_id of null', edited((b) => (b.targets[0].node_id = null)), 402, 'targets[0].node_id: has no value (null)'],
  ['a target node_type not in the graph', edited((b) => (b.targets[0].node_type = 'venue')), 403, 'targets[0].node_type: "venue" is the node_type of no node in graph.nodes (node types: author, paper)'],
  ['a target node_id not in the graph', edited((b) => (b.targets[0].node_id = 'a40')), 404, 'targets[0].node_id: "a40" is not a node of type "author" in graph.nodes'],
  ['a target id of another node type', edited((b) => (b.targets[0].node_id = 'p1')), 404, 'targets[0].node_id: "p1" is not a node of type "author" in graph.nodes'],
  ['feature names differing within a node type', edited((b) => (b.graph.nodes[1].features = { feat: [1, 2] })), 411,
    'graph.nodes[1].features: feature names [feat] differ from [feat, name] of node_type author at graph.nodes[0]; every node of one node_type must have the same feature names'],
  ['feature names differing within an edge type', edited((b) => (b.graph.edges[1].features = { weight: 1 })), 411,
    'graph.edges[1].features: feature names [weight] differ from [] of edge_type [author, writing, paper] at graph.edges[0]; every edge of one edge_type must have the same feature names'],
  ['a node listed twice', edited((b) => b.graph.nodes.push({ node_type: 'author', node_id: 'a39', features: { feat: [1, 1], name: 'x' } })), 411, 'graph.nodes[3]: node author/a39 is listed twice (first at graph.nodes[1])'],
  ['an edge from a node not in the graph', edited((b) => (b.graph.edges[0].src_node_id = 'a1')), 411, 'graph.edges[0].src_node_id: node author/a1 is not in graph.nodes'],
  ['an edge to a node of the wrong type', edited((b) => (b.graph.edges[0].edge_type = ['author', 'writing', 'author'])), 411, 'graph.edges[0].dest_node_id: node author/p1 is not in graph.nodes'],
  ['a target listed twice', edited((b) => b.targets.push({ node_type: 'author', node_id: 'a39' })), 400, 'targets[1]: node author/a39 is already a target (targets[0]); each result answers one target'],
  ['another task', edited((b) => (b.gml_task = 'node_regression')), 421, 'gml_task: "node_regression" does not match the deployed model\'s task "node_classification"'],
  ['a task GraphStorm does not have', edited((b) => (b.gml_task = 'link_prediction')), 421, 'gml_task: "link_prediction" does not match the deployed model\'s task "node_classification"'],
];

test.each(REFUSED)('refuses %s', (_what, body, status, message) => {
  const err = thrownBy(() => check(body), ApiError);
  expect(err.httpStatus).toBe(status);
  if (status === 400 && message === 'invalid JSON') expect(err.message).toMatch(/^invalid JSON/);
  else expect(err.message).toBe(message);
});

test('a body nested too deep is refused before it is parsed', () => {
  const deep = `{"version": ${'['.repeat(100)}${']'.repeat(100)}}`;
  const err = thrownBy(() => check(deep), ApiError);
  expect([err.httpStatus, err.message]).toEqual([400, 'body: nesting deeper than 32 levels']);
});

describe('the answer', () => {
  const targets: GraphTarget[] = [{ node_type: 'author', node_id: 'a39' }, { node_type: 'paper', node_id: 'p1' }];
  const answer = (v: unknown): Buffer => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v));
  const results = [
    { node_type: 'paper', node_id: 'p1', predictions: [0.5] },
    { node_type: 'author', node_id: 'a39', predictions: [1.25, -0.5] },
  ];

  test('is GraphStorm\'s body with the gateway\'s request id as request_uid and the model\'s results', () => {
    const out = shapeGraphStormAnswer(answer({ status_code: 200, request_uid: 'model-uid', message: 'ok', error: '', data: { results } }), targets, 'req-1', 'gs');
    expect(JSON.parse(out)).toEqual({ status_code: 200, request_uid: 'req-1', message: 'ok', error: '', data: { results } });
    // A model that leaves out the envelope's other fields still gets the full body; NaN survives.
    const bare = shapeGraphStormAnswer(answer('{"data": {"results": [{"node_type": "author", "node_id": "a39", "predictions": [NaN]}, {"node_type": "paper", "node_id": "p1", "predictions": [1]}]}}'), targets, 'req-2', 'gs');
    expect(bare).toBe('{"status_code":200,"request_uid":"req-2","message":"Request processed successfully.","error":"","data":{"results":[{"node_type":"author","node_id":"a39","predictions":[NaN]},{"node_type":"paper","node_id":"p1","predictions":[1]}]}}');
  });

  const BAD: [string, unknown, string][] = [
    ['not JSON', '<html>', 'deployed model gs answered with a body that is not JSON'],
    ['a list', '[]', 'deployed model gs answered with list, expected a GraphStorm response object'],
    ['no results', { status_code: 200, data: {} }, 'deployed model gs answered without a data.results list'],
    ['a result missing', { data: { results: results.slice(0, 1) } }, 'deployed model gs answered no result for target author/a39; expected one per target'],
    ['a result for another node', { data: { results: [...results, { node_type: 'author', node_id: 'a4444', predictions: [1] }] } }, 'deployed model gs answered data.results[2] for author/a4444, which is not a target'],
    ['a target answered twice', { data: { results: [...results, results[1]] } }, 'deployed model gs answered data.results[2] for author/a39 a second time; expected one result per target'],
    ['a result without predictions', { data: { results: [{ node_type: 'paper', node_id: 'p1' }] } }, 'deployed model gs answered data.results[0] without node_type, node_id and a predictions list'],
  ];
  test.each(BAD)('is a 502 when the model answers %s', (_what, body, message) => {
    const err = thrownBy(() => shapeGraphStormAnswer(answer(body), targets, 'r', 'gs'), ApiError);
    expect([err.code, err.httpStatus, err.message]).toEqual(['bad_upstream_response', 502, message]);
  });

  test('passes on a status_code other than 200 in a 2xx answer, with its error', () => {
    const err = thrownBy(() => shapeGraphStormAnswer(answer({ status_code: 411, error: 'Graph Construction Failure: bad feature', data: {} }), targets, 'r', 'gs'), ApiError);
    expect([err.code, err.httpStatus, err.message]).toEqual(['upstream_error', 411, 'Graph Construction Failure: bad feature']);
    const odd = thrownBy(() => shapeGraphStormAnswer(answer({ status_code: 'weird' }), targets, 'r', 'gs'), ApiError);
    expect([odd.httpStatus, odd.message]).toEqual([500, 'deployed model gs reported status_code weird']);
  });
});
