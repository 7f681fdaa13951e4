// The local-mode Store: DeployedModel and Endpoint manifests read from a folder of YAML (the same
// files a user would `kubectl apply`), reloaded when a file changes. Generations are counted here
// (a spec change bumps it, as the apiserver does); status lives in memory. A file that fails to parse
// keeps its last good objects, so a half-saved edit never tears a model down.
import { readdir, readFile } from 'node:fs/promises';
import { watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { API_VERSION, type DeployedModel, type Endpoint, type Resource, type ResourceKind, keyOf } from '../api/types.js';
import type { Logger } from '../log.js';
import type { Store, StoreEvent } from './store.js';

interface Entry {
  obj: Resource;
  file: string;
  specJson: string;
}

export interface FolderStoreOptions {
  dir: string;
  logger: Logger;
  clock: () => Date;
  /** Debounce of file-change events before a reload. */
  debounceMs?: number;
}

const KINDS: ReadonlySet<string> = new Set(['DeployedModel', 'Endpoint']);

export class FolderStore implements Store {
  private readonly entries = new Map<string, Entry>(); // `${kind}/${ns}/${name}`
  private readonly lastGood = new Map<string, Resource[]>(); // file → objects
  private readonly listeners: ((e: StoreEvent) => void)[] = [];
  private watcher: FSWatcher | null = null;
  private timer: NodeJS.Timeout | null = null;
  private reloading: Promise<void> = Promise.resolve();
  loaded = false;

  constructor(private readonly opts: FolderStoreOptions) {}

  async start(): Promise<void> {
    await this.reload();
    this.watcher = watch(this.opts.dir, () => this.scheduleReload());
    this.watcher.on('error', (err) => this.opts.logger.error({ err: String(err), dir: this.opts.dir }, 'cannot watch the manifest folder'));
  }

  stop(): void {
    this.watcher?.close();
    if (this.timer) clearTimeout(this.timer);
  }

  private scheduleReload(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.reload();
    }, this.opts.debounceMs ?? 100);
  }

  /** Re-reads every manifest and emits an event per added, changed or removed object. */
  reload(): Promise<void> {
    this.reloading = this.reloading.then(() => this.doReload());
    return this.reloading;
  }

  /** Never rejects: a folder that cannot be read keeps every object as it was (and says so). */
  private async doReload(): Promise<void> {
    let names: string[];
    try {
      names = await readdir(this.opts.dir);
    } catch (err) {
      this.opts.logger.error({ dir: this.opts.dir, err: err instanceof Error ? err.message : String(err) }, 'cannot read the manifest folder; keeping the objects loaded before');
      return;
    }
    const files = names.filter((f) => /\.(ya?ml|json)$/.test(f)).sort();
    for (const f of this.lastGood.keys()) if (!files.includes(f)) this.lastGood.delete(f);
    const next = new Map<string, { obj: Resource; file: string }>();
    for (const file of files) {
      for (const obj of await this.readFile(file)) {
        const k = `${obj.kind}/${keyOf(obj.metadata)}`;
        const prev = next.get(k);
        if (prev) this.opts.logger.warn({ file, other: prev.file, object: k }, 'object defined twice; the later file wins');
        next.set(k, { obj, file });
      }
    }
    const events: StoreEvent[] = [];
    for (const [k, { obj, file }] of next) {
      const specJson = JSON.stringify(obj.spec);
      const old = this.entries.get(k);
      if (old && old.specJson === specJson) continue;
      const generation = old ? (old.obj.metadata.generation ?? 1) + 1 : 1;
      const metadata = { ...obj.metadata, generation, creationTimestamp: old?.obj.metadata.creationTimestamp ?? this.opts.clock().toISOString().replace(/\.\d{3}Z$/, 'Z') };
      this.entries.set(k, { obj: { ...obj, metadata, status: old?.obj.status } as Resource, file, specJson });
      events.push({ kind: obj.kind, key: keyOf(metadata) });
    }
    for (const [k, old] of this.entries) {
      if (next.has(k)) continue;
      this.entries.delete(k);
      events.push({ kind: old.obj.kind, key: keyOf(old.obj.metadata) });
    }
    this.loaded = true;
    for (const e of events) this.emit(e);
  }

  private async readFile(file: string): Promise<Resource[]> {
    const path = join(this.opts.dir, file);
    try {
      const text = await readFile(path, 'utf8');
      const objs: Resource[] = [];
      parseAllDocuments(text).forEach((doc, i) => {
        if (doc.errors.length) throw new Error(`document ${i + 1}: ${doc.errors[0].message}`);
        const value: unknown = doc.toJS();
        if (value === null || value === undefined) return;
        const problem = manifestProblem(value);
        if (problem === 'skip') return;
        if (problem) throw new Error(`document ${i + 1}: ${problem}`);
        const obj = value as Resource;
        obj.metadata.namespace ??= 'default';
        objs.push(obj);
      });
      this.lastGood.set(file, objs);
      return objs;
    } catch (err) {
      const kept = this.lastGood.get(file) ?? [];
      this.opts.logger.error({ file: path, keptObjects: kept.length, err: err instanceof Error ? err.message : String(err) }, 'cannot read manifest; keeping its last good version');
      return kept;
    }
  }

  private emit(e: StoreEvent): void {
    for (const l of this.listeners) {
      try {
        l(e);
      } catch (err) {
        this.opts.logger.error({ kind: e.kind, key: e.key, err: err instanceof Error ? err.stack : String(err) }, 'a store listener failed');
      }
    }
  }

  private list<T extends Resource>(kind: ResourceKind): T[] {
    const out: T[] = [];
    for (const e of this.entries.values()) if (e.obj.kind === kind) out.push(e.obj as T);
    return out;
  }

  listDeployedModels(): DeployedModel[] {
    return this.list('DeployedModel');
  }

  listEndpoints(): Endpoint[] {
    return this.list('Endpoint');
  }

  getDeployedModel(key: string): DeployedModel | undefined {
    return this.entries.get(`DeployedModel/${key}`)?.obj as DeployedModel | undefined;
  }

  getEndpoint(key: string): Endpoint | undefined {
    return this.entries.get(`Endpoint/${key}`)?.obj as Endpoint | undefined;
  }

  private async setStatus(kind: ResourceKind, key: string, status: unknown): Promise<void> {
    const e = this.entries.get(`${kind}/${key}`);
    if (!e) return;
    e.obj = { ...e.obj, status } as Resource;
    this.emit({ kind, key });
  }

  updateDeployedModelStatus(key: string, status: DeployedModel['status']): Promise<void> {
    return this.setStatus('DeployedModel', key, status);
  }

  updateEndpointStatus(key: string, status: Endpoint['status']): Promise<void> {
    return this.setStatus('Endpoint', key, status);
  }

  onChange(listener: (e: StoreEvent) => void): void {
    this.listeners.push(listener);
  }
}

/** Why a parsed document is not a usable manifest: a message, 'skip' for other kinds, or null. */
export function manifestProblem(v: unknown): string | 'skip' | null {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return 'expected a Kubernetes object (a YAML mapping)';
  const o = v as Record<string, unknown>;
  if (typeof o.kind !== 'string' || !KINDS.has(o.kind)) return 'skip';
  if (o.apiVersion !== API_VERSION) return `${o.kind}: apiVersion must be ${API_VERSION}, got ${JSON.stringify(o.apiVersion)}`;
  const meta = o.metadata as Record<string, unknown> | undefined;
  if (!meta || typeof meta.name !== 'string' || !/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(meta.name)) {
    return `${o.kind}: metadata.name must be a DNS-1123 name`;
  }
  if (meta.namespace !== undefined && (typeof meta.namespace !== 'string' || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(meta.namespace))) {
    return `${o.kind} ${meta.name}: metadata.namespace must be a DNS-1123 label`;
  }
  if (typeof o.spec !== 'object' || o.spec === null) return `${o.kind} ${meta.name}: spec is required`;
  return null;
}
