// The Store seam: where DeployedModels and Endpoints live (a folder of manifests in local mode, the
// Kubernetes API in cluster mode) and where their status is written. Reconcilers and the routing
// table depend on this interface only.
import type { DeployedModel, Endpoint, ResourceKind } from '../api/types.js';

export interface StoreEvent {
  kind: ResourceKind;
  /** namespace/name */
  key: string;
}

export interface Store {
  listDeployedModels(): DeployedModel[];
  listEndpoints(): Endpoint[];
  getDeployedModel(key: string): DeployedModel | undefined;
  getEndpoint(key: string): Endpoint | undefined;
  /** Replaces the status of an object (no-op if it is gone). */
  updateDeployedModelStatus(key: string, status: DeployedModel['status']): Promise<void>;
  updateEndpointStatus(key: string, status: Endpoint['status']): Promise<void>;
  /** Called after any add, change (spec or status) or removal. */
  onChange(listener: (event: StoreEvent) => void): void;
}
