// Settings: defaults, environment, flags (which win), the commands each setting belongs to, help
// requests, and clear errors.
import { COMMANDS, SETTINGS, loadConfig, parseCommandLine, settingsHelp, settingsOf, wrap } from '../../src/config.js';

test('defaults', () => {
  const { config, rest } = loadConfig([], {});
  expect(config).toMatchObject({ host: '127.0.0.1', port: 8080, endpointDomain: 'predictgate.internal', timeoutSeconds: 60, maxRequestBytes: 16777216, maxJsonDepth: 64, logLevel: 'info' });
  expect(rest).toEqual([]);
});

test('environment, then flags win; positional arguments pass through', () => {
  const { config, rest } = loadConfig(['dir', '--port', '9000', '--log-level=debug'], { PORT: '7000', ENDPOINT_DOMAIN: 'example.test', UPSTREAM_TIMEOUT_SECONDS: '2.5' }, 'local');
  expect(config).toMatchObject({ port: 9000, endpointDomain: 'example.test', timeoutSeconds: 2.5, logLevel: 'debug' });
  expect(rest).toEqual(['dir']);
});

test('a flag wins over a bad environment value', () => {
  expect(loadConfig(['--port', '9000'], { PORT: 'abc' }, 'gateway').config.port).toBe(9000);
});

test("a command reads only its own settings from the environment; the others keep their defaults", () => {
  const env = { LEADER_ELECTION: 'not a bool', HEALTH_INTERVAL_MS: '5', RESYNC_SECONDS: '7' };
  const local = loadConfig([], env, 'local').config;
  expect([local.healthIntervalMs, local.leaderElection, local.resyncSeconds]).toEqual([5, true, 300]);
  expect(() => loadConfig([], env, 'controller')).toThrow('LEADER_ELECTION must be true or false, got "not a bool"');
});

test('every setting belongs to at least one command, and model reads none of them', () => {
  for (const s of SETTINGS) expect([s.flag, s.commands.length > 0]).toEqual([s.flag, true]);
  expect(settingsOf('model')).toEqual([]);
  expect(COMMANDS).toEqual(['local', 'gateway', 'controller', 'model']);
  expect(settingsOf('controller').map((s) => s.env)).toEqual(['HOST', 'PORT', 'ENDPOINT_DOMAIN', 'WATCH_NAMESPACES', 'LEADER_ELECTION', 'LEADER_ELECTION_NAMESPACE', 'LEASE_DURATION_SECONDS', 'RESYNC_SECONDS', 'AUTOSCALE_INTERVAL_MS', 'AUTOSCALE_STABLE_WINDOW_SECONDS', 'GATEWAY_SERVICE', 'LOG_LEVEL']);
});

test('-h and --help anywhere on the line are a help request, whatever else is there', () => {
  for (const argv of [['-h'], ['--help'], ['dir', '--port', '1', '--help'], ['--nope', '-h'], ['--port', '1', 'x', '-h']]) {
    expect(parseCommandLine(argv, 'local')).toEqual({ help: true });
  }
  const line = parseCommandLine(['dir', '--port=1', '--', '--help'], 'local');
  expect(line.help).toBe(false);
  expect(line.help === false && [[...line.flags].map(([s, v]) => [s.flag, v]), line.rest]).toEqual([[['--port', '1']], ['dir', '--help']]);
});

test.each([
  [[], { PORT: 'abc' }, undefined, 'PORT must be a non-negative integer, got "abc"'],
  [[], { MAX_REQUEST_BYTES: '1.5' }, undefined, 'MAX_REQUEST_BYTES must be a non-negative integer, got "1.5"'],
  [[], { LOG_LEVEL: 'loud' }, undefined, 'LOG_LEVEL must be one of debug, info, warn, error, silent, got "loud"'],
  [['--nope'], {}, undefined, 'unknown option --nope; see predictgate --help'],
  [['--nope'], {}, 'gateway', 'unknown option --nope; see predictgate gateway --help'],
  [['-p', '1'], {}, 'local', 'unknown option -p; see predictgate local --help'],
  [['--resync-seconds', '1'], {}, 'gateway', '--resync-seconds is not a setting of predictgate gateway; see predictgate gateway --help'],
  [['--port'], {}, undefined, '--port needs a value; see predictgate --help'],
  [['--port', '--host', 'h'], {}, 'local', '--port needs a value; see predictgate local --help'],
  [['--help=yes'], {}, 'local', '--help takes no value; see predictgate local --help'],
  [['--port', '-1'], {}, 'local', '--port must be a non-negative integer, got "-1"'],
])('%j %j (%s) is refused', (argv, env, command, message) => {
  expect(() => loadConfig(argv as string[], env as NodeJS.ProcessEnv, command as 'local' | undefined)).toThrow(message);
});

test('who may call: none in local mode, kubernetes for the cluster gateway, unless told; nothing else is taken', () => {
  expect(loadConfig([], {}, 'local').config.auth).toBe('none');
  expect(loadConfig([], {}, 'gateway').config.auth).toBe('kubernetes');
  expect(loadConfig([], { PREDICT_AUTH: 'kubernetes' }, 'local').config.auth).toBe('kubernetes');
  expect(loadConfig(['--auth', 'none'], { PREDICT_AUTH: 'kubernetes' }, 'gateway').config.auth).toBe('none');
  expect(() => loadConfig([], { PREDICT_AUTH: 'oidc' }, 'gateway')).toThrow('PREDICT_AUTH must be one of none, kubernetes, got "oidc"');
  expect(() => loadConfig(['--auth', 'yes'], {}, 'local')).toThrow('--auth must be one of none, kubernetes, got "yes"');
  expect(settingsHelp('local')).toContain('  --auth / PREDICT_AUTH (default none)\n');
  expect(settingsHelp('gateway')).toContain('  --auth / PREDICT_AUTH (default kubernetes)\n');
  expect(() => loadConfig([], { AUTH_REVIEWS_PER_SECOND: '0' }, 'gateway')).toThrow('AUTH_REVIEWS_PER_SECOND must be at least 1, got "0"');
  expect(() => loadConfig([], { AUTOSCALE_STABLE_WINDOW_SECONDS: '7200' }, 'controller')).toThrow('AUTOSCALE_STABLE_WINDOW_SECONDS must be at most 3600, got "7200"');
});

test("a command's settings help lists each of its settings with variable, default and meaning", () => {
  const local = settingsHelp('local').split('\n');
  const health = local.indexOf('  --health-interval-ms / HEALTH_INTERVAL_MS (default 1000)');
  expect(local[health + 1]).toBe("      How often local mode checks each model process's health route (for its ready replicas).");
  expect(local.slice(-2)).toEqual(['  --log-level / LOG_LEVEL (default info)', '      debug (one line per request), info, warn, error or silent.']);
  // A default that differs by command is the command's own.
  expect(local).toContain('  --auth / PREDICT_AUTH (default none)');
  expect(settingsHelp('gateway').split('\n')).toContain('  --auth / PREDICT_AUTH (default kubernetes)');
  expect(wrap('one two three four', 12, '  ')).toBe('  one two\n  three four');
});
