// Exponential backoff, the one formula every retry in the project uses: the reconcile queue, the
// local model restarts, the watches and the wait for the apiserver.

/** The delay before try `failures + 1`: base, 2 x base, 4 x base, ... never above max. */
export function backoffMs(failures: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.min(Math.max(failures - 1, 0), 16));
}
