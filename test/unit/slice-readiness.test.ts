// The test harness's view of when a pod's address takes calls (test/helpers/sliceReadiness.ts), from
// EndpointSlice watch events: an address listed in two slices is ready when either lists it ready,
// so a stale entry of a gone pod does not hide the readiness of a new pod that took its address.
import type { V1EndpointSlice } from '@kubernetes/client-node';
import { SliceReadiness } from '../helpers/sliceReadiness.js';

const slice = (name: string, endpoints: [string, { ready: boolean; terminating?: boolean }][]): V1EndpointSlice => ({
  addressType: 'IPv4',
  metadata: { name },
  endpoints: endpoints.map(([address, conditions]) => ({ addresses: [address], conditions })),
});

test('a pod that takes the address of a gone pod still listed in another slice: ready when its own slice says so', () => {
  let t = 0;
  const r = new SliceReadiness(() => t);
  // Slice a holds one pod; slice b, made later, the pod at 10.0.0.5, ready, then terminating.
  r.apply('ADDED', slice('a', [['10.0.0.7', { ready: true }]]));
  r.apply('ADDED', slice('b', [['10.0.0.5', { ready: true }]]));
  t = 1;
  r.apply('MODIFIED', slice('b', [['10.0.0.5', { ready: false, terminating: true }]]));
  // A new pod with the same address lands in slice a: not ready, then ready, while b still lists the old one.
  t = 2;
  r.apply('MODIFIED', slice('a', [['10.0.0.7', { ready: true }], ['10.0.0.5', { ready: false }]]));
  t = 3;
  r.apply('MODIFIED', slice('a', [['10.0.0.7', { ready: true }], ['10.0.0.5', { ready: true }]]));
  t = 4;
  r.apply('MODIFIED', slice('b', []));
  expect(r.changes.filter((c) => c.address === '10.0.0.5')).toEqual([
    { at: 0, address: '10.0.0.5', ready: true },
    { at: 1, address: '10.0.0.5', ready: false },
    { at: 3, address: '10.0.0.5', ready: true },
  ]);
  expect([r.turned('10.0.0.5', true, 2), r.turned('10.0.0.5', false, 0)]).toEqual([3, 1]);
});

test('an address gone from every slice is not ready; a terminating one is not ready', () => {
  const r = new SliceReadiness(() => 7);
  r.apply('ADDED', slice('a', [['10.0.0.1', { ready: true }], ['10.0.0.2', { ready: true, terminating: true }]]));
  r.apply('MODIFIED', slice('a', []));
  expect(r.changes.filter((c) => c.address === '10.0.0.1')).toEqual([{ at: 7, address: '10.0.0.1', ready: true }, { at: 7, address: '10.0.0.1', ready: false }]);
  expect(r.turned('10.0.0.2', true, 0)).toBeUndefined();
});
