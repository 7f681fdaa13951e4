// Where the benches write their latest tables: the block between `<!-- NAME:start -->` and
// `<!-- NAME:end -->` in docs/performance.md (made with a title if missing; a file without the
// markers gets the block appended), and the line that says what was measured (date, Node, machine,
// commit). The rest of the file is left as it is.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const PERFORMANCE_DOC = path.join('docs', 'performance.md');

/** `text` with the content between NAME's markers replaced by `content` (the markers added at the end when absent). */
export function replaceBlock(text: string, name: string, content: string): string {
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  const block = `${start}\n${content.trim()}\n${end}`;
  const i = text.indexOf(start);
  const j = text.indexOf(end);
  if (i < 0 && j < 0) return `${text.replace(/\n*$/, '\n\n')}${block}\n`;
  if (i < 0 || j < i) throw new Error(`${name}: the markers ${start} and ${end} must both be there, in that order`);
  return `${text.slice(0, i)}${block}${text.slice(j + end.length)}`;
}

/** Writes `content` between NAME's markers of docs/performance.md (or of `doc`); returns the file's path. */
export function writeBlock(root: string, name: string, content: string, doc = PERFORMANCE_DOC): string {
  const file = path.join(root, doc);
  const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '# Performance\n';
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, replaceBlock(text, name, content));
  return file;
}

/** The commit checked out at `root`, with "+ uncommitted changes" when files besides the two the bench writes (docs/performance.md, README.md) differ from it. */
export function commitOf(root: string): string {
  const head = spawnSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: root, encoding: 'utf8' });
  if (head.status !== 0) return 'unknown (not a git checkout)';
  const dirty = spawnSync('git', ['status', '--porcelain', '--untracked-files=no', '--', '.', `:!${PERFORMANCE_DOC}`, ':!README.md'], { cwd: root, encoding: 'utf8' });
  return `${head.stdout.trim()}${dirty.stdout.trim() !== '' ? ' + uncommitted changes' : ''}`;
}

/** "2026-05-04, Node v24.22.3, Intel ... (2 cores), commit abc": what a written table was measured on. */
export function measuredOn(root: string, date: Date): string {
  const cpu = os.cpus()[0]?.model.trim() ?? 'unknown CPU';
  return `${date.toISOString().slice(0, 10)}, Node ${process.version}, ${cpu} (${os.cpus().length} cores), commit ${commitOf(root)}`;
}
