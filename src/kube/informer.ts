// A watched cache of one resource type (client-node's informer, made resilient): list+watch, relist
// after 410 Gone (the library does that), restart with exponential backoff after any other error (the
// library stops there), one callback per change with the object's key, `synced` once the first list
// is in, and counters for relists and restarts. Optionally one informer per watched namespace.
// Objects are cached with their managedFields cut down to who owns which fields two levels deep
// (compactManagedFields): the full field sets are most of a Deployment's or a status-written
// object's size, and nothing reads them from a cache beyond that depth.
import { ListWatch, Watch, type KubeConfig, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from '../log.js';
import { describeApiError } from './errors.js';
import { backoffMs } from '../backoff.js';
import { BACKOFF_BASE_MS, BACKOFF_MAX_MS } from './backoff.js';

export type ChangeType = 'add' | 'update' | 'delete';

/** What the cache needs of an object (custom resources arrive as plain JSON, timestamps as strings). */
export interface ApiObject {
  metadata: { name: string; namespace?: string; resourceVersion?: string };
}

type ListOf<T> = { items: T[]; metadata?: { resourceVersion?: string } };

/** A field set (fieldsV1) kept to `depth` levels: which fields, not their members' members. */
function fieldsTo(fields: unknown, depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (depth === 0 || typeof fields !== 'object' || fields === null) return out;
  for (const [k, v] of Object.entries(fields)) out[k] = fieldsTo(v, depth - 1);
  return out;
}

/**
 * Cuts an object's metadata.managedFields down, in place, to each entry's manager, operation and
 * subresource and its fields two levels deep (`f:spec` → `f:replicas`: whether a manager owns
 * `spec.replicas`, not what it owns inside the pod template). Returns the object.
 */
export function compactManagedFields<T>(obj: T): T {
  const meta = (obj as { metadata?: { managedFields?: unknown } } | null)?.metadata;
  if (!meta || !Array.isArray(meta.managedFields)) return obj;
  meta.managedFields = meta.managedFields.map((f: { manager?: string; operation?: string; subresource?: string; fieldsV1?: unknown }) => {
    const entry: Record<string, unknown> = { manager: f.manager, operation: f.operation, fieldsV1: fieldsTo(f.fieldsV1, 2) };
    if (f.subresource) entry.subresource = f.subresource;
    return entry;
  });
  return obj;
}

/** client-node's Watch, with each delivered object compacted before the informer caches it. */
class CompactingWatch extends Watch {
  override watch(path: string, queryParams: Record<string, string | number | boolean | undefined>, callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void, done: (err: unknown) => void): Promise<AbortController> {
    return super.watch(path, queryParams, (phase, obj, raw) => callback(phase, phase === 'ERROR' ? obj : compactManagedFields(obj), raw), done);
  }
}

export interface CacheOptions<T extends ApiObject> {
  kc: KubeConfig;
  /** Name for logs and metrics, e.g. "deployments". */
  name: string;
  /** Watch path for a namespace (undefined: all namespaces), e.g. ns => `/apis/apps/v1/namespaces/${ns}/deployments`. */
  path(namespace: string | undefined): string;
  list(namespace: string | undefined, labelSelector: string | undefined): Promise<ListOf<T>>;
  /** Empty: watch all namespaces with one informer. */
  namespaces: string[];
  labelSelector?: string;
  logger: Logger;
  backoffBaseMs?: number;
  backoffMaxMs?: number;
}

export interface CacheStats {
  lists: number;
  restarts: number;
}

export class WatchedCache<T extends ApiObject> {
  private readonly informers: ListWatch<KubernetesObject>[] = [];
  private readonly listeners: ((type: ChangeType, obj: T) => void)[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private stopped = false;
  private readonly onStop: (() => void)[] = [];
  readonly stats: CacheStats = { lists: 0, restarts: 0 };
  readonly synced: Promise<void>;
  /** The resource's plural, as given (logs and metrics). */
  readonly name: string;

  constructor(opts: CacheOptions<T>) {
    this.name = opts.name;
    const scopes = opts.namespaces.length ? opts.namespaces : [undefined];
    const syncs: Promise<void>[] = [];
    for (const ns of scopes) {
      let markSynced!: () => void;
      syncs.push(new Promise<void>((r) => (markSynced = r)));
      this.onStop.push(() => markSynced()); // start() never hangs on a cache stopped before its first list
      let failures = 0;
      const list = async (): Promise<KubernetesListObject<KubernetesObject>> => {
        // The library does not look at stop() between its list and its watch: refuse both here.
        if (this.stopped) throw new Error('stopped');
        this.stats.lists++;
        const result = await opts.list(ns, opts.labelSelector);
        if (this.stopped) throw new Error('stopped');
        for (const item of result.items) compactManagedFields(item);
        failures = 0; // a good list ends a run of failures (the library's 'connect' fires before every try)
        // The informer adds the items right after this promise settles; `synced` follows them.
        setImmediate(markSynced);
        return result as unknown as KubernetesListObject<KubernetesObject>;
      };
      // makeInformer's own construction, with the compacting watch.
      const informer = new ListWatch<KubernetesObject>(opts.path(ns), new CompactingWatch(opts.kc), list, false, opts.labelSelector);
      for (const type of ['add', 'update', 'delete'] as const) {
        informer.on(type, (obj: KubernetesObject) => {
          failures = 0; // the watch delivers: it works again
          for (const l of this.listeners) l(type, obj as unknown as T);
        });
      }
      informer.on('error', (err: unknown) => {
        if (this.stopped) return;
        failures++;
        this.stats.restarts++;
        const delay = backoffMs(failures, opts.backoffBaseMs ?? BACKOFF_BASE_MS, opts.backoffMaxMs ?? BACKOFF_MAX_MS);
        opts.logger.warn({ cache: opts.name, namespace: ns ?? '*', server: opts.kc.getCurrentCluster()?.server, retryInMs: delay, err: describeApiError(err) }, 'watch failed; restarting');
        const timer = setTimeout(() => {
          this.timers.delete(timer);
          if (!this.stopped) void informer.start().catch(() => {}); // a failure arrives as another 'error'
        }, delay);
        this.timers.add(timer);
      });
      this.informers.push(informer);
    }
    this.synced = Promise.all(syncs).then(() => undefined);
  }

  async start(): Promise<void> {
    await Promise.all(this.informers.map((i) => i.start().catch(() => {}))); // errors arrive as 'error' events
  }

  onChange(listener: (type: ChangeType, obj: T) => void): void {
    this.listeners.push(listener);
  }

  get(namespace: string, name: string): T | undefined {
    for (const i of this.informers) {
      const o = i.get(name, namespace);
      if (o) return o as unknown as T;
    }
    return undefined;
  }

  list(): T[] {
    return this.informers.flatMap((i) => i.list()) as unknown as T[];
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const f of this.onStop) f();
    await Promise.all(this.informers.map((i) => i.stop()));
  }
}
