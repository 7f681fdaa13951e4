// Where hostile bodies are sent: the gateway's routes over the bundled models in local mode (Vertex
// predict, rawPredict and explain, the GDC form chosen by Host, the TF Serving surface's predict,
// classify and regress, GraphStorm predict), what each route's body looks like when valid, which
// dialect its errors speak; and the folder of manifests that serves them.
import { deployedModelYaml, endpointYaml } from '../local.js';

/** What a valid body for a route looks like (the generators start from one). */
export type BodyKind = 'tf-predict' | 'pt-predict' | 'custom-predict' | 'gs-predict' | 'tf-examples' | 'httpbody';

/**
 * Who writes the errors: the gateway in the route's dialect, or, on rawPredict, the model behind it
 * (its answer is passed on unchanged; the gateway's own errors there speak Vertex or GDC).
 */
export type AnswerDialect = 'vertex' | 'gdc' | 'tfserving' | 'graphstorm';

export interface Target {
  name: string;
  path: string;
  /** The Host header (the GDC form chooses the Endpoint by it). */
  host?: string;
  body: BodyKind;
  /** The deployed model behind it (its id is its name). */
  model: 'hpt' | 'echo' | 'custom' | 'gs';
  dialect: AnswerDialect;
  /** rawPredict: the model's answer comes back as it is. */
  raw?: 'echo' | 'half-plus-two' | 'graphstorm';
  /** explain: the answer lists `explanations`. */
  explain?: boolean;
  /** TF Serving classify or regress: the answer lists `results`. */
  examples?: 'classify' | 'regress';
}

export const DOMAIN = 'predictgate.internal';
const vertex = (endpoint: string, verb: string): string => `/v1/projects/default/locations/local/endpoints/${endpoint}:${verb}`;
const host = (endpoint: string): string => `${endpoint}.default.${DOMAIN}`;
const TF = '/tfserving/default/hpt/v1/models/half_plus_two';

export const TARGETS: readonly Target[] = [
  { name: 'vertex predict tensorflow', path: vertex('hpt', 'predict'), model: 'hpt', body: 'tf-predict', dialect: 'vertex' },
  { name: 'vertex predict pytorch', path: vertex('echo', 'predict'), model: 'echo', body: 'pt-predict', dialect: 'vertex' },
  { name: 'vertex predict custom', path: vertex('custom', 'predict'), model: 'custom', body: 'custom-predict', dialect: 'vertex' },
  { name: 'vertex predict graphstorm', path: vertex('gs', 'predict'), model: 'gs', body: 'gs-predict', dialect: 'graphstorm' },
  { name: 'vertex rawPredict tensorflow', path: vertex('hpt', 'rawPredict'), model: 'hpt', body: 'tf-predict', dialect: 'vertex', raw: 'half-plus-two' },
  { name: 'vertex rawPredict pytorch', path: vertex('echo', 'rawPredict'), model: 'echo', body: 'pt-predict', dialect: 'vertex', raw: 'echo' },
  { name: 'vertex rawPredict graphstorm', path: vertex('gs', 'rawPredict'), model: 'gs', body: 'gs-predict', dialect: 'vertex', raw: 'graphstorm' },
  { name: 'vertex rawPredict HttpBody', path: `${vertex('echo', 'rawPredict')}?$alt=json%3Benum-encoding=int`, model: 'echo', body: 'httpbody', dialect: 'vertex' },
  { name: 'vertex explain pytorch', path: vertex('echo', 'explain'), model: 'echo', body: 'pt-predict', dialect: 'vertex', explain: true },
  { name: 'vertex explain tensorflow', path: vertex('hpt', 'explain'), model: 'hpt', body: 'tf-predict', dialect: 'vertex', explain: true },
  { name: 'vertex explain graphstorm', path: vertex('gs', 'explain'), model: 'gs', body: 'gs-predict', dialect: 'vertex', explain: true },
  { name: 'gdc predict tensorflow', path: '/v1/model:predict', host: host('hpt'), model: 'hpt', body: 'tf-predict', dialect: 'gdc' },
  { name: 'gdc predict pytorch', path: '/v1/model:predict', host: host('echo'), model: 'echo', body: 'pt-predict', dialect: 'gdc' },
  { name: 'gdc predict graphstorm', path: '/v1/model:predict', host: host('gs'), model: 'gs', body: 'gs-predict', dialect: 'graphstorm' },
  { name: 'gdc rawPredict pytorch', path: '/v1/model:rawPredict', host: host('echo'), model: 'echo', body: 'pt-predict', dialect: 'gdc', raw: 'echo' },
  { name: 'gdc explain pytorch', path: '/v1/model:explain', host: host('echo'), model: 'echo', body: 'pt-predict', dialect: 'gdc', explain: true },
  { name: 'tfserving predict', path: `${TF}:predict`, model: 'hpt', body: 'tf-predict', dialect: 'tfserving' },
  { name: 'tfserving classify', path: `${TF}:classify`, model: 'hpt', body: 'tf-examples', dialect: 'tfserving', examples: 'classify' },
  { name: 'tfserving regress', path: `${TF}:regress`, model: 'hpt', body: 'tf-examples', dialect: 'tfserving', examples: 'regress' },
];

/** Largest request body the gateway under test takes (its MAX_REQUEST_BYTES): small, so bodies just over it are cheap. */
export const MAX_REQUEST_BYTES = 256 * 1024;
/** The gateway's MAX_JSON_DEPTH (its default). */
export const MAX_JSON_DEPTH = 64;

/** The Endpoints every target needs to be Ready. */
export const ENDPOINTS = ['hpt', 'echo', 'custom', 'gs'];

/** The manifests of the folder local mode serves: the bundled models, one Endpoint each. */
export function hostileManifests(): Record<string, string> {
  const hpt = { command: ['predictgate', 'model', 'half-plus-two'], predictRoute: '/v1/models/half_plus_two:predict', healthRoute: '/v1/models/half_plus_two' };
  const models = [
    deployedModelYaml({ name: 'hpt', framework: 'tensorflow', ...hpt }),
    deployedModelYaml({ name: 'echo', framework: 'pytorch', command: ['predictgate', 'model', 'echo'], predictRoute: '/v1/models/echo:predict', healthRoute: '/ping' }),
    deployedModelYaml({ name: 'custom', framework: 'custom', ...hpt }),
    deployedModelYaml({ name: 'gs', framework: 'graphstorm', gmlTask: 'node_classification', command: ['predictgate', 'model', 'graphstorm'], predictRoute: '/invocations', healthRoute: '/ping', env: { GRAPHSTORM_TASK: 'node_classification' } }),
  ];
  const files: Record<string, string> = {};
  ENDPOINTS.forEach((name, i) => (files[`${name}.yaml`] = `${models[i]}---\n${endpointYaml(name, [{ model: name }])}`));
  return files;
}
