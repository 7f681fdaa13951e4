// The bundled `tiny-llm` model: a deterministic stand-in for an OpenAI-compatible generative server
// (as vLLM serves it), needing nothing but Node. Owns: GET /health, GET /v1/models, POST
// /v1/chat/completions and POST /v1/completions (answered whole or streamed as server-sent events),
// the request checks with OpenAI's error shape, the paced token loop (setTimeout, backpressure,
// abort when the client leaves), the FIFO of generations beyond `maxRunning`, and vLLM's metrics.
//
// What it generates: the words of "You said: <text>", <text> being the last user message (the last
// message when none is from the user) or the prompt, cycled until max_tokens words are made. A word
// is a token; every token but the first carries its leading space. So `Say hi` with max_tokens 5 is
// "You said: Say hi You" (finish_reason `length`). A stop string ends the text just before it
// (finish_reason `stop`). prompt_tokens is the number of words in all messages (or the prompt), at least 1.
import type { IncomingMessage, ServerResponse } from 'node:http';

export const TINY_LLM_CHAT_PATH = '/v1/chat/completions';
export const TINY_LLM_HEALTH_PATH = '/health';
const COMPLETIONS_PATH = '/v1/completions';
const MODELS_PATH = '/v1/models';
const MAX_BODY_BYTES = 1024 * 1024;
const MAX_TOKENS = 4096;
const DEFAULT_MAX_TOKENS = 16;
/** Tokens one running generation may hold: the kv-cache capacity is this times maxRunning. */
const TOKENS_PER_SLOT = 4096;

export interface TinyLlmOptions {
  /** Pause before each token, ms (TINY_LLM_TOKEN_INTERVAL_MS); default 20. */
  tokenIntervalMs?: number;
  /** Generations at once (TINY_LLM_MAX_RUNNING); more wait in a FIFO queue. Default 4. */
  maxRunning?: number;
  /** The id /v1/models lists and the metrics' model_name (TINY_LLM_MODEL_NAME); default tiny-llm. */
  modelName?: string;
  /** Clock, ms since the epoch; default Date.now. */
  now?: () => number;
}

export const TINY_LLM_SETTINGS: readonly { env: string; default: string; help: string }[] = [
  { env: 'TINY_LLM_TOKEN_INTERVAL_MS', default: '20', help: "The tiny-llm model's pause before each generated token, in ms (0 allowed)." },
  { env: 'TINY_LLM_MAX_RUNNING', default: '4', help: "Generations the tiny-llm model makes at once; more wait in a FIFO queue (vLLM's max_num_seqs)." },
  { env: 'TINY_LLM_MODEL_NAME', default: 'tiny-llm', help: 'The model id the tiny-llm model lists on /v1/models and labels its metrics with.' },
];

/** tiny-llm's options from TINY_LLM_* (only those set); throws naming the variable on a bad value. */
export function tinyLlmOptionsFromEnv(env: NodeJS.ProcessEnv): TinyLlmOptions {
  const opts: TinyLlmOptions = {};
  const int = (key: string, min: number): number | undefined => {
    const raw = env[key]?.trim();
    if (raw === undefined || raw === '') return undefined;
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n < min) throw new Error(`${key} must be an integer of ${min} or more, got "${env[key]}"`);
    return n;
  };
  const interval = int('TINY_LLM_TOKEN_INTERVAL_MS', 0);
  const maxRunning = int('TINY_LLM_MAX_RUNNING', 1);
  if (interval !== undefined) opts.tokenIntervalMs = interval;
  if (maxRunning !== undefined) opts.maxRunning = maxRunning;
  if (env.TINY_LLM_MODEL_NAME !== undefined) {
    const name = env.TINY_LLM_MODEL_NAME.trim();
    if (name === '') throw new Error('TINY_LLM_MODEL_NAME must be a non-empty model id, got ""');
    opts.modelName = name;
  }
  return opts;
}

type Finish = 'stop' | 'length';
type Kind = 'chat' | 'completion';

/** One request's generation: what it will write, token by token, and how it ends. */
interface Plan { pieces: string[]; text: string; finish: Finish }

interface Request {
  kind: Kind;
  model: string;
  source: string;
  promptTokens: number;
  maxTokens: number;
  stops: string[];
  stream: boolean;
  includeUsage: boolean;
}

class BadRequest extends Error {
  constructor(message: string, readonly param: string | null, readonly status = 400) {
    super(message);
  }
}

const words = (text: string): string[] => text.split(/\s+/).filter((w) => w !== '');

/** The reply, cut at the stop string that completes first (that string and what follows left out). */
export function planReply(source: string, maxTokens: number, stops: readonly string[]): Plan {
  const cycle = ['You', 'said:', ...words(source)];
  const tokens = Array.from({ length: maxTokens }, (_, i) => (i === 0 ? '' : ' ') + cycle[i % cycle.length]);
  const full = tokens.join('');
  let cut = -1;
  let end = Infinity;
  for (const s of stops) {
    const at = s === '' ? -1 : full.indexOf(s);
    if (at >= 0 && at + s.length < end) [cut, end] = [at, at + s.length];
  }
  if (cut < 0) return { pieces: tokens, text: full, finish: 'length' };
  const pieces: string[] = [];
  for (let i = 0, pos = 0; pos < end; pos += tokens[i].length, i++) pieces.push(tokens[i].slice(0, Math.max(0, cut - pos)));
  return { pieces, text: full.slice(0, cut), finish: 'stop' };
}

const shape = (v: unknown): string => (v === undefined ? 'nothing' : JSON.stringify(v).slice(0, 80));

function messageText(content: unknown, where: string): string {
  if (typeof content === 'string') return content;
  const expected = `${where}: expected a string or an array of {"type": "text", "text": string}, got ${shape(content)}`;
  if (!Array.isArray(content)) throw new BadRequest(expected, 'messages');
  return content
    .map((part: unknown, i) => {
      const p = part as { type?: unknown; text?: unknown } | null;
      if (typeof p !== 'object' || p === null || p.type !== 'text' || typeof p.text !== 'string') {
        throw new BadRequest(`${where}[${i}]: expected {"type": "text", "text": string}, got ${shape(part)}`, 'messages');
      }
      return p.text;
    })
    .join('\n');
}

/** The source text and prompt token count of a chat body's `messages`. */
function chatPrompt(messages: unknown): { source: string; promptTokens: number } {
  if (!Array.isArray(messages)) throw new BadRequest(`messages: expected a non-empty array of {role, content}, got ${shape(messages)}`, 'messages');
  if (messages.length === 0) throw new BadRequest('messages: expected a non-empty array of {role, content}, got []', 'messages');
  const texts = messages.map((m: unknown, i) => {
    const msg = m as { role?: unknown; content?: unknown } | null;
    if (typeof msg !== 'object' || msg === null || Array.isArray(msg)) throw new BadRequest(`messages[${i}]: expected an object {role, content}, got ${shape(m)}`, 'messages');
    if (typeof msg.role !== 'string' || msg.role === '') throw new BadRequest(`messages[${i}].role: expected a string, got ${shape(msg.role)}`, 'messages');
    return { role: msg.role, text: messageText(msg.content, `messages[${i}].content`) };
  });
  const last = [...texts].reverse().find((t) => t.role === 'user') ?? texts[texts.length - 1];
  return { source: last.text, promptTokens: Math.max(1, texts.reduce((n, t) => n + words(t.text).length, 0)) };
}

function completionPrompt(prompt: unknown): { source: string; promptTokens: number } {
  const one = Array.isArray(prompt) && prompt.length === 1 ? prompt[0] : prompt;
  if (Array.isArray(prompt) && prompt.length > 1) throw new BadRequest(`prompt: only one prompt is supported, got ${prompt.length}`, 'prompt');
  if (typeof one !== 'string') throw new BadRequest(`prompt: expected a string or an array of one string, got ${shape(prompt)}`, 'prompt');
  return { source: one, promptTokens: Math.max(1, words(one).length) };
}

/** Checks a request body (JSON text) of `kind`; throws BadRequest naming the field. */
export function parseRequest(kind: Kind, text: string, defaultModel: string): Request {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    throw new BadRequest(`the body is not valid JSON: ${err instanceof Error ? err.message : String(err)}`, null);
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new BadRequest(`the body must be a JSON object, got ${shape(body)}`, null);
  const b = body as Record<string, unknown>;
  const given = (key: string): boolean => b[key] !== undefined && b[key] !== null;
  if (kind === 'chat' && !given('messages')) throw new BadRequest('messages: required, expected a non-empty array of {role, content}', 'messages');
  if (kind === 'completion' && !given('prompt')) throw new BadRequest('prompt: required, expected a string or an array of one string', 'prompt');
  const prompt = kind === 'chat' ? chatPrompt(b.messages) : completionPrompt(b.prompt);
  if (given('model') && typeof b.model !== 'string') throw new BadRequest(`model: expected a string, got ${shape(b.model)}`, 'model');
  const maxKey = kind === 'chat' && given('max_completion_tokens') ? 'max_completion_tokens' : 'max_tokens';
  const max = given(maxKey) ? b[maxKey] : DEFAULT_MAX_TOKENS;
  if (typeof max !== 'number' || !Number.isInteger(max) || max < 1 || max > MAX_TOKENS) {
    throw new BadRequest(`${maxKey}: expected an integer from 1 to ${MAX_TOKENS}, got ${shape(max)}`, maxKey);
  }
  if (given('n') && b.n !== 1) throw new BadRequest(`n: only 1 is supported, got ${shape(b.n)}`, 'n');
  if (given('stream') && typeof b.stream !== 'boolean') throw new BadRequest(`stream: expected a boolean, got ${shape(b.stream)}`, 'stream');
  const so = b.stream_options as { include_usage?: unknown } | null | undefined;
  if (given('stream_options') && (typeof so !== 'object' || Array.isArray(so))) throw new BadRequest(`stream_options: expected an object, got ${shape(so)}`, 'stream_options');
  const usage = so?.include_usage;
  if (usage !== undefined && usage !== null && typeof usage !== 'boolean') throw new BadRequest(`stream_options.include_usage: expected a boolean, got ${shape(usage)}`, 'stream_options');
  const stop = given('stop') ? b.stop : [];
  const stops = typeof stop === 'string' ? [stop] : stop;
  if (!Array.isArray(stops) || !stops.every((s) => typeof s === 'string')) throw new BadRequest(`stop: expected a string or an array of strings, got ${shape(stop)}`, 'stop');
  return { kind, model: typeof b.model === 'string' ? b.model : defaultModel, ...prompt, maxTokens: max, stops, stream: b.stream === true, includeUsage: usage === true };
}

/** A generation the engine runs: it hands each made piece to `token` and calls `done` at the end. */
interface Job {
  promptTokens: number;
  plan: Plan;
  made: number;
  state: 'waiting' | 'running' | 'done';
  timer?: NodeJS.Timeout;
  /** Writes a piece; false when the client's buffer is full (the engine then waits for `drain`). */
  token(piece: string): boolean;
  done(): void;
  res: ServerResponse;
}

/** Slots, FIFO queue, token pacing and vLLM's counters. */
class Engine {
  private readonly running = new Set<Job>();
  private readonly waiting: Job[] = [];
  private readonly resumes = new Map<Job, () => void>();
  private promptTotal = 0;
  private generationTotal = 0;
  private readonly finished: Record<Finish | 'abort', number> = { stop: 0, length: 0, abort: 0 };

  constructor(private readonly maxRunning: number, private readonly intervalMs: number, private readonly label: string) {}

  submit(job: Job): void {
    job.res.on('close', () => {
      if (!job.res.writableFinished) this.abort(job);
    });
    if (this.running.size < this.maxRunning) this.start(job);
    else this.waiting.push(job);
  }

  private start(job: Job): void {
    job.state = 'running';
    this.running.add(job);
    this.promptTotal += job.promptTokens;
    this.schedule(job);
  }

  private schedule(job: Job): void {
    job.timer = setTimeout(() => this.tick(job), this.intervalMs);
  }

  private tick(job: Job): void {
    if (job.state !== 'running') return;
    const piece = job.plan.pieces[job.made++];
    this.generationTotal++;
    const room = job.token(piece);
    if (job.made === job.plan.pieces.length) {
      this.end(job, job.plan.finish);
    } else if (room) {
      this.schedule(job);
    } else {
      const resume = (): void => {
        this.resumes.delete(job);
        this.schedule(job);
      };
      this.resumes.set(job, resume);
      job.res.once('drain', resume);
    }
  }

  private end(job: Job, reason: Finish | 'abort'): void {
    const wasRunning = job.state === 'running';
    job.state = 'done';
    this.finished[reason]++;
    if (reason !== 'abort') job.done();
    if (!wasRunning) return;
    this.running.delete(job);
    const next = this.waiting.shift();
    if (next) this.start(next);
  }

  /** The client left: stop at once and free the slot (or the place in the queue). */
  private abort(job: Job): void {
    if (job.state === 'done') return;
    clearTimeout(job.timer);
    const resume = this.resumes.get(job);
    if (resume) job.res.off('drain', resume);
    this.resumes.delete(job);
    if (job.state === 'waiting') this.waiting.splice(this.waiting.indexOf(job), 1);
    this.end(job, 'abort');
  }

  exposition(): string {
    const l = `model_name="${this.label.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;
    let held = 0;
    for (const j of this.running) held += j.promptTokens + j.made;
    const kv = Math.min(1, held / (TOKENS_PER_SLOT * this.maxRunning));
    const metric = (name: string, type: string, help: string, series: string[]): string => `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n${series.join('\n')}\n`;
    return [
      metric('vllm:num_requests_running', 'gauge', 'Number of requests in model execution batches.', [`vllm:num_requests_running{${l}} ${this.running.size}`]),
      metric('vllm:num_requests_waiting', 'gauge', 'Number of requests waiting to be processed.', [`vllm:num_requests_waiting{${l}} ${this.waiting.length}`]),
      metric('vllm:kv_cache_usage_perc', 'gauge', 'KV-cache usage. 1 means 100 percent usage.', [`vllm:kv_cache_usage_perc{${l}} ${kv}`]),
      metric('vllm:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.', [`vllm:prompt_tokens_total{${l}} ${this.promptTotal}`]),
      metric('vllm:generation_tokens_total', 'counter', 'Number of generation tokens processed.', [`vllm:generation_tokens_total{${l}} ${this.generationTotal}`]),
      metric('vllm:request_success_total', 'counter', 'Count of successfully processed requests, by finished_reason (abort: the client left).',
        (['abort', 'length', 'stop'] as const).map((r) => `vllm:request_success_total{${l},finished_reason="${r}"} ${this.finished[r]}`)),
    ].join('');
  }
}

function sendJson(res: ServerResponse, status: number, doc: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(doc);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

function sendError(res: ServerResponse, status: number, message: string, param: string | null = null, headers: Record<string, string> = {}): void {
  sendJson(res, status, { error: { message, type: 'invalid_request_error', param, code: null } }, headers);
}

/** Reads the body (at most 1 MiB, else 413) and hands its text on. Never throws. */
function readBody(req: IncomingMessage, res: ServerResponse, then: (text: string) => void): void {
  const tooLarge = (): void => {
    sendError(res, 413, `the body is larger than ${MAX_BODY_BYTES} bytes`, null, { Connection: 'close' });
    req.resume();
  };
  if (Number(req.headers['content-length'] ?? 0) > MAX_BODY_BYTES) return tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('error', () => undefined); // an aborted upload: nothing to answer
  req.on('data', (c: Buffer) => {
    if (size > MAX_BODY_BYTES) return;
    size += c.length;
    if (size > MAX_BODY_BYTES) tooLarge();
    else chunks.push(c);
  });
  req.on('end', () => {
    if (size <= MAX_BODY_BYTES) then(Buffer.concat(chunks).toString('utf8'));
  });
}

/** The tiny-llm app for the model runner: its routes, its handler and its metrics. */
export function tinyLlmApp(opts: TinyLlmOptions = {}): { predictPath: string; healthPath: string; handle(req: IncomingMessage, res: ServerResponse): void; metrics(): string } {
  const now = opts.now ?? Date.now;
  const name = opts.modelName ?? 'tiny-llm';
  const interval = opts.tokenIntervalMs ?? 20;
  const maxRunning = opts.maxRunning ?? 4;
  if (!Number.isInteger(interval) || interval < 0) throw new Error(`tiny-llm: tokenIntervalMs must be an integer of 0 or more, got ${interval}`);
  if (!Number.isInteger(maxRunning) || maxRunning < 1) throw new Error(`tiny-llm: maxRunning must be an integer of 1 or more, got ${maxRunning}`);
  const engine = new Engine(maxRunning, interval, name);
  const started = Math.floor(now() / 1000);
  let nextId = 1;

  const generate = (r: Request, res: ServerResponse): void => {
    const id = `${r.kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${nextId++}`;
    const created = Math.floor(now() / 1000);
    const object = r.kind === 'chat' ? 'chat.completion' : 'text_completion';
    const plan = planReply(r.source, r.maxTokens, r.stops);
    const job: Job = { promptTokens: r.promptTokens, plan, made: 0, state: 'waiting', res, token: () => true, done: () => undefined };
    const usage = (): unknown => ({ prompt_tokens: r.promptTokens, completion_tokens: job.made, total_tokens: r.promptTokens + job.made });
    if (!r.stream) {
      job.done = () => {
        const choice = r.kind === 'chat' ? { index: 0, message: { role: 'assistant', content: plan.text }, logprobs: null, finish_reason: plan.finish } : { index: 0, text: plan.text, logprobs: null, finish_reason: plan.finish };
        sendJson(res, 200, { id, object, created, model: r.model, choices: [choice], usage: usage() });
      };
      return engine.submit(job);
    }
    const extra = r.includeUsage ? { usage: null } : {};
    const chunk = (choice: Record<string, unknown>): boolean =>
      res.write(`data: ${JSON.stringify({ id, object: r.kind === 'chat' ? 'chat.completion.chunk' : object, created, model: r.model, choices: [{ index: 0, ...choice }], ...extra })}\n\n`);
    const part = (text: string, finish: Finish | null): Record<string, unknown> =>
      r.kind === 'chat' ? { delta: finish ? {} : { content: text }, logprobs: null, finish_reason: finish } : { text, logprobs: null, finish_reason: finish };
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
    res.flushHeaders();
    if (r.kind === 'chat') chunk({ delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null });
    job.token = (piece) => (piece === '' ? true : chunk(part(piece, null)));
    job.done = () => {
      chunk(part('', plan.finish));
      if (r.includeUsage) res.write(`data: ${JSON.stringify({ id, object: r.kind === 'chat' ? 'chat.completion.chunk' : object, created, model: r.model, choices: [], usage: usage() })}\n\n`);
      res.end('data: [DONE]\n\n');
    };
    engine.submit(job);
  };

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const method = req.method ?? 'GET';
    const path = (req.url ?? '/').split('?')[0];
    const kind: Kind | null = path === TINY_LLM_CHAT_PATH ? 'chat' : path === COMPLETIONS_PATH ? 'completion' : null;
    const getRoute = path === TINY_LLM_HEALTH_PATH || path === MODELS_PATH;
    const get = method === 'GET' || method === 'HEAD';
    if (kind && method === 'POST') {
      return readBody(req, res, (text) => {
        try {
          generate(parseRequest(kind, text, name), res);
        } catch (err) {
          if (err instanceof BadRequest) sendError(res, err.status, err.message, err.param);
          else sendJson(res, 500, { error: { message: 'internal error', type: 'server_error', param: null, code: null } });
        }
      });
    }
    req.resume();
    if (kind || (getRoute && !get)) return sendError(res, 405, `method ${method} is not allowed on ${path}; use ${kind ? 'POST' : 'GET'}`, null, { Allow: kind ? 'POST' : 'GET, HEAD' });
    if (path === TINY_LLM_HEALTH_PATH) return sendJson(res, 200, { status: 'ok' });
    if (path === MODELS_PATH) return sendJson(res, 200, { object: 'list', data: [{ id: name, object: 'model', created: started, owned_by: 'predictgate' }] });
    sendError(res, 404, `no route for ${method} ${path}`);
  };

  return { predictPath: TINY_LLM_CHAT_PATH, healthPath: TINY_LLM_HEALTH_PATH, handle, metrics: () => engine.exposition() };
}
