// Where a benchmark's results go: the block between `<!-- NAME:start -->` and `<!-- NAME:end -->` in
// docs/performance.md is replaced by the run's own output, headed by when, on which Node and on
// which code it was measured.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';

/** `text` with the block between the markers of `name` replaced by `content`. */
export function replaceMarkedBlock(text: string, name: string, content: string): string {
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  const from = text.indexOf(start);
  const to = text.indexOf(end);
  if (from < 0 || to < from) throw new Error(`no ${start} ... ${end} block`);
  return `${text.slice(0, from + start.length)}\n${content.trim()}\n${text.slice(to)}`;
}

/** The commit the working tree is at, and whether it has changes that are not committed. */
function codeVersion(root: string): string {
  try {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: root, encoding: 'utf8' }).trim() !== '';
    return `commit ${commit}${dirty ? ' with uncommitted changes' : ''}`;
  } catch {
    return 'code not under git';
  }
}

/** One line saying when, where and on what a run was measured. */
export function measuredOn(root: string, date = new Date()): string {
  return `Measured ${date.toISOString().slice(0, 10)} on Node ${process.versions.node}, ${codeVersion(root)}, ${os.availableParallelism()} CPUs (${os.cpus()[0]?.model ?? 'unknown CPU'}).`;
}

/** Writes `content` into docs/performance.md between the markers of `name`; returns the file's path. */
export function writeResults(root: string, name: string, content: string): string {
  const file = join(root, 'docs', 'performance.md');
  writeFileSync(file, replaceMarkedBlock(readFileSync(file, 'utf8'), name, content));
  return file;
}
