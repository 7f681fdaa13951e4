// Configuration: every setting, its environment variable, its command-line flag, its default, the
// commands that read it and its description in one table, and the command line read against it.
// Each command's `--help` and the README's table are written from this table.
import { parseArgs } from 'node:util';
import type { LogLevel } from './log.js';

export interface Config {
  host: string;
  port: number;
  endpointDomain: string;
  timeoutSeconds: number;
  idleTimeoutSeconds: number;
  streamTimeoutSeconds: number;
  streamIdleTimeoutSeconds: number;
  coldStartQueue: number;
  autoscaleIntervalMs: number;
  autoscaleStableWindowSeconds: number;
  gatewayService: string;
  maxRequestBytes: number;
  bufferedBodyBytes: number;
  maxResponseBytes: number;
  responseGzipMinBytes: number;
  maxJsonDepth: number;
  upstreamKeepAliveMs: number;
  upstreamConnections: number;
  upstreamStreamConnections: number;
  outlierConsecutiveFailures: number;
  outlierEjectionSeconds: number;
  outlierMaxEjectionPercent: number;
  retryBudgetPercent: number;
  healthCheckIntervalMs: number;
  healthCheckTimeoutMs: number;
  loadScrapeIntervalMs: number;
  prefixAffinityBlockChars: number;
  unhealthyThreshold: number;
  drainSeconds: number;
  headersTimeoutSeconds: number;
  bodyTimeoutSeconds: number;
  bodyMinBytesPerSecond: number;
  maxConnections: number;
  maxConnectionsPerClient: number;
  probePort: number;
  grpcPort: number;
  healthIntervalMs: number;
  logLevel: LogLevel;
  namespaces: string[];
  leaderElection: boolean;
  leaderElectionNamespace: string;
  leaseDurationSeconds: number;
  resyncSeconds: number;
  upstreamResolve: string[];
  auth: AuthMode;
  authAudiences: string[];
  authAllowTtlSeconds: number;
  authDenyTtlSeconds: number;
  authCacheSize: number;
  authReviewsPerSecond: number;
}

/** Who may call: nobody is asked (`none`), or the Kubernetes API decides (TokenReview and SubjectAccessReview). */
export type AuthMode = 'none' | 'kubernetes';

/** The commands. `model` reads none of these settings: its environment is the Vertex contract (models/index.ts). */
export const COMMANDS = ['local', 'gateway', 'controller', 'model'] as const;
export type Command = (typeof COMMANDS)[number];

export interface Setting {
  key: keyof Config;
  env: string;
  flag: string;
  kind: 'int' | 'number' | 'string' | 'choice' | 'list' | 'bool';
  default: string | number | boolean;
  /** Defaults of commands that differ from `default`. */
  commandDefaults?: Partial<Record<Command, string>>;
  /** A choice's values. */
  choices?: readonly string[];
  /** The commands that read it (their --help lists it; other commands refuse its flag). */
  commands: readonly Command[];
  help: string;
  /** Numbers: the least value accepted (default 0). */
  min?: number;
  /** Numbers: the largest value accepted (default none). */
  max?: number;
}

export const SETTINGS: Setting[] = [
  { key: 'host', env: 'HOST', flag: '--host', kind: 'string', default: '127.0.0.1', commands: ['local', 'gateway', 'controller'], help: 'Address to listen on (0.0.0.0 in a container).' },
  { key: 'port', env: 'PORT', flag: '--port', kind: 'int', default: 8080, commands: ['local', 'gateway', 'controller'], help: 'Port to listen on (0 picks a free one).' },
  { key: 'endpointDomain', env: 'ENDPOINT_DOMAIN', flag: '--endpoint-domain', kind: 'string', default: 'predictgate.internal', commands: ['local', 'gateway', 'controller'], help: 'Endpoint FQDNs are {endpoint}.{namespace}.{domain}; GDC-form calls and the OpenAI-compatible routes at the root (/v1/chat/completions, ...) choose the Endpoint by this Host.' },
  { key: 'timeoutSeconds', env: 'UPSTREAM_TIMEOUT_SECONDS', flag: '--timeout-seconds', kind: 'number', default: 60, commands: ['local', 'gateway'], help: 'Deadline of a model call, from sending it to the last byte of the answer. Endpoint and DeployedModel spec.serving.timeoutSeconds override it.' },
  { key: 'idleTimeoutSeconds', env: 'UPSTREAM_IDLE_TIMEOUT_SECONDS', flag: '--idle-timeout-seconds', kind: 'number', default: 30, commands: ['local', 'gateway'], help: 'Longest pause between two parts of a streamed answer (rawPredict) once it has started; past it the call fails as if its deadline had passed. Only shorter than the deadline matters.' },
  { key: 'streamTimeoutSeconds', env: 'STREAM_TIMEOUT_SECONDS', flag: '--stream-timeout-seconds', kind: 'number', default: 1800, min: 1, commands: ['local', 'gateway'], help: 'Deadline of a streamed call (streamRawPredict, and OpenAI chat/completions and completions calls with stream true), from sending it to the last byte of the answer: a stream still running then ends with an error event (one that has not started gets 504). Endpoint and DeployedModel spec.serving.streamTimeoutSeconds override it.' },
  { key: 'streamIdleTimeoutSeconds', env: 'STREAM_IDLE_TIMEOUT_SECONDS', flag: '--stream-idle-timeout-seconds', kind: 'number', default: 60, min: 1, commands: ['local', 'gateway'], help: 'Longest pause in a streamed answer once it has started (between two tokens, say): past it the stream ends with an error event and the model call is closed. Endpoint and DeployedModel spec.serving.streamIdleTimeoutSeconds override it.' },
  { key: 'coldStartQueue', env: 'COLD_START_QUEUE', flag: '--cold-start-queue', kind: 'int', default: 1000, min: 1, commands: ['local', 'gateway'], help: 'Calls this gateway holds for a model at zero replicas (dedicatedResources.scaleToZeroSpec) while it wakes; each waits up to its timeoutSeconds (then 503 model_starting, with Retry-After), and one more is refused at once with 429 model_busy. A held call holds no body memory: its body is read once a replica is ready. A stream counts from its start to its end.' },
  { key: 'maxRequestBytes', env: 'MAX_REQUEST_BYTES', flag: '--max-request-bytes', kind: 'int', default: 16 * 1024 * 1024, commands: ['local', 'gateway'], help: 'Largest request body. Endpoint and DeployedModel spec.serving.maxRequestBytes override it.' },
  { key: 'maxResponseBytes', env: 'MAX_RESPONSE_BYTES', flag: '--max-response-bytes', kind: 'int', default: 64 * 1024 * 1024, commands: ['local', 'gateway'], help: 'Largest predict answer the gateway buffers from a model (rawPredict streams and has no limit).' },
  { key: 'responseGzipMinBytes', env: 'RESPONSE_GZIP_MIN_BYTES', flag: '--response-gzip-min-bytes', kind: 'int', default: 16 * 1024, min: 0, commands: ['local', 'gateway'], help: 'Answers the gateway makes (predict, explain, the TF Serving surface, rawPredict in its $alt=json form) of this many bytes or more go gzip-compressed to clients whose Accept-Encoding takes gzip; 0: never. Streamed answers, and rawPredict\'s answers as the model sent them, are passed on as they come. Request bodies may always come gzip-compressed (Content-Encoding: gzip), held to the request limit once inflated.' },
  { key: 'bufferedBodyBytes', env: 'BUFFERED_BODY_BYTES', flag: '--buffered-body-bytes', kind: 'int', default: 4 * 1024 * 1024, commands: ['local', 'gateway'], help: 'Memory for the request and answer bodies that calls in flight hold whole (predict, explain, the TF Serving surface), and the most the pool of reused body buffers keeps. Past it, a body of 256 KiB or more waits to be read, up to the call\'s timeout (then 503 overloaded); smaller and chunked bodies never wait but are counted.' },
  { key: 'maxJsonDepth', env: 'MAX_JSON_DEPTH', flag: '--max-json-depth', kind: 'int', default: 64, commands: ['local', 'gateway'], help: 'Deepest nesting accepted in a predict body.' },
  { key: 'upstreamKeepAliveMs', env: 'UPSTREAM_KEEPALIVE_MS', flag: '--upstream-keepalive-ms', kind: 'int', default: 4000, commands: ['local', 'gateway'], help: 'Idle time after which a pooled model connection is closed; keep it below the model server keep-alive timeout.' },
  { key: 'upstreamConnections', env: 'UPSTREAM_CONNECTIONS', flag: '--upstream-connections', kind: 'int', default: 256, commands: ['local', 'gateway'], help: 'Most pooled connections per model replica.' },
  { key: 'upstreamStreamConnections', env: 'UPSTREAM_STREAM_CONNECTIONS', flag: '--upstream-stream-connections', kind: 'int', default: 4096, min: 1, commands: ['local', 'gateway'], help: 'Most connections per model replica for streamed calls (streamRawPredict, the OpenAI routes), apart from UPSTREAM_CONNECTIONS: a stream holds its connection for as long as it runs, so streams neither wait behind the other calls\' connections nor take them. Past it, a stream waits for one of them to end (a model\'s concurrency limit, spec.serving.maxConcurrency, is the better bound).' },
  { key: 'outlierConsecutiveFailures', env: 'OUTLIER_CONSECUTIVE_FAILURES', flag: '--outlier-consecutive-failures', kind: 'int', default: 5, commands: ['local', 'gateway'], help: 'Failed connections, resets and timeouts in a row that take a model replica out of rotation (0: never).' },
  { key: 'outlierEjectionSeconds', env: 'OUTLIER_EJECTION_SECONDS', flag: '--outlier-ejection-seconds', kind: 'number', default: 30, commands: ['local', 'gateway'], help: 'How long a replica is first out of rotation; each further time in a row adds as much again, up to 300 s.' },
  { key: 'outlierMaxEjectionPercent', env: 'OUTLIER_MAX_EJECTION_PERCENT', flag: '--outlier-max-ejection-percent', kind: 'int', default: 50, commands: ['local', 'gateway'], help: 'Most of a model\'s replicas that outlier detection takes out of rotation, in percent, counting those out for failed health checks (one of two or more may always be).' },
  { key: 'retryBudgetPercent', env: 'RETRY_BUDGET_PERCENT', flag: '--retry-budget-percent', kind: 'int', default: 20, commands: ['local', 'gateway'], help: 'Retries on another replica after a refused connection, in flight at once, as a share of the calls in flight (at least 3).' },
  { key: 'healthCheckIntervalMs', env: 'UPSTREAM_HEALTH_CHECK_INTERVAL_MS', flag: '--upstream-health-check-interval-ms', kind: 'int', default: 1000, commands: ['local', 'gateway'], help: 'How often the gateway asks each replica of a model that took calls in the last minute for its health route (the replicas of other models once a minute, failing ones included); 0 turns these checks off.' },
  { key: 'healthCheckTimeoutMs', env: 'UPSTREAM_HEALTH_CHECK_TIMEOUT_MS', flag: '--upstream-health-check-timeout-ms', kind: 'int', default: 1000, min: 1, commands: ['local', 'gateway'], help: 'A health check not answered 2xx within this long fails.' },
  { key: 'loadScrapeIntervalMs', env: 'LOAD_SCRAPE_INTERVAL_MS', flag: '--load-scrape-interval-ms', kind: 'int', default: 250, commands: ['local', 'gateway'], help: 'How often the gateway reads the load that each replica of a model speaking the OpenAI API reports on its modelSpec.openai.metricsRoute (vLLM\'s and llama.cpp\'s queue and KV-cache metrics), for replicas that took calls in the last minute (the others every 10 s). Calls to such a model go to the replica with the least queued work and cache pressure while every report is younger than four intervals (and at least 1 s), else by least-request. 0 turns it off.' },
  { key: 'prefixAffinityBlockChars', env: 'PREFIX_AFFINITY_BLOCK_CHARS', flag: '--prefix-affinity-block-chars', kind: 'int', default: 256, min: 0, commands: ['local', 'gateway'], help: 'Prefix affinity of load-aware picks: an OpenAI call\'s prompt (its messages\' roles and contents, or the completion\'s prompt) is cut into blocks of this many characters, up to 64, and the call goes to the replica it last sent the longest shared prefix to, where the model server\'s prefix cache already holds it, while that replica\'s queue is no longer than the shortest and its KV cache under 90 % full; else by load. A prompt shorter than one block has no affinity. 0 turns it off.' },
  { key: 'unhealthyThreshold', env: 'UPSTREAM_UNHEALTHY_THRESHOLD', flag: '--upstream-unhealthy-threshold', kind: 'int', default: 2, min: 1, commands: ['local', 'gateway'], help: 'Failed health checks in a row that take a replica out of rotation until one passes.' },
  { key: 'drainSeconds', env: 'DRAIN_SECONDS', flag: '--drain-seconds', kind: 'number', default: 30, commands: ['local', 'gateway'], help: 'On SIGTERM, how long the drain may last: calls still unanswered then get 503 shutting_down, and the process exits.' },
  { key: 'headersTimeoutSeconds', env: 'HEADERS_TIMEOUT_SECONDS', flag: '--headers-timeout-seconds', kind: 'number', default: 10, min: 1, commands: ['local', 'gateway'], help: 'A request\'s headers must arrive whole within this long of its first byte (of the connection, for its first request); past it the gateway answers 408 client_timeout and closes the connection (a connection that sent nothing at all is closed without an answer). Checked every second.' },
  { key: 'bodyTimeoutSeconds', env: 'BODY_TIMEOUT_SECONDS', flag: '--body-timeout-seconds', kind: 'number', default: 10, min: 1, commands: ['local', 'gateway'], help: 'Longest pause in a request body while the gateway is reading it (like nginx\'s client_body_timeout); past it the call fails with 408 client_timeout (its model call cancelled) and the connection is closed.' },
  { key: 'bodyMinBytesPerSecond', env: 'BODY_MIN_BYTES_PER_SECOND', flag: '--body-min-bytes-per-second', kind: 'int', default: 1024, commands: ['local', 'gateway'], help: 'Least rate of a request body: in every BODY_TIMEOUT_SECONDS of reading, at least this many bytes per second must arrive (unless the body ends first), else 408 client_timeout; 0 checks only the pause. A large body arriving slower than 64 KiB a second gives its unread share of BUFFERED_BODY_BYTES back.' },
  { key: 'maxConnections', env: 'MAX_CONNECTIONS', flag: '--max-connections', kind: 'int', default: 0, commands: ['local', 'gateway'], help: 'Most client connections open at once; past it a new connection is answered 503 too_many_connections and closed. 0: half of what the soft open-files limit (ulimit -n) leaves after 256 descriptors, 4096 where it cannot be read.' },
  { key: 'maxConnectionsPerClient', env: 'MAX_CONNECTIONS_PER_CLIENT', flag: '--max-connections-per-client', kind: 'int', default: 1024, commands: ['local', 'gateway'], help: 'Most connections open at once from one remote address (behind a proxy or ingress, that is the proxy\'s address: raise it, or 0 for no limit); past it a new connection is answered 503 too_many_connections.' },
  { key: 'probePort', env: 'PROBE_PORT', flag: '--probe-port', kind: 'int', default: 0, commands: ['local', 'gateway'], help: 'Port of a second listener that serves only /healthz and /readyz, with connections of its own (32 at most), so probes are answered when the main port is at MAX_CONNECTIONS; 0: none.' },
  { key: 'grpcPort', env: 'GRPC_PORT', flag: '--grpc-port', kind: 'int', default: 0, commands: ['local', 'gateway'], help: 'Port of the gRPC surface: Vertex AI\'s PredictionService (v1 and v1beta1: Predict, Explain, RawPredict, StreamRawPredict), what the official client libraries call by default, in plaintext HTTP/2. Each call is made as the REST call it names, with the same routing, auth (its authorization metadata), limits, metrics and drain; its request message may be up to twice MAX_REQUEST_BYTES. 0: none.' },
  { key: 'healthIntervalMs', env: 'HEALTH_INTERVAL_MS', flag: '--health-interval-ms', kind: 'int', default: 1000, commands: ['local'], help: 'How often local mode checks each model process\'s health route (for its ready replicas).' },
  { key: 'namespaces', env: 'WATCH_NAMESPACES', flag: '--namespaces', kind: 'list', default: '', commands: ['gateway', 'controller'], help: 'The namespaces whose DeployedModels and Endpoints are watched (comma-separated); empty watches all.' },
  { key: 'leaderElection', env: 'LEADER_ELECTION', flag: '--leader-election', kind: 'bool', default: true, commands: ['controller'], help: 'Take a coordination.k8s.io Lease before reconciling, so one of several replicas is active.' },
  { key: 'leaderElectionNamespace', env: 'LEADER_ELECTION_NAMESPACE', flag: '--leader-election-namespace', kind: 'string', default: 'default', commands: ['controller'], help: 'Namespace of the Lease predictgate-controller (the chart sets its own namespace).' },
  { key: 'leaseDurationSeconds', env: 'LEASE_DURATION_SECONDS', flag: '--lease-duration-seconds', kind: 'number', default: 15, commands: ['controller'], help: 'How long a Lease holds without renewal; a standby takes over within it. Renewal is due at 2/3 of it.' },
  { key: 'resyncSeconds', env: 'RESYNC_SECONDS', flag: '--resync-seconds', kind: 'number', default: 300, commands: ['controller'], help: 'How often every object is reconciled again even without a change (writes nothing when all is in order).' },
  { key: 'autoscaleIntervalMs', env: 'AUTOSCALE_INTERVAL_MS', flag: '--autoscale-interval-ms', kind: 'int', default: 1000, min: 50, commands: ['local', 'controller'], help: 'How often the request autoscaler reads every gateway\'s demand and decides the replicas of the models that scale on calls (autoscaling.targetConcurrency, targetRequestsPerSecond); a call held for a model at zero wakes it at once, without waiting for the next read.' },
  { key: 'autoscaleStableWindowSeconds', env: 'AUTOSCALE_STABLE_WINDOW_SECONDS', flag: '--autoscale-stable-window-seconds', kind: 'number', default: 60, min: 6, max: 3600, commands: ['local', 'controller'], help: 'The request autoscaler\'s stable window, as Knative\'s stable-window: replicas follow the calls in flight averaged over it, and none is taken away before the model has been watched for that long or while a burst is less than that long ago. The panic window, which follows a burst of twice the ready replicas\' worth at once, is a tenth of it (6 s of the default 60 s).' },
  { key: 'gatewayService', env: 'GATEWAY_SERVICE', flag: '--gateway-service', kind: 'string', default: '', commands: ['controller', 'gateway'], help: 'The gateway\'s Service as namespace/name (the chart sets it). The controller\'s request autoscaler finds every gateway replica through its EndpointSlices and reads each one\'s demand (GET /stats/demand, with the controller\'s token); empty: no request autoscaling in the cluster (models with a request target keep their minimum, at least one replica). Each gateway counts the ready replicas there and admits its share of every model\'s maxConcurrency and maxQueuedCalls, so that all of them together admit what one would (a share is at least one call); empty: each gateway admits the whole limit.' },
  { key: 'upstreamResolve', env: 'UPSTREAM_RESOLVE', flag: '--upstream-resolve', kind: 'list', default: '', commands: ['gateway'], help: 'HOST:PORT=ADDRESS:PORT pairs (comma-separated) that replace model Service addresses, like curl --resolve (out-of-cluster runs, tests).' },
  { key: 'auth', env: 'PREDICT_AUTH', flag: '--auth', kind: 'choice', choices: ['none', 'kubernetes'], default: 'kubernetes', commandDefaults: { local: 'none' }, commands: ['local', 'gateway'], help: 'Who may call: none lets every caller in; kubernetes checks each call\'s bearer token with a TokenReview and its right with a SubjectAccessReview (create on endpoints/predict or endpoints/explain, deployedmodels/predict for the TF Serving surface, get on the non-resource URL /metrics), so RBAC decides. /healthz and /readyz stay open.' },
  { key: 'authAudiences', env: 'AUTH_AUDIENCES', flag: '--auth-audiences', kind: 'list', default: '', commands: ['local', 'gateway'], help: 'Audiences a bearer token must be for (comma-separated); empty takes the apiserver\'s own (what kubectl create token issues).' },
  { key: 'authAllowTtlSeconds', env: 'AUTH_ALLOW_TTL_SECONDS', flag: '--auth-allow-ttl-seconds', kind: 'number', default: 300, commands: ['local', 'gateway'], help: 'How long an accepted token and an allowed call are remembered (never past the token\'s own expiry); a revoked RoleBinding takes effect within it.' },
  { key: 'authDenyTtlSeconds', env: 'AUTH_DENY_TTL_SECONDS', flag: '--auth-deny-ttl-seconds', kind: 'number', default: 30, commands: ['local', 'gateway'], help: 'How long a refused token and a denied call are remembered; a new RoleBinding takes effect within it.' },
  { key: 'authCacheSize', env: 'AUTH_CACHE_SIZE', flag: '--auth-cache-size', kind: 'int', default: 10000, min: 1, commands: ['local', 'gateway'], help: 'Most tokens, and most decisions, remembered (each; the least recently used go first). Keyed by a SHA-256 of the token, never the token.' },
  { key: 'authReviewsPerSecond', env: 'AUTH_REVIEWS_PER_SECOND', flag: '--auth-reviews-per-second', kind: 'number', default: 100, min: 1, commands: ['local', 'gateway'], help: 'Most TokenReviews and SubjectAccessReviews sent per second (bursts of twice as many); calls past it that need a review get 429 auth_throttled, so a flood of made-up tokens never floods the apiserver. Remembered decisions are not limited.' },
  { key: 'logLevel', env: 'LOG_LEVEL', flag: '--log-level', kind: 'choice', choices: ['debug', 'info', 'warn', 'error', 'silent'], default: 'info', commands: ['local', 'gateway', 'controller'], help: 'debug (one line per request), info, warn, error or silent.' },
];

function parseValue(s: Setting, raw: string, source: string): string | number | boolean | string[] {
  if (s.kind === 'list') return raw.split(',').map((x) => x.trim()).filter((x) => x !== '');
  if (s.kind === 'bool') {
    if (raw !== 'true' && raw !== 'false') throw new Error(`${source} must be true or false, got ${JSON.stringify(raw)}`);
    return raw === 'true';
  }
  if (s.kind === 'string') {
    // A string whose default is empty is optional: empty leaves it unset.
    if (raw === '' && s.default !== '') throw new Error(`${source} must not be empty`);
    return raw;
  }
  if (s.kind === 'choice') {
    const choices = s.choices ?? [];
    if (!choices.includes(raw)) throw new Error(`${source} must be one of ${choices.join(', ')}, got ${JSON.stringify(raw)}`);
    return raw;
  }
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n < 0 || (s.kind === 'int' && !Number.isInteger(n))) {
    throw new Error(`${source} must be a non-negative ${s.kind === 'int' ? 'integer' : 'number'}, got ${JSON.stringify(raw)}`);
  }
  if (s.min !== undefined && n < s.min) throw new Error(`${source} must be at least ${s.min}, got ${JSON.stringify(raw)}`);
  if (s.max !== undefined && n > s.max) throw new Error(`${source} must be at most ${s.max}, got ${JSON.stringify(raw)}`);
  return n;
}

/** The command line of a command: its settings' flags, its positional arguments, or a help request. */
export type CommandLine = { help: true } | { help: false; flags: Map<Setting, string>; rest: string[] };

function refused(command: Command | undefined, why: string): Error {
  return new Error(`${why}; see predictgate ${command ? `${command} ` : ''}--help`);
}

/**
 * Splits `argv` (what follows the command's name) with node:util's parseArgs: `--flag value` or
 * `--flag=value` for each setting of `command` (every setting when undefined), `-h`/`--help`, and
 * positional arguments. A help request anywhere wins over everything else on the line.
 */
export function parseCommandLine(argv: string[], command?: Command): CommandLine {
  const settings = command ? settingsOf(command) : SETTINGS;
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = { help: { type: 'boolean', short: 'h' } };
  for (const s of settings) options[s.flag.slice(2)] = { type: 'string' };
  // Not strict: unknown options and missing values come back as tokens, and are refused below with
  // the setting's own words.
  const { tokens } = parseArgs({ args: argv, options, strict: false, allowPositionals: true, tokens: true });
  if (tokens.some((t) => t.kind === 'option' && t.name === 'help' && t.value === undefined)) return { help: true };
  const flags = new Map<Setting, string>();
  const rest: string[] = [];
  for (const t of tokens) {
    if (t.kind === 'positional') rest.push(t.value);
    if (t.kind !== 'option') continue;
    const s = settings.find((x) => x.flag === `--${t.name}`);
    if (t.name === 'help') throw refused(command, `${t.rawName} takes no value`);
    if (!s) {
      const other = SETTINGS.find((x) => x.flag === t.rawName);
      throw refused(command, other && command ? `${t.rawName} is not a setting of predictgate ${command}` : `unknown option ${t.rawName}`);
    }
    // parseArgs takes the next argument as the value even when it is another flag.
    if (t.value === undefined || (!t.inlineValue && t.value.startsWith('--'))) throw refused(command, `${s.flag} needs a value`);
    flags.set(s, t.value);
  }
  return { help: false, flags, rest };
}

/**
 * Reads the settings of `command` (every setting when undefined) from flags (first) and the
 * environment; the others keep their defaults. Returns the config and the positional arguments.
 * Throws with a clear message on a bad value or an unknown flag. A help request is for the caller
 * to see first (parseCommandLine); here it reads as a line without flags.
 */
export function loadConfig(argv: string[], env: NodeJS.ProcessEnv, command?: Command): { config: Config; rest: string[] } {
  const line = parseCommandLine(argv, command);
  const { flags, rest } = line.help ? { flags: new Map<Setting, string>(), rest: [] } : line;
  const read = command ? settingsOf(command) : SETTINGS;
  const values: Record<string, unknown> = {};
  for (const s of SETTINGS) {
    const flag = flags.get(s);
    const raw = read.includes(s) ? env[s.env] : undefined;
    if (flag !== undefined) values[s.key] = parseValue(s, flag, s.flag);
    else values[s.key] = parseValue(s, raw ?? defaultOf(s, command), raw === undefined ? `the default of ${s.env}` : s.env);
  }
  return { config: values as unknown as Config, rest };
}

/** A setting's default for `command` (its own default when the command has none of its own, or none is named). */
export function defaultOf(s: Setting, command?: Command): string {
  return String((command && s.commandDefaults?.[command]) ?? s.default);
}

/** The settings that `command` reads. */
export function settingsOf(command: Command): Setting[] {
  return SETTINGS.filter((s) => s.commands.includes(command));
}

/** The settings part of `predictgate COMMAND --help`: each setting's flag, variable, default and meaning. */
export function settingsHelp(command: Command, width = 100): string {
  return settingsOf(command)
    .map((s) => `  ${s.flag} / ${s.env} (default ${defaultOf(s, command) || 'none'})\n${wrap(s.help, width, '      ')}`)
    .join('\n');
}

/** `text` broken at spaces into lines of at most `width` characters, each starting with `indent`. */
export function wrap(text: string, width: number, indent: string): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line !== '' && indent.length + line.length + 1 + word.length > width) {
      lines.push(indent + line);
      line = word;
    } else {
      line = line === '' ? word : `${line} ${word}`;
    }
  }
  if (line !== '') lines.push(indent + line);
  return lines.join('\n');
}

/** The README's configuration table (test/unit/docs.test.ts keeps the README in step with it). */
export function settingsMarkdown(): string {
  const rows = SETTINGS.map((s) => {
    const others = Object.entries(s.commandDefaults ?? {}).map(([c, v]) => ` (${c}: \`${v}\`)`).join('');
    return `| \`${s.flag}\` | \`${s.env}\` | ${s.default === '' ? '(none)' : `\`${s.default}\``}${others} | ${s.commands.join(', ')} | ${s.help} |`;
  });
  return ['| flag | environment | default | commands | meaning |', '| --- | --- | --- | --- | --- |', ...rows].join('\n');
}
