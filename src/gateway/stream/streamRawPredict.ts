// streamRawPredict: rawPredict's body, untouched, to the model's predict route, and its answer
// streamed back as the model sends it: server-sent events event by event, any other type part by
// part. The official client libraries' REST form (`?$alt=json`) sends the request as
// {"httpBody": {...}} and reads the answer as a JSON array of google.api.HttpBody, one per part.
import type { EndpointCall } from '../call.js';
import { rawBody, readHttpBodyRequest, wantsProtoJson } from '../rawPredict.js';
import { isEventStream, streamToClient } from './streamCall.js';

export async function handleStreamRawPredict(call: EndpointCall): Promise<void> {
  const { dest } = call;
  if (wantsProtoJson(call.req.url ?? '')) {
    const request = await readHttpBodyRequest(call);
    return streamToClient(call, {
      path: dest.predictRoute,
      headers: request.contentType ? { 'content-type': request.contentType } : {},
      body: request.data,
      mode: (status) => (status < 300 ? 'httpBody' : 'bytes'),
    });
  }
  const { headers, body, view } = await rawBody(call);
  try {
    await streamToClient(call, { path: dest.predictRoute, headers, body, mode: (status, contentType) => (status < 300 && isEventStream(contentType) ? 'sse' : 'bytes') });
  } finally {
    const v = view();
    if (v) call.requestBytes = v.bytes;
  }
}
