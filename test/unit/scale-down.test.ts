// Which pods a request autoscaler's scale-down takes (workload/kubeObjects.ts planScaleDown): pods
// not made yet and unready ones first, then idle ready ones, marked with the lowest
// pod-deletion-cost; a pod with calls in flight (by its address, summed over the gateways) is never
// taken, and the count stays higher instead; stale marks come off. And the balancer's busy replicas,
// which the gateways report for it.
import { ANNOTATION_DELETION_COST, TAKEN_DELETION_COST, hostOfAddress, planScaleDown, type PodView } from '../../src/workload/kubeObjects.js';
import { Balancer, BALANCER_DEFAULTS } from '../../src/gateway/upstream/balancer.js';

const pod = (name: string, ip: string | undefined, more: Partial<PodView> = {}): PodView => ({ name, ip, ready: true, terminating: false, cost: undefined, ...more });
const calls = (entries: [string, number][]): Map<string, number> => new Map(entries);

test('the annotation is the one the ReplicaSet controller ranks by', () => {
  expect([ANNOTATION_DELETION_COST, TAKEN_DELETION_COST]).toEqual(['controller.kubernetes.io/pod-deletion-cost', '-1000']);
});

test('4 → 2 with two pods busy: the two idle ones are taken and marked', () => {
  const pods = [pod('a', '10.0.0.1'), pod('b', '10.0.0.2'), pod('c', '10.0.0.3'), pod('d', '10.0.0.4')];
  const plan = planScaleDown(pods, 4, 2, calls([['http://10.0.0.1:8080', 1], ['http://10.0.0.3:8080', 3]]));
  expect(plan).toEqual({ replicas: 2, costs: new Map([['b', TAKEN_DELETION_COST], ['d', TAKEN_DELETION_COST]]) });
});

test('4 → 1 with three pods busy (a stream on each): only the idle one goes, and the count stays at 3', () => {
  const pods = [pod('a', '10.0.0.1'), pod('b', '10.0.0.2'), pod('c', '10.0.0.3'), pod('d', '10.0.0.4')];
  const busy = calls([['http://10.0.0.1:8080', 1], ['http://10.0.0.2:8080', 1], ['http://10.0.0.4:9000', 1]]);
  expect(planScaleDown(pods, 4, 1, busy)).toEqual({ replicas: 3, costs: new Map([['c', TAKEN_DELETION_COST]]) });
});

test('every pod busy: nothing is taken, the count stays', () => {
  const pods = [pod('a', '10.0.0.1'), pod('b', '10.0.0.2')];
  expect(planScaleDown(pods, 2, 1, calls([['http://10.0.0.1:8080', 1], ['http://10.0.0.2:8080', 2]]))).toEqual({ replicas: 2, costs: new Map() });
});

test('replicas asked for whose pods are not made yet go first, then unready pods, then idle ready ones', () => {
  const pods = [pod('ready-idle', '10.0.0.1'), pod('unready', '10.0.0.2', { ready: false }), pod('pending', undefined, { ready: false }), pod('busy', '10.0.0.4')];
  const busy = calls([['http://10.0.0.4:8080', 1]]);
  // 5 asked for, 4 pods: one is missing. 5 → 3 takes the missing one and one unready pod.
  expect(planScaleDown(pods, 5, 3, busy)).toEqual({ replicas: 3, costs: new Map([['unready', TAKEN_DELETION_COST]]) });
  // 5 → 1: the missing one, both unready pods and the idle ready one; the busy pod keeps the count at 1.
  expect(planScaleDown(pods, 5, 1, busy).replicas).toBe(1);
  expect(planScaleDown(pods, 5, 0, busy)).toEqual({ replicas: 1, costs: new Map([['ready-idle', TAKEN_DELETION_COST], ['unready', TAKEN_DELETION_COST], ['pending', TAKEN_DELETION_COST]]) });
});

test('terminating pods are not counted or marked; a stale mark on a pod that stays comes off; a mark already there is not written again', () => {
  const pods = [pod('leaving', '10.0.0.9', { terminating: true, cost: TAKEN_DELETION_COST }), pod('a', '10.0.0.1', { cost: TAKEN_DELETION_COST }), pod('b', '10.0.0.2', { cost: TAKEN_DELETION_COST }), pod('c', '10.0.0.3', { cost: '5' })];
  const plan = planScaleDown(pods, 3, 2, calls([['http://10.0.0.1:8080', 1]]));
  // b is idle: taken, already marked. a is busy: its stale mark comes off. c: a cost someone else set comes off too (it would rank c last).
  expect(plan).toEqual({ replicas: 2, costs: new Map([['a', null], ['c', null]]) });
});

test('IPv6 addresses and unreadable addresses', () => {
  expect(hostOfAddress('http://[fd00::5]:8080')).toBe('fd00::5');
  expect(hostOfAddress('http://10.0.0.5:8080')).toBe('10.0.0.5');
  expect(hostOfAddress('not a url')).toBeUndefined();
  const plan = planScaleDown([pod('v6', 'fd00::5'), pod('v4', '10.0.0.5')], 2, 1, calls([['http://[fd00::5]:8080', 1], ['garbage', 4]]));
  expect(plan).toEqual({ replicas: 1, costs: new Map([['v4', TAKEN_DELETION_COST]]) });
});

test('the balancer\'s busy replicas: each address with calls on it now, and how many', () => {
  const b = new Balancer({ ...BALANCER_DEFAULTS, random: () => 0, now: () => 0 });
  b.begin('http://10.0.0.1:8080');
  b.begin('http://10.0.0.1:8080');
  b.begin('http://10.0.0.2:8080');
  b.end('http://10.0.0.2:8080', ['http://10.0.0.2:8080'], 'success');
  expect(b.busy()).toEqual(new Map([['http://10.0.0.1:8080', 2]]));
});
