// The node tier's configuration files: the settings this kind of machine needs (cgroup v1, no
// CAP_SYS_RESOURCE, no swap limit, imported images) and every part's state under the node's folder.
import { parse } from 'yaml';
import { NODE_NET, containerdConfig, cniConfig, corefile, kubeProxyConfig, kubeletConfig, nodePaths } from '../cluster/nodeConfig.js';
import { recordMachine, WATCHED_DIRS } from '../cluster/machine.js';

const p = nodePaths('/n');

test('containerd: restricted oom_score_adj, runc on cgroupfs, the pause image, CNI and state under the node folder', () => {
  const toml = containerdConfig(p, '/usr/lib/cni');
  for (const line of ['restrict_oom_score_adj = true', 'SystemdCgroup = false', 'sandbox_image = "registry.k8s.io/pause:3.10"', 'root = "/n/containerd/root"', 'state = "/n/containerd/state"', 'address = "/n/containerd/containerd.sock"', 'conf_dir = "/n/cni/net.d"', 'Root = "/n/containerd/runc"']) {
    expect(toml).toContain(line);
  }
});

test('kubelet: cgroup v1 allowed, cgroupfs under /predictgate, no swap failure, images never collected, state under the node folder', () => {
  expect(parse(kubeletConfig(p))).toMatchObject({
    failCgroupV1: false,
    cgroupDriver: 'cgroupfs',
    cgroupRoot: '/predictgate',
    failSwapOn: false,
    imageGCHighThresholdPercent: 100,
    containerRuntimeEndpoint: 'unix:///n/containerd/containerd.sock',
    clusterDNS: [NODE_NET.nodeIp],
    podLogsDir: '/n/pod-logs',
    readOnlyPort: 0,
  });
});

test('CNI: a bridge gateway with no masquerading, addresses from the pod range kept under the node folder', () => {
  const conf = JSON.parse(cniConfig(p));
  expect(conf.plugins[0]).toMatchObject({ type: 'bridge', bridge: NODE_NET.bridge, isGateway: true, ipMasq: false, ipam: { ranges: [[{ subnet: NODE_NET.podCidr }]], dataDir: '/n/cni/ipam' } });
});

test('kube-proxy leaves the machine\'s conntrack settings alone and serves NodePorts on the node address only', () => {
  expect(parse(kubeProxyConfig(p))).toMatchObject({ mode: 'iptables', nodePortAddresses: [`${NODE_NET.nodeIp}/32`], conntrack: { maxPerCore: 0, tcpEstablishedTimeout: '0s' } });
});

test('CoreDNS answers cluster.local on the node address and forwards nothing off the machine', () => {
  const text = corefile(p, { health: 1, ready: 2 });
  expect(text).toContain(`bind ${NODE_NET.nodeIp}`);
  expect(text).toContain('kubernetes cluster.local');
  expect(text).not.toContain('forward');
});

test('the machine record lists every watched folder and the kubelet\'s sysctls', () => {
  const rec = recordMachine('/n');
  expect(Object.keys(rec.dirs)).toEqual([...WATCHED_DIRS]);
  expect(Object.keys(rec.sysctls)).toEqual(expect.arrayContaining(['vm/overcommit_memory', 'kernel/panic']));
});
