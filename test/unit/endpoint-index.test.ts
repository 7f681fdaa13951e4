// The controller's index of which Endpoints name which DeployedModels: kept per Endpoint, answers
// which Endpoints name a model and the first Endpoint name (AIP_ENDPOINT_ID) without a scan.
import { EndpointIndex } from '../../src/controller/endpointIndex.js';

test('an Endpoint set, replaced and deleted: the models it names and the Endpoints naming each model follow', () => {
  const ix = new EndpointIndex();
  expect(ix.set('ns/e1', ['ns/a', 'ns/b'])).toEqual([]);
  ix.set('other/e0', ['ns/a']);
  expect([...ix.endpointsNaming('ns/a')].sort()).toEqual(['ns/e1', 'other/e0']);
  expect([...ix.endpointsNaming('ns/b')]).toEqual(['ns/e1']);
  // Replaced: e1 now names b and c; what it named before comes back (a's Endpoint id may change).
  expect(ix.set('ns/e1', ['ns/b', 'ns/c'])).toEqual(['ns/a', 'ns/b']);
  expect([...ix.endpointsNaming('ns/a')]).toEqual(['other/e0']);
  expect([...ix.endpointsNaming('ns/c')]).toEqual(['ns/e1']);
  expect(ix.delete('ns/e1')).toEqual(['ns/b', 'ns/c']);
  expect([...ix.endpointsNaming('ns/b')]).toEqual([]);
  expect(ix.delete('ns/missing')).toEqual([]);
});

test('the first Endpoint name in sort order, whatever the namespace, as AIP_ENDPOINT_ID takes it', () => {
  const ix = new EndpointIndex();
  expect(ix.firstEndpointName('ns/m')).toBeUndefined();
  ix.set('ns/zeta', ['ns/m']);
  ix.set('other/beta', ['ns/m']);
  ix.set('ns/alpha', ['ns/n']);
  expect(ix.firstEndpointName('ns/m')).toBe(['zeta', 'beta'].sort()[0]);
  ix.set('ns/Alpha', ['ns/m']); // code-unit order, as Array.prototype.sort: upper case first
  expect(ix.firstEndpointName('ns/m')).toBe('Alpha');
  ix.delete('ns/Alpha');
  ix.delete('other/beta');
  expect(ix.firstEndpointName('ns/m')).toBe('zeta');
});
