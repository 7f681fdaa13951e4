// The Express side of the gateway: the management routes (the Vertex Endpoint resource, local
// mode's status API) run as Express handlers once the route table has matched them, with the
// table's parameters as req.params, and the one error middleware turns what they throw into the
// route's error answer. Built on first use, so probes, scrapes and prediction calls never load Express.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { ApiError } from '../errors.js';
import type { Logger } from '../log.js';
import { sendError } from './respond.js';
import type { Params, Serve } from './routes.js';

export type ManagementName = Extract<Serve, { kind: 'management' }>['name'];

/** The handlers of the management routes the gateway serves (absent: the route answers 404). */
export type ManagementHandlers = Partial<Record<ManagementName, RequestHandler>>;

/** Runs a matched management route's handler through Express. */
export type ServeManaged = (req: IncomingMessage, res: ServerResponse, handler: RequestHandler, params: Params) => void;

export function buildManagementApp(express: typeof import('express'), log: Logger): ServeManaged {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  const matched = new WeakMap<IncomingMessage, { handler: RequestHandler; params: Params }>();
  app.use((req: Request, res: Response, next: NextFunction) => {
    const m = matched.get(req) as { handler: RequestHandler; params: Params };
    req.params = m.params;
    return m.handler(req, res, next);
  });
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    // Express's own 4xx errors are the caller's, not a gateway bug.
    const status = (err as { status?: unknown }).status;
    const known = !(err instanceof ApiError) && typeof status === 'number' && status >= 400 && status < 500
      ? new ApiError('invalid_request', `${(err as Error).message}`, status)
      : err;
    const api = sendError(res, known, 'vertex');
    if (api.code === 'internal') log.error({ err, path: req.path }, 'unhandled error');
  });
  return (req, res, handler, params) => {
    matched.set(req, { handler, params });
    app(req, res);
  };
}
