// Local mode's read-only view of its objects, shaped like the Kubernetes API paths so the same
// jsonpath a user runs with kubectl works on it:
//   GET /apis/prediction.predictgate.dev/v1/[namespaces/{ns}/]{deployedmodels|endpoints}[/{name}]
import type { Request, Response } from 'express';
import { API_VERSION, type Resource } from '../api/types.js';
import type { ManagementHandlers } from '../gateway/management.js';
import { ApiError } from '../errors.js';
import type { Store } from '../store/store.js';

function listOf(store: Store, plural: string): Resource[] | undefined {
  if (plural === 'deployedmodels') return store.listDeployedModels();
  if (plural === 'endpoints') return store.listEndpoints();
  return undefined;
}

function kindOf(plural: string): string {
  return plural === 'deployedmodels' ? 'DeployedModelList' : 'EndpointList';
}

/** The status API's handlers, for the gateway's management routes (routes.ts has their paths). */
export function statusApi(store: Store): ManagementHandlers {
  return {
    statusList(req: Request, res: Response): void {
      const plural = String(req.params.plural);
      const items = listOf(store, plural);
      if (!items) throw new ApiError('route_not_found', `unknown resource ${plural}; expected deployedmodels or endpoints`);
      const ns = req.params.namespace;
      res.json({ apiVersion: API_VERSION, kind: kindOf(plural), items: ns === undefined ? items : items.filter((o) => o.metadata.namespace === ns) });
    },
    statusObject(req: Request, res: Response): void {
      const plural = String(req.params.plural);
      const items = listOf(store, plural);
      if (!items) throw new ApiError('route_not_found', `unknown resource ${plural}; expected deployedmodels or endpoints`);
      const obj = items.find((o) => o.metadata.namespace === req.params.namespace && o.metadata.name === req.params.name);
      if (!obj) throw new ApiError('route_not_found', `${plural.replace(/s$/, '')} ${req.params.namespace}/${req.params.name} not found`);
      res.json(obj);
    },
  };
}
