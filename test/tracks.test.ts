/**
 * Tracks: `idem-lab track` lists them and switches a workspace to one; the advanced track
 * lays ADVANCED.md and renews an old server.py's frame around the learner's own
 * handle_pay (after a backup); every learner command then follows the track, and a step of
 * any track can still be named by its id. Real CLI runs on real workspaces.
 */
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildWorkspace } from '../fixtures/build.js';
import { handlePaySection, hasFrame, upgradeFrame, upgradeFrames } from '../lab/frame.js';
import { LAB_DIR, PACKAGE_ROOT } from '../lab/paths.js';
import { readSheet, sheetSection } from '../lab/sheet.js';
import { labFiles, layWorkspace, lineage, listBackups, readState } from '../lab/workspace.js';
import { ADVANCED, ADVANCED_STEPS, BASIC, TRACKS } from '../steps/index.js';
import { chooseSteps, configForTrack, isFirstTrack, stepsLeftBefore, trackName } from '../bin/shared/tracks.js';
import { grade } from '../grader/engine.js';
import { CheckFailed } from '../grader/failure.js';
import type { Step, Track } from '../grader/track.js';
import { runCli, runMain, serversUnder, stopRecorded, tempDir } from './support.js';

/** Fails a file check with `message`. */
function failWith(message: string): never {
  throw new CheckFailed(message, 'the step says which word');
}

/** server.py as shipped before the advanced track (128d0f7), with one line of the learner's own in handle_pay. */
function oldServer(): string {
  const old = execFileSync('git', ['-C', PACKAGE_ROOT, 'show', '128d0f7:lab/server.py'], { encoding: 'utf8' });
  return old.replace('    charge(payload["user"], payload["amount"])\n', '    # the learner was here\n    charge(payload["user"], payload["amount"])\n');
}

test('idem-lab track lists the tracks; track advanced lays ADVANCED.md and renews an old frame around the learner\'s handle_pay', async (t) => {
  const ws = tempDir('track-');
  try {
    buildWorkspace(ws.dir, 'starter', {});
    let old: string;
    try {
      old = oldServer();
    } catch {
      t.skip('no git history here (an exported tree): the old frame cannot be read');
      return;
    }
    fs.writeFileSync(path.join(ws.dir, 'server.py'), old);
    const list = await runMain(['track', '--dir', ws.dir]);
    assert.equal(list.exitCode, 0, list.stderr);
    assert.match(list.stdout, /^\* basic\s+steps 01-08: 0 of 8 pass$/m);
    assert.match(list.stdout, new RegExp(`^  advanced\\s+steps 09-${ADVANCED_STEPS[ADVANCED_STEPS.length - 1].id}: 0 of ${ADVANCED_STEPS.length} pass$`, 'm'));
    assert.match(list.stdout, /idem-lab track ID follows another track \(basic, advanced\)\./, 'the ids come from TRACKS');

    const bad = await runMain(['track', 'expert', '--dir', ws.dir]);
    assert.equal(bad.exitCode, 2);
    assert.match(bad.stderr, /there is no track "expert"; there are: basic, advanced/);
    assert.equal(fs.readFileSync(path.join(ws.dir, 'server.py'), 'utf8'), old, 'a refused switch changes nothing');
    assert.equal(readState(ws.dir).track, undefined);

    // The switch itself through a real process; the rest asserts output and exit codes only, in process.
    const moved = await runCli(['track', 'advanced', '--dir', ws.dir]);
    assert.equal(moved.exitCode, 0, moved.stderr);
    assert.match(moved.stdout, /^Laid out .*ADVANCED\.md in /m);
    assert.match(moved.stdout, /server\.py has the new frame now .* the old file is in \.idem-lab\/backup\//);
    assert.match(moved.stdout, /^## 09 · Mark every replay$/m, 'the first advanced step is shown');
    assert.match(moved.stdout, /Steps 01, 02, .* of the basic track do not pass yet/);
    assert.equal(readState(ws.dir).track, 'advanced');
    assert.equal(fs.readFileSync(path.join(ws.dir, 'ADVANCED.md'), 'utf8'), fs.readFileSync(path.join(LAB_DIR, 'ADVANCED.en.md'), 'utf8'));
    const renewed = fs.readFileSync(path.join(ws.dir, 'server.py'), 'utf8');
    assert.ok(hasFrame(renewed, ADVANCED.frame!), 'the new frame');
    assert.equal(handlePaySection(renewed), handlePaySection(old), "the learner's handle_pay, unchanged");
    const [backup] = listBackups(ws.dir);
    assert.equal(fs.readFileSync(path.join(backup, 'server.py'), 'utf8'), old, 'the old file is kept');

    // The commands follow the track now.
    const status = await runMain(['status', '--dir', ws.dir]);
    assert.match(status.stdout, new RegExp(`Progress: 0 of ${ADVANCED_STEPS.length} steps pass`));
    assert.match(status.stdout, /^ {2}09 replayed/m);
    assert.doesNotMatch(status.stdout, /^ {2}01 duplicate/m);
    const show = await runMain(['show', '--dir', ws.dir]);
    assert.match(show.stdout, /^## 09 · /m);
    const show03 = await runMain(['show', '03', '--dir', ws.dir]);
    assert.match(show03.stdout, /^## 03 · /m, 'a step of another track, by its id');
    const hint = await runMain(['hint', '--dir', ws.dir]);
    assert.match(hint.stdout, /^Hint 1 of 3 for 09 replayed/m);

    const again = await runMain(['track', 'advanced', '--dir', ws.dir]);
    assert.doesNotMatch(again.stdout, /new frame/, 'a frame already new is left alone');
    assert.equal(listBackups(ws.dir).length, 1);
    const back = await runMain(['track', 'basic', '--dir', ws.dir]);
    assert.equal(back.exitCode, 0, back.stderr);
    assert.equal(readState(ws.dir).track, 'basic');
    assert.match((await runMain(['status', '--dir', ws.dir])).stdout, /Progress: 0 of 8 steps pass/);
    assert.doesNotMatch(back.stdout, /do not pass yet/, 'the first track builds on none');
  } finally {
    ws.remove();
  }
});

test('upgradeFrame leaves a server.py without its markers as it is, and says so', () => {
  const ws = tempDir('frame-');
  try {
    const text = '# a server of my own, no markers\nprint("hello")\n';
    fs.writeFileSync(path.join(ws.dir, 'server.py'), text);
    assert.deepEqual(upgradeFrame(ws.dir, ADVANCED.frame!), { kind: 'no-markers' });
    assert.equal(fs.readFileSync(path.join(ws.dir, 'server.py'), 'utf8'), text);
    assert.deepEqual(listBackups(ws.dir), []);
  } finally {
    ws.remove();
  }
});

test('start --track advanced lays both sheets and shows step 09; check there grades the advanced steps only', async () => {
  const ws = tempDir('start-advanced-');
  const dir = path.join(ws.dir, 'lab');
  try {
    const started = await runCli(['start', '--dir', dir, '--track', 'advanced']);
    assert.equal(started.exitCode, 0, started.stderr);
    assert.ok(fs.existsSync(path.join(dir, 'ADVANCED.md')) && fs.existsSync(path.join(dir, 'LAB.md')));
    assert.match(started.stdout, /^## 09 · Mark every replay$/m);
    assert.equal(readState(dir).track, 'advanced');
    stopRecorded(dir);
    buildWorkspace(dir, 'advanced/reference', {});
    const checked = await runCli(['check', '--dir', dir, '--reporter', 'json'], { timeoutMs: 120_000 });
    assert.equal(checked.exitCode, 0, checked.stdout + checked.stderr);
    const report = JSON.parse(checked.stdout) as { tests: Array<{ test_code: string; status: string }> };
    assert.deepEqual(report.tests.map((s) => `${s.test_code} ${s.status}`), ADVANCED_STEPS.map((s) => `idem-lab check ${s.id} pass`));
    const bad = await runCli(['start', '--dir', path.join(ws.dir, 'other'), '--track', 'expert']);
    assert.equal(bad.exitCode, 2);
    assert.ok(!fs.existsSync(path.join(ws.dir, 'other')), 'an unknown track lays nothing');
  } finally {
    stopRecorded(dir);
    assert.deepEqual(serversUnder(ws.dir), []);
    ws.remove();
  }
});

test('a required list that names no step of the graded track leaves all of its steps required', () => {
  const basicOnly = { points: {}, required: ['02', '05'], source: 'idem-lab.json' };
  assert.equal(configForTrack(basicOnly, ADVANCED).required, undefined);
  assert.deepEqual(configForTrack(basicOnly, BASIC).required, ['02', '05']);
  const mixed = { points: {}, required: ['02', '09'], source: 'idem-lab.json' };
  assert.deepEqual(configForTrack(mixed, ADVANCED).required, ['02', '09'], 'a list that names a step of the track is kept as it is');
});

test('a third track is data: laid, read and graded through the functions the command line uses, with no edit in lab/ or bin/', async () => {
  const tmp = tempDir('third-track-');
  try {
    // The track's bundled files live in a folder of its own (absolute sources), not in lab/.
    const bundle = path.join(tmp.dir, 'bundle');
    fs.mkdirSync(bundle);
    for (const lang of ['en', 'ko']) fs.writeFileSync(path.join(bundle, `THIRD.${lang}.md`), `# Third (${lang})\n\n## 16 · Say yes\n\nWrite yes in 16-yes.txt.\n\n## 17 · Say no\n\nWrite no in 17-no.txt.\n`);
    fs.writeFileSync(path.join(bundle, 'third.sh'), '#!/bin/sh\necho third\n');
    const says = (id: string, slug: string, word: string): Step => ({
      id, slug, title: `Say ${word}`, hints: [`write ${word}`],
      file: { name: `${id}-${slug}.txt`, check: (text) => (text.trim() === word ? `it says ${word}` : failWith(`${id}-${slug}.txt does not say ${word}`)) },
    });
    const third: Track = {
      id: 'third',
      steps: [says('16', 'yes', 'yes'), says('17', 'no', 'no')],
      buildsOn: ADVANCED,
      sheet: { source: (lang) => path.join(bundle, `THIRD.${lang}.md`), name: 'THIRD.md' },
      files: [{ source: path.join(bundle, 'third.sh'), name: 'third.sh', executable: true }],
    };

    // What it lays: every track of its lineage, the first's first, then its own file and sheet.
    assert.deepEqual(lineage(third), [BASIC, ADVANCED, third]);
    assert.deepEqual(labFiles('ko', third).map(([, name]) => name), ['server.py', 'probe.sh', 'ledger.sh', 'statement.sh', 'LAB.md', 'ADVANCED.md', 'third.sh', 'THIRD.md']);
    const ws = path.join(tmp.dir, 'ws');
    const report = layWorkspace(ws, false, 'en', third);
    assert.deepEqual(report.written, ['server.py', 'probe.sh', 'ledger.sh', 'statement.sh', 'LAB.md', 'ADVANCED.md', 'third.sh', 'THIRD.md']);
    assert.equal(fs.readFileSync(path.join(ws, 'THIRD.md'), 'utf8'), fs.readFileSync(path.join(bundle, 'THIRD.en.md'), 'utf8'));
    assert.equal(fs.statSync(path.join(ws, 'third.sh')).mode & 0o777, 0o755);
    assert.deepEqual(upgradeFrames(ws, third), [{ kind: 'current' }], "the advanced track's frame, inherited, is the one laid");

    // What it reads and says: its sheet's sections, the steps before it, its name.
    const sheet = readSheet(ws, [...TRACKS, third]);
    assert.match(sheetSection(sheet, '16') ?? '', /^## 16 · Say yes\n\nWrite yes/);
    assert.match(sheetSection(sheet, '09') ?? '', /^## 09 · /, 'the tracks before it are still read');
    assert.deepEqual(stepsLeftBefore(third, ws).map((s) => s.id), [...BASIC.steps, ...ADVANCED.steps].map((s) => s.id));
    assert.equal(trackName(third), 'third', 'a track without a name in the messages is called by its id');
    assert.equal(isFirstTrack(third), false);
    assert.deepEqual(chooseSteps([], third).map((s) => s.id), ['16', '17']);

    // Graded by the engine like any other track.
    fs.writeFileSync(path.join(ws, '16-yes.txt'), 'yes\n');
    fs.writeFileSync(path.join(ws, '17-no.txt'), 'yes\n');
    const results = await grade({ workspace: ws, steps: third.steps, command: { file: 'true', args: [] } });
    assert.deepEqual(results.map((r) => `${r.id} ${r.status}`), ['16 pass', '17 fail']);
  } finally {
    tmp.remove();
  }
});

test('lab/ and bin/ name no track: no track id or sheet name as a literal outside comments (the tracks are steps/index.ts TRACKS)', () => {
  const words = TRACKS.flatMap((track) => [track.id, ...(track.sheet ? [track.sheet.name, track.sheet.source('en').replace(/\.en\.md$/, '')] : [])]);
  assert.ok(words.includes('advanced') && words.includes('LAB.md') && words.includes('ADVANCED'), 'the scan looks for the tracks of the registry');
  const literal = new RegExp(`(['"\`])(${words.map((w) => w.replace(/[.]/g, '\\.')).join('|')})\\1`);
  const found: string[] = [];
  for (const dir of ['lab', 'bin']) {
    for (const name of fs.readdirSync(path.join(PACKAGE_ROOT, dir)).filter((f) => f.endsWith('.ts'))) {
      const code = fs.readFileSync(path.join(PACKAGE_ROOT, dir, name), 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:])\/\/.*$/gm, '$1');
      code.split('\n').forEach((line, i) => {
        if (literal.test(line)) found.push(`${dir}/${name}:${i + 1}: ${line.trim()}`);
      });
    }
  }
  assert.deepEqual(found, []);
  assert.ok(literal.test("if (track === 'advanced')") && !literal.test('track.id'), 'the scan can fail');
});
