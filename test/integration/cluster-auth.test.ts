// Who may call, on the real apiserver (--auth kubernetes): ServiceAccount tokens from the
// TokenRequest API, RBAC Roles and bindings, and `predictgate gateway` asking TokenReviews and
// SubjectAccessReviews. Every surface answers 401 and 403 in its own dialect, the probes stay open,
// /metrics takes a nonResourceURLs rule, a revoked binding takes effect within the allow TTL (and not
// before: the gate's clock is the test's), an unreachable apiserver fails closed, a flood of made-up
// tokens costs at most the review budget, logs name the user and never hold a token, and a
// cross-namespace Endpoint says why it has no model.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { IncomingMessage } from 'node:http';
import { request } from 'undici';
import { KubeConfig } from '@kubernetes/client-node';
import { ROOT } from '../helpers/local.js';
import { fencedBlocks } from '../helpers/markdown.js';
import { startBundledModel, stopAll, type PredictgateProcess } from '../helpers/procs.js';
import { documentedMetrics, metricNames, promtoolCheck, seriesValue } from '../helpers/metrics.js';
import {
  applyCrds, clients, deleteNamespace, inNamespace, kubectl, kubectlOk, newNamespace, setAvailable, startClusterGateway, startController, testKubeconfig, waitFor,
  type ClusterProcess, type Clients,
} from '../helpers/cluster.js';
import { KubernetesGate } from '../../src/gateway/auth/kubernetes.js';
import { kubeReviewer } from '../../src/gateway/auth/reviews.js';
import { endpointCallAccess } from '../../src/gateway/auth/access.js';
import { loadConfig } from '../../src/config.js';
import { silentLogger } from '../../src/log.js';
import { GatewayMetrics } from '../../src/gateway/metrics.js';
import { servicesFromConfig } from '../../src/gateway/call.js';
import { createGateway } from '../../src/gateway/server.js';
import type { RoutingTable } from '../../src/gateway/routing.js';

let c: Clients;
let ns: string;
let other: string;
let controller: ClusterProcess;
let gateway: ClusterProcess;
let resolve: string;
const models: PredictgateProcess[] = [];
const tokens: Record<string, string> = {};
const clusterObjects: string[][] = [];

const CHALLENGE = 'Bearer realm="predictgate"';
const INVALID = 'Bearer realm="predictgate", error="invalid_token"';

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  json(): unknown;
}

async function call(port: number, method: string, path: string, opts: { token?: string; host?: string; body?: string } = {}): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
  if (opts.host) headers.host = opts.host;
  const r = await request(`http://127.0.0.1:${port}${path}`, { method: method as 'GET', headers, body: opts.body });
  const body = await r.body.text();
  return { status: r.statusCode, headers: r.headers, body, json: () => JSON.parse(body) as unknown };
}

const vertex = (endpoint: string, verb = 'predict', project = ns): string => `/v1/projects/${project}/locations/us-central1/endpoints/${endpoint}:${verb}`;
const INSTANCES = '{"instances": [1.0, 2.0, 5.0]}';
const predict = (token: string | undefined, endpoint = 'half-plus-two', project = ns): Promise<Answer> => call(gateway.port, 'POST', vertex(endpoint, 'predict', project), { token, body: INSTANCES });

/** A ServiceAccount and a one-hour token for it (kubectl create token). */
async function serviceAccount(namespace: string, name: string): Promise<string> {
  await kubectlOk(['create', 'serviceaccount', name, '-n', namespace]);
  return (await kubectlOk(['create', 'token', name, '-n', namespace, '--duration=1h'])).trim();
}

/** The Role of the README's "Who may call". */
function readmeRole(): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const blocks = fencedBlocks(readme.slice(readme.indexOf('\n## Who may call')));
  const role = blocks.find((b) => b.lang === 'sh' && b.text.includes('kind: Role'));
  if (!role) throw new Error('the README\'s "Who may call" shows no Role');
  // The manifest of `kubectl apply -f - <<'EOF'`.
  const lines = role.text.split('\n');
  return lines.slice(1, lines.indexOf('EOF')).join('\n');
}

const user = (namespace: string, sa: string): string => `system:serviceaccount:${namespace}:${sa}`;

/** Whether the apiserver's RBAC already says `sa` may do it (its authorizer follows bindings through a watch). */
async function canI(namespace: string, sa: string, args: string[]): Promise<boolean> {
  return (await kubectl(['auth', 'can-i', ...args, '-n', namespace, `--as=${user(namespace, sa)}`])).stdout.trim() === 'yes';
}

beforeAll(async () => {
  c = clients();
  await applyCrds();
  ns = await newNamespace(c, 'auth');
  other = await newNamespace(c, 'auth-other');
  const port = await startBundledModel('half-plus-two', { AIP_DEPLOYED_MODEL_ID: 'half-plus-two' }, models);
  resolve = `half-plus-two.${ns}.svc:8080=127.0.0.1:${port}`;
  controller = await startController([ns, other]);
  gateway = await startClusterGateway([ns, other], { PREDICT_AUTH: 'kubernetes', AUTH_ALLOW_TTL_SECONDS: '2', AUTH_DENY_TTL_SECONDS: '1', UPSTREAM_RESOLVE: resolve, LOG_LEVEL: 'debug' });
  await kubectlOk(['apply', '-f', '-'], { input: inNamespace(readFileSync(join(ROOT, 'crds/samples/half-plus-two.yaml'), 'utf8'), ns) });
  // A DeployedModel in the other namespace that does not let this one use it, and an Endpoint here naming it.
  await kubectlOk(['apply', '-f', '-'], { input: inNamespace(readFileSync(join(ROOT, 'crds/samples/half-plus-two.yaml'), 'utf8'), other) });
  await kubectlOk(['apply', '-f', '-'], { input: JSON.stringify({ apiVersion: 'prediction.predictgate.dev/v1', kind: 'Endpoint', metadata: { name: 'cross', namespace: ns }, spec: { destinations: [{ serviceRef: { name: 'half-plus-two', namespace: other } }] } }) });
  await waitFor(async () => (await c.apps.readNamespacedDeployment({ name: 'half-plus-two', namespace: ns })).metadata?.name, 'the Deployment');
  await setAvailable(c, ns, 'half-plus-two', 1);
  await kubectlOk(['wait', '--for=condition=EndpointReady', '--timeout=30s', '-n', ns, 'endpoints.prediction.predictgate.dev/half-plus-two']);

  // The callers: a team member bound to a predictor Role, one who is later unbound, a stranger, an
  // admin of everything, and a metrics scraper.
  // The README's Role, as it shows it.
  await kubectlOk(['apply', '-f', '-'], { input: readmeRole().replace('namespace: team-a', `namespace: ${ns}`) });
  for (const sa of ['caller', 'revoked', 'stranger', 'root', 'scraper']) tokens[sa] = await serviceAccount(ns, sa);
  for (const sa of ['caller', 'revoked']) await kubectlOk(['create', 'rolebinding', `${sa}-predicts`, '--role=predictor', `--serviceaccount=${ns}:${sa}`, '-n', ns]);
  await kubectlOk(['create', 'clusterrolebinding', `${ns}-root`, '--clusterrole=cluster-admin', `--serviceaccount=${ns}:root`]);
  await kubectlOk(['create', 'clusterrole', `${ns}-metrics`, '--verb=get', '--non-resource-url=/metrics']);
  await kubectlOk(['create', 'clusterrolebinding', `${ns}-metrics`, `--clusterrole=${ns}-metrics`, `--serviceaccount=${ns}:scraper`]);
  clusterObjects.push(['clusterrolebinding', `${ns}-root`], ['clusterrole', `${ns}-metrics`], ['clusterrolebinding', `${ns}-metrics`]);
  await waitFor(async () => (await canI(ns, 'revoked', ['create', 'endpoints.prediction.predictgate.dev', '--subresource=predict'])) || undefined, 'the bindings in force');
  await waitFor(async () => {
    const r = await predict(tokens.caller);
    return r.status === 200 && r;
  }, 'a first 200 through the gateway');
});

afterAll(async () => {
  await gateway?.stop();
  await controller?.stop();
  await stopAll(models);
  for (const [kind, name] of clusterObjects) await kubectl(['delete', kind, name, '--ignore-not-found']);
  await deleteNamespace(c, ns);
  await deleteNamespace(c, other);
});

test('the probes stay open; every prediction surface answers a call without a token 401 in its dialect with a Bearer challenge', async () => {
  for (const path of ['/healthz', '/readyz']) expect((await call(gateway.port, 'GET', path)).status).toBe(200);
  const message = 'the call has no bearer token; send Authorization: Bearer TOKEN, with a token the cluster accepts (kubectl create token SERVICEACCOUNT, a pod\'s ServiceAccount token, or an OIDC token)';
  const v = await predict(undefined);
  expect([v.status, v.json(), v.headers['www-authenticate'], v.headers.connection]).toEqual([401, { error: { code: 401, message, status: 'UNAUTHENTICATED' } }, CHALLENGE, 'close']);
  const raw = await call(gateway.port, 'POST', vertex('half-plus-two', 'rawPredict'), { body: INSTANCES });
  expect([raw.status, raw.headers['www-authenticate']]).toEqual([401, CHALLENGE]);
  const gdc = await call(gateway.port, 'POST', '/v1/model:predict', { host: `half-plus-two.${ns}.predictgate.internal`, body: INSTANCES });
  expect([gdc.status, gdc.json(), gdc.headers['www-authenticate']]).toEqual([401, { error: message }, CHALLENGE]);
  const tf = await call(gateway.port, 'GET', `/tfserving/${ns}/half-plus-two/v1/models/half_plus_two`);
  expect([tf.status, tf.json(), tf.headers['www-authenticate']]).toEqual([401, { error: message }, CHALLENGE]);
  const resource = await call(gateway.port, 'GET', `/v1/projects/${ns}/locations/us-central1/endpoints/half-plus-two`);
  expect([resource.status, resource.headers['www-authenticate']]).toEqual([401, CHALLENGE]);
});

test('a token the cluster does not accept is 401 invalid_token, on every surface', async () => {
  const message = 'the bearer token was not accepted by the cluster\'s TokenReview: it is expired, revoked, malformed, or for another audience';
  const v = await predict('not-a-real-token');
  expect([v.status, v.json(), v.headers['www-authenticate']]).toEqual([401, { error: { code: 401, message, status: 'UNAUTHENTICATED' } }, INVALID]);
  // A ServiceAccount token whose signature was tampered with.
  const forged = `${tokens.caller.slice(0, -4)}AAAA`;
  expect((await predict(forged)).status).toBe(401);
  const tf = await call(gateway.port, 'POST', `/tfserving/${ns}/half-plus-two/v1/models/half_plus_two:predict`, { token: 'not-a-real-token', body: INSTANCES });
  expect([tf.status, tf.json()]).toEqual([401, { error: message }]);
});

test('a permitted caller predicts on every surface its Role grants; what it does not grant is 403 in kubectl\'s words', async () => {
  const v = await predict(tokens.caller);
  expect([v.status, v.json()]).toEqual([200, { predictions: [2.5, 3.0, 4.5], deployedModelId: 'half-plus-two', modelDisplayName: 'half-plus-two', modelVersionId: '1' }]);
  expect((await call(gateway.port, 'POST', vertex('half-plus-two', 'rawPredict'), { token: tokens.caller, body: INSTANCES })).status).toBe(200);
  const gdc = await call(gateway.port, 'POST', '/v1/model:predict', { token: tokens.caller, host: `half-plus-two.${ns}.predictgate.internal`, body: INSTANCES });
  expect([gdc.status, (gdc.json() as { predictions: number[] }).predictions]).toEqual([200, [2.5, 3.0, 4.5]]);
  const tfStatus = await call(gateway.port, 'GET', `/tfserving/${ns}/half-plus-two/v1/models/half_plus_two`, { token: tokens.caller });
  expect(tfStatus.status).toBe(200);
  const tfPredict = await call(gateway.port, 'POST', `/tfserving/${ns}/half-plus-two/v1/models/half_plus_two:predict`, { token: tokens.caller, body: INSTANCES });
  expect([tfPredict.status, tfPredict.json()]).toEqual([200, { predictions: [2.5, 3.0, 4.5] }]);

  const explain = await call(gateway.port, 'POST', vertex('half-plus-two', 'explain'), { token: tokens.caller, body: INSTANCES });
  expect([explain.status, explain.json(), explain.headers['www-authenticate']]).toEqual([403, { error: { code: 403, status: 'PERMISSION_DENIED',
    message: `endpoints.prediction.predictgate.dev "half-plus-two" is forbidden: User "${user(ns, 'caller')}" cannot create resource "endpoints/explain" in API group "prediction.predictgate.dev" in the namespace "${ns}"` } }, undefined]);
  // The Endpoint resource is a read of endpoints, which the Role does not grant.
  const resource = await call(gateway.port, 'GET', `/v1/projects/${ns}/locations/us-central1/endpoints/half-plus-two`, { token: tokens.caller });
  expect([resource.status, (resource.json() as { error: { message: string } }).error.message]).toEqual([403, `endpoints.prediction.predictgate.dev "half-plus-two" is forbidden: User "${user(ns, 'caller')}" cannot get resource "endpoints" in API group "prediction.predictgate.dev" in the namespace "${ns}"`]);
});

test('a caller without a grant is refused 403 on every surface, and in another namespace, whether or not the Endpoint exists', async () => {
  const denied = (namespace: string, resource: string, name: string, verb = 'create'): string =>
    `${resource.split('/')[0]}.prediction.predictgate.dev "${name}" is forbidden: User "${user(ns, 'stranger')}" cannot ${verb} resource "${resource}" in API group "prediction.predictgate.dev" in the namespace "${namespace}"`;
  const v = await predict(tokens.stranger);
  expect([v.status, v.json()]).toEqual([403, { error: { code: 403, message: denied(ns, 'endpoints/predict', 'half-plus-two'), status: 'PERMISSION_DENIED' } }]);
  const gdc = await call(gateway.port, 'POST', '/v1/model:predict', { token: tokens.stranger, host: `half-plus-two.${ns}.predictgate.internal`, body: INSTANCES });
  expect([gdc.status, gdc.json()]).toEqual([403, { error: denied(ns, 'endpoints/predict', 'half-plus-two') }]);
  const tf = await call(gateway.port, 'GET', `/tfserving/${ns}/half-plus-two/v1/models/half_plus_two`, { token: tokens.stranger });
  expect([tf.status, tf.json()]).toEqual([403, { error: denied(ns, 'deployedmodels/predict', 'half-plus-two', 'get') }]);
  // No Endpoint by that name: still 403, so a caller learns nothing of what exists where it may not call.
  expect((await predict(tokens.stranger, 'no-such-endpoint')).json()).toEqual({ error: { code: 403, message: denied(ns, 'endpoints/predict', 'no-such-endpoint'), status: 'PERMISSION_DENIED' } });
  // The team's own caller, in a namespace its Role is not in.
  const elsewhere = await predict(tokens.caller, 'half-plus-two', other);
  expect([elsewhere.status, (elsewhere.json() as { error: { message: string } }).error.message]).toEqual([403, expect.stringContaining(`User "${user(ns, 'caller')}" cannot create resource "endpoints/predict" in API group "prediction.predictgate.dev" in the namespace "${other}"`)]);
});

test('a caller who may call anywhere gets the 404s: an Endpoint that does not exist, a Host no Endpoint has', async () => {
  const missing = await predict(tokens.root, 'no-such-endpoint');
  expect([missing.status, missing.json()]).toEqual([404, { error: { code: 404, message: `endpoint no-such-endpoint not found in project ${ns}`, status: 'NOT_FOUND' } }]);
  const host = await call(gateway.port, 'POST', '/v1/model:predict', { token: tokens.root, host: 'nobody.nowhere.predictgate.internal', body: INSTANCES });
  expect(host.status).toBe(404);
  // A Host that names no Endpoint can only be authenticated: without a token it is 401, not 404.
  expect((await call(gateway.port, 'POST', '/v1/model:predict', { host: 'nobody.nowhere.predictgate.internal', body: INSTANCES })).status).toBe(401);
});

test('an Endpoint naming a DeployedModel of a namespace that does not let it is refused with why', async () => {
  const r = await waitFor(async () => {
    const x = await predict(tokens.root, 'cross');
    return x.status !== 404 && x;
  }, 'the gateway to see Endpoint cross');
  expect([r.status, r.json()]).toEqual([503, { error: { code: 503, status: 'UNAVAILABLE',
    message: `endpoint cross has no Ready deployed model with traffic (DeployedModel ${other}/half-plus-two does not allow Endpoints of namespace ${ns} (spec.allowedNamespaces))` } }]);
});

test('/metrics takes get on the non-resource URL /metrics: 401 without a token, 403 for a caller, 200 for the scraper, with the gate\'s own metrics', async () => {
  expect((await call(gateway.port, 'GET', '/metrics')).status).toBe(401);
  const caller = await call(gateway.port, 'GET', '/metrics', { token: tokens.caller });
  expect([caller.status, caller.json()]).toEqual([403, { error: { code: 403, status: 'PERMISSION_DENIED', message: `forbidden: User "${user(ns, 'caller')}" cannot get path "/metrics"` } }]);
  const scrape = await call(gateway.port, 'GET', '/metrics', { token: tokens.scraper });
  expect(scrape.status).toBe(200);
  expect(seriesValue(scrape.body, 'predictgate_auth_decisions_total{result="allowed"}')).toBeGreaterThan(0);
  expect(seriesValue(scrape.body, 'predictgate_auth_decisions_total{result="denied"}')).toBeGreaterThan(0);
  expect(seriesValue(scrape.body, 'predictgate_auth_decisions_total{result="unauthenticated"}')).toBeGreaterThan(0);
  expect(seriesValue(scrape.body, 'predictgate_auth_review_duration_seconds_count{review="TokenReview",outcome="authenticated"}')).toBeGreaterThan(0);
  expect(seriesValue(scrape.body, 'predictgate_auth_review_duration_seconds_count{review="SubjectAccessReview",outcome="denied"}')).toBeGreaterThan(0);
  expect(metricNames(scrape.body).filter((n) => n.startsWith('predictgate_auth_'))).toEqual(documentedMetrics('Gateway: who may call'));
  expect(await promtoolCheck(scrape.body)).toEqual({ code: 0, output: '' });
  // Back-to-back calls with one token: the second is answered from memory.
  const hits = seriesValue(scrape.body, 'predictgate_auth_cache_hits_total{cache="access"}');
  await predict(tokens.caller);
  await predict(tokens.caller);
  const after = (await call(gateway.port, 'GET', '/metrics', { token: tokens.scraper })).body;
  expect(seriesValue(after, 'predictgate_auth_cache_hits_total{cache="access"}')).toBeGreaterThan(hits);
});

test('revoking a RoleBinding takes effect within the allow TTL', async () => {
  expect((await predict(tokens.revoked)).status).toBe(200);
  await kubectlOk(['delete', 'rolebinding', 'revoked-predicts', '-n', ns]);
  // The gateway remembers an allowed call for AUTH_ALLOW_TTL_SECONDS=2; past it, the refusal.
  const refused = await waitFor(async () => {
    const r = await predict(tokens.revoked);
    return r.status === 403 && r;
  }, 'the revoked caller refused', 15_000);
  expect((refused.json() as { error: { message: string } }).error.message).toContain(`User "${user(ns, 'revoked')}" cannot create resource "endpoints/predict"`);
});

test('within the allow TTL a revoked grant still passes, and past it not: the gate\'s memory on the gate\'s clock', async () => {
  await kubectlOk(['create', 'serviceaccount', 'timed', '-n', ns]);
  const token = (await kubectlOk(['create', 'token', 'timed', '-n', ns, '--duration=1h'])).trim();
  await kubectlOk(['create', 'rolebinding', 'timed-predicts', '--role=predictor', `--serviceaccount=${ns}:timed`, '-n', ns]);
  await waitFor(async () => (await canI(ns, 'timed', ['create', 'endpoints.prediction.predictgate.dev', '--subresource=predict'])) || undefined, 'the binding in force');
  const kc = new KubeConfig();
  kc.loadFromFile(testKubeconfig());
  let now = 1000;
  const gate = new KubernetesGate({ reviewer: kubeReviewer(kc), audiences: [], allowTtlMs: 300_000, denyTtlMs: 30_000, cacheSize: 100, reviewsPerSecond: 100, now: () => now });
  const req = { headers: { authorization: `Bearer ${token}` } } as unknown as IncomingMessage;
  const access = endpointCallAccess('predict', ns, 'half-plus-two');
  expect((await gate.check(req, access)).user).toBe(user(ns, 'timed'));
  await kubectlOk(['delete', 'rolebinding', 'timed-predicts', '-n', ns]);
  await waitFor(async () => !(await canI(ns, 'timed', ['create', 'endpoints.prediction.predictgate.dev', '--subresource=predict'])) || undefined, 'the binding gone');
  now += 299_999;
  expect((await gate.check(req, access)).user).toBe(user(ns, 'timed'));
  now += 2;
  await expect(Promise.resolve().then(() => gate.check(req, access))).rejects.toMatchObject({ code: 'permission_denied' });
});

test('an apiserver that cannot be reached fails closed: 503 auth_unavailable, never a call let in', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'predictgate-auth-'));
  try {
    // A kubeconfig of a cluster nobody listens at (port 1 on loopback refuses at once).
    writeFileSync(join(dir, 'kubeconfig'), JSON.stringify({
      apiVersion: 'v1', kind: 'Config', 'current-context': 'gone',
      clusters: [{ name: 'gone', cluster: { server: 'https://127.0.0.1:1', 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'u', user: { token: 'x' } }], contexts: [{ name: 'gone', context: { cluster: 'gone', user: 'u' } }],
    }));
    const kc = new KubeConfig();
    kc.loadFromFile(join(dir, 'kubeconfig'));
    const { config } = loadConfig([], { PREDICT_AUTH: 'kubernetes' }, 'gateway');
    const gate = new KubernetesGate({ reviewer: kubeReviewer(kc), audiences: [], allowTtlMs: 300_000, denyTtlMs: 30_000, cacheSize: 100, reviewsPerSecond: 100 });
    const table: RoutingTable = { byName: () => undefined, byHost: () => undefined, model: () => undefined, healthTargets: () => [], loadTargets: () => [] };
    const gw = createGateway(servicesFromConfig(config, { routes: () => table, metrics: new GatewayMetrics({ defaultMetrics: false }), logger: silentLogger(), random: () => 0.5, gate }));
    const port = await gw.listen(0, '127.0.0.1');
    try {
      const r = await call(port, 'POST', vertex('half-plus-two'), { token: tokens.caller, body: INSTANCES });
      expect(r.status).toBe(503);
      const { error } = r.json() as { error: { code: number; status: string; message: string } };
      expect(error).toMatchObject({ code: 503, status: 'UNAVAILABLE' });
      expect(error.message).toMatch(/^cannot tell whether the caller may call: the TokenReview to the Kubernetes API failed \(.*ECONNREFUSED.*\); the call is refused$/);
      const metrics = await call(port, 'GET', '/metrics', { token: tokens.scraper });
      expect(metrics.status).toBe(503);
    } finally {
      await gw.drain(0);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a flood of made-up tokens is answered within the review budget; a remembered caller keeps being served', async () => {
  const flood = await startClusterGateway([ns], { PREDICT_AUTH: 'kubernetes', AUTH_REVIEWS_PER_SECOND: '10', UPSTREAM_RESOLVE: resolve });
  try {
    await waitFor(async () => (await call(flood.port, 'POST', vertex('half-plus-two'), { token: tokens.caller, body: INSTANCES })).status === 200, 'the flood gateway serving');
    const started = performance.now();
    const counts: Record<number, number> = {};
    let served = 0;
    let next = 0;
    // 16 callers at once, 800 made-up tokens in all; between them, the permitted caller.
    await Promise.all(Array.from({ length: 16 }, async () => {
      while (next < 800) {
        const i = next++;
        const r = await call(flood.port, 'POST', vertex('half-plus-two'), { token: `made-up-${i}`, body: INSTANCES });
        counts[r.status] = (counts[r.status] ?? 0) + 1;
        if (i % 50 === 0 && (await call(flood.port, 'POST', vertex('half-plus-two'), { token: tokens.caller, body: INSTANCES })).status === 200) served++;
      }
    }));
    const seconds = (performance.now() - started) / 1000;
    expect(Object.keys(counts).sort()).toEqual(['401', '429']);
    expect(counts[401] + counts[429]).toBe(800);
    expect(served).toBe(16);
    // The scraper's own reviews wait for the budget to refill.
    const scrape = await waitFor(async () => {
      const r = await call(flood.port, 'GET', '/metrics', { token: tokens.scraper });
      return r.status === 200 && r;
    }, 'a scrape within the budget');
    const reviews = seriesValue(scrape.body, 'predictgate_auth_review_duration_seconds_count{review="TokenReview",outcome="unauthenticated"}');
    // Each 401 is one TokenReview; 429s asked none. A burst of 20, then 10 a second.
    expect(reviews).toBe(counts[401]);
    expect(reviews).toBeLessThanOrEqual(20 + Math.ceil(10 * seconds));
  } finally {
    await flood.stop();
  }
});

test('logs carry the caller\'s name and never a token', async () => {
  const logs = gateway.proc.logs();
  const text = JSON.stringify(logs);
  for (const [sa, token] of Object.entries(tokens)) expect({ sa, leaked: text.includes(token) || text.includes(token.slice(-40)) }).toEqual({ sa, leaked: false });
  expect(logs.some((l) => l.user === user(ns, 'caller') && l.status === 200)).toBe(true);
  expect(logs.some((l) => l.user === user(ns, 'stranger') && l.status === 403)).toBe(true);
});
