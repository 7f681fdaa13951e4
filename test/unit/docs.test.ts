// The README's generated tables match the code they document (the error catalog and the settings).
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
