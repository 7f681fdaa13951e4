// undici's connection pool (Agent), loaded without the rest of undici: the transports call its
// dispatch() (upstream.ts), the documented low-level API, so neither the package's index nor its
// request/stream calls are needed. `import 'undici'` also loads fetch, WebSocket, EventSource, the
// cache and the mocks: measured in a bare script, 11 MB of RSS and 4.4 MB of live heap against 3 MB
// and 1.1 MB for the pool with the request and stream calls; and with heap-growing-percent=200
// (bin/predictgate.js) every MB of live heap lets the old generation grow 3 MB under load. undici
// has no "exports" map, so the file can be required, but its path is not documented API: the
// lockfile pins undici, the upstream tests exercise it, and test/unit/command.test.ts fails if it
// moves or the package's index is loaded again.
import { createRequire } from 'node:module';
import type { Agent as UndiciAgent } from 'undici';

const require = createRequire(import.meta.url);

export const Agent = require('undici/lib/dispatcher/agent.js') as typeof UndiciAgent;

export type Agent = UndiciAgent;
