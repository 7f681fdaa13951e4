// The gate every guarded call passes: who the caller is, from its bearer token, and whether it may
// do what it asks (access.ts). Two gates: the open one (--auth none) and the Kubernetes one
// (kubernetes.ts). Also owns reading the bearer token and the 401 answers about it.
import type { IncomingMessage } from 'node:http';
import { ApiError } from '../../errors.js';
import type { Access } from './access.js';

/** The caller, as the Kubernetes API authenticated it (what a SubjectAccessReview asks about). */
export interface Identity {
  user: string;
  uid: string;
  groups: string[];
  extra: Record<string, string[]>;
}

export interface Gate {
  /** False for the open gate: callers are not asked who they are. */
  readonly enabled: boolean;
  /**
   * The caller of `req` once it may do `access` (only authenticated when `access` is undefined): at
   * once when the answer is remembered, else once the reviews are back. Throws the ApiError that
   * refuses the call (401, 403, 429, 503).
   */
  check(req: IncomingMessage, access: Access | undefined): Identity | Promise<Identity>;
}

/** A refusal of a caller the cluster authenticated (403, or a review it could not make): it names them, for logs. */
export class Refusal extends ApiError {
  constructor(code: 'permission_denied' | 'auth_throttled' | 'auth_unavailable', message: string, readonly user: string) {
    super(code, message);
  }
}

/** Callers of the open gate. */
export const ANONYMOUS: Identity = Object.freeze({ user: 'system:anonymous', uid: '', groups: [], extra: {} });

/** --auth none: every caller may call. */
export const OPEN_GATE: Gate = { enabled: false, check: () => ANONYMOUS };

/** Longest bearer token read (ServiceAccount and OIDC tokens are a few KiB). */
const MAX_TOKEN_CHARS = 16 * 1024;
/** RFC 6750's b64token (RFC 9110's token68). */
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;

const CHALLENGE = 'Bearer realm="predictgate"';

/** A 401 with its WWW-Authenticate challenge (RFC 6750: error="invalid_token" when a token was sent). */
export function unauthenticated(message: string, tokenSent: boolean): ApiError {
  const err = new ApiError('unauthenticated', message);
  err.headers = { 'WWW-Authenticate': tokenSent ? `${CHALLENGE}, error="invalid_token"` : CHALLENGE };
  return err;
}

const HOW = 'send Authorization: Bearer TOKEN, with a token the cluster accepts (kubectl create token SERVICEACCOUNT, a pod\'s ServiceAccount token, or an OIDC token)';

/**
 * The bearer token of a request; throws 401 when there is none. Whether it can be a token at all
 * (checkTokenSyntax) is asked only of tokens not yet remembered.
 */
export function bearerToken(req: IncomingMessage): string {
  const header = req.headers.authorization;
  if (header === undefined || header === '') throw unauthenticated(`the call has no bearer token; ${HOW}`, false);
  const space = header.indexOf(' ');
  const scheme = space < 0 ? header : header.slice(0, space);
  if (scheme.toLowerCase() !== 'bearer') {
    throw unauthenticated(`the Authorization header uses the ${JSON.stringify(scheme.slice(0, 32))} scheme, not Bearer; ${HOW}`, false);
  }
  const token = header.slice(space + 1).trim();
  if (token === '') throw unauthenticated(`the Authorization header has an empty bearer token; ${HOW}`, true);
  if (token.length > MAX_TOKEN_CHARS) throw unauthenticated(`the bearer token is ${token.length} characters long, more than the ${MAX_TOKEN_CHARS} accepted`, true);
  return token;
}

/** Throws 401 when `token` has characters no token can have (before it is sent to a TokenReview). */
export function checkTokenSyntax(token: string): void {
  if (!TOKEN68.test(token)) throw unauthenticated('the bearer token has characters no token can have (RFC 6750 b64token: letters, digits and -._~+/ then = padding)', true);
}

/** When a JWT says it expires (its `exp` claim, in ms since the epoch); undefined for other tokens. Read, not verified: it only shortens how long the token is remembered. */
export function jwtExpiry(token: string): number | undefined {
  const first = token.indexOf('.');
  const second = token.indexOf('.', first + 1);
  if (first < 0 || second < 0) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(token.slice(first + 1, second), 'base64url').toString('utf8')) as { exp?: unknown };
    return typeof claims?.exp === 'number' && Number.isFinite(claims.exp) ? claims.exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}
