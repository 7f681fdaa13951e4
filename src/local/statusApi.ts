// Local mode's read-only view of its objects, shaped like the Kubernetes API paths so the same
// jsonpath a user runs with kubectl works on it:
//   GET /apis/prediction.predictgate.dev/v1/[namespaces/{ns}/]{deployedmodels|endpoints}[/{name}]
import type { Express, Request, Response } from 'express';
import { API_VERSION, GROUP, VERSION, type Resource } from '../api/types.js';
import { ApiError } from '../errors.js';
import type { Store } from '../store/store.js';

const BASE = `/apis/${GROUP}/${VERSION}`;

function listOf(store: Store, plural: string): Resource[] | undefined {
  if (plural === 'deployedmodels') return store.listDeployedModels();
  if (plural === 'endpoints') return store.listEndpoints();
  return undefined;
}

function kindOf(plural: string): string {
  return plural === 'deployedmodels' ? 'DeployedModelList' : 'EndpointList';
}

export function mountStatusApi(app: Express, store: Store): void {
  const list = (req: Request, res: Response): void => {
    const plural = String(req.params.plural);
    const items = listOf(store, plural);
    if (!items) throw new ApiError('route_not_found', `unknown resource ${plural}; expected deployedmodels or endpoints`);
    const ns = req.params.ns;
    res.json({ apiVersion: API_VERSION, kind: kindOf(plural), items: ns === undefined ? items : items.filter((o) => o.metadata.namespace === ns) });
  };
  app.get(`${BASE}/:plural`, list);
  app.get(`${BASE}/namespaces/:ns/:plural`, list);
  app.get(`${BASE}/namespaces/:ns/:plural/:name`, (req, res) => {
    const plural = String(req.params.plural);
    const items = listOf(store, plural);
    if (!items) throw new ApiError('route_not_found', `unknown resource ${plural}; expected deployedmodels or endpoints`);
    const obj = items.find((o) => o.metadata.namespace === req.params.ns && o.metadata.name === req.params.name);
    if (!obj) throw new ApiError('route_not_found', `${plural.replace(/s$/, '')} ${req.params.ns}/${req.params.name} not found`);
    res.json(obj);
  });
}
