// Settings: defaults, environment, flags (which win), and clear errors.
import { loadConfig } from '../../src/config.js';

test('defaults', () => {
  const { config, rest } = loadConfig([], {});
  expect(config).toMatchObject({ host: '127.0.0.1', port: 8080, endpointDomain: 'predictgate.internal', timeoutSeconds: 60, maxRequestBytes: 16777216, maxJsonDepth: 64, logLevel: 'info' });
  expect(rest).toEqual([]);
});

test('environment, then flags win; positional arguments pass through', () => {
  const { config, rest } = loadConfig(['dir', '--port', '9000', '--log-level=debug'], { PORT: '7000', ENDPOINT_DOMAIN: 'example.test', UPSTREAM_TIMEOUT_SECONDS: '2.5' });
  expect(config).toMatchObject({ port: 9000, endpointDomain: 'example.test', timeoutSeconds: 2.5, logLevel: 'debug' });
  expect(rest).toEqual(['dir']);
});

test.each([
  [[], { PORT: 'abc' }, 'PORT must be a non-negative integer, got "abc"'],
  [[], { MAX_REQUEST_BYTES: '1.5' }, 'MAX_REQUEST_BYTES must be a non-negative integer, got "1.5"'],
  [[], { LOG_LEVEL: 'loud' }, 'LOG_LEVEL must be one of debug, info, warn, error, silent, got "loud"'],
  [['--nope'], {}, 'unknown option --nope; see predictgate --help'],
  [['--port'], {}, '--port needs a value'],
])('%j %j is refused', (argv, env, message) => {
  expect(() => loadConfig(argv as string[], env as NodeJS.ProcessEnv)).toThrow(message);
});
