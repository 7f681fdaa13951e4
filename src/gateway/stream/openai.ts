// The OpenAI-compatible routes of an Endpoint (`.../endpoints/{e}/chat/completions`, `/completions`,
// `/models`), on the deployed model the split or the pinning header chose, when its manifest says
// its container speaks the OpenAI API (modelSpec.openai). The request is checked and forwarded
// (payload/openai.ts); the answer comes back as the model sends it: a stream event by event, a
// whole answer as it is, the model's own errors with its status. On the way the gateway measures
// what users of an LLM gateway expect: time to the first token, time between tokens, and the
// prompt and completion tokens of the answer's `usage` (asked for on streams that did not). The
// prompt's prefix keys go with the call, for the load-aware pick's prefix affinity.
import { ApiError } from '../../errors.js';
import { prepareOpenAi, readChunk, usageOf, type OpenAiKind, type Usage } from '../../payload/openai.js';
import { readRequestBody } from '../bodyStream.js';
import { prefixKeys } from '../upstream/affinity.js';
import type { EndpointCall } from '../call.js';
import type { OpenAiTarget } from '../routing.js';
import { readEvent } from './sse.js';
import { isEventStream, streamToClient } from './streamCall.js';

/** How much of a whole (not streamed) answer is looked at for its `usage`. */
const USAGE_SCAN_BYTES = 256 * 1024;

function target(call: EndpointCall): OpenAiTarget {
  const { openai, deployedModelId } = call.dest;
  if (!openai) throw new ApiError('openai_unsupported', `deployed model ${deployedModelId} does not serve the OpenAI API (its modelSpec has no openai)`);
  return openai;
}

/** chat/completions and completions. */
export async function handleOpenAi(call: EndpointCall, kind: OpenAiKind): Promise<void> {
  const { dest, svc } = call;
  const openai = target(call);
  const path = openai[kind];
  if (path === null) throw new ApiError('openai_unsupported', `deployed model ${dest.deployedModelId} does not serve ${kind === 'chatCompletions' ? 'chat/completions' : 'completions'} (modelSpec.openai.routes)`);
  const raw = await readRequestBody(call.req, dest.maxRequestBytes, call.lease, dest.timeoutMs);
  call.requestBytes = raw.length;
  const request = prepareOpenAi(raw, kind, svc.maxJsonDepth, openai.servedModelName);
  const tokens = new TokenMeter(call, request.injectedUsage);
  try {
    await streamToClient(call, {
      path,
      headers: { 'content-type': 'application/json', accept: request.stream ? 'text/event-stream' : 'application/json' },
      body: request.body,
      // Only a pick among replicas that report their load looks at the prompt's prefix.
      prefix: svc.prefixBlockChars > 0 && dest.loadAware && dest.upstreams.length > 1 ? prefixKeys(dest.modelKey, request.promptParts(), svc.prefixBlockChars) : undefined,
      mode: (status, contentType) => (status < 300 && isEventStream(contentType) ? 'sse' : 'bytes'),
      onEvent: (event) => tokens.event(event),
      tap: request.stream ? undefined : (chunk) => tokens.wholeAnswer(chunk),
    });
  } finally {
    tokens.over();
  }
}

/** GET .../models: the chosen deployed model's own list, from its container. */
export async function handleOpenAiModels(call: EndpointCall): Promise<void> {
  const openai = target(call);
  await streamToClient(call, { method: 'GET', path: openai.models, headers: { accept: 'application/json' }, body: Buffer.alloc(0), mode: () => 'bytes' });
}

/**
 * One answer's token figures. A stream's events are read as they pass (a `data:` chunk with text is
 * a token event: the first gives the time to first token, each later one a time between tokens); a
 * whole answer is read for its `usage` at the end. The counts come from `usage` only: a chunk may
 * carry several tokens, so events are not counted as tokens.
 */
class TokenMeter {
  private firstAt = -1n;
  private lastAt = -1n;
  private usage: Usage | undefined;
  private whole: Buffer[] = [];
  private wholeBytes = 0;

  constructor(private readonly call: EndpointCall, private readonly injectedUsage: boolean) {}

  /** Sees a streamed event; false keeps the usage chunk the gateway asked for from the client. */
  event(bytes: Buffer): boolean {
    const { data } = readEvent(bytes);
    if (data === undefined || data === '[DONE]') return true;
    const { text, usage, usageOnly } = readChunk(data);
    if (usage) this.usage = usage;
    if (text) this.token();
    return !(usageOnly && this.injectedUsage);
  }

  /** A part of a whole answer (kept, up to USAGE_SCAN_BYTES, to read its usage). */
  wholeAnswer(chunk: Buffer): void {
    if (this.wholeBytes + chunk.length > USAGE_SCAN_BYTES) return void (this.wholeBytes = Infinity);
    this.whole.push(chunk);
    this.wholeBytes += chunk.length;
  }

  private token(): void {
    const now = process.hrtime.bigint();
    const { metrics } = this.call.svc;
    if (this.firstAt < 0n) {
      this.firstAt = now;
      metrics.firstToken(this.call, Number(now - this.call.startNs) / 1e9);
    } else {
      metrics.interToken(this.call, Number(now - this.lastAt) / 1e9);
    }
    this.lastAt = now;
  }

  /** The call is over, however it ended. */
  over(): void {
    const { metrics } = this.call.svc;
    if (this.whole.length && this.wholeBytes !== Infinity && this.call.res.statusCode < 300) {
      try {
        const doc: unknown = JSON.parse(Buffer.concat(this.whole).toString('utf8'));
        this.usage = usageOf(doc);
      } catch {
        // Not JSON: no usage to count.
      }
    }
    this.whole = [];
    if (this.usage) metrics.tokens(this.call, this.usage.promptTokens, this.usage.completionTokens);
  }
}
