// The Vertex AI `Endpoint` resource (REST v1, proto3 JSON) that `GET /v1/projects/{p}/locations/{l}/endpoints/{e}`
// answers, built from an Endpoint and the DeployedModels it names. The Vertex SDKs read it before
// calling predict (the Python SDK's Endpoint GETs it lazily: `name` must be the full resource name,
// `createTime` set or it GETs again on every call, `dedicatedEndpointEnabled` false or absent so
// predict goes to the api_endpoint). Pure: the same objects in, the same JSON out.
import type { DeployedModel, Endpoint } from '../api/types.js';
import { findCondition } from '../api/conditions.js';
import { deployedModelIdOf } from '../api/status.js';
import { routableDestinations, trafficSplitOf } from '../api/references.js';

/** google.cloud.aiplatform.v1.DeployedModel, the fields predictgate knows. */
export interface VertexDeployedModel {
  id: string;
  /** Model resource name (spec.modelSpec.model), when the manifest gives one. */
  model?: string;
  modelVersionId?: string;
  displayName: string;
  createTime?: string;
  dedicatedResources?: { minReplicaCount?: number; maxReplicaCount?: number };
  status?: { message?: string; lastUpdateTime?: string; availableReplicaCount?: number };
}

/** google.cloud.aiplatform.v1.Endpoint, the fields predictgate knows. */
export interface VertexEndpoint {
  name: string;
  displayName: string;
  deployedModels: VertexDeployedModel[];
  /** deployedModelId → percent, for the destinations that resolve (as the Endpoint's status.trafficSplit). */
  trafficSplit: Record<string, number>;
  labels?: Record<string, string>;
  etag?: string;
  createTime?: string;
  /** Always false: predict and rawPredict go to the gateway itself. */
  dedicatedEndpointEnabled: false;
  clientConnectionConfig?: { inferenceTimeout: string };
}

/** Where the resource is asked for: the path's project (namespace) and location (echoed back as asked). */
export interface ResourcePlace {
  project: string;
  location: string;
}

export function endpointResourceName(place: ResourcePlace, endpoint: string): string {
  return `projects/${place.project}/locations/${place.location}/endpoints/${endpoint}`;
}

function deployedModelResource(dm: DeployedModel): VertexDeployedModel {
  const m = dm.spec.modelSpec;
  const out: VertexDeployedModel = { id: deployedModelIdOf(dm), displayName: m.modelDisplayName ?? dm.metadata.name };
  if (m.model) out.model = m.model;
  if (m.modelVersionID) out.modelVersionId = m.modelVersionID;
  if (dm.metadata.creationTimestamp) out.createTime = dm.metadata.creationTimestamp;
  const r = dm.spec.dedicatedResources;
  if (r?.minReplicaCount !== undefined || r?.maxReplicaCount !== undefined) {
    out.dedicatedResources = {
      ...(r.minReplicaCount !== undefined ? { minReplicaCount: r.minReplicaCount } : {}),
      ...(r.maxReplicaCount !== undefined ? { maxReplicaCount: r.maxReplicaCount } : {}),
    };
  }
  const ready = findCondition(dm.status?.conditions, 'Ready');
  if (ready || dm.status?.readyReplicas !== undefined) {
    out.status = {
      ...(ready ? { message: ready.message, lastUpdateTime: ready.lastTransitionTime } : {}),
      ...(dm.status?.readyReplicas !== undefined ? { availableReplicaCount: dm.status.readyReplicas } : {}),
    };
  }
  return out;
}

/**
 * The Vertex Endpoint resource of `ep`. `lookup` finds a DeployedModel by `namespace/name`; destinations
 * that do not resolve (missing, or in a namespace that does not allow this Endpoint's) are left out,
 * as they are from the Endpoint's status.
 */
export function endpointResource(ep: Endpoint, lookup: (key: string) => DeployedModel | undefined, place: ResourcePlace): VertexEndpoint {
  const routable = routableDestinations(ep, lookup);
  const deployedModels: VertexDeployedModel[] = routable.map((r) => deployedModelResource(r.model));
  const trafficSplit = trafficSplitOf(routable);
  const out: VertexEndpoint = {
    name: endpointResourceName(place, ep.metadata.name),
    displayName: ep.metadata.name,
    deployedModels,
    trafficSplit,
    dedicatedEndpointEnabled: false,
  };
  if (ep.metadata.labels && Object.keys(ep.metadata.labels).length) out.labels = { ...ep.metadata.labels };
  if (ep.metadata.resourceVersion) out.etag = ep.metadata.resourceVersion;
  if (ep.metadata.creationTimestamp) out.createTime = ep.metadata.creationTimestamp;
  if (ep.spec?.serving?.timeoutSeconds !== undefined) out.clientConnectionConfig = { inferenceTimeout: `${ep.spec.serving.timeoutSeconds}s` };
  return out;
}
