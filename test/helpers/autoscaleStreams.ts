// Streams across a scale-down on the test node: a closed-loop load raises the tiny-llm model that
// scales on calls (test/helpers/autoscale.ts) to four replicas, long streamed chat completions start,
// the load stops, and the autoscaler scales down while the streams run. Each stream is read to its
// end and judged whole (every token, finish_reason "length", `data: [DONE]`, no error event): a
// scale-down that took a pod with a stream on it would cut it (the pod's preStop pause is 10 s, the
// streams last 40 s). The Deployment's scale writes during the streams say that it did scale down.
import { atReplicas, CHAT_PATH, driver, LLM_MODEL, type Rig } from './autoscale.js';
import type { LoadReport } from './load.js';
import { origin } from './rollout.js';

/** One stream as the client read it. */
export interface StreamOutcome {
  status: number;
  /** Chunks that carried content. */
  tokens: number;
  finishReason: string | undefined;
  done: boolean;
  /** An error event's text, or how the read failed. */
  error: string | undefined;
}

export interface StreamsResult {
  /** The load that raised the replicas. */
  load: LoadReport;
  streams: StreamOutcome[];
  /** spec.replicas written from the load's stop to the streams' end, in order (the one in force first). */
  specsDuring: number[];
}

/** A streamed chat completion of `maxTokens` tokens: resolves `started` at its first chunk, `outcome` at its end. */
function openStream(rig: Rig, maxTokens: number): { started: Promise<void>; outcome: Promise<StreamOutcome> } {
  let started!: () => void;
  const first = new Promise<void>((resolve) => (started = resolve));
  const outcome = (async (): Promise<StreamOutcome> => {
    const out: StreamOutcome = { status: 0, tokens: 0, finishReason: undefined, done: false, error: undefined };
    try {
      const res = await fetch(origin() + CHAT_PATH, {
        method: 'POST',
        headers: { ...rig.headers, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny-llm', messages: [{ role: 'user', content: 'hold a replica' }], max_tokens: maxTokens, stream: true }),
      });
      out.status = res.status;
      if (!res.body) return out;
      const decoder = new TextDecoder();
      let pending = '';
      for await (const part of res.body) {
        started();
        pending += decoder.decode(part, { stream: true });
        let nl: number;
        while ((nl = pending.indexOf('\n')) >= 0) {
          const line = pending.slice(0, nl).trim();
          pending = pending.slice(nl + 1);
          if (line.startsWith('event: error')) out.error ??= 'error event';
          if (!line.startsWith('data: ')) continue;
          const data = line.slice('data: '.length);
          if (data === '[DONE]') {
            out.done = true;
            continue;
          }
          const chunk = JSON.parse(data) as { error?: { message?: string }; choices?: { delta?: { content?: string }; finish_reason?: string | null }[] };
          if (chunk.error) out.error = chunk.error.message ?? 'error';
          const choice = chunk.choices?.[0];
          if (choice?.delta?.content) out.tokens++;
          if (choice?.finish_reason) out.finishReason = choice.finish_reason;
        }
      }
    } catch (err) {
      out.error = err instanceof Error ? err.message : String(err);
    } finally {
      started();
    }
    return out;
  })();
  return { started: first, outcome };
}

/**
 * `inFlight` calls in flight until the model runs `replicas` (inFlight / TARGET), then `count` streams
 * of `maxTokens` tokens; the load stops once every stream has begun, and the streams are read to
 * their end while the autoscaler scales down.
 */
export async function streamsAcrossScaleDown(rig: Rig, opts: { inFlight: number; replicas: number; count: number; maxTokens: number }): Promise<StreamsResult> {
  const log = rig.replicas[LLM_MODEL];
  const load = driver(rig, opts.inFlight);
  load.start();
  let streams: ReturnType<typeof openStream>[] = [];
  let report: LoadReport;
  try {
    await atReplicas(rig, LLM_MODEL, opts.replicas, 240_000);
    streams = Array.from({ length: opts.count }, () => openStream(rig, opts.maxTokens));
    await Promise.all(streams.map((s) => s.started));
  } finally {
    report = await load.stop();
  }
  const t0 = performance.now();
  const outcomes = await Promise.all(streams.map((s) => s.outcome));
  return { load: report, streams: outcomes, specsDuring: log.specsBetween(t0, performance.now()) };
}
