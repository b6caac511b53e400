/**
 * `npm run soak`'s command line (bench/soak.ts), without soaking: a bad option is a usage
 * error (exit 2, usage on stderr), --help prints the usage, --list names what it would soak.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const SOAK = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'bench', 'soak.js');
const soak = (...args: string[]) => spawnSync(process.execPath, [SOAK, ...args], { encoding: 'utf8', timeout: 60_000 });

test('soak: an unknown option or a bad number is a usage error (exit 2) with the usage; --help prints it (exit 0)', () => {
  const bogus = soak('--bogus');
  assert.equal(bogus.status, 2, bogus.stderr);
  assert.match(bogus.stderr, /^soak: Unknown option '--bogus'/);
  assert.match(bogus.stderr, /^usage: npm run soak -- /m);
  const jobs = soak('--jobs', '0');
  assert.equal(jobs.status, 2);
  assert.match(jobs.stderr, /--jobs must be a whole number of 1 or more \(got 0\)/);
  const help = soak('--help');
  assert.equal(help.status, 0, help.stderr);
  assert.match(help.stdout, /^usage: npm run soak -- /);
  assert.equal(help.stderr, '');
});

test('soak --list names the fixtures and steps it would soak, and soaks nothing', () => {
  const list = soak('--list', '--only', 'reference');
  assert.equal(list.status, 0, list.stderr);
  assert.match(list.stdout, /^reference +05 pass +06 pass$/m);
});
