// Resource types of group prediction.predictgate.dev/v1: DeployedModel and Endpoint, as stored in
// the Kubernetes API or read from a folder of manifests. The CRD schema in crds/ is the truth for
// their shape; these types mirror it. No logic here.

export const GROUP = 'prediction.predictgate.dev';
export const VERSION = 'v1';
export const API_VERSION = `${GROUP}/${VERSION}`;

/** Container defaults when containerSpec leaves them out. */
export const DEFAULT_PREDICT_ROUTE = '/predict';
export const DEFAULT_HEALTH_ROUTE = '/health';
export const DEFAULT_CONTAINER_PORT = 8080;
/** GraphStorm real-time containers follow the SageMaker contract: POST /invocations, GET /ping. */
export const GRAPHSTORM_PREDICT_ROUTE = '/invocations';
export const GRAPHSTORM_HEALTH_ROUTE = '/ping';

export type Framework = 'tensorflow' | 'pytorch' | 'graphstorm' | 'custom';
export const FRAMEWORKS: readonly Framework[] = ['tensorflow', 'pytorch', 'graphstorm', 'custom'];

/** The graph machine-learning task of a graphstorm model (`gml_task` of gs-realtime-v0.1 payloads). */
export type GmlTask = 'node_classification' | 'node_regression';
export const GML_TASKS: readonly GmlTask[] = ['node_classification', 'node_regression'];

/** The route predict calls go to: containerSpec.predictRoute, else the framework's default. */
export function predictRouteOf(m: ModelSpec): string {
  return m.containerSpec.predictRoute ?? (m.framework === 'graphstorm' ? GRAPHSTORM_PREDICT_ROUTE : DEFAULT_PREDICT_ROUTE);
}

/** The route health checks go to: containerSpec.healthRoute, else the framework's default. */
export function healthRouteOf(m: ModelSpec): string {
  return m.containerSpec.healthRoute ?? (m.framework === 'graphstorm' ? GRAPHSTORM_HEALTH_ROUTE : DEFAULT_HEALTH_ROUTE);
}

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  creationTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export type ConditionStatus = 'True' | 'False' | 'Unknown';

/** A Kubernetes-style condition (metav1.Condition). */
export interface Condition {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
  observedGeneration?: number;
  lastTransitionTime: string;
}

/** GDC's primary condition of a DeployedModel, as `kubectl get -o jsonpath='{.status.primaryCondition}'` prints it. */
export interface PrimaryCondition {
  type: 'DeployedModel';
  reason: string;
  message: string;
  observedGeneration?: number;
  resourceName: string;
  firstObservedTime: string;
  lastUpdateTime: string;
}

export interface EnvVar {
  name: string;
  value?: string;
}

export interface ContainerSpec {
  image?: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  ports?: { containerPort: number; name?: string }[];
  predictRoute?: string;
  explainRoute?: string;
  healthRoute?: string;
}

/** Per-resource overrides of the gateway's upstream limits. */
export interface ServingSpec {
  timeoutSeconds?: number;
  maxRequestBytes?: number;
  /** Deadline of a streamed call (streamRawPredict, OpenAI streams), to the answer's last byte. */
  streamTimeoutSeconds?: number;
  /** Longest pause in a streamed answer once it has started (between two tokens, say). */
  streamIdleTimeoutSeconds?: number;
}

/** A DeployedModel's serving limits: the shared ones and its concurrency. */
export interface ModelServingSpec extends ServingSpec {
  /** Calls in flight per replica in rotation, per gateway replica; unset: no limit. */
  maxConcurrency?: number;
  /** Calls waiting for a slot per ready replica (default 10 × maxConcurrency). */
  maxQueuedCalls?: number;
  /** Longest wait for a slot (default 10 s). */
  queueTimeoutSeconds?: number;
}

/** The OpenAI routes a container may serve. */
export type OpenAiRoute = 'chatCompletions' | 'completions';
export const OPENAI_ROUTES: readonly OpenAiRoute[] = ['chatCompletions', 'completions'];
/** Where vLLM, TGI and llama.cpp's server serve the OpenAI API. */
export const DEFAULT_OPENAI_BASE_PATH = '/v1';

/** A container that speaks the OpenAI API: where, which routes, and the model name it expects. */
export interface OpenAiSpec {
  basePath?: string;
  routes?: OpenAiRoute[];
  servedModelName?: string;
  /** Where the container reports its load in Prometheus text (default /metrics). */
  metricsRoute?: string;
}

/** Where vLLM and llama.cpp's server report their load. */
export const DEFAULT_METRICS_ROUTE = '/metrics';

export interface ModelSpec {
  framework: Framework;
  /** Required for framework graphstorm, refused for the others. */
  gmlTask?: GmlTask;
  modelDisplayName?: string;
  modelVersionID?: string;
  model?: string;
  artifactLocation?: string;
  containerSpec: ContainerSpec;
  /** Set when the container speaks the OpenAI API (the Endpoint's chat/completions routes reach it). */
  openai?: OpenAiSpec;
}

export interface ResourceRequirements {
  requests?: Record<string, string | number>;
  limits?: Record<string, string | number>;
}

/** What replicas follow: CPU (an HPA), or the calls the gateways see (the controller's autoscaler). */
export interface AutoscalingSpec {
  targetCPUUtilizationPercentage?: number;
  /** Calls in flight (queued and held included) per replica. */
  targetConcurrency?: number;
  /** Calls arriving per second per replica. */
  targetRequestsPerSecond?: number;
}

/** Vertex AI's v1beta1 scaleToZeroSpec: google.protobuf.Duration strings ("1800s"). */
export interface ScaleToZeroSpec {
  /** At least this long at one replica or more after scaling up from zero. */
  minScaleupPeriod?: string;
  /** No call for this long: scaled to zero. */
  idleScaledownPeriod?: string;
}

export interface DedicatedResources {
  resources?: ResourceRequirements;
  minReplicaCount?: number;
  maxReplicaCount?: number;
  autoscaling?: AutoscalingSpec;
  scaleToZeroSpec?: ScaleToZeroSpec;
}

export interface DeployedModelSpec {
  id?: string;
  endpointPath?: string;
  modelSpec: ModelSpec;
  dedicatedResources?: DedicatedResources;
  serving?: ModelServingSpec;
  /** Namespaces whose Endpoints may route to this model besides its own. */
  allowedNamespaces?: string[];
}

export interface DeployedModelStatus {
  primaryCondition?: PrimaryCondition;
  conditions?: Condition[];
  observedGeneration?: number;
  deployedModelId?: string;
  /** Base URL of the model's Service (cluster) or first ready replica (local). */
  address?: string;
  /** Base URLs of the ready replicas when they are addressable one by one (local mode). */
  replicaAddresses?: string[];
  replicas?: number;
  readyReplicas?: number;
  /** What the request autoscaler decided last, when the model scales on calls. */
  autoscaling?: AutoscalingStatus;
}

export interface AutoscalingStatus {
  desiredReplicas: number;
  /** Why (ScaledUp, ScaledDown, ScaledToZero, ScaledFromZero), and in words. */
  lastScaleReason: string;
  lastScaleMessage: string;
  lastScaleTime: string;
}

export interface DeployedModel {
  apiVersion: string;
  kind: 'DeployedModel';
  metadata: ObjectMeta;
  spec: DeployedModelSpec;
  status?: DeployedModelStatus;
}

export interface Destination {
  serviceRef: { kind?: 'DeployedModel'; name: string; namespace?: string };
  trafficPercentage?: number;
}

export interface EndpointSpec {
  createDns?: boolean;
  destinations: Destination[];
  serving?: ServingSpec;
}

export interface EndpointStatus {
  conditions?: Condition[];
  endpointFQDN?: string;
  observedGeneration?: number;
  /** deployedModelId → percent of traffic. */
  trafficSplit?: Record<string, number>;
}

export interface Endpoint {
  apiVersion: string;
  kind: 'Endpoint';
  metadata: ObjectMeta;
  spec: EndpointSpec;
  status?: EndpointStatus;
}

export type Resource = DeployedModel | Endpoint;
export type ResourceKind = Resource['kind'];

/** `namespace/name`, the key of work queues and caches. */
export function keyOf(meta: ObjectMeta): string {
  return `${meta.namespace ?? 'default'}/${meta.name}`;
}

/** The inverse of keyOf. */
export function splitKey(key: string): { namespace: string; name: string } {
  const i = key.indexOf('/');
  return { namespace: key.slice(0, i), name: key.slice(i + 1) };
}
