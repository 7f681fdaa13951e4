// OpenAI-compatible requests (chat/completions, completions) as the gateway checks and forwards them:
// the fields it reads are checked with path-precise errors (the rest is the model server's to judge),
// and the body goes on as the client sent it unless the gateway must change it: `model` becomes the
// container's servedModelName when its manifest names one, and a stream asks for its usage
// (stream_options.include_usage) so that tokens can be counted; the usage event the client did not
// ask for is then kept from it (see gateway/stream/openai.ts). Pure: bytes in, bytes out.
import { ApiError } from '../errors.js';
import { parseBody, refuseDeepNesting } from './prepare.js';
import { isObject, kindPhrase } from './instances.js';

export type OpenAiKind = 'chatCompletions' | 'completions';

export interface OpenAiRequest {
  /** What goes to the model. */
  body: Buffer;
  stream: boolean;
  /** The gateway asked for the usage event (the client did not): it is not passed on. */
  injectedUsage: boolean;
  /**
   * The prompt as the parts it is made of, for prefix affinity: each message's role and content (a
   * content that is not a string as its JSON), or the completion's prompt.
   */
  promptParts(): string[];
}

const invalid = (message: string): ApiError => new ApiError('invalid_payload', message);

/** Checks a chat/completions or completions body and makes the one the model gets. */
export function prepareOpenAi(raw: Buffer, kind: OpenAiKind, maxDepth: number, servedModelName: string | undefined): OpenAiRequest {
  if (raw.length === 0) throw new ApiError('invalid_json', `the body is empty; expected a JSON object (an OpenAI ${kind === 'chatCompletions' ? 'chat completion' : 'completion'} request)`);
  refuseDeepNesting(raw, maxDepth);
  const doc = parseBody(raw, false);
  if (!isObject(doc)) throw invalid(`expected a JSON object (an OpenAI ${kind === 'chatCompletions' ? 'chat completion' : 'completion'} request), got ${kindPhrase(doc)}`);
  const { model, stream, stream_options: options } = doc;
  if (model !== undefined && typeof model !== 'string') throw invalid(`model: expected a string, got ${kindPhrase(model)}`);
  if (stream !== undefined && stream !== null && typeof stream !== 'boolean') throw invalid(`stream: expected a boolean, got ${kindPhrase(stream)}`);
  const streaming = stream === true;
  if (options !== undefined && options !== null) {
    if (!isObject(options)) throw invalid(`stream_options: expected an object, got ${kindPhrase(options)}`);
    if (!streaming) throw invalid('stream_options: only allowed when stream is true');
    const usage = options.include_usage;
    if (usage !== undefined && usage !== null && typeof usage !== 'boolean') throw invalid(`stream_options.include_usage: expected a boolean, got ${kindPhrase(usage)}`);
  }
  if (kind === 'chatCompletions') checkMessages(doc.messages);
  else checkPrompt(doc.prompt);
  const rename = servedModelName !== undefined && model !== servedModelName;
  const injectedUsage = streaming && !(isObject(options) && options.include_usage === true);
  const promptParts = (): string[] => (kind === 'chatCompletions' ? messageParts(doc.messages as Record<string, unknown>[]) : [asText(doc.prompt)]);
  if (!rename && !injectedUsage) return { body: raw, stream: streaming, injectedUsage, promptParts };
  // Made again from the parsed document: its own keys (`__proto__` among them) stay its own.
  const changed: Record<string, unknown> = { ...doc };
  if (rename) changed.model = servedModelName;
  if (injectedUsage) changed.stream_options = { ...(isObject(options) ? options : {}), include_usage: true };
  return { body: Buffer.from(JSON.stringify(changed)), stream: streaming, injectedUsage, promptParts };
}

const asText = (v: unknown): string => (typeof v === 'string' ? v : (JSON.stringify(v) ?? ''));

/** A checked chat's messages as role, content, role, content, ... */
function messageParts(messages: readonly Record<string, unknown>[]): string[] {
  const parts: string[] = [];
  for (const m of messages) parts.push(m.role as string, '\n', asText(m.content), '\n');
  return parts;
}

function checkMessages(messages: unknown): void {
  if (messages === undefined) throw invalid('messages: required (a list of {"role": string, "content": ...})');
  if (!Array.isArray(messages)) throw invalid(`messages: expected a list, got ${kindPhrase(messages)}`);
  if (messages.length === 0) throw invalid('messages: expected at least one message, got an empty list');
  for (let i = 0; i < messages.length; i++) {
    const m: unknown = messages[i];
    if (!isObject(m)) throw invalid(`messages[${i}]: expected an object {"role": string, "content": ...}, got ${kindPhrase(m)}`);
    if (typeof m.role !== 'string') throw invalid(`messages[${i}].role: expected a string, got ${m.role === undefined ? 'nothing' : kindPhrase(m.role)}`);
  }
}

function checkPrompt(prompt: unknown): void {
  if (prompt === undefined) throw invalid('prompt: required (a string, a list of strings, or token ids)');
  if (typeof prompt === 'string') return;
  if (!Array.isArray(prompt) || prompt.length === 0) throw invalid(`prompt: expected a string or a non-empty list, got ${Array.isArray(prompt) ? 'an empty list' : kindPhrase(prompt)}`);
  for (let i = 0; i < prompt.length; i++) {
    const p: unknown = prompt[i];
    const ok = typeof p === 'string' || Number.isInteger(p) || (Array.isArray(p) && p.every((t) => Number.isInteger(t)));
    if (!ok) throw invalid(`prompt[${i}]: expected a string, a token id or a list of token ids, got ${kindPhrase(p)}`);
  }
}

/** Token counts of a finished answer (`usage`), when the model gave them. */
export interface Usage {
  promptTokens: number;
  completionTokens: number;
}

/** The `usage` of an OpenAI answer or chunk, when it has one that reads as counts. */
export function usageOf(doc: unknown): Usage | undefined {
  if (!isObject(doc) || !isObject(doc.usage)) return undefined;
  const { prompt_tokens: p, completion_tokens: c } = doc.usage;
  if (!Number.isInteger(p) || !Number.isInteger(c) || (p as number) < 0 || (c as number) < 0) return undefined;
  return { promptTokens: p as number, completionTokens: c as number };
}

/** What one streamed chunk carries, as the gateway counts it. */
export interface ChunkReading {
  /** It carries generated text (a token event). */
  text: boolean;
  usage: Usage | undefined;
  /** The chunk with the usage and no choices (the one include_usage adds last). */
  usageOnly: boolean;
}

/** Text in `delta.content` (chat) or `text` (completions): the name, then a string that is not empty. */
const TEXT = /"(?:content|text)"\s*:\s*"[^"]/;
const USAGE_OBJECT = /"usage"\s*:\s*\{/;

/**
 * Reads one streamed chunk (a `data:` event's JSON). Every chunk but the last carries no usage
 * object, and those are read without being parsed (a test of its text, not a JSON.parse per token);
 * a chunk with a usage object is parsed. Not JSON: nothing to count.
 */
export function readChunk(data: string): ChunkReading {
  if (!USAGE_OBJECT.test(data)) return { text: TEXT.test(data), usage: undefined, usageOnly: false };
  let doc: unknown;
  try {
    doc = JSON.parse(data);
  } catch {
    return { text: false, usage: undefined, usageOnly: false };
  }
  return { ...chunkContent(doc), usage: usageOf(doc) };
}

/** What one streamed chunk (a `data:` event's JSON) carries: generated text, and whether it is the usage-only chunk. */
export function chunkContent(doc: unknown): { text: boolean; usageOnly: boolean } {
  if (!isObject(doc) || !Array.isArray(doc.choices)) return { text: false, usageOnly: false };
  if (doc.choices.length === 0) return { text: false, usageOnly: isObject(doc.usage) };
  const choice: unknown = doc.choices[0];
  if (!isObject(choice)) return { text: false, usageOnly: false };
  const delta = choice.delta;
  const content = isObject(delta) ? delta.content : choice.text;
  return { text: typeof content === 'string' && content.length > 0, usageOnly: false };
}
