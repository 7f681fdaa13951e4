// The Helm chart on the real apiserver with the real helm: lint, every values file rendered and
// accepted by a server-side dry run, install / upgrade / uninstall, and least privilege proven with the
// chart's own ServiceAccounts: the controller and the gateway run as processes with TokenRequest tokens,
// reconcile a sample to Ready and route a call (a permission the code needs but the chart lacks fails
// here), and `kubectl auth can-i` shows the gateway writes nothing and the controller reads no Secrets.
// Who may call: the gateway's own token may only create TokenReviews and SubjectAccessReviews on top,
// the callers' roles grant calls and nothing else, and the chart's gateway with PREDICT_AUTH=kubernetes
// lets a bound caller in and refuses the others; the README's team RoleBinding is run here.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { ROOT } from '../helpers/local.js';
import { fencedBlocks } from '../helpers/markdown.js';
import { spawnPredictgate, type PredictgateProcess } from '../helpers/procs.js';
import { thirdPartyCrds } from '../cluster/thirdParty.js';
import { chartNodeOptions, chartRuntime, shippedRuntime } from '../bench/runtime.js';
import { SETTINGS } from '../../src/config.js';
import {
  applyCrds, clients, conditionOf, deleteNamespace, getEndpoint, inNamespace, kubectl, kubectlOk, newNamespace, runTool, setAvailable, startClusterGateway, startController, testKubeconfig, waitFor,
  type ClusterProcess, type Clients, type Run,
} from '../helpers/cluster.js';

const CHART = join(ROOT, 'charts/predictgate');
/** The first line of the README's team RoleBinding example, which the callers' test runs. */
const README_TEAM_BLOCK = 'kubectl create serviceaccount scorer -n team-a';
const CI_VALUES = readdirSync(join(CHART, 'ci')).filter((f) => f.endsWith('.yaml')).sort();
let c: Clients;
let helmHome: string;
const namespaces: string[] = [];
const processes: (ClusterProcess | PredictgateProcess)[] = [];

/** The real helm on the test kubeconfig, with its own config, cache and data folders. */
function helm(args: string[]): Promise<Run> {
  const bin = process.env.PREDICTGATE_TEST_HELM;
  if (!bin) throw new Error('PREDICTGATE_TEST_HELM is not set: run under jest\'s global setup (npm test)');
  return runTool(bin, args, { env: { KUBECONFIG: testKubeconfig(), HELM_CACHE_HOME: join(helmHome, 'cache'), HELM_CONFIG_HOME: join(helmHome, 'config'), HELM_DATA_HOME: join(helmHome, 'data') } });
}

async function helmOk(args: string[]): Promise<string> {
  const r = await helm(args);
  if (r.code !== 0) throw new Error(`helm ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
  return r.stdout;
}

async function namespace(prefix: string): Promise<string> {
  const ns = await newNamespace(c, prefix);
  namespaces.push(ns);
  return ns;
}

/** A kubeconfig for a ServiceAccount, with a token from the TokenRequest API (`kubectl create token`). */
async function serviceAccountKubeconfig(ns: string, sa: string, dir: string): Promise<string> {
  const token = (await kubectlOk(['create', 'token', sa, '-n', ns, '--duration=1h'])).trim();
  const admin = c.kc.getCurrentCluster()!;
  const path = join(dir, `${sa}.kubeconfig`);
  writeFileSync(path, stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'test', cluster: { server: admin.server, 'certificate-authority': admin.caFile } }],
    users: [{ name: sa, user: { token } }],
    contexts: [{ name: sa, context: { cluster: 'test', user: sa } }],
    'current-context': sa,
  }), { mode: 0o600 });
  return path;
}

async function canI(kubeconfig: string, args: string[]): Promise<boolean> {
  const r = await kubectl(['auth', 'can-i', ...args], { kubeconfig });
  return r.stdout.trim() === 'yes';
}

beforeAll(async () => {
  c = clients();
  helmHome = mkdtempSync(join(tmpdir(), 'predictgate-helm-'));
  await applyCrds();
  for (const f of thirdPartyCrds()) await kubectlOk(['apply', '--server-side', '-f', f]);
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=30s', 'crd/httproutes.gateway.networking.k8s.io', 'crd/grpcroutes.gateway.networking.k8s.io', 'crd/servicemonitors.monitoring.coreos.com']);
  for (const ns of ['team-a', 'team-b']) if ((await kubectl(['get', 'namespace', ns])).code !== 0) await kubectlOk(['create', 'namespace', ns]);
});

afterAll(async () => {
  for (const p of processes) {
    if ('stop' in p) await p.stop();
    else {
      p.child.kill('SIGTERM');
      await p.exited;
    }
  }
  for (const ns of namespaces) await deleteNamespace(c, ns);
  rmSync(helmHome, { recursive: true, force: true });
});

test('the chart\'s CRDs are the project\'s CRDs', () => {
  const top = readdirSync(join(ROOT, 'crds')).filter((f) => f.endsWith('.yaml')).sort();
  expect(readdirSync(join(CHART, 'crds')).sort()).toEqual(top);
  for (const f of top) expect(readFileSync(join(CHART, 'crds', f), 'utf8')).toBe(readFileSync(join(ROOT, 'crds', f), 'utf8'));
});

test('helm lint --strict passes for the default values and every ci/ values file', async () => {
  expect(CI_VALUES.length).toBeGreaterThanOrEqual(5);
  for (const values of [undefined, ...CI_VALUES]) {
    const r = await helm(['lint', '--strict', CHART, ...(values ? ['-f', join(CHART, 'ci', values)] : [])]);
    expect({ values, code: r.code, out: r.code ? r.stdout + r.stderr : '' }).toEqual({ values, code: 0, out: '' });
  }
});

test('every values file renders manifests the apiserver accepts (server-side dry run)', async () => {
  const ns = await namespace('chart-dry');
  for (const values of [undefined, ...CI_VALUES]) {
    const manifests = await helmOk(['template', 'pg', CHART, '-n', ns, ...(values ? ['-f', join(CHART, 'ci', values)] : [])]);
    const r = await kubectl(['apply', '--dry-run=server', '-f', '-'], { input: manifests });
    expect({ values, code: r.code, err: r.stderr }).toEqual({ values, code: 0, err: '' });
  }
});

test('a typo in the values fails before anything is installed', async () => {
  const r = await helm(['template', 'pg', CHART, '--set', 'gateway.replicaz=3']);
  expect(r.code).not.toBe(0);
  expect(r.stderr).toContain("additional properties 'replicaz' not allowed");
});

test("both containers get the image's runtime settings and a heap sized from their memory limit by default, and values override them", async () => {
  type Deployment = { kind: string; metadata: { name: string }; spec: { template: { spec: { containers: { env: { name: string; value: string }[] }[] } } } };
  const runtime = async (set: string[]): Promise<Record<string, (string | undefined)[]>> => {
    const docs = parseAllDocuments(await helmOk(['template', 'pg', CHART, ...set])).map((d) => d.toJS() as Deployment);
    return Object.fromEntries(docs.filter((d) => d?.kind === 'Deployment').map((d) => {
      const env = d.spec.template.spec.containers[0].env;
      return [d.metadata.name, ['NODE_OPTIONS', 'GLIBC_TUNABLES'].map((n) => env.find((e) => e.name === n)?.value)];
    }));
  };
  const image = shippedRuntime(ROOT);
  // By default: the image's settings, and the old generation at heapPercent of the memory limit.
  const chart = (component: 'gateway' | 'controller'): (string | undefined)[] => {
    const { env } = chartRuntime(ROOT, component);
    return [env.NODE_OPTIONS, env.GLIBC_TUNABLES];
  };
  expect(await runtime([])).toEqual({ 'pg-predictgate-controller': chart('controller'), 'pg-predictgate-gateway': chart('gateway') });
  expect(chart('gateway')).toEqual([`${image.NODE_OPTIONS} --max-old-space-size-percentage=50`, image.GLIBC_TUNABLES]);
  expect(await runtime(['--set', 'gateway.nodeOptions=--max-old-space-size=300', '--set', 'controller.nodeOptions=', '--set', 'gateway.glibcTunables='])).toEqual({
    'pg-predictgate-controller': ['--max-old-space-size-percentage=50', image.GLIBC_TUNABLES],
    'pg-predictgate-gateway': ['--max-old-space-size=300', ''],
  });
  expect(await runtime(['--set', 'controller.heapPercent=0', '--set', 'gateway.heapPercent=35', '--set', 'gateway.nodeOptions=--max_old_space_size=300'])).toEqual({
    'pg-predictgate-controller': [image.NODE_OPTIONS, image.GLIBC_TUNABLES],
    'pg-predictgate-gateway': ['--max_old_space_size=300', image.GLIBC_TUNABLES],
  });
  expect(await runtime(['--set', 'gateway.heapPercent=35', '--set', 'controller.nodeOptions=--max-old-space-size-percentage=70'])).toEqual({
    'pg-predictgate-controller': ['--max-old-space-size-percentage=70', image.GLIBC_TUNABLES],
    'pg-predictgate-gateway': [chartNodeOptions({ nodeOptions: image.NODE_OPTIONS, heapPercent: 35 }), image.GLIBC_TUNABLES],
  });
  const refused = await helm(['template', 'pg', CHART, '--set', 'controller.heapPercent=101']);
  expect(refused.code).not.toBe(0);
  expect(refused.stderr).toContain('heapPercent');
});

test('the gateway\'s probes use the probe listener, or the main port when gateway.probePort is 0; the limits reach its environment', async () => {
  type Container = { env: { name: string; value: string }[]; ports: { name: string }[]; livenessProbe: { httpGet: { port: string } }; readinessProbe: { httpGet: { port: string } } };
  type Doc = { kind: string; metadata: { name: string }; spec: { template: { spec: { containers: Container[] } } } };
  const gateway = async (set: string[]): Promise<Container> => {
    const docs = parseAllDocuments(await helmOk(['template', 'pg', CHART, ...set])).map((d) => d.toJS() as Doc);
    return docs.find((d) => d?.kind === 'Deployment' && d.metadata.name === 'pg-predictgate-gateway')!.spec.template.spec.containers[0];
  };
  const probes = (ct: Container) => [ct.ports.map((p) => p.name), ct.livenessProbe.httpGet.port, ct.readinessProbe.httpGet.port];
  expect(probes(await gateway([]))).toEqual([['http', 'probes', 'grpc'], 'probes', 'probes']);
  const off = await gateway(['--set', 'gateway.probePort=0', '--set', 'gateway.grpcPort=0']);
  expect(probes(off)).toEqual([['http'], 'http', 'http']);
  expect(off.env.find((e) => e.name === 'GRPC_PORT')?.value).toBe('0');
  const tuned = await gateway(['--set', 'gateway.limits.maxConnections=500', '--set', 'gateway.limits.maxConnectionsPerClient=0', '--set', 'gateway.limits.headersTimeoutSeconds=3']);
  const env = Object.fromEntries(tuned.env.map((e) => [e.name, e.value]));
  expect([env.MAX_CONNECTIONS, env.MAX_CONNECTIONS_PER_CLIENT, env.HEADERS_TIMEOUT_SECONDS, env.BODY_TIMEOUT_SECONDS, env.BODY_MIN_BYTES_PER_SECOND]).toEqual(['500', '0', '3', '10', '1024']);
  const clash = await helm(['template', 'pg', CHART, '--set', 'gateway.probePort=8080']);
  expect([clash.code !== 0, clash.stderr.includes('gateway.probePort must differ from gateway.port')]).toEqual([true, true]);
  const grpcClash = await helm(['template', 'pg', CHART, '--set', 'gateway.grpcPort=8082']);
  expect([grpcClash.code !== 0, grpcClash.stderr.includes('gateway.grpcPort must differ from gateway.port and gateway.probePort')]).toEqual([true, true]);
});

test('every gateway setting is a chart value, at the product\'s default but for the listen address, the two extra ports and its own Service', async () => {
  const env = gatewayEnv(await rendered());
  const gateway = SETTINGS.filter((x) => x.commands.includes('gateway'));
  // UPSTREAM_RESOLVE replaces model Service addresses for a gateway run outside the cluster.
  expect(gateway.filter((x) => env[x.env] === undefined).map((x) => x.env)).toEqual(['UPSTREAM_RESOLVE']);
  const differ = gateway.filter((x) => env[x.env] !== undefined && env[x.env] !== String(x.default)).map((x) => [x.env, env[x.env]]);
  expect(differ).toEqual([['HOST', '0.0.0.0'], ['PROBE_PORT', '8082'], ['GRPC_PORT', '8083'], ['GATEWAY_SERVICE', 'rel/pg-predictgate-gateway']]);
  const tuned = gatewayEnv(await rendered(['--set', 'gateway.streamTimeoutSeconds=7200', '--set', 'gateway.loadScrapeIntervalMs=0', '--set', 'gateway.bufferedBodyBytes=67108864']));
  expect([tuned.STREAM_TIMEOUT_SECONDS, tuned.LOAD_SCRAPE_INTERVAL_MS, tuned.BUFFERED_BODY_BYTES]).toEqual(['7200', '0', '67108864']);
});

test('the gRPC surface: GRPC_PORT, a grpc container port, and a Service port for HTTP/2 that the NetworkPolicy opens; none with gateway.grpcPort 0', async () => {
  const svcPorts = (docs: Manifest[]) => (named(docs, 'Service', 'pg-predictgate-gateway')!.spec.ports as Record<string, unknown>[]);
  const policyPorts = (docs: Manifest[]) => (named(docs, 'NetworkPolicy', 'pg-predictgate-gateway')!.spec.ingress[0].ports as { port: string }[]).map((p) => p.port);
  const on = await rendered(['--set', 'networkPolicy.enabled=true']);
  expect(gatewayEnv(on).GRPC_PORT).toBe('8083');
  expect(svcPorts(on)).toEqual([
    { name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' },
    { name: 'grpc', port: 8081, targetPort: 'grpc', protocol: 'TCP', appProtocol: 'kubernetes.io/h2c' },
  ]);
  expect(policyPorts(on)).toEqual(['http', 'grpc']);
  const off = await rendered(['--set', 'networkPolicy.enabled=true', '--set', 'gateway.grpcPort=0']);
  expect(svcPorts(off).map((p) => p.name)).toEqual(['http']);
  expect(policyPorts(off)).toEqual(['http']);
});

test('the optional GRPCRoute sends PredictionService (v1, v1beta1) to the Service\'s grpc port; it needs the gRPC surface on', async () => {
  const route = named(await rendered(['-f', join(CHART, 'ci', 'grpcroute-values.yaml')]), 'GRPCRoute', 'pg-predictgate-gateway')!;
  expect(route.spec).toEqual({
    parentRefs: [{ name: 'shared', namespace: 'gateway-system' }],
    hostnames: ['predict-grpc.example.com'],
    rules: [{
      matches: [{ method: { service: 'google.cloud.aiplatform.v1.PredictionService' } }, { method: { service: 'google.cloud.aiplatform.v1beta1.PredictionService' } }],
      backendRefs: [{ name: 'pg-predictgate-gateway', port: 8081 }],
    }],
  });
  expect(named(await rendered(), 'GRPCRoute', 'pg-predictgate-gateway')).toBeUndefined();
  const off = await helm(['template', 'pg', CHART, '-f', join(CHART, 'ci', 'grpcroute-values.yaml'), '--set', 'gateway.grpcPort=0']);
  expect([off.code !== 0, off.stderr.includes('grpcRoute.enabled needs gateway.grpcPort')]).toEqual([true, true]);
  const noParent = await helm(['template', 'pg', CHART, '--set', 'grpcRoute.enabled=true']);
  expect([noParent.code !== 0, noParent.stderr.includes("at '/grpcRoute/parentRefs': minItems")]).toEqual([true, true]);
});

type Manifest = { kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string> }; rules?: Record<string, string[]>[]; roleRef?: { name: string }; subjects?: Record<string, string>[]; spec?: any };

/** The chart rendered with `set` (helm template pg, release namespace rel). */
async function rendered(set: string[] = []): Promise<Manifest[]> {
  return parseAllDocuments(await helmOk(['template', 'pg', CHART, '-n', 'rel', ...set])).map((d) => d.toJS() as Manifest).filter((d) => d);
}

const named = (docs: Manifest[], kind: string, name: string): Manifest | undefined => docs.find((d) => d.kind === kind && d.metadata.name === name);

const gatewayEnv = (docs: Manifest[]): Record<string, string> =>
  Object.fromEntries((named(docs, 'Deployment', 'pg-predictgate-gateway')!.spec.template.spec.containers[0].env as { name: string; value?: string }[]).map((e) => [e.name, e.value ?? '']));

test('the gateway checks its callers by default: PREDICT_AUTH and the AUTH_* settings come from gateway.auth', async () => {
  expect(gatewayEnv(await rendered())).toMatchObject({
    PREDICT_AUTH: 'kubernetes', AUTH_AUDIENCES: '', AUTH_ALLOW_TTL_SECONDS: '300', AUTH_DENY_TTL_SECONDS: '30', AUTH_CACHE_SIZE: '10000', AUTH_REVIEWS_PER_SECOND: '100',
  });
  expect(gatewayEnv(await rendered(['-f', join(CHART, 'ci/auth-values.yaml')]))).toMatchObject({
    PREDICT_AUTH: 'kubernetes', AUTH_AUDIENCES: 'predictgate,https://kubernetes.default.svc.cluster.local', AUTH_ALLOW_TTL_SECONDS: '60', AUTH_DENY_TTL_SECONDS: '5', AUTH_CACHE_SIZE: '50000', AUTH_REVIEWS_PER_SECOND: '250',
  });
  expect(gatewayEnv(await rendered(['--set', 'gateway.auth.mode=none']))).toMatchObject({ PREDICT_AUTH: 'none' });
  const bad = await helm(['template', 'pg', CHART, '--set', 'gateway.auth.mode=oidc']);
  expect(bad.code).not.toBe(0);
  expect(bad.stderr).toContain("at '/gateway/auth/mode': value must be one of 'kubernetes', 'none'");
});

test('the gateway may create TokenReviews and SubjectAccessReviews (a ClusterRole, also with watchNamespaces), only with auth on', async () => {
  const reviews = 'rel-pg-predictgate-gateway-reviews';
  const rules = [
    { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
    { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
  ];
  for (const set of [[], ['--set', 'watchNamespaces={team-a,team-b}']]) {
    const docs = await rendered(set);
    expect(named(docs, 'ClusterRole', reviews)?.rules).toEqual(rules);
    expect(named(docs, 'ClusterRoleBinding', reviews)).toMatchObject({ roleRef: { name: reviews }, subjects: [{ kind: 'ServiceAccount', name: 'pg-predictgate-gateway', namespace: 'rel' }] });
  }
  // Limited to namespaces, the gateway's other rules are Roles, and nothing else of it is cluster-wide.
  const scoped = await rendered(['--set', 'watchNamespaces={team-a,team-b}']);
  expect(scoped.filter((d) => d.kind.startsWith('ClusterRole') && d.metadata.labels?.['app.kubernetes.io/component'] === 'gateway').map((d) => d.metadata.name)).toEqual([reviews, reviews]);
  const none = await rendered(['--set', 'gateway.auth.mode=none']);
  expect(none.filter((d) => d.metadata.name.endsWith('-reviews'))).toEqual([]);
});

test('the callers\' roles: predictgate-predictor (aggregated into edit and admin) and predictgate-metrics-reader, by values', async () => {
  const docs = await rendered();
  const predictor = named(docs, 'ClusterRole', 'predictgate-predictor')!;
  expect(predictor.rules).toEqual([
    { apiGroups: ['prediction.predictgate.dev'], resources: ['endpoints/predict', 'endpoints/explain', 'deployedmodels/predict'], verbs: ['create'] },
    { apiGroups: ['prediction.predictgate.dev'], resources: ['deployedmodels/predict', 'endpoints'], verbs: ['get'] },
  ]);
  expect(predictor.metadata.labels).toMatchObject({ 'rbac.authorization.k8s.io/aggregate-to-edit': 'true', 'rbac.authorization.k8s.io/aggregate-to-admin': 'true' });
  expect(named(docs, 'ClusterRole', 'predictgate-metrics-reader')?.rules).toEqual([{ nonResourceURLs: ['/metrics'], verbs: ['get'] }]);
  expect(docs.filter((d) => d.kind === 'ClusterRoleBinding' && d.roleRef?.name === 'predictgate-metrics-reader')).toEqual([]);

  const custom = await rendered(['-f', join(CHART, 'ci/auth-values.yaml')]);
  const renamed = named(custom, 'ClusterRole', 'ml-predictor')!;
  expect(Object.keys(renamed.metadata.labels ?? {}).filter((l) => l.startsWith('rbac.'))).toEqual([]);
  expect(named(custom, 'ClusterRoleBinding', 'rel-pg-predictgate-metrics-reader')).toMatchObject({
    roleRef: { name: 'ml-metrics-reader' },
    subjects: [{ kind: 'ServiceAccount', name: 'prometheus-k8s', namespace: 'monitoring' }, { kind: 'Group', name: 'metrics-scrapers', apiGroup: 'rbac.authorization.k8s.io' }],
  });
  // A second release in the cluster uses the first one's roles.
  const second = await rendered(['--set', 'auth.predictorRole.create=false', '--set', 'auth.metricsReaderRole.create=false']);
  expect(second.filter((d) => d.kind === 'ClusterRole' && !d.metadata.name.startsWith('rel-'))).toEqual([]);
});

test('the ServiceMonitor of the gateway sends Prometheus\' ServiceAccount token, or a Secret\'s, when auth is on', async () => {
  const endpoint = async (set: string[]): Promise<Record<string, unknown>> =>
    named(await rendered(['--set', 'serviceMonitor.enabled=true', ...set]), 'ServiceMonitor', 'pg-predictgate-gateway')!.spec.endpoints[0];
  expect(await endpoint([])).toEqual({ port: 'http', path: '/metrics', interval: '30s', bearerTokenFile: '/var/run/secrets/kubernetes.io/serviceaccount/token' });
  expect(await endpoint(['-f', join(CHART, 'ci/servicemonitor-values.yaml')])).toEqual({ port: 'http', path: '/metrics', interval: '15s', authorization: { type: 'Bearer', credentials: { name: 'prometheus-token', key: 'token' } } });
  expect(await endpoint(['--set', 'gateway.auth.mode=none'])).toEqual({ port: 'http', path: '/metrics', interval: '30s' });
  // The controller's /metrics asks no token.
  const controller = named(await rendered(['--set', 'serviceMonitor.enabled=true']), 'ServiceMonitor', 'pg-predictgate-controller')!;
  expect(controller.spec.endpoints).toEqual([{ port: 'metrics', path: '/metrics', interval: '30s' }]);
});

test('helm install, upgrade with changed values, and uninstall', async () => {
  const ns = await namespace('chart-life');
  const install = await helmOk(['install', 'life', CHART, '-n', ns]);
  expect(install).toContain('STATUS: deployed');
  expect(install).toContain('kubectl apply -f crds/samples/half-plus-two.yaml'); // NOTES.txt
  expect(install).toContain('kubectl create rolebinding predictors -n default --clusterrole=predictgate-predictor --serviceaccount=default:scorer');
  const deployments = async (): Promise<Record<string, number | undefined>> =>
    Object.fromEntries((await c.apps.listNamespacedDeployment({ namespace: ns })).items.map((d) => [d.metadata!.name!, d.spec?.replicas]));
  expect(await deployments()).toEqual({ 'life-predictgate-controller': 2, 'life-predictgate-gateway': 1 }); // the HPA owns the gateway's count
  expect((await kubectl(['get', 'hpa', 'life-predictgate-gateway', '-n', ns])).code).toBe(0);
  const gw = await c.apps.readNamespacedDeployment({ name: 'life-predictgate-gateway', namespace: ns });
  const pod = gw.spec!.template.spec!;
  expect(pod.securityContext).toMatchObject({ runAsNonRoot: true });
  expect(pod.containers[0].securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
  expect(pod.containers[0].lifecycle?.preStop?.sleep?.seconds).toBe(5);
  expect(pod.containers[0].readinessProbe?.httpGet?.path).toBe('/readyz');
  // The probes go to the probe listener, which the Service does not expose.
  expect([pod.containers[0].livenessProbe?.httpGet?.port, pod.containers[0].readinessProbe?.httpGet?.port]).toEqual(['probes', 'probes']);
  expect(pod.containers[0].ports?.map((p) => [p.name, p.containerPort])).toEqual([['http', 8080], ['probes', 8082], ['grpc', 8083]]);
  expect(pod.containers[0].env?.find((e) => e.name === 'PROBE_PORT')?.value).toBe('8082');
  const svc = await c.core.readNamespacedService({ name: 'life-predictgate-gateway', namespace: ns });
  expect(svc.spec?.ports?.map((p) => p.targetPort)).toEqual(['http', 'grpc']);
  expect(gw.metadata?.labels).toMatchObject({ 'app.kubernetes.io/name': 'predictgate', 'app.kubernetes.io/instance': 'life', 'app.kubernetes.io/component': 'gateway', 'app.kubernetes.io/managed-by': 'Helm' });

  const upgrade = await helmOk(['upgrade', 'life', CHART, '-n', ns, '--set', 'gateway.autoscaling.enabled=false', '--set', 'gateway.replicas=3', '--set', 'endpointDomain=predict.example.com']);
  expect(upgrade).toContain('REVISION: 2');
  expect(await deployments()).toEqual({ 'life-predictgate-controller': 2, 'life-predictgate-gateway': 3 });
  expect((await kubectl(['get', 'hpa', 'life-predictgate-gateway', '-n', ns])).code).not.toBe(0);
  const env = (await c.apps.readNamespacedDeployment({ name: 'life-predictgate-gateway', namespace: ns })).spec!.template.spec!.containers[0].env!;
  expect(env.find((e) => e.name === 'ENDPOINT_DOMAIN')?.value).toBe('predict.example.com');

  await helmOk(['uninstall', 'life', '-n', ns]);
  expect(await deployments()).toEqual({});
  for (const role of [`${ns}-life-predictgate-controller`, `${ns}-life-predictgate-gateway-reviews`, 'predictgate-predictor', 'predictgate-metrics-reader']) {
    expect({ role, gone: (await kubectl(['get', 'clusterrole', role])).code !== 0 }).toEqual({ role, gone: true });
  }
  expect((await kubectl(['get', 'serviceaccount', '-n', ns, '-l', 'app.kubernetes.io/instance=life', '-o', 'name'])).stdout.trim()).toBe('');
});

describe('least privilege, with the chart\'s own ServiceAccounts', () => {
  let release: string;
  let models: string;
  let dir: string;
  let controllerKc: string;
  let gatewayKc: string;
  let modelPort = 0;

  beforeAll(async () => {
    release = await namespace('chart-rbac');
    models = await namespace('chart-models');
    dir = mkdtempSync(join(tmpdir(), 'predictgate-sa-'));
    // The metrics reader bound by the release to a scraper's ServiceAccount, as for Prometheus.
    await kubectlOk(['create', 'serviceaccount', 'scraper', '-n', release]);
    await helmOk(['install', 'rbac', CHART, '-n', release, '--set', 'auth.metricsReaderRole.subjects[0].kind=ServiceAccount', '--set', 'auth.metricsReaderRole.subjects[0].name=scraper', '--set', `auth.metricsReaderRole.subjects[0].namespace=${release}`]);
    controllerKc = await serviceAccountKubeconfig(release, 'rbac-predictgate-controller', dir);
    gatewayKc = await serviceAccountKubeconfig(release, 'rbac-predictgate-gateway', dir);
  });

  afterAll(async () => {
    await helm(['uninstall', 'rbac', '-n', release]);
    rmSync(dir, { recursive: true, force: true });
  });

  test('the controller reconciles a sample to Ready and the gateway routes it, each with its own token', async () => {
    const model = spawnPredictgate(['model', 'half-plus-two'], { AIP_HTTP_PORT: '0' });
    processes.push(model);
    modelPort = (await model.waitForLog((l) => l.msg === 'listening', 'model listening')).port as number;
    // The processes watch only the test's namespace (the ClusterRoles would allow all), so they leave other suites alone.
    const controller = await startController([models], { KUBECONFIG: controllerKc, LEADER_ELECTION_NAMESPACE: release });
    processes.push(controller);
    const gateway = await startClusterGateway([models], { KUBECONFIG: gatewayKc, UPSTREAM_RESOLVE: `half-plus-two.${models}.svc:8080=127.0.0.1:${modelPort}` });
    processes.push(gateway);

    await kubectlOk(['apply', '-f', '-'], { input: inNamespace(readFileSync(join(ROOT, 'crds/samples/half-plus-two.yaml'), 'utf8'), models) });
    await waitFor(async () => (await c.apps.readNamespacedDeployment({ name: 'half-plus-two', namespace: models })).metadata?.name, 'the Deployment, created with the controller\'s token');
    await setAvailable(c, models, 'half-plus-two', 1);
    await kubectlOk(['wait', '--for=condition=EndpointReady', '--timeout=30s', '-n', models, 'endpoints.prediction.predictgate.dev/half-plus-two']);
    expect(conditionOf(await getEndpoint(c, models, 'half-plus-two'), 'EndpointReady')?.reason).toBe('ResourceReady');
    const events = await kubectlOk(['get', 'events', '-n', models, '-o', 'jsonpath={.items[*].reason}']);
    expect(events).toContain('Ready');

    const res = await fetch(`http://127.0.0.1:${gateway.port}/v1/projects/${models}/locations/any/endpoints/half-plus-two:predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"instances": [1.0, 2.0, 5.0]}' });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ predictions: [2.5, 3.0, 4.5], deployedModelId: 'half-plus-two' });

    // Nothing was refused on the way: a missing permission would show as a 403 in a log.
    for (const p of [controller, gateway]) expect(p.proc.logs().filter((l) => /\b403\b|forbidden/i.test(JSON.stringify(l)))).toEqual([]);
  });

  test('the gateway can read its resources, list and watch EndpointSlices, and write nothing', async () => {
    expect(await canI(gatewayKc, ['list', 'deployedmodels.prediction.predictgate.dev', '-n', models])).toBe(true);
    expect(await canI(gatewayKc, ['watch', 'endpoints.prediction.predictgate.dev', '-n', models])).toBe(true);
    expect(await canI(gatewayKc, ['list', 'endpointslices.discovery.k8s.io', '-n', models])).toBe(true);
    expect(await canI(gatewayKc, ['watch', 'endpointslices.discovery.k8s.io', '-n', models])).toBe(true);
    // Nothing more of them: not even one by name, and no other kind of endpoint.
    expect(await canI(gatewayKc, ['get', 'endpointslices.discovery.k8s.io', '-n', models])).toBe(false);
    expect(await canI(gatewayKc, ['list', 'endpoints', '-n', models])).toBe(false);
    expect(await canI(gatewayKc, ['list', 'pods', '-n', models])).toBe(false);
    for (const verb of ['create', 'update', 'patch', 'delete']) {
      for (const resource of ['deployedmodels.prediction.predictgate.dev', 'endpoints.prediction.predictgate.dev', 'endpointslices.discovery.k8s.io', 'deployments.apps', 'services', 'pods', 'secrets', 'configmaps', 'events', 'leases.coordination.k8s.io']) {
        expect({ verb, resource, allowed: await canI(gatewayKc, [verb, resource, '-n', models]) }).toEqual({ verb, resource, allowed: false });
      }
    }
    expect(await canI(gatewayKc, ['patch', 'deployedmodels.prediction.predictgate.dev', '--subresource=status', '-n', models])).toBe(false);
    expect(await canI(gatewayKc, ['get', 'secrets', '-n', models])).toBe(false);
  });

  test('the gateway may create TokenReviews and SubjectAccessReviews, and nothing more of them or of anything else', async () => {
    expect(await canI(gatewayKc, ['create', 'tokenreviews.authentication.k8s.io'])).toBe(true);
    expect(await canI(gatewayKc, ['create', 'subjectaccessreviews.authorization.k8s.io'])).toBe(true);
    const refused: string[][] = [
      ['get', 'tokenreviews.authentication.k8s.io'],
      ['list', 'subjectaccessreviews.authorization.k8s.io'],
      ['create', 'localsubjectaccessreviews.authorization.k8s.io', '-n', models],
      ['impersonate', 'users'],
      ['impersonate', 'serviceaccounts', '-n', models],
      ['impersonate', 'groups'],
      ['create', 'serviceaccounts', '--subresource=token', '-n', models],
      ['get', 'secrets', '-n', release],
      ['list', 'secrets', '--all-namespaces'],
      ['create', 'certificatesigningrequests.certificates.k8s.io'],
      ['create', 'rolebindings.rbac.authorization.k8s.io', '-n', models],
      ['bind', 'clusterroles.rbac.authorization.k8s.io'],
      // The gateway checks its callers' right to call; it has none of its own.
      ['create', 'endpoints.prediction.predictgate.dev', '--subresource=predict', '-n', models],
      ['get', '/metrics'],
    ];
    for (const args of refused) expect({ args, allowed: await canI(gatewayKc, args) }).toEqual({ args, allowed: false });
  });

  describe('callers', () => {
    let other: string;
    let callerKc: string;

    beforeAll(async () => {
      other = await namespace('chart-other');
      await kubectlOk(['create', 'serviceaccount', 'caller', '-n', models]);
      await kubectlOk(['create', 'serviceaccount', 'stranger', '-n', models]);
      await kubectlOk(['create', 'rolebinding', 'caller-predicts', '-n', models, '--clusterrole=predictgate-predictor', `--serviceaccount=${models}:caller`]);
      callerKc = await serviceAccountKubeconfig(models, 'caller', dir);
    });

    test('bound to predictgate-predictor in one namespace, a ServiceAccount may call there and nowhere else, and may not change the resources', async () => {
      const allowed: string[][] = [
        ['create', 'endpoints.prediction.predictgate.dev/half-plus-two', '--subresource=predict', '-n', models],
        ['create', 'endpoints.prediction.predictgate.dev', '--subresource=explain', '-n', models],
        ['create', 'deployedmodels.prediction.predictgate.dev', '--subresource=predict', '-n', models],
        ['get', 'deployedmodels.prediction.predictgate.dev', '--subresource=predict', '-n', models],
        ['get', 'endpoints.prediction.predictgate.dev/half-plus-two', '-n', models],
      ];
      for (const args of allowed) expect({ args, allowed: await canI(callerKc, args) }).toEqual({ args, allowed: true });
      const refused: string[][] = [
        ['create', 'endpoints.prediction.predictgate.dev', '--subresource=predict', '-n', other],
        ['create', 'deployedmodels.prediction.predictgate.dev', '--subresource=predict', '-n', other],
        ['get', 'endpoints.prediction.predictgate.dev', '-n', other],
        ['create', 'endpoints.prediction.predictgate.dev', '--subresource=predict', '--all-namespaces'],
        ['list', 'endpoints.prediction.predictgate.dev', '-n', models],
        ['watch', 'endpoints.prediction.predictgate.dev', '-n', models],
        ['get', 'deployedmodels.prediction.predictgate.dev', '-n', models],
        ['get', '/metrics'],
        ['get', 'secrets', '-n', models],
      ];
      for (const verb of ['create', 'update', 'patch', 'delete']) {
        for (const resource of ['endpoints.prediction.predictgate.dev', 'deployedmodels.prediction.predictgate.dev']) refused.push([verb, resource, '-n', models]);
        refused.push([verb, 'endpoints.prediction.predictgate.dev', '--subresource=status', '-n', models]);
      }
      for (const args of refused) expect({ args, allowed: await canI(callerKc, args) }).toEqual({ args, allowed: false });
    });

    test('the built-in edit and admin roles aggregate predictgate-predictor: their aggregationRule selects it', async () => {
      // kube-controller-manager copies the selected roles' rules into them (the node tier sees an editor call).
      for (const role of ['edit', 'admin']) {
        const rule = JSON.parse(await kubectlOk(['get', 'clusterrole', role, '-o', 'jsonpath={.aggregationRule.clusterRoleSelectors}'])) as { matchLabels: Record<string, string> }[];
        const selected = await Promise.all(rule.map(async (sel) => (await kubectlOk(['get', 'clusterroles', '-o', 'name', '-l', Object.entries(sel.matchLabels).map(([k, v]) => `${k}=${v}`).join(',')])).split('\n')));
        expect({ role, selects: selected.flat().includes('clusterrole.rbac.authorization.k8s.io/predictgate-predictor') }).toEqual({ role, selects: true });
      }
      const view = JSON.parse(await kubectlOk(['get', 'clusterrole', 'view', '-o', 'jsonpath={.aggregationRule.clusterRoleSelectors}'])) as { matchLabels: Record<string, string> }[];
      const labels = JSON.parse(await kubectlOk(['get', 'clusterrole', 'predictgate-predictor', '-o', 'jsonpath={.metadata.labels}'])) as Record<string, string>;
      expect(view.some((sel) => Object.entries(sel.matchLabels).every(([k, v]) => labels[k] === v))).toBe(false);
    });

    test('the metrics reader, bound by the release, may get /metrics and nothing else', async () => {
      const kc = await serviceAccountKubeconfig(release, 'scraper', dir);
      expect(await canI(kc, ['get', '/metrics'])).toBe(true);
      for (const args of [['get', '/logs'], ['post', '/metrics'], ['create', 'endpoints.prediction.predictgate.dev', '--subresource=predict', '-n', models], ['get', 'secrets', '-n', release], ['list', 'pods', '-n', release]]) {
        expect({ args, allowed: await canI(kc, args) }).toEqual({ args, allowed: false });
      }
    });

    test('the chart\'s gateway with PREDICT_AUTH=kubernetes and its own token: a bound caller gets 200, an unbound one 403, no token 401', async () => {
      expect(modelPort).toBeGreaterThan(0);
      const gateway = await startClusterGateway([models], { KUBECONFIG: gatewayKc, PREDICT_AUTH: 'kubernetes', UPSTREAM_RESOLVE: `half-plus-two.${models}.svc:8080=127.0.0.1:${modelPort}` });
      processes.push(gateway);
      const base = `http://127.0.0.1:${gateway.port}`;
      await waitFor(async () => (await fetch(`${base}/readyz`)).status === 200, 'the gateway ready');
      const token = async (sa: string, ns = models): Promise<string> => (await kubectlOk(['create', 'token', sa, '-n', ns])).trim();
      const predict = async (headers: Record<string, string>): Promise<{ status: number; body: any; challenge: string | null }> => {
        const res = await fetch(`${base}/v1/projects/${models}/locations/us-central1/endpoints/half-plus-two:predict`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: '{"instances": [1.0, 2.0, 5.0]}' });
        return { status: res.status, body: await res.json(), challenge: res.headers.get('www-authenticate') };
      };
      expect(await predict({ authorization: `Bearer ${await token('caller')}` })).toMatchObject({ status: 200, body: { predictions: [2.5, 3.0, 4.5], deployedModelId: 'half-plus-two' } });
      expect(await predict({ authorization: `Bearer ${await token('stranger')}` })).toEqual({
        status: 403,
        challenge: null,
        body: { error: { code: 403, status: 'PERMISSION_DENIED', message: `endpoints.prediction.predictgate.dev "half-plus-two" is forbidden: User "system:serviceaccount:${models}:stranger" cannot create resource "endpoints/predict" in API group "prediction.predictgate.dev" in the namespace "${models}"` } },
      });
      expect(await predict({})).toMatchObject({ status: 401, challenge: 'Bearer realm="predictgate"', body: { error: { code: 401, status: 'UNAUTHENTICATED' } } });
      expect(await predict({ authorization: 'Bearer not-a-token-the-cluster-issued' })).toMatchObject({ status: 401, challenge: 'Bearer realm="predictgate", error="invalid_token"', body: { error: { status: 'UNAUTHENTICATED' } } });
      // /metrics for the scraper the release bound, not for a caller; the probes for anyone.
      const get = async (path: string, sa?: [string, string]): Promise<number> => (await fetch(`${base}${path}`, { headers: sa ? { authorization: `Bearer ${await token(...sa)}` } : {} })).status;
      expect(await get('/metrics', ['scraper', release])).toBe(200);
      expect(await get('/metrics', ['caller', models])).toBe(403);
      expect(await get('/healthz')).toBe(200);
      expect(await get('/readyz')).toBe(200);
      // Every review went through with the gateway's own token: none failed for want of a permission.
      expect(gateway.proc.logs().filter((l) => /auth_unavailable|TokenReview to|SubjectAccessReview to/.test(JSON.stringify(l)))).toEqual([]);

      // The README's team RoleBinding, run as it is shown: its namespace is this test's, its port the gateway's.
      const block = fencedBlocks(readFileSync(join(ROOT, 'README.md'), 'utf8')).find((b) => b.lang === 'sh' && b.text.startsWith(README_TEAM_BLOCK));
      expect(block).toBeDefined();
      const script = block!.text.replace(/\bteam-a\b/g, models).replace(/\blocalhost:8080\b/g, `127.0.0.1:${gateway.port}`);
      const r = await runTool('bash', ['-c', `set -eo pipefail\n${script}`], { env: { KUBECONFIG: testKubeconfig() } });
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
      // What the README shows as `# ` lines is what the commands print (kubectl's "... created" lines aside).
      const shown = block!.text.split('\n').filter((l) => /^# /.test(l)).map((l) => l.slice(2));
      expect(r.stdout.trim().split('\n').filter((l) => !/^\S+\/\S+ created$/.test(l))).toEqual(shown);
    }, 90_000);
  });

  test('the controller manages what it must, and cannot read Secrets or touch anything else', async () => {
    const allowed: string[][] = [
      ['patch', 'deployments.apps', '-n', models],
      ['delete', 'services', '-n', models],
      ['create', 'horizontalpodautoscalers.autoscaling', '-n', models],
      ['update', 'deployments.apps', '--subresource=scale', '-n', models],
      ['list', 'pods', '-n', models],
      ['patch', 'pods', '-n', models],
      ['patch', 'deployedmodels.prediction.predictgate.dev', '--subresource=status', '-n', models],
      ['create', 'events', '-n', models],
      ['update', 'leases.coordination.k8s.io/predictgate-controller', '-n', release],
    ];
    for (const args of allowed) expect({ args, allowed: await canI(controllerKc, args) }).toEqual({ args, allowed: true });
    const refused: string[][] = [
      ['get', 'secrets', '-n', models],
      ['list', 'secrets', '-n', release],
      ['get', 'configmaps', '-n', models],
      ['create', 'pods', '-n', models],
      ['delete', 'pods', '-n', models],
      ['get', 'pods', '-n', models],
      ['update', 'deployedmodels.prediction.predictgate.dev', '-n', models],
      ['delete', 'endpoints.prediction.predictgate.dev', '-n', models],
      ['update', 'leases.coordination.k8s.io/kube-scheduler', '-n', release],
      ['create', 'clusterroles.rbac.authorization.k8s.io'],
    ];
    for (const args of refused) expect({ args, allowed: await canI(controllerKc, args) }).toEqual({ args, allowed: false });
  });

  test('limited to listed namespaces, the chart grants Roles there and nothing elsewhere', async () => {
    const scoped = await namespace('chart-scoped');
    const elsewhere = await namespace('chart-elsewhere');
    // A second release uses the first one's callers' roles.
    await helmOk(['install', 'scoped', CHART, '-n', release, '--set', `watchNamespaces={${scoped}}`, '--set', 'fullnameOverride=scoped', '--set', 'auth.predictorRole.create=false', '--set', 'auth.metricsReaderRole.create=false']);
    try {
      const kc = await serviceAccountKubeconfig(release, 'scoped-controller', dir);
      expect(await canI(kc, ['list', 'deployedmodels.prediction.predictgate.dev', '-n', scoped])).toBe(true);
      expect(await canI(kc, ['list', 'deployedmodels.prediction.predictgate.dev', '-n', elsewhere])).toBe(false);
      expect(await canI(kc, ['list', 'deployedmodels.prediction.predictgate.dev', '--all-namespaces'])).toBe(false);
      const gw = await serviceAccountKubeconfig(release, 'scoped-gateway', dir);
      expect(await canI(gw, ['watch', 'endpoints.prediction.predictgate.dev', '-n', scoped])).toBe(true);
      expect(await canI(gw, ['watch', 'endpoints.prediction.predictgate.dev', '-n', elsewhere])).toBe(false);
      expect(await canI(gw, ['watch', 'endpointslices.discovery.k8s.io', '-n', scoped])).toBe(true);
      expect(await canI(gw, ['watch', 'endpointslices.discovery.k8s.io', '-n', elsewhere])).toBe(false);
      // Its own Service's slices, in the release's namespace: how many gateway replicas split each model's maxConcurrency.
      expect(await canI(gw, ['watch', 'endpointslices.discovery.k8s.io', '-n', release])).toBe(true);
      // The reviews are cluster-scoped: a ClusterRole, whatever the namespaces.
      expect(await canI(gw, ['create', 'tokenreviews.authentication.k8s.io'])).toBe(true);
      expect(await canI(gw, ['create', 'subjectaccessreviews.authorization.k8s.io'])).toBe(true);
    } finally {
      await helm(['uninstall', 'scoped', '-n', release]);
    }
  });
});

