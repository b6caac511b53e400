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

/**
 * The relative specifiers a module's text imports, as written (`./x.js`): `import … from`,
 * `export … from`, dynamic `import(…)` and side-effect `import '…'` (which loads a module as
 * surely as the others).
 */
function importsIn(text: string): string[] {
  return [...text.matchAll(/(?:\bfrom|\bimport\s*\(?)\s*['"](\.{1,2}\/[^'"]+)['"]/g)].map(([, spec]) => spec);
}

/** The package-relative paths a source file imports (relative specifiers only), e.g. `steps/index.js`. */
function importsOf(file: string): string[] {
  const text = fs.readFileSync(path.join(PACKAGE_ROOT, file), 'utf8');
  return importsIn(text).map((spec) => path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)));
}

test('the import scan reads every form of import: from, dynamic, side-effect, re-export', () => {
  const text = [
    "import { a } from './a.js';",
    "import type { B } from '../b.js';",
    "import './side-effect.js';",
    "const c = await import('./c.js');",
    "export { d } from './d.js';",
    "import fs from 'node:fs';",
    "const s = 'import is a word';",
  ].join('\n');
  assert.deepEqual(importsIn(text), ['./a.js', '../b.js', './side-effect.js', './c.js', './d.js']);
});

test('grader/ imports nothing of steps/, lab/ or bin/: the engine is given its track', () => {
  const files = sources('grader');
  assert.ok(files.includes('grader/engine.ts') && files.includes('grader/reporters/human.ts'), 'the scan reads the engine and its reporters');
  const wrong = files.flatMap((file) => importsOf(file).filter((target) => /^(steps|lab|bin)\//.test(target)).map((target) => `${file} imports ${target}`));
  assert.deepEqual(wrong, []);
});

test('the scan sees an import into steps/ when there is one (it can fail)', () => {
  // bin/shared/tracks.ts is the command line's: it takes the tracks from steps/.
  assert.ok(importsOf('bin/shared/tracks.ts').includes('steps/index.js'));
});

test('lab/ imports nothing of bin/: what a workspace gets and the runner, under the commands', () => {
  const wrong = sources('lab').flatMap((file) => importsOf(file).filter((target) => /^bin\//.test(target)).map((target) => `${file} imports ${target}`));
  assert.deepEqual(wrong, []);
});

test('steps/ imports nothing of lab/ or bin/: a track is data and checks on the engine', () => {
  const wrong = sources('steps').flatMap((file) => importsOf(file).filter((target) => /^(lab|bin)\//.test(target)).map((target) => `${file} imports ${target}`));
  assert.deepEqual(wrong, []);
});

/**
 * The import cycles of `graph` (file -> the files it imports, package-relative .ts paths),
 * each as the files around it, the first repeated at the end; type-only imports count: a
 * cycle is modules that need each other, so none can be read or moved without the others.
 */
function cyclesAmong(graph: Map<string, string[]>): string[][] {
  const cycles: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (file: string): void => {
    state.set(file, 'open');
    stack.push(file);
    for (const target of graph.get(file) ?? []) {
      if (!graph.has(target)) continue;
      if (state.get(target) === 'open') cycles.push([...stack.slice(stack.indexOf(target)), target]);
      else if (!state.has(target)) visit(target);
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of [...graph.keys()].sort()) if (!state.has(file)) visit(file);
  return cycles;
}

/** Every source file's imports, keyed by file, with `.js` specifiers read as the `.ts` they are built from. */
function importGraph(dirs: string[]): Map<string, string[]> {
  return new Map(dirs.flatMap(sources).map((file) => [file, importsOf(file).map((target) => target.replace(/\.js$/, '.ts'))]));
}

test('no module imports itself through others, type-only imports included (issue 23)', () => {
  const graph = importGraph(['bin', 'lab', 'steps', 'grader', 'i18n', 'fixtures', 'bench', 'test']);
  assert.ok(graph.size > 100, 'the scan reads the whole tree');
  assert.deepEqual(cyclesAmong(graph).map((cycle) => cycle.join(' -> ')), []);
});

test('the cycle scan finds a cycle when there is one (it can fail)', () => {
  const graph = new Map([
    ['grader/a.ts', ['grader/b.ts']],
    ['grader/b.ts', ['grader/c.ts']],
    ['grader/c.ts', ['grader/a.ts', 'node-module.ts']],
    ['grader/d.ts', ['grader/a.ts']],
  ]);
  assert.deepEqual(cyclesAmong(graph), [['grader/a.ts', 'grader/b.ts', 'grader/c.ts', 'grader/a.ts']]);
  assert.deepEqual(cyclesAmong(new Map([['x.ts', ['y.ts']], ['y.ts', []]])), []);
});

/** The entry of the command line: idem-lab.ts (the process) and cli.ts (`main`, which loads each command's module), with early.ts, read before cli.ts loads. */
const ENTRY = new Set(['bin/idem-lab.ts', 'bin/cli.ts', 'bin/early.ts']);

/**
 * Imports that break bin/'s layers (issue 23), as `file imports target` lines, given
 * `graph` (file -> the .ts files it imports): a command module (bin/*.ts outside the
 * entry) imports another command module, or shared/ imports anything of bin/ outside
 * shared/. What two commands both run lives in bin/shared/, so that following a command
 * never climbs back up into another.
 */
function binLayerViolations(graph: Map<string, string[]>): string[] {
  const isCommand = (file: string) => /^bin\/[^/]+\.ts$/.test(file) && !ENTRY.has(file);
  return [...graph].flatMap(([file, targets]) =>
    targets
      .filter((target) => target !== file && ((isCommand(file) && isCommand(target)) || (file.startsWith('bin/shared/') && target.startsWith('bin/') && !target.startsWith('bin/shared/'))))
      .map((target) => `${file} imports ${target}`),
  );
}

test('bin/ command modules never import each other, and bin/shared/ imports no command (issue 23)', () => {
  const graph = importGraph(['bin']);
  assert.ok(graph.has('bin/commands.ts') && graph.has('bin/shared/check.ts') && graph.has('bin/watch.ts'), 'the scan reads the command modules and the shared layer');
  assert.ok(graph.get('bin/cli.ts')!.includes('bin/commands.ts'), 'the scan sees cli.ts load a command module (dynamic import)');
  assert.deepEqual(binLayerViolations(graph), []);
});

test('the bin/ layer scan finds a command importing a command, or shared/ importing one (it can fail)', () => {
  const graph = new Map([
    ['bin/cli.ts', ['bin/menu.ts', 'bin/check.ts']],
    ['bin/menu.ts', ['bin/shared/check.ts', 'bin/check.ts']],
    ['bin/check.ts', ['bin/shared/check.ts']],
    ['bin/shared/check.ts', ['bin/shared/output.ts', 'bin/watch.ts', 'grader/engine.ts']],
  ]);
  assert.deepEqual(binLayerViolations(graph), ['bin/menu.ts imports bin/check.ts', 'bin/shared/check.ts imports bin/watch.ts']);
});
