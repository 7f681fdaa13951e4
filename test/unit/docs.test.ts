// The README's generated tables match the code they document (the error catalog and the settings),
// and CONTRIBUTING's commands that run one suite select exactly that suite.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { catalogMarkdown } from '../../src/errors.js';
import { settingsMarkdown } from '../../src/config.js';
import { ROOT } from '../helpers/local.js';

const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');

function section(name: string): string {
  const m = new RegExp(`<!-- ${name}:start -->\\n([\\s\\S]*?)\\n?<!-- ${name}:end -->`).exec(readme);
  if (!m) throw new Error(`README has no ${name} markers`);
  return m[1].trim();
}

test('the README error table is the catalog', () => {
  expect(section('error-table')).toBe(catalogMarkdown());
});

test('the README configuration table is the settings table', () => {
  expect(section('config-table')).toBe(settingsMarkdown());
});

test('CONTRIBUTING\'s commands that run one suite select exactly the file they name', () => {
  const contributing = readFileSync(join(ROOT, 'CONTRIBUTING.md'), 'utf8');
  const commands = contributing.split('\n').filter((l) => l.startsWith('node ') && l.includes('--runTestsByPath'));
  expect(commands.length).toBeGreaterThanOrEqual(2);
  for (const command of commands) {
    const [, ...args] = command.split(/\s+/);
    const named = args[args.indexOf('--runTestsByPath') + 1];
    // --listTests: the files jest would run, one absolute path a line (after a line naming the project).
    const listed = execFileSync(process.execPath, [...args, '--listTests'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split('\n').filter((l) => l.startsWith('/'));
    expect({ command, listed }).toEqual({ command, listed: [join(ROOT, named)] });
  }
});
