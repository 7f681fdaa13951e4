// Configuration: every setting, its environment variable, its command-line flag, its default and
// its description in one table. `--help` and the README are written from this table.
import type { LogLevel } from './log.js';

export interface Config {
  host: string;
  port: number;
  endpointDomain: string;
  timeoutSeconds: number;
  maxRequestBytes: number;
  bufferedBodyBytes: number;
  maxResponseBytes: number;
  maxJsonDepth: number;
  upstreamKeepAliveMs: number;
  upstreamConnections: number;
  upstreamConnectionMaxAgeMs: number;
  drainSeconds: number;
  healthIntervalMs: number;
  memoryTrimIntervalMs: number;
  logLevel: LogLevel;
  namespaces: string[];
  leaderElection: boolean;
  leaderElectionNamespace: string;
  leaseDurationSeconds: number;
  resyncSeconds: number;
  upstreamResolve: string[];
}

interface Setting {
  key: keyof Config;
  env: string;
  flag: string;
  kind: 'int' | 'number' | 'string' | 'level' | 'list' | 'bool';
  default: string | number | boolean;
  help: string;
}

export const SETTINGS: Setting[] = [
  { key: 'host', env: 'HOST', flag: '--host', kind: 'string', default: '127.0.0.1', help: 'Address the gateway listens on (0.0.0.0 in a container).' },
  { key: 'port', env: 'PORT', flag: '--port', kind: 'int', default: 8080, help: 'Port the gateway listens on (0 picks a free one).' },
  { key: 'endpointDomain', env: 'ENDPOINT_DOMAIN', flag: '--endpoint-domain', kind: 'string', default: 'predictgate.internal', help: 'Endpoint FQDNs are {endpoint}.{namespace}.{domain}; GDC-form calls choose the Endpoint by this Host.' },
  { key: 'timeoutSeconds', env: 'UPSTREAM_TIMEOUT_SECONDS', flag: '--timeout-seconds', kind: 'number', default: 60, help: 'Time a model has to answer (headers, then between body chunks). Endpoint and DeployedModel spec.serving.timeoutSeconds override it.' },
  { key: 'maxRequestBytes', env: 'MAX_REQUEST_BYTES', flag: '--max-request-bytes', kind: 'int', default: 16 * 1024 * 1024, help: 'Largest request body. Endpoint and DeployedModel spec.serving.maxRequestBytes override it.' },
  { key: 'maxResponseBytes', env: 'MAX_RESPONSE_BYTES', flag: '--max-response-bytes', kind: 'int', default: 64 * 1024 * 1024, help: 'Largest predict answer the gateway buffers from a model (rawPredict streams and has no limit).' },
  { key: 'bufferedBodyBytes', env: 'BUFFERED_BODY_BYTES', flag: '--buffered-body-bytes', kind: 'int', default: 4 * 1024 * 1024, help: 'Memory for request and answer bodies held whole (predict, explain, the TF Serving surface) across calls in flight. A call holds one body at a time: its request until the model has been sent all of it (a call waiting for its model holds nothing), then the answer. Past it, a body of 256 KiB or more waits before it is read (TCP holds it), answers ahead of requests, up to the call\'s timeout (then 503 overloaded); smaller bodies, and chunked ones (their size is unknown until read), never wait but are counted. A body that does not fit still goes once no other large body is held. Also the most the pool of reused body buffers keeps (a buffer given back to a full pool drops the longest-kept ones).' },
  { key: 'maxJsonDepth', env: 'MAX_JSON_DEPTH', flag: '--max-json-depth', kind: 'int', default: 64, help: 'Deepest nesting accepted in a predict body.' },
  { key: 'upstreamKeepAliveMs', env: 'UPSTREAM_KEEPALIVE_MS', flag: '--upstream-keepalive-ms', kind: 'int', default: 4000, help: 'Idle time after which a pooled model connection is closed; keep it below the model server keep-alive timeout.' },
  { key: 'upstreamConnectionMaxAgeMs', env: 'UPSTREAM_CONNECTION_MAX_AGE_MS', flag: '--upstream-connection-max-age-ms', kind: 'int', default: 5000, help: 'Cluster gateway: pooled model connections are retired once this old (0: no limit). Through a Service address a connection stays with one pod; this moves calls off a pod that left the Service within its 10 s preStop pause, before it stops.' },
  { key: 'upstreamConnections', env: 'UPSTREAM_CONNECTIONS', flag: '--upstream-connections', kind: 'int', default: 256, help: 'Most pooled connections per model replica.' },
  { key: 'drainSeconds', env: 'DRAIN_SECONDS', flag: '--drain-seconds', kind: 'number', default: 30, help: 'On SIGTERM, how long in-flight requests may take to finish before the process exits.' },
  { key: 'healthIntervalMs', env: 'HEALTH_INTERVAL_MS', flag: '--health-interval-ms', kind: 'int', default: 1000, help: 'Local mode: how often each model replica\'s health route is checked.' },
  { key: 'memoryTrimIntervalMs', env: 'MEMORY_TRIM_INTERVAL_MS', flag: '--memory-trim-interval-ms', kind: 'int', default: 30_000, help: 'Gateways: how often the process looks whether its calls have gone quiet (no prediction call started in the interval and none in flight; 0: never look), so memory goes back 30-60 s after the last call by default. The first quiet look after calls runs a full V8 collection (20-27 ms for the local-mode gateway; it frees the bodies and socket reads V8 still counted) and then gives the free pages of its C heap back to the kernel (glibc malloc_trim, about 1 ms), so memory used by a burst of large bodies does not stay resident; neither runs while calls do. The next burst faults the pages in again: with 1 s, 400 KB rawPredict in 4 s bursts 4 s apart took 15-20% more CPU than with none. The process also has glibc map blocks of 128 KiB or more (whole bodies) on their own, so they leave when freed (MALLOC_MMAP_THRESHOLD_ chooses another threshold). The trim and the threshold need Linux with glibc, the collection node started with --expose-gc (bin/predictgate.js sets it); a step that cannot run is left out and the start-up log says why.' },
  { key: 'namespaces', env: 'WATCH_NAMESPACES', flag: '--namespaces', kind: 'list', default: '', help: 'Cluster modes: the namespaces whose DeployedModels and Endpoints are watched (comma-separated); empty watches all.' },
  { key: 'leaderElection', env: 'LEADER_ELECTION', flag: '--leader-election', kind: 'bool', default: true, help: 'Controller: take a coordination.k8s.io Lease before reconciling, so one of several replicas is active.' },
  { key: 'leaderElectionNamespace', env: 'LEADER_ELECTION_NAMESPACE', flag: '--leader-election-namespace', kind: 'string', default: 'default', help: 'Controller: namespace of the Lease predictgate-controller (the chart sets its own namespace).' },
  { key: 'leaseDurationSeconds', env: 'LEASE_DURATION_SECONDS', flag: '--lease-duration-seconds', kind: 'number', default: 15, help: 'Controller: how long a Lease holds without renewal; a standby takes over within it. Renewal is due at 2/3 of it.' },
  { key: 'resyncSeconds', env: 'RESYNC_SECONDS', flag: '--resync-seconds', kind: 'number', default: 300, help: 'Controller: how often every object is reconciled again even without a change (writes nothing when all is in order).' },
  { key: 'upstreamResolve', env: 'UPSTREAM_RESOLVE', flag: '--upstream-resolve', kind: 'list', default: '', help: 'Cluster gateway: HOST:PORT=ADDRESS:PORT pairs (comma-separated) that replace model Service addresses, like curl --resolve (out-of-cluster runs, tests).' },
  { key: 'logLevel', env: 'LOG_LEVEL', flag: '--log-level', kind: 'level', default: 'info', help: 'debug (one line per request), info, warn, error or silent.' },
];

const LEVELS = ['debug', 'info', 'warn', 'error', 'silent'];

function parseValue(s: Setting, raw: string, source: string): string | number | boolean | string[] {
  if (s.kind === 'list') return raw.split(',').map((x) => x.trim()).filter((x) => x !== '');
  if (s.kind === 'bool') {
    if (raw !== 'true' && raw !== 'false') throw new Error(`${source} must be true or false, got ${JSON.stringify(raw)}`);
    return raw === 'true';
  }
  if (s.kind === 'string') {
    if (raw === '') throw new Error(`${source} must not be empty`);
    return raw;
  }
  if (s.kind === 'level') {
    if (!LEVELS.includes(raw)) throw new Error(`${source} must be one of ${LEVELS.join(', ')}, got ${JSON.stringify(raw)}`);
    return raw;
  }
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n < 0 || (s.kind === 'int' && !Number.isInteger(n))) {
    throw new Error(`${source} must be a non-negative ${s.kind === 'int' ? 'integer' : 'number'}, got ${JSON.stringify(raw)}`);
  }
  return n;
}

/**
 * Reads settings from flags (first) and the environment. Returns the config and the arguments
 * that are not settings. Throws with a clear message on a bad value or unknown flag.
 */
export function loadConfig(argv: string[], env: NodeJS.ProcessEnv): { config: Config; rest: string[] } {
  const values: Record<string, unknown> = {};
  for (const s of SETTINGS) {
    const raw = env[s.env];
    values[s.key] = parseValue(s, raw ?? String(s.default), raw === undefined ? `the default of ${s.env}` : s.env);
  }
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('--')) {
      rest.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const flag = eq < 0 ? arg : arg.slice(0, eq);
    const inline = eq < 0 ? undefined : arg.slice(eq + 1);
    const s = SETTINGS.find((x) => x.flag === flag);
    if (!s) throw new Error(`unknown option ${flag}; see predictgate --help`);
    const raw = inline ?? argv[++i];
    if (raw === undefined) throw new Error(`${flag} needs a value`);
    values[s.key] = parseValue(s, raw, flag);
  }
  return { config: values as unknown as Config, rest };
}

export function settingsHelp(): string {
  return SETTINGS.map((s) => `  ${(s.flag + ' / ' + s.env).padEnd(52)} ${s.help} (default ${s.default === '' ? 'none' : s.default})`).join('\n');
}

/** The README's configuration table (test/unit/docs.test.ts keeps the README in step with it). */
export function settingsMarkdown(): string {
  const rows = SETTINGS.map((s) => `| \`${s.flag}\` | \`${s.env}\` | ${s.default === '' ? '(none)' : `\`${s.default}\``} | ${s.help} |`);
  return ['| flag | environment | default | meaning |', '| --- | --- | --- | --- |', ...rows].join('\n');
}
