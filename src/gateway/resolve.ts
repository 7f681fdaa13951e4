// Resolving a call to where it goes: an Endpoint call to its Endpoint (by project and name, or by
// Host) and one of its deployed models (the traffic split, or the pinning header), then the handler
// of its verb; a TF Serving call to the DeployedModel named in its path. A model with a concurrency
// limit admits the call first (admission.ts), before its body is read; a model at zero replicas holds
// it there until one is ready, and a model whose replicas follow the calls counts it in its demand
// (demand.ts) from here to its end. Before all of that, the gate
// (auth/) lets the caller in, or refuses it, for what it asks of that Endpoint or DeployedModel.
import { ApiError } from '../errors.js';
import { destinationById, invalidManifest, pickDestination } from './routing.js';
import { handlePredict } from './predict.js';
import { handleRawPredict } from './rawPredict.js';
import { handleExplain } from './explain.js';
import { handleGraphStorm } from './graphstorm.js';
import { handleStreamRawPredict } from './stream/streamRawPredict.js';
import { handleOpenAi, handleOpenAiModels } from './stream/openai.js';
import { handleTfServing, tfServingPath } from './tfServing.js';
import { sendTo, type CallContext, type EndpointCall, type EndpointHandler, type ModelCall } from './call.js';
import type { RouteDestination } from './routing.js';
import type { Verb } from './routes.js';
import { endpointCallAccess, modelCallAccess, type Access } from './auth/access.js';
import { Refusal } from './auth/gate.js';

/** Request header that sends a call to one deployed model of the Endpoint, whatever the traffic split says. */
export const PIN_HEADER = 'x-predictgate-deployed-model-id';

const HANDLERS: Record<Verb, EndpointHandler> = {
  predict: handlePredict,
  rawPredict: handleRawPredict,
  explain: handleExplain,
  streamRawPredict: handleStreamRawPredict,
  chatCompletions: (call) => handleOpenAi(call, 'chatCompletions'),
  completions: (call) => handleOpenAi(call, 'completions'),
  models: handleOpenAiModels,
};

/** An Endpoint call: the Endpoint, then the deployed model, then the handler of the verb. */
export async function serveEndpointCall(call: CallContext, verb: Verb, byHost: boolean): Promise<void> {
  const { req, params } = call;
  const table = call.svc.routes();
  const route = byHost ? table.byHost(req.headers.host ?? '') : table.byName(params.project, params.endpoint);
  // The caller is asked about the Endpoint it names, whether or not it exists (a 404 is for callers
  // who may call it); a Host that names no Endpoint can only be authenticated.
  if (call.svc.gate.enabled) await letIn(call, byHost ? route && endpointCallAccess(verb, route.namespace, route.name) : endpointCallAccess(verb, params.project, params.endpoint));
  if (!route) {
    throw byHost
      ? new ApiError('endpoint_not_found', `no endpoint has the FQDN ${JSON.stringify(req.headers.host ?? '')}; calls on this route choose the endpoint by the Host header ({endpoint}.{namespace}.{domain})`)
      : endpointNotFound(params.project, params.endpoint);
  }
  call.endpoint = `${route.namespace}/${route.name}`;
  if (route.problems.length) throw invalidManifest('Endpoint', route.namespace, route.name, route.problems);
  const pinned = req.headers[PIN_HEADER];
  const dest = typeof pinned === 'string' ? destinationById(route, pinned, PIN_HEADER) : pickDestination(route, call.svc.random);
  if (!dest) {
    const ids = route.allDeployedModelIds;
    const why = [...(ids.length ? [`deployed models: ${ids.join(', ')}`] : []), ...ids.filter((id) => route.notReady.has(id)).map((id) => `${id} ${route.notReady.get(id)}`), ...route.unresolved];
    throw new ApiError('no_ready_destination', `endpoint ${route.name} has no Ready deployed model with traffic (${why.length ? why.join('; ') : 'it names no DeployedModel with traffic'})`);
  }
  call.route = route;
  sendTo(call, dest);
  // predict on a graphstorm model speaks GraphStorm, errors included.
  const graphstorm = verb === 'predict' && dest.framework === 'graphstorm';
  if (graphstorm) call.dialect = 'graphstorm';
  const handler = graphstorm ? handleGraphStorm : HANDLERS[verb];
  // Listing the models is not a prediction: it takes no slot and is not demand.
  if (!(dest.concurrency || dest.autoscaled) || verb === 'models') return handler(call as EndpointCall);
  const current = (): RouteDestination | undefined => call.svc.routes().byName(route.namespace, route.name)?.readyById.get(dest.deployedModelId);
  return admitted(call, dest, current, (wakes) => {
    if (wakes) sendTo(call, current() ?? dest);
    return handler(call as EndpointCall);
  });
}

/**
 * Runs a handler in a slot of its model (waiting for one, or refused with 429 model_busy), counted in
 * its demand when its replicas follow the calls. A call for a model that scales to zero waits for the
 * replicas the model has now (`current`), none while it is at zero; `handle` is told to go to them.
 */
async function admitted(call: CallContext, dest: RouteDestination, current: () => RouteDestination | undefined, handle: (held: boolean) => Promise<void>): Promise<void> {
  const { admission, upstream, demand } = call.svc;
  if (dest.autoscaled) demand.begin(dest.modelKey);
  try {
    const limit = dest.concurrency;
    if (!limit) return await handle(false);
    // A model that scales to zero may lose or gain its replicas while the call waits: it waits for
    // the replicas the model has now, and goes to them.
    const wakes = limit.coldStart !== undefined;
    if (wakes && dest.upstreams.length === 0) demand.hold(dest.modelKey);
    const rotation = wakes
      ? () => upstream.balancer.inRotationCount(current()?.upstreams ?? dest.upstreams)
      : () => upstream.balancer.inRotationCount(dest.upstreams);
    await admission.enter(dest, limit, rotation, call.cancel);
    try {
      await handle(wakes);
    } finally {
      admission.leave(dest.modelKey);
    }
  } finally {
    if (dest.autoscaled) demand.end(dest.modelKey);
  }
}

/** A TF Serving call: the DeployedModel named in the path, then the pass-through. */
export async function serveModelCall(call: CallContext): Promise<void> {
  const { namespace, name } = call.params;
  if (call.svc.gate.enabled) await letIn(call, modelCallAccess(call.req.method ?? '', namespace, name));
  const model = call.svc.routes().model(namespace, name);
  if (!model) throw new ApiError('endpoint_not_found', `no DeployedModel ${name} in namespace ${namespace}`);
  call.deployedModelId = model.deployedModelId;
  call.modelKey = `${namespace}/${name}`;
  if (model.problems.length) throw invalidManifest('DeployedModel', namespace, name, model.problems);
  call.model = model;
  // The TF Serving path and query after `/tfserving/{namespace}/{name}`, as the client sent them (checked).
  call.modelPath = tfServingPath(call.req.url ?? '');
  // Status and metadata reads (GET) are not predictions: only POST calls take a slot.
  const dest = model.destination;
  if (!dest || !(dest.concurrency || dest.autoscaled) || call.req.method !== 'POST') return handleTfServing(call as ModelCall);
  return admitted(call, dest, () => call.svc.routes().model(namespace, name)?.destination, (wakes) => {
    if (wakes) call.model = call.svc.routes().model(namespace, name) ?? model;
    return handleTfServing(call as ModelCall);
  });
}

/** Passes the gate for `access` (or refuses the call); the caller's name goes on the call, refused or not. */
async function letIn(call: CallContext, access: Access | undefined): Promise<void> {
  try {
    const who = call.svc.gate.check(call.req, access);
    call.user = (who instanceof Promise ? await who : who).user;
  } catch (err) {
    if (err instanceof Refusal) call.user = err.user;
    throw err;
  }
}

export function endpointNotFound(project: string, endpoint: string): ApiError {
  return new ApiError('endpoint_not_found', `endpoint ${endpoint} not found in project ${project}`);
}
