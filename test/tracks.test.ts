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
import { handlePaySection, hasAdvancedFrame, upgradeFrame } from '../lab/frame.js';
import { LAB_DIR, PACKAGE_ROOT } from '../lab/paths.js';
import { listBackups, readState } from '../lab/workspace.js';
import { ADVANCED, ADVANCED_STEPS, BASIC } from '../steps/index.js';
import { configForTrack } from '../bin/tracks.js';
import { runCli, serversUnder, stopRecorded, tempDir } from './support.js';

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
    const list = await runCli(['track', '--dir', ws.dir]);
    assert.equal(list.exitCode, 0, list.stderr);
    assert.match(list.stdout, /^\* basic\s+steps 01-08: 0 of 8 pass$/m);
    assert.match(list.stdout, new RegExp(`^  advanced\\s+steps 09-${ADVANCED_STEPS[ADVANCED_STEPS.length - 1].id}: 0 of ${ADVANCED_STEPS.length} pass$`, 'm'));

    const bad = await runCli(['track', 'expert', '--dir', ws.dir]);
    assert.equal(bad.exitCode, 2);
    assert.match(bad.stderr, /there is no track "expert"; there are: basic, advanced/);
    assert.equal(fs.readFileSync(path.join(ws.dir, 'server.py'), 'utf8'), old, 'a refused switch changes nothing');
    assert.equal(readState(ws.dir).track, undefined);

    const moved = await runCli(['track', 'advanced', '--dir', ws.dir]);
    assert.equal(moved.exitCode, 0, moved.stderr);
    assert.match(moved.stdout, /^Laid out .*ADVANCED\.md in /m);
    assert.match(moved.stdout, /server\.py has the new frame now .* the old file is in \.idem-lab\/backup\//);
    assert.match(moved.stdout, /^## 09 · Mark every replay$/m, 'the first advanced step is shown');
    assert.match(moved.stdout, /Steps 01, 02, .* of the basic track do not pass yet/);
    assert.equal(readState(ws.dir).track, 'advanced');
    assert.equal(fs.readFileSync(path.join(ws.dir, 'ADVANCED.md'), 'utf8'), fs.readFileSync(path.join(LAB_DIR, 'ADVANCED.en.md'), 'utf8'));
    const renewed = fs.readFileSync(path.join(ws.dir, 'server.py'), 'utf8');
    assert.ok(hasAdvancedFrame(renewed), 'the new frame');
    assert.equal(handlePaySection(renewed), handlePaySection(old), "the learner's handle_pay, unchanged");
    const [backup] = listBackups(ws.dir);
    assert.equal(fs.readFileSync(path.join(backup, 'server.py'), 'utf8'), old, 'the old file is kept');

    // The commands follow the track now.
    const status = await runCli(['status', '--dir', ws.dir]);
    assert.match(status.stdout, new RegExp(`Progress: 0 of ${ADVANCED_STEPS.length} steps pass`));
    assert.match(status.stdout, /^ {2}09 replayed/m);
    assert.doesNotMatch(status.stdout, /^ {2}01 duplicate/m);
    const show = await runCli(['show', '--dir', ws.dir]);
    assert.match(show.stdout, /^## 09 · /m);
    const show03 = await runCli(['show', '03', '--dir', ws.dir]);
    assert.match(show03.stdout, /^## 03 · /m, 'a step of another track, by its id');
    const hint = await runCli(['hint', '--dir', ws.dir]);
    assert.match(hint.stdout, /^Hint 1 of 3 for 09 replayed/m);

    const again = await runCli(['track', 'advanced', '--dir', ws.dir]);
    assert.doesNotMatch(again.stdout, /new frame/, 'a frame already new is left alone');
    assert.equal(listBackups(ws.dir).length, 1);
    const back = await runCli(['track', 'basic', '--dir', ws.dir]);
    assert.equal(back.exitCode, 0, back.stderr);
    assert.equal(readState(ws.dir).track, 'basic');
    assert.match((await runCli(['status', '--dir', ws.dir])).stdout, /Progress: 0 of 8 steps pass/);
  } finally {
    ws.remove();
  }
});

test('upgradeFrame leaves a server.py without its markers as it is, and says so', () => {
  const ws = tempDir('frame-');
  try {
    const text = '# a server of my own, no markers\nprint("hello")\n';
    fs.writeFileSync(path.join(ws.dir, 'server.py'), text);
    assert.deepEqual(upgradeFrame(ws.dir), { kind: 'no-markers' });
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
