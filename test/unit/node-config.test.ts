// The node tier's configuration files: the settings this kind of machine needs (cgroup v1, no
// CAP_SYS_RESOURCE, no swap limit, imported images) and every part's state under the node's folder.
import { parse } from 'yaml';
import { HPA_CONTROLLER_FLAGS, METRICS_SERVER, METRICS_SERVER_RBAC, NODE_NET, NODE_USERS, containerdConfig, cniConfig, corefile, kubeProxyConfig, kubeletConfig, metricsApi, metricsServerArgs, nodePaths } from '../cluster/nodeConfig.js';
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

test('metrics-server: on the node address with its own user, scraping the kubelet by its InternalIP every 10 s', () => {
  expect(metricsServerArgs(p)).toEqual(expect.arrayContaining([
    '--kubeconfig=/n/metrics-server.kubeconfig',
    '--authentication-kubeconfig=/n/metrics-server.kubeconfig',
    '--authorization-kubeconfig=/n/metrics-server.kubeconfig',
    `--bind-address=${NODE_NET.nodeIp}`,
    `--secure-port=${METRICS_SERVER.port}`,
    '--cert-dir=/n/metrics-server',
    '--kubelet-insecure-tls',
    '--kubelet-preferred-address-types=InternalIP',
    '--metric-resolution=10s',
  ]));
  expect(NODE_USERS.find((u) => u.component === 'metrics-server')?.name).toBe('system:metrics-server');
  // Its user may read nodes' metrics, delegate authentication and read the front proxy's CA.
  const bound = METRICS_SERVER_RBAC.filter((o) => o.kind.endsWith('Binding')).map((o) => (o as { roleRef: { name: string } }).roleRef.name);
  expect(bound).toEqual(['system:metrics-server', 'system:auth-delegator', 'extension-apiserver-authentication-reader']);
});

test('metrics.k8s.io: an APIService on a selector-less Service whose EndpointSlice points at the node address', () => {
  const [service, slice, api] = metricsApi() as Record<string, any>[];
  expect(service.spec.selector).toBeUndefined();
  expect(service.spec.ports).toEqual([{ name: 'https', port: 443, targetPort: METRICS_SERVER.port, protocol: 'TCP' }]);
  expect(slice.metadata.labels['kubernetes.io/service-name']).toBe(service.metadata.name);
  expect(slice.endpoints[0].addresses).toEqual([NODE_NET.nodeIp]);
  expect(slice.ports).toEqual([{ name: 'https', port: METRICS_SERVER.port, protocol: 'TCP' }]);
  expect(api).toMatchObject({ kind: 'APIService', metadata: { name: 'v1beta1.metrics.k8s.io' }, spec: { group: 'metrics.k8s.io', version: 'v1beta1', service: { name: service.metadata.name, namespace: service.metadata.namespace, port: 443 } } });
  expect(HPA_CONTROLLER_FLAGS).toEqual(['--horizontal-pod-autoscaler-sync-period=5s', '--horizontal-pod-autoscaler-downscale-stabilization=20s']);
});

test('the machine record lists every watched folder and the kubelet\'s sysctls', () => {
  const rec = recordMachine('/n');
  expect(Object.keys(rec.dirs)).toEqual([...WATCHED_DIRS]);
  expect(Object.keys(rec.sysctls)).toEqual(expect.arrayContaining(['vm/overcommit_memory', 'kernel/panic']));
});
