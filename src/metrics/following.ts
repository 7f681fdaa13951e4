// Metrics read from counts their owners keep themselves (the hot path only adds to numbers): a
// counter that follows a growing count, or growing counts by one label, and a gauge read at scrape.
import { Counter, Gauge, type Registry } from 'prom-client';

/**
 * Counts that only grow: one, or one per value of a label, the values known up front (`series`) or
 * read with their counts at each scrape (`read`: values may appear over time).
 */
export type Counts =
  | (() => number)
  | { label: string; series: Record<string, () => number> }
  | { label: string; read: () => Map<string, number> };

/** The counts of each label value now ('' for an unlabelled counter). */
function reader(counts: Counts): () => Iterable<[string, number]> {
  if (typeof counts === 'function') return () => [['', counts()]];
  if ('read' in counts) return counts.read;
  const series = Object.entries(counts.series);
  return () => series.map(([value, read]) => [value, read()]);
}

/** A counter that follows growing counts: adds what each gained since the last scrape. */
export function following(registry: Registry, name: string, help: string, counts: Counts): void {
  const label = typeof counts === 'function' ? undefined : counts.label;
  const read = reader(counts);
  const seen = new Map<string, number>();
  new Counter({
    name,
    help,
    labelNames: label ? [label] : [],
    registers: [registry],
    collect() {
      for (const [value, n] of read()) {
        const before = seen.get(value) ?? 0;
        if (label) this.inc({ [label]: value }, Math.max(0, n - before));
        else this.inc(Math.max(0, n - before));
        seen.set(value, Math.max(n, before));
      }
    },
  });
}

/** A gauge read at scrape time. */
export function gauge(registry: Registry, name: string, help: string, read: () => number): void {
  new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      this.set(read());
    },
  });
}
