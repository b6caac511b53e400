/**
 * The folders mean one thing each (issue 11, part 1): grader/ is the lab-agnostic engine
 * and never imports a lab's steps, its workspace code or the command line; a track is
 * passed in. bin/ holds every command; lab/ (a workspace and the runner) is under it. Read off the TypeScript sources' import specifiers, static and dynamic.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { PACKAGE_ROOT } from '../lab/paths.js';

/** Every .ts file below `dir` (relative to the package root), recursively. */
function sources(dir: string): string[] {
  const found: string[] = [];
  for (const entry of fs.readdirSync(path.join(PACKAGE_ROOT, dir), { withFileTypes: true })) {
    const rel = path.posix.join(dir, entry.name);
    if (entry.isDirectory()) found.push(...sources(rel));
    else if (entry.name.endsWith('.ts')) found.push(rel);
  }
  return found;
}

/** The package-relative paths a source file imports (relative specifiers only), e.g. `steps/index.js`. */
function importsOf(file: string): string[] {
  const text = fs.readFileSync(path.join(PACKAGE_ROOT, file), 'utf8');
  return [...text.matchAll(/(?:from|import\()\s*['"](\.{1,2}\/[^'"]+)['"]/g)].map(([, spec]) => path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)));
}

test('grader/ imports nothing of steps/, lab/ or bin/: the engine is given its track', () => {
  const files = sources('grader');
  assert.ok(files.includes('grader/engine.ts') && files.includes('grader/reporters/human.ts'), 'the scan reads the engine and its reporters');
  const wrong = files.flatMap((file) => importsOf(file).filter((target) => /^(steps|lab|bin)\//.test(target)).map((target) => `${file} imports ${target}`));
  assert.deepEqual(wrong, []);
});

test('the scan sees an import into steps/ when there is one (it can fail)', () => {
  // bin/tracks.ts is the command line's: it takes the tracks from steps/.
  assert.ok(importsOf('bin/tracks.ts').includes('steps/index.js'));
});

test('lab/ imports nothing of bin/: what a workspace gets and the runner, under the commands', () => {
  const wrong = sources('lab').flatMap((file) => importsOf(file).filter((target) => /^bin\//.test(target)).map((target) => `${file} imports ${target}`));
  assert.deepEqual(wrong, []);
});

test('steps/ imports nothing of lab/ or bin/: a track is data and checks on the engine', () => {
  const wrong = sources('steps').flatMap((file) => importsOf(file).filter((target) => /^(lab|bin)\//.test(target)).map((target) => `${file} imports ${target}`));
  assert.deepEqual(wrong, []);
});
