// undici's connection pool (Agent, whose dispatch() is the buffered calls' API) and its stream call,
// loaded without the rest of undici.
// `import 'undici'` also loads fetch, WebSocket, EventSource, the cache and the mocks: measured in
// a bare script, 11 MB of RSS and 4.4 MB of live heap against 3 MB and 1.1 MB for these files
// (with its request call too), and with heap-growing-percent=200 (bin/predictgate.js) every MB of
// live heap lets the old generation grow 3 MB under load. undici has no "exports" map, so these files can be required, but
// they are not its documented API: the lockfile pins undici, the upstream tests exercise them, and
// test/unit/command.test.ts fails if they move or the package's index is loaded again.
import { createRequire } from 'node:module';
import type { Agent as UndiciAgent, Dispatcher } from 'undici';

const require = createRequire(import.meta.url);

export const Agent = require('undici/lib/dispatcher/agent.js') as typeof UndiciAgent;
const apiStream = require('undici/lib/api/api-stream.js') as (this: Dispatcher, opts: Dispatcher.RequestOptions, factory: Dispatcher.StreamFactory) => Promise<Dispatcher.StreamData>;

export type Agent = UndiciAgent;

/** `agent.stream(opts, factory)` of the full package. */
export const stream = (agent: Dispatcher, opts: Dispatcher.RequestOptions, factory: Dispatcher.StreamFactory): Promise<Dispatcher.StreamData> =>
  apiStream.call(agent, opts, factory);
