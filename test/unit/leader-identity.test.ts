// The controller's Lease candidate identity: the pod's name and a part of its own per process.
import { candidateIdentity } from '../../src/controller/leader.js';

test('two processes of one pod (a restarted container) are two candidates', () => {
  const a = candidateIdentity('predictgate-controller-7f69bb87c9-glp28');
  const b = candidateIdentity('predictgate-controller-7f69bb87c9-glp28');
  expect(a).toMatch(/^predictgate-controller-7f69bb87c9-glp28_[0-9a-f-]{36}$/);
  expect(b).not.toBe(a);
});
