// The Express side of the gateway: the management routes of the route table (the Vertex Endpoint
// resource, local mode's status API) mounted from the table's own paths, and the one error
// middleware that turns what they throw into the route's error answer. Built on first use, so
// probes, scrapes and prediction calls never load Express.
import type { Express, NextFunction, Request, RequestHandler, Response } from 'express';
import { ApiError } from '../errors.js';
import type { Logger } from '../log.js';
import { sendError } from './respond.js';
import type { RouteSpec, Serve } from './routes.js';

export type ManagementName = Extract<Serve, { kind: 'management' }>['name'];

/** The handlers of the management routes the gateway serves (absent: the route answers 404). */
export type ManagementHandlers = Partial<Record<ManagementName, RequestHandler>>;

export function buildManagementApp(express: typeof import('express'), routes: readonly RouteSpec[], handlers: ManagementHandlers, log: Logger): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // Matched as the route table matches them.
  app.set('case sensitive routing', true);
  app.set('strict routing', true);
  const loose = express.Router({ caseSensitive: false, strict: false });
  app.use(loose);
  for (const spec of routes) {
    if (spec.serve.kind !== 'management') continue;
    const name = spec.serve.name;
    const handler = handlers[name];
    if (!handler) continue;
    (spec.loose ? loose : app).get([...spec.paths], handler);
  }
  app.use((req: Request) => {
    throw new ApiError('route_not_found', `no route for ${req.method} ${req.path}`);
  });
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    // Express's own 4xx errors (a malformed URI, say) are the caller's, not a gateway bug.
    const status = (err as { status?: unknown }).status;
    const known = !(err instanceof ApiError) && typeof status === 'number' && status >= 400 && status < 500
      ? new ApiError('invalid_request', `${(err as Error).message}`, status)
      : err;
    const api = sendError(res, known, 'vertex');
    if (api.code === 'internal') log.error({ err, path: req.path }, 'unhandled error');
  });
  return app;
}
