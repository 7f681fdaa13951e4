// The Kubernetes gate's memory and manners (auth/kubernetes.ts), with reviews answered by the test
// and the test's clock: what is remembered and for how long (allow and deny TTLs, a token's own
// expiry), that calls asking at once share one review, that made-up tokens cannot flood the
// apiserver, that a failed review refuses the call (fail closed), and the refusals' words.
// The same gate against a real apiserver is in test/integration/cluster-auth.test.ts.
import type { IncomingMessage } from 'node:http';
import { KubernetesGate, type KubernetesGateOptions } from '../../src/gateway/auth/kubernetes.js';
import { bearerToken, jwtExpiry, type Identity } from '../../src/gateway/auth/gate.js';
import { endpointCallAccess, modelCallAccess, urlAccess, type Access } from '../../src/gateway/auth/access.js';
import type { AccessVerdict, Reviewer, TokenVerdict } from '../../src/gateway/auth/reviews.js';
import { ApiError } from '../../src/errors.js';

const ALICE: Identity = { user: 'system:serviceaccount:team-a:alice', uid: 'u-1', groups: ['system:serviceaccounts'], extra: {} };
const PREDICT = endpointCallAccess('predict', 'team-a', 'half-plus-two');

/** A reviewer that knows the tokens and grants of the test, counts what it was asked, and can be held or broken. */
class TestReviewer implements Reviewer {
  tokens = new Map<string, Identity>([['good', ALICE]]);
  grants = new Set<string>(['team-a/half-plus-two predict']);
  tokenReviews = 0;
  accessReviews = 0;
  failWith: Error | undefined;
  held: Array<() => void> = [];
  hold = false;

  private async gate(): Promise<void> {
    if (this.hold) await new Promise<void>((resolve) => this.held.push(resolve));
    if (this.failWith) throw this.failWith;
  }

  async tokenReview(token: string): Promise<TokenVerdict> {
    this.tokenReviews++;
    await this.gate();
    const identity = this.tokens.get(token);
    return identity ? { authenticated: true, identity, audiences: ['https://kubernetes.default.svc.cluster.local'] } : { authenticated: false, error: 'invalid bearer token' };
  }

  async accessReview(who: Identity, a: Access): Promise<AccessVerdict> {
    this.accessReviews++;
    await this.gate();
    const key = a.kind === 'resource' ? `${a.namespace}/${a.name} ${a.subresource}` : a.path;
    return { allowed: who === ALICE && this.grants.has(key), reason: '' };
  }

  release(): void {
    for (const r of this.held.splice(0)) r();
  }
}

function request(authorization?: string): IncomingMessage {
  return { headers: authorization === undefined ? {} : { authorization } } as IncomingMessage;
}

function setup(over: Partial<KubernetesGateOptions> = {}): { gate: KubernetesGate; reviewer: TestReviewer; clock: { t: number; wall: number } } {
  const reviewer = new TestReviewer();
  const clock = { t: 1000, wall: Date.UTC(2026, 0, 1) };
  const gate = new KubernetesGate({
    reviewer, audiences: [], allowTtlMs: 300_000, denyTtlMs: 30_000, cacheSize: 100, reviewsPerSecond: 100,
    now: () => clock.t, wallClock: () => clock.wall, ...over,
  });
  return { gate, reviewer, clock };
}

/** The check's outcome: the user let in, or the refusal's code. */
async function outcome(gate: KubernetesGate, req: IncomingMessage, access: Access | 'authenticate only' = PREDICT): Promise<string> {
  try {
    return (await gate.check(req, access === 'authenticate only' ? undefined : access)).user;
  } catch (err) {
    if (err instanceof ApiError) return err.code;
    throw err;
  }
}

async function refusal(gate: KubernetesGate, req: IncomingMessage, access: Access = PREDICT): Promise<ApiError> {
  try {
    await gate.check(req, access);
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error('the call was let in');
}

test('a permitted token passes once reviewed, and is then let in from memory without a review, at once', async () => {
  const { gate, reviewer } = setup();
  expect(await outcome(gate, request('Bearer good'))).toBe(ALICE.user);
  expect([reviewer.tokenReviews, reviewer.accessReviews]).toEqual([1, 1]);
  const again = gate.check(request('Bearer good'), PREDICT);
  // Remembered: answered without a promise, so a cached call waits for nothing.
  expect(again).toEqual(ALICE);
  expect([reviewer.tokenReviews, reviewer.accessReviews]).toEqual([1, 1]);
  expect(gate.stats).toMatchObject({ allowed: 2, tokenHits: 1, accessHits: 1 });
});

test('an allowed call is remembered for the allow TTL: a revoked grant takes effect once it passes', async () => {
  const { gate, reviewer, clock } = setup({ allowTtlMs: 5000 });
  expect(await outcome(gate, request('Bearer good'))).toBe(ALICE.user);
  reviewer.grants.clear();
  clock.t += 4999;
  expect(await outcome(gate, request('Bearer good'))).toBe(ALICE.user);
  clock.t += 2;
  expect(await outcome(gate, request('Bearer good'))).toBe('permission_denied');
  expect([reviewer.tokenReviews, reviewer.accessReviews]).toEqual([2, 2]);
});

test('a denied call is remembered for the deny TTL: a new grant takes effect once it passes', async () => {
  const { gate, reviewer, clock } = setup({ denyTtlMs: 30_000 });
  const other = endpointCallAccess('predict', 'team-b', 'secret-model');
  expect(await outcome(gate, request('Bearer good'), other)).toBe('permission_denied');
  reviewer.grants.add('team-b/secret-model predict');
  clock.t += 29_999;
  expect(await outcome(gate, request('Bearer good'), other)).toBe('permission_denied');
  expect(reviewer.accessReviews).toBe(1);
  clock.t += 2;
  expect(await outcome(gate, request('Bearer good'), other)).toBe(ALICE.user);
  expect(reviewer.accessReviews).toBe(2);
});

test('each thing asked is its own decision: explain, another Endpoint, the TF Serving surface and /metrics', async () => {
  const { gate, reviewer } = setup();
  expect(await outcome(gate, request('Bearer good'))).toBe(ALICE.user);
  expect(await outcome(gate, request('Bearer good'), endpointCallAccess('explain', 'team-a', 'half-plus-two'))).toBe('permission_denied');
  expect(await outcome(gate, request('Bearer good'), endpointCallAccess('predict', 'team-a', 'other'))).toBe('permission_denied');
  expect(await outcome(gate, request('Bearer good'), modelCallAccess('POST', 'team-a', 'half-plus-two'))).toBe(ALICE.user);
  expect(await outcome(gate, request('Bearer good'), urlAccess('/metrics'))).toBe('permission_denied');
  // rawPredict asks what predict asks: remembered.
  expect(await outcome(gate, request('Bearer good'), endpointCallAccess('rawPredict', 'team-a', 'half-plus-two'))).toBe(ALICE.user);
  expect([reviewer.tokenReviews, reviewer.accessReviews]).toEqual([1, 5]);
});

test('calls asking about one token at once share one TokenReview and one SubjectAccessReview', async () => {
  const { gate, reviewer } = setup();
  reviewer.hold = true;
  const calls = Array.from({ length: 50 }, () => outcome(gate, request('Bearer good')));
  await new Promise((resolve) => setImmediate(resolve));
  expect(reviewer.held.length).toBe(1);
  reviewer.hold = false;
  reviewer.release();
  expect(new Set(await Promise.all(calls))).toEqual(new Set([ALICE.user]));
  expect([reviewer.tokenReviews, reviewer.accessReviews]).toEqual([1, 1]);
});

test('a refused token is remembered for the deny TTL (negative cache) and answered 401 with a Bearer challenge', async () => {
  const { gate, reviewer, clock } = setup();
  for (let i = 0; i < 20; i++) expect(await outcome(gate, request('Bearer bogus'))).toBe('unauthenticated');
  expect(reviewer.tokenReviews).toBe(1);
  expect(reviewer.accessReviews).toBe(0);
  const err = await refusal(gate, request('Bearer bogus'));
  expect(err.httpStatus).toBe(401);
  expect(err.rpcStatus).toBe('UNAUTHENTICATED');
  expect(err.headers).toEqual({ 'WWW-Authenticate': 'Bearer realm="predictgate", error="invalid_token"' });
  expect(err.message).toBe('the bearer token was not accepted by the cluster\'s TokenReview: it is expired, revoked, malformed, or for another audience');
  clock.t += 30_001;
  expect(await outcome(gate, request('Bearer bogus'))).toBe('unauthenticated');
  expect(reviewer.tokenReviews).toBe(2);
});

test('a flood of made-up tokens costs at most the review budget: the rest get 429 auth_throttled, remembered tokens still pass', async () => {
  const { gate, reviewer, clock } = setup({ reviewsPerSecond: 10 });
  expect(await outcome(gate, request('Bearer good'))).toBe(ALICE.user);
  const results = await Promise.all(Array.from({ length: 1000 }, (_, i) => outcome(gate, request(`Bearer made-up-${i}`))));
  const counts = results.reduce<Record<string, number>>((m, r) => ((m[r] = (m[r] ?? 0) + 1), m), {});
  // A burst of twice the rate, less the two reviews of the good token.
  expect(counts).toEqual({ unauthenticated: 18, auth_throttled: 982 });
  expect(reviewer.tokenReviews).toBe(19);
  expect(gate.check(request('Bearer good'), PREDICT)).toEqual(ALICE);
  const throttled = await refusal(gate, request('Bearer made-up-again'));
  expect([throttled.httpStatus, throttled.headers]).toEqual([429, { 'Retry-After': '1' }]);
  // The budget refills at the rate.
  clock.t += 1000;
  const next = await Promise.all(Array.from({ length: 20 }, (_, i) => outcome(gate, request(`Bearer later-${i}`))));
  expect(next.filter((r) => r === 'unauthenticated').length).toBe(10);
  expect(gate.stats.throttled).toBe(983 + 10);
});

test('a review that fails refuses the call with 503 auth_unavailable, and is not remembered', async () => {
  const { gate, reviewer } = setup();
  reviewer.failWith = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' });
  const err = await refusal(gate, request('Bearer good'));
  expect([err.code, err.httpStatus, err.rpcStatus]).toEqual(['auth_unavailable', 503, 'UNAVAILABLE']);
  expect(err.message).toBe('cannot tell whether the caller may call: the TokenReview to the Kubernetes API failed (connect ECONNREFUSED 127.0.0.1:6443); the call is refused');
  reviewer.failWith = undefined;
  expect(await outcome(gate, request('Bearer good'))).toBe(ALICE.user);
  expect(gate.stats).toMatchObject({ unavailable: 1, allowed: 1 });
});

test('a 403 names the user, the verb, the resource and the namespace as kubectl does', async () => {
  const { gate } = setup();
  const err = await refusal(gate, request('Bearer good'), endpointCallAccess('explain', 'team-b', 'fraud'));
  expect([err.code, err.httpStatus, err.rpcStatus]).toEqual(['permission_denied', 403, 'PERMISSION_DENIED']);
  expect(err.message).toBe('endpoints.prediction.predictgate.dev "fraud" is forbidden: User "system:serviceaccount:team-a:alice" cannot create resource "endpoints/explain" in API group "prediction.predictgate.dev" in the namespace "team-b"');
  const metrics = await refusal(gate, request('Bearer good'), urlAccess('/metrics'));
  expect(metrics.message).toBe('forbidden: User "system:serviceaccount:team-a:alice" cannot get path "/metrics"');
  const tf = await refusal(gate, request('Bearer good'), modelCallAccess('GET', 'team-b', 'tf'));
  expect(tf.message).toContain('cannot get resource "deployedmodels/predict" in API group "prediction.predictgate.dev" in the namespace "team-b"');
});

test('a token is remembered no longer than its own expiry (a JWT exp claim)', async () => {
  const { gate, reviewer, clock } = setup();
  const payload = Buffer.from(JSON.stringify({ exp: clock.wall / 1000 + 60 })).toString('base64url');
  const jwt = `eyJhbGciOiJSUzI1NiJ9.${payload}.c2ln`;
  reviewer.tokens.set(jwt, ALICE);
  expect(jwtExpiry(jwt)).toBe(clock.wall + 60_000);
  expect(await outcome(gate, request(`Bearer ${jwt}`))).toBe(ALICE.user);
  clock.t += 59_000;
  expect(await outcome(gate, request(`Bearer ${jwt}`))).toBe(ALICE.user);
  expect(reviewer.tokenReviews).toBe(1);
  reviewer.tokens.delete(jwt); // expired: the apiserver no longer accepts it
  clock.t += 1001;
  expect(await outcome(gate, request(`Bearer ${jwt}`))).toBe('unauthenticated');
  expect(reviewer.tokenReviews).toBe(2);
});

test('a token for another audience is refused when audiences are configured', async () => {
  const { gate } = setup({ audiences: ['predictgate'] });
  const err = await refusal(gate, request('Bearer good'));
  expect(err.message).toBe('the bearer token was not accepted by the cluster\'s TokenReview: it is not for this gateway\'s audiences (predictgate)');
});

test('the memory is bounded: past the cache size the least recently used token is reviewed again', async () => {
  const { gate, reviewer } = setup({ cacheSize: 10 });
  for (let i = 0; i < 11; i++) reviewer.tokens.set(`t${i}`, ALICE);
  for (let i = 0; i < 11; i++) await outcome(gate, request(`Bearer t${i}`));
  expect(reviewer.tokenReviews).toBe(11);
  await outcome(gate, request('Bearer t10'));
  expect(reviewer.tokenReviews).toBe(11);
  await outcome(gate, request('Bearer t0'));
  expect(reviewer.tokenReviews).toBe(12);
});

test('a missing, foreign-scheme or impossible token is refused before any review', async () => {
  const { gate, reviewer } = setup();
  const cases: Array<[string | undefined, string, string]> = [
    [undefined, 'the call has no bearer token; send Authorization: Bearer TOKEN', 'Bearer realm="predictgate"'],
    ['Basic YWxpY2U6cHc=', 'the Authorization header uses the "Basic" scheme, not Bearer', 'Bearer realm="predictgate"'],
    ['Bearer ', 'the Authorization header has an empty bearer token', 'Bearer realm="predictgate", error="invalid_token"'],
    ['Bearer a b', 'the bearer token has characters no token can have', 'Bearer realm="predictgate", error="invalid_token"'],
    [`Bearer ${'a'.repeat(16 * 1024 + 1)}`, 'the bearer token is 16385 characters long, more than the 16384 accepted', 'Bearer realm="predictgate", error="invalid_token"'],
  ];
  for (const [header, message, challenge] of cases) {
    const err = await refusal(gate, request(header));
    expect({ code: err.code, message: err.message.slice(0, message.length), challenge: err.headers?.['WWW-Authenticate'] }).toEqual({ code: 'unauthenticated', message, challenge });
  }
  expect(reviewer.tokenReviews).toBe(0);
  expect(bearerToken(request('bearer  tok.en-1_~+/=='))).toBe('tok.en-1_~+/==');
});

test('authenticating only (a Host that names no Endpoint) asks no SubjectAccessReview', async () => {
  const { gate, reviewer } = setup();
  expect(await outcome(gate, request('Bearer good'), 'authenticate only')).toBe(ALICE.user);
  expect(await outcome(gate, request('Bearer bogus'), 'authenticate only')).toBe('unauthenticated');
  expect([reviewer.tokenReviews, reviewer.accessReviews]).toEqual([2, 0]);
});
