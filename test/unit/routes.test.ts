// The route table: what each method and path come to (the route and its parameters, a 405 with the
// allowed methods, or a 404 in the dialect of the nearest surface).
import { compileRoutes, routeTable, type Match } from '../../src/gateway/routes.js';

const local = compileRoutes(routeTable({ statusApi: true }));
const cluster = compileRoutes(routeTable({ statusApi: false }));

/** A match in a form that compares whole. */
function what(m: Match): unknown {
  return m.found ? { serve: m.spec.serve, dialect: m.spec.dialect, params: { ...m.params } } : { allowed: m.allowed, dialect: m.dialect, ...(m.malformed ? { malformed: true } : {}) };
}

test.each([
  ['POST', '/v1/projects/p/locations/l/endpoints/e:predict', { serve: { kind: 'endpointCall', verb: 'predict', byHost: false }, dialect: 'vertex', params: { project: 'p', location: 'l', endpoint: 'e' } }],
  ['POST', '/v1beta1/projects/p/locations/l/endpoints/e:rawPredict?$alt=json', { serve: { kind: 'endpointCall', verb: 'rawPredict', byHost: false }, dialect: 'vertex', params: { project: 'p', location: 'l', endpoint: 'e' } }],
  ['POST', '/v1/projects/p%2Dx/locations/l/endpoints/e:explain', { serve: { kind: 'endpointCall', verb: 'explain', byHost: false }, dialect: 'vertex', params: { project: 'p-x', location: 'l', endpoint: 'e' } }],
  ['POST', '/v1/model:predict', { serve: { kind: 'endpointCall', verb: 'predict', byHost: true }, dialect: 'gdc', params: {} }],
  ['POST', '/v1/model:rawPredict', { serve: { kind: 'endpointCall', verb: 'rawPredict', byHost: true }, dialect: 'gdc', params: {} }],
  ['POST', '/v1/chat/completions', { serve: { kind: 'endpointCall', verb: 'chatCompletions', byHost: true }, dialect: 'openai', params: {} }],
  ['POST', '/v1/completions', { serve: { kind: 'endpointCall', verb: 'completions', byHost: true }, dialect: 'openai', params: {} }],
  ['GET', '/v1/models', { serve: { kind: 'endpointCall', verb: 'models', byHost: true }, dialect: 'openai', params: {} }],
  ['POST', '/v1beta1/projects/p/locations/l/endpoints/e/chat/completions', { serve: { kind: 'endpointCall', verb: 'chatCompletions', byHost: false }, dialect: 'openai', params: { project: 'p', location: 'l', endpoint: 'e' } }],
  ['GET', '/tfserving/ns/m/v1/models/half_plus_two', { serve: { kind: 'modelCall' }, dialect: 'tfserving', params: { namespace: 'ns', name: 'm', rest: 'half_plus_two' } }],
  ['POST', '/tfserving/ns/m/v1/models/half_plus_two:predict', { serve: { kind: 'modelCall' }, dialect: 'tfserving', params: { namespace: 'ns', name: 'm', rest: 'half_plus_two:predict' } }],
  ['GET', '/v1/projects/p/locations/l/endpoints/e', { serve: { kind: 'management', name: 'endpointResource' }, dialect: 'vertex', params: { project: 'p', location: 'l', endpoint: 'e' } }],
  ['GET', '/healthz', { serve: { kind: 'operation', name: 'healthz' }, dialect: 'vertex', params: {} }],
  ['HEAD', '/READYZ/', { serve: { kind: 'operation', name: 'readyz' }, dialect: 'vertex', params: {} }],
  ['GET', '/metrics?x=1', { serve: { kind: 'operation', name: 'metrics' }, dialect: 'vertex', params: {} }],
  ['GET', '/apis/prediction.predictgate.dev/v1/namespaces/default/endpoints/echo', { serve: { kind: 'management', name: 'statusObject' }, dialect: 'vertex', params: { namespace: 'default', plural: 'endpoints', name: 'echo' } }],
  ['GET', '/apis/prediction.predictgate.dev/v1/deployedmodels', { serve: { kind: 'management', name: 'statusList' }, dialect: 'vertex', params: { plural: 'deployedmodels' } }],
  ['GET', '/apis/prediction.predictgate.dev/v1/endpoints/', { serve: { kind: 'management', name: 'statusList' }, dialect: 'vertex', params: { plural: 'endpoints' } }],
  ['HEAD', '/APIS/Prediction.predictgate.dev/V1/namespaces/default/endpoints/echo/', { serve: { kind: 'management', name: 'statusObject' }, dialect: 'vertex', params: { namespace: 'default', plural: 'endpoints', name: 'echo' } }],
])('%s %s', (method, url, expected) => {
  expect(what(local.match(method, url))).toEqual(expected);
});

test.each([
  // Another method on a route's path: 405 with what it takes.
  ['GET', '/v1/projects/p/locations/l/endpoints/e:predict', { allowed: ['POST'], dialect: 'vertex' }],
  ['PUT', '/v1/model:rawPredict', { allowed: ['POST'], dialect: 'gdc' }],
  ['GET', '/v1/chat/completions', { allowed: ['POST'], dialect: 'openai' }],
  ['POST', '/v1/models', { allowed: ['GET'], dialect: 'openai' }],
  ['DELETE', '/tfserving/ns/m/v1/models', { allowed: ['GET', 'POST'], dialect: 'tfserving' }],
  ['POST', '/healthz', { allowed: ['GET', 'HEAD'], dialect: 'vertex' }],
  // No route: 404.
  ['POST', '/v1/projects/p/locations/l/endpoints/e:frobnicate', { allowed: [], dialect: 'vertex' }],
  ['POST', '/v2/projects/p/locations/l/endpoints/e:predict', { allowed: [], dialect: 'vertex' }],
  ['POST', '/v1/projects/p/locations/l/endpoints/e:predict/', { allowed: [], dialect: 'vertex' }],
  ['POST', '/V1/projects/p/locations/l/endpoints/e:Predict', { allowed: [], dialect: 'vertex' }],
  ['POST', '/v1/model:frobnicate', { allowed: [], dialect: 'gdc' }],
  ['GET', '/tfserving/ns/m/v2/models', { allowed: [], dialect: 'tfserving' }],
  ['POST', '/v1/chat/completions/', { allowed: [], dialect: 'openai' }],
  // Malformed escapes are told apart (a 400, not a 404).
  ['POST', '/v1/projects/%E0%A4%A/locations/l/endpoints/e:predict', { allowed: [], dialect: 'vertex', malformed: true }],
  ['GET', '/apis/prediction.predictgate.dev/v1/namespaces/%E0%A4%A/endpoints/x', { allowed: [], dialect: 'vertex', malformed: true }],
  ['GET', '/', { allowed: [], dialect: 'vertex' }],
])('%s %s: no route', (method, url, expected) => {
  expect(what(local.match(method, url))).toEqual(expected);
});

test('the status API is a route of local mode only', () => {
  expect(what(cluster.match('GET', '/apis/prediction.predictgate.dev/v1/endpoints'))).toEqual({ allowed: [], dialect: 'vertex' });
});
