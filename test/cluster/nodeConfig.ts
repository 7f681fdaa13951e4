// The node tier's addresses and the configuration files of its parts (containerd, CNI, kubelet,
// kube-proxy, CoreDNS, metrics-server and its registration as metrics.k8s.io), as pure functions of
// the node's folder, so they are read and tested in one place.
import { join } from 'node:path';
import { stringify } from 'yaml';
import { PAUSE_IMAGE } from './images.js';

/**
 * The node's network. The node's processes live in their own network namespace, joined to the
 * machine by one veth pair: the machine's end carries the apiserver's address, the node's end the
 * node's address (NodePorts, the kubelet, cluster DNS). Pods sit on a bridge inside the namespace;
 * the machine reaches them through one route via the node. Nothing is masqueraded or routed off the
 * machine, and iptables rules and forwarding stay inside the namespace.
 */
export const NODE_NET = {
  netns: 'predictgate-node',
  /** The veth ends: on the machine, and inside the node's namespace. */
  hostIf: 'pg-host',
  nodeIf: 'pg-node',
  hostIp: '10.213.0.1',
  nodeIp: '10.213.0.2',
  prefix: 30,
  /** The pods' bridge in the node's namespace, and the pods' addresses. */
  bridge: 'pg0',
  podCidr: '10.214.0.0/24',
  /** ClusterIPs (the apiserver's --service-cluster-ip-range). */
  serviceCidr: '10.0.0.0/16',
  nodeName: 'predictgate-node',
} as const;


/** Where each part keeps its state, under the node's folder. */
export function nodePaths(dir: string) {
  return {
    dir,
    containerdConfig: join(dir, 'containerd.toml'),
    containerdRoot: join(dir, 'containerd', 'root'),
    containerdState: join(dir, 'containerd', 'state'),
    containerdSocket: join(dir, 'containerd', 'containerd.sock'),
    runcRoot: join(dir, 'containerd', 'runc'),
    cniConfDir: join(dir, 'cni', 'net.d'),
    cniIpamDir: join(dir, 'cni', 'ipam'),
    kubeletRoot: join(dir, 'kubelet'),
    kubeletConfig: join(dir, 'kubelet.yaml'),
    podLogs: join(dir, 'pod-logs'),
    resolvConf: join(dir, 'resolv.conf'),
    kubeProxyConfig: join(dir, 'kube-proxy.yaml'),
    corefile: join(dir, 'Corefile'),
    kubeconfig: (component: string) => join(dir, `${component}.kubeconfig`),
    log: (component: string) => join(dir, `${component}.log`),
  };
}

export type NodePaths = ReturnType<typeof nodePaths>;

/** containerd 1.6 with its CRI plugin: runc, the machine's CNI plugins, state under the node's folder. */
export function containerdConfig(p: NodePaths, cniBinDir: string): string {
  return `version = 2
root = ${JSON.stringify(p.containerdRoot)}
state = ${JSON.stringify(p.containerdState)}
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = ${JSON.stringify(p.containerdSocket)}

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = ${JSON.stringify(PAUSE_IMAGE)}
  # Without CAP_SYS_RESOURCE (a VM, a container) runc cannot lower a sandbox's oom_score_adj below
  # its own and dies creating it ("can't get final child's PID from pipe: EOF").
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = ${JSON.stringify(p.runcRoot)}
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = ${JSON.stringify(cniBinDir)}
    conf_dir = ${JSON.stringify(p.cniConfDir)}
`;
}

/** The pods' network: a bridge with the node as gateway, addresses from host-local, hostPorts by portmap. */
export function cniConfig(p: NodePaths): string {
  return JSON.stringify({
    cniVersion: '1.0.0',
    name: 'predictgate',
    plugins: [
      {
        type: 'bridge',
        bridge: NODE_NET.bridge,
        isGateway: true,
        ipMasq: false,
        hairpinMode: true,
        ipam: { type: 'host-local', ranges: [[{ subnet: NODE_NET.podCidr }]], routes: [{ dst: '0.0.0.0/0' }], dataDir: p.cniIpamDir },
      },
      { type: 'portmap', capabilities: { portMappings: true } },
    ],
  }, null, 2);
}

/** The kubelet: cgroupfs on cgroup v1, its pods' cgroups under /predictgate, state under the node's folder. */
export function kubeletConfig(p: NodePaths): string {
  return stringify({
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    // This machine has cgroup v1 hierarchies only; 1.35 and later refuse them unless told.
    failCgroupV1: false,
    cgroupDriver: 'cgroupfs',
    // Every pod's cgroup lives under this one, so a stop removes them all.
    cgroupRoot: '/predictgate',
    failSwapOn: false,
    containerRuntimeEndpoint: `unix://${p.containerdSocket}`,
    address: NODE_NET.nodeIp,
    port: 10250,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort: 10248,
    clusterDNS: [NODE_NET.nodeIp],
    clusterDomain: 'cluster.local',
    resolvConf: p.resolvConf,
    podLogsDir: p.podLogs,
    // The apiserver reaches the kubelet (logs, exec, port-forward) without client certificates;
    // the kubelet listens only inside the node's namespace and on the machine's veth.
    authentication: { anonymous: { enabled: true }, webhook: { enabled: false } },
    authorization: { mode: 'AlwaysAllow' },
    // Imported images cannot be pulled again: never collect them.
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    evictionHard: { 'memory.available': '100Mi', 'nodefs.available': '1%', 'imagefs.available': '1%' },
    serializeImagePulls: false,
    maxPods: 60,
  });
}

/** kube-proxy in iptables mode inside the node's namespace; NodePorts on the node's address only. */
export function kubeProxyConfig(p: NodePaths): string {
  return stringify({
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
    kind: 'KubeProxyConfiguration',
    clientConnection: { kubeconfig: p.kubeconfig('kube-proxy') },
    mode: 'iptables',
    hostnameOverride: NODE_NET.nodeName,
    clusterCIDR: NODE_NET.podCidr,
    bindAddress: NODE_NET.nodeIp,
    healthzBindAddress: `${NODE_NET.nodeIp}:10256`,
    metricsBindAddress: '127.0.0.1:10249',
    nodePortAddresses: [`${NODE_NET.nodeIp}/32`],
    // The conntrack table's size and timeouts are the machine's: leave them as they are.
    conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s' },
    // Pod to Service to pod on one bridge: masquerade, so answers come back through the node.
    iptables: { masqueradeAll: true },
  });
}

/** Cluster DNS on the node's address: cluster.local from the apiserver, nothing forwarded off the machine. */
export function corefile(p: NodePaths, ports: { health: number; ready: number }): string {
  return `.:53 {
    bind ${NODE_NET.nodeIp}
    errors
    health ${NODE_NET.nodeIp}:${ports.health}
    ready ${NODE_NET.nodeIp}:${ports.ready}
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig ${p.kubeconfig('coredns')} coredns
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    loadbalance
}
`;
}

/** The node's components and their users on the apiserver: the names its default RBAC already binds (CoreDNS's: COREDNS_RBAC). */
export const NODE_USERS: readonly { component: string; name: string; groups: string[] }[] = [
  { component: 'kubelet', name: `system:node:${NODE_NET.nodeName}`, groups: ['system:nodes', 'system:authenticated'] },
  { component: 'kube-proxy', name: 'system:kube-proxy', groups: ['system:authenticated'] },
  { component: 'kube-controller-manager', name: 'system:kube-controller-manager', groups: ['system:authenticated'] },
  { component: 'kube-scheduler', name: 'system:kube-scheduler', groups: ['system:authenticated'] },
  { component: 'coredns', name: 'system:coredns', groups: ['system:authenticated'] },
  { component: 'metrics-server', name: 'system:metrics-server', groups: ['system:authenticated'] },
];

/** What CoreDNS may read (its usual ClusterRole), bound to its user. */
export const COREDNS_RBAC = [
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: 'system:coredns' },
    rules: [
      { apiGroups: [''], resources: ['endpoints', 'services', 'pods', 'namespaces'], verbs: ['list', 'watch'] },
      { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] },
    ],
  },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'system:coredns' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:coredns' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'system:coredns' }],
  },
];

/**
 * metrics-server: a process in the node's namespace, on the node's address, scraping the kubelet's
 * /metrics/resource every `resolutionSeconds` (the usual 60 s would make the tests wait minutes).
 */
export const METRICS_SERVER = { port: 4443, resolutionSeconds: 10, namespace: 'kube-system', service: 'metrics-server' } as const;

/** metrics-server's command line: its user's kubeconfig for the apiserver and for delegated authentication and authorization. */
export function metricsServerArgs(p: NodePaths): string[] {
  const kubeconfig = p.kubeconfig('metrics-server');
  return [
    `--kubeconfig=${kubeconfig}`,
    `--authentication-kubeconfig=${kubeconfig}`,
    `--authorization-kubeconfig=${kubeconfig}`,
    `--bind-address=${NODE_NET.nodeIp}`,
    `--secure-port=${METRICS_SERVER.port}`,
    // A self-signed serving certificate it makes itself; the APIService skips its check, as
    // metrics-server's own manifest does.
    `--cert-dir=${join(p.dir, 'metrics-server')}`,
    // The kubelet serves a self-signed certificate and lets anyone read (kubeletConfig).
    '--kubelet-insecure-tls',
    '--kubelet-preferred-address-types=InternalIP',
    '--kubelet-use-node-status-port',
    `--metric-resolution=${METRICS_SERVER.resolutionSeconds}s`,
    // It must be shorter than the resolution (default 10 s: a 10 s resolution is refused without it).
    `--kubelet-request-timeout=${METRICS_SERVER.resolutionSeconds / 2}s`,
  ];
}

/** What metrics-server may do (its usual RBAC), bound to its user, and what view, edit and admin gain from it. */
export const METRICS_SERVER_RBAC = [
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: 'system:aggregated-metrics-reader', labels: { 'rbac.authorization.k8s.io/aggregate-to-view': 'true', 'rbac.authorization.k8s.io/aggregate-to-edit': 'true', 'rbac.authorization.k8s.io/aggregate-to-admin': 'true' } },
    rules: [{ apiGroups: ['metrics.k8s.io'], resources: ['pods', 'nodes'], verbs: ['get', 'list', 'watch'] }],
  },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: 'system:metrics-server' },
    rules: [
      { apiGroups: [''], resources: ['nodes/metrics'], verbs: ['get'] },
      { apiGroups: [''], resources: ['pods', 'nodes'], verbs: ['get', 'list', 'watch'] },
    ],
  },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'system:metrics-server' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:metrics-server' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'system:metrics-server' }],
  },
  {
    // TokenReviews and SubjectAccessReviews for the calls it serves.
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'metrics-server:system:auth-delegator' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:auth-delegator' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'system:metrics-server' }],
  },
  {
    // The front proxy's CA and header names (kube-system/extension-apiserver-authentication).
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'metrics-server-auth-reader', namespace: 'kube-system' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'extension-apiserver-authentication-reader' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'system:metrics-server' }],
  },
];

/**
 * metrics.k8s.io through the aggregation layer: a Service without a selector, an EndpointSlice that
 * points it at the process on the node's address (the apiserver routes to endpoints, not to the
 * ClusterIP: --enable-aggregator-routing), and the APIService.
 */
export function metricsApi(): object[] {
  const { namespace, service, port } = METRICS_SERVER;
  return [
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: service, namespace },
      spec: { ports: [{ name: 'https', port: 443, targetPort: port, protocol: 'TCP' }] },
    },
    {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: `${service}-node`, namespace, labels: { 'kubernetes.io/service-name': service, 'endpointslice.kubernetes.io/managed-by': 'predictgate-test-node' } },
      addressType: 'IPv4',
      endpoints: [{ addresses: [NODE_NET.nodeIp], conditions: { ready: true }, nodeName: NODE_NET.nodeName }],
      ports: [{ name: 'https', port, protocol: 'TCP' }],
    },
    {
      apiVersion: 'apiregistration.k8s.io/v1',
      kind: 'APIService',
      metadata: { name: 'v1beta1.metrics.k8s.io' },
      spec: { group: 'metrics.k8s.io', version: 'v1beta1', service: { name: service, namespace, port: 443 }, insecureSkipTLSVerify: true, groupPriorityMinimum: 100, versionPriority: 100 },
    },
  ];
}

/**
 * The HPA controller's settings for tests (kube-controller-manager's flags): it acts every 5 s
 * (default 15 s) and scales down after 20 s of lower recommendations (default 5 minutes), so a
 * scale-down is seen within a test. An HPA's own spec.behavior still wins over the second.
 */
export const HPA_CONTROLLER_FLAGS = ['--horizontal-pod-autoscaler-sync-period=5s', '--horizontal-pod-autoscaler-downscale-stabilization=20s'] as const;
