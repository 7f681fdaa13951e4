// Writes the watch has not delivered yet. After a write, the watched cache lags for a moment; a
// reconcile in that moment would see the old object and write again. This remembers each write (its
// resourceVersion and what the apiserver returned) until the cache holds that version, the object
// is deleted, or WRITE_TRUST_MS passes (an object deleted before the watch ever delivered it sends no
// event that would clear the entry). Shared by the Kubernetes store (status) and workload backend.

export const WRITE_TRUST_MS = 10_000;

/** Whether resource version `cached` is at least `written` (etcd revisions are integers; others count as caught up). */
export function caughtUp(cached: string | undefined, written: string): boolean {
  if (cached === undefined) return false;
  if (!/^\d+$/.test(cached) || !/^\d+$/.test(written)) return true;
  return BigInt(cached) >= BigInt(written);
}

export class PendingWrites<T> {
  private readonly writes = new Map<string, { rv: string; value: T; at: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Remembers a write, unless the cache already holds its version. */
  wrote(id: string, rv: string | undefined, value: T, cachedRv: string | undefined): void {
    if (rv && !caughtUp(cachedRv, rv)) this.writes.set(id, { rv, value, at: this.now() });
  }

  /** The cache saw the object at `rv` (or saw it deleted): a write it has caught up with is forgotten. */
  observed(id: string, rv: string | undefined, deleted: boolean): void {
    const w = this.writes.get(id);
    if (w && (deleted || caughtUp(rv, w.rv))) this.writes.delete(id);
  }

  /** The written value while the cache (at `cachedRv`) lags behind it, else undefined. */
  pending(id: string, cachedRv: string | undefined): T | undefined {
    const w = this.writes.get(id);
    if (!w) return undefined;
    if (this.now() - w.at > WRITE_TRUST_MS || caughtUp(cachedRv, w.rv)) {
      this.writes.delete(id);
      return undefined;
    }
    return w.value;
  }
}
