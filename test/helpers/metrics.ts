// Test helpers for /metrics scrapes: Prometheus's own linter (`promtool check metrics`, from
// Debian's `prometheus` package) over a scrape, and the metric names docs/metrics.md documents.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './local.js';

const PROMTOOL_MISSING = 'promtool is not installed: `apt-get install -y prometheus` (Debian) provides /usr/bin/promtool, and .ci/run installs it; the metrics tests need it to lint a scrape';

/**
 * Runs `promtool check metrics` over a scrape. Resolves with what promtool printed (empty when it
 * found nothing); rejects when promtool is missing, so a machine without it fails rather than
 * passing unchecked.
 */
export function promtoolCheck(text: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('promtool', ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.once('error', (err: NodeJS.ErrnoException) => reject(err.code === 'ENOENT' ? new Error(PROMTOOL_MISSING) : err));
    child.once('close', (code) => resolve({ code, output }));
    // promtool may exit before reading everything; its exit status says what it found.
    child.stdin.on('error', () => undefined);
    child.stdin.end(text);
  });
}

/** The metric names of a scrape (its `# TYPE` lines), sorted. */
export function metricNames(text: string): string[] {
  return [...text.matchAll(/^# TYPE (\S+) \S+$/gm)].map((m) => m[1]).sort();
}

/** Metric names documented in docs/metrics.md under a `## ` heading whose title starts with `section`. */
export function documentedMetrics(section: string): string[] {
  const doc = readFileSync(join(ROOT, 'docs/metrics.md'), 'utf8');
  const start = doc.indexOf(`\n## ${section}`);
  if (start < 0) throw new Error(`docs/metrics.md has no "## ${section}" section`);
  const end = doc.indexOf('\n## ', start + 1);
  const body = doc.slice(start, end < 0 ? undefined : end);
  return [...body.matchAll(/^\| `([a-z0-9_:]+)` \|/gm)].map((m) => m[1]).sort();
}

/** The value of one series (name and labels as the exposition writes them) in a scrape of `url`. */
export async function metricValue(url: string, series: string): Promise<number> {
  return seriesValue(await (await fetch(url)).text(), series, url);
}

/** The value of one series (name and labels as the exposition writes them) in the text of a scrape. */
export function seriesValue(text: string, series: string, from = 'the scrape'): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  if (!line) throw new Error(`no ${series} in ${from}`);
  return Number(line.slice(series.length + 1));
}
