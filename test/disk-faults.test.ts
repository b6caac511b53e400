/**
 * Faults a person can act on: a full disk, a read-only workspace, a full, read-only or
 * missing temporary folder of the grader's. Each is one sentence and exit 2, with no
 * stack trace and no stray files; a grader that cannot make its temporary folder gives
 * status error, never a failed step. The faults are real: small tmpfs mounts, filled or
 * remounted read-only (this needs root, as in CI; elsewhere the tests are skipped).
 */
import fs from 'node:fs';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execa } from 'execa';
import { buildWorkspace } from '../fixtures/build.js';
import { grade } from '../grader/engine.js';
import { runningServerCount } from '../grader/server.js';
import { selectSteps } from '../steps/index.js';
import { readState, statePath, writeState } from '../lab/workspace.js';
import { runCli, serversUnder, stopRecorded, tempDir } from './support.js';

/** A tmpfs of `kb` KB mounted on a fresh folder; undefined when this machine does not let us mount. */
async function tinyDisk(kb: number): Promise<{ dir: string; fill: () => void; readOnly: () => Promise<void>; remove: () => Promise<void> } | undefined> {
  const mountPoint = tempDir('idem-lab-disk-');
  const mounted = await execa('mount', ['-t', 'tmpfs', '-o', `size=${kb}k,mode=0755`, 'tmpfs', mountPoint.dir], { reject: false });
  if (mounted.exitCode !== 0) {
    mountPoint.remove();
    return undefined;
  }
  return {
    dir: mountPoint.dir,
    /** Fills the disk to the last byte. */
    fill: () => {
      const fd = fs.openSync(path.join(mountPoint.dir, 'filler'), 'w');
      const block = Buffer.alloc(4096);
      try {
        for (;;) fs.writeSync(fd, block);
      } catch (err) {
        assert.equal((err as NodeJS.ErrnoException).code, 'ENOSPC');
      } finally {
        fs.closeSync(fd);
      }
    },
    readOnly: async () => {
      await execa('mount', ['-o', 'remount,ro', mountPoint.dir]);
    },
    remove: async () => {
      await execa('umount', [mountPoint.dir], { reject: false });
      mountPoint.remove();
    },
  };
}

/** Every file and folder under `dir`, relative, sorted. */
function tree(dir: string): string[] {
  return (fs.readdirSync(dir, { recursive: true }) as string[]).filter((f) => !f.startsWith('filler')).sort();
}

/** Asserts one plain sentence on stderr, exit 2, no stack trace. */
function saysPlainly(run: { exitCode: number; stdout: string; stderr: string }, sentence: RegExp): void {
  assert.equal(run.exitCode, 2, run.stdout + run.stderr);
  assert.match(run.stderr, sentence);
  assert.doesNotMatch(run.stderr, /^\s+at /m, 'no stack trace');
  assert.doesNotMatch(run.stderr, /Error:/, 'no raw error');
}

async function skipUnlessMounted(t: TestContext, kb: number): Promise<Awaited<ReturnType<typeof tinyDisk>>> {
  const disk = await tinyDisk(kb);
  if (!disk) t.skip('cannot mount a tmpfs here (needs root)');
  return disk;
}

test('a full disk: start and hint say so in one sentence, exit 2, and leave nothing half-written', async (t) => {
  const disk = await skipUnlessMounted(t, 512);
  if (!disk) return;
  try {
    const ws = path.join(disk.dir, 'ws');
    buildWorkspace(ws, 'reference');
    writeState(ws, { lang: 'en', hintsShown: { '01': 1 } });
    const before = fs.readFileSync(statePath(ws), 'utf8');
    disk.fill();
    saysPlainly(await runCli(['hint', '01', '--dir', ws]), /The disk holding .* is full: .* could not be written\. Free some space and run the command again\./);
    assert.equal(fs.readFileSync(statePath(ws), 'utf8'), before, 'the state file is as it was');
    saysPlainly(await runCli(['start', '--dir', ws, '--port', '1']), /is full/);
    saysPlainly(await runCli(['start', '--dir', path.join(disk.dir, 'fresh')]), /is full/);
    assert.deepEqual(serversUnder(disk.dir), [], 'no server was started');
    assert.equal(readState(ws).pid, undefined);
    assert.deepEqual(
      tree(disk.dir),
      ['ws', ...tree(ws).map((f) => path.join('ws', f))].sort(),
      'no new folder, no temporary file, no lock',
    );
    assert.ok(!tree(ws).some((f) => /\.tmp$|state\.lock$/.test(f)), tree(ws).join(' '));
  } finally {
    await disk.remove();
  }
});

test('a read-only workspace: start and hint say so (exit 2); check still grades and says the verdicts were not saved', async (t) => {
  const disk = await skipUnlessMounted(t, 1024);
  if (!disk) return;
  const ws = path.join(disk.dir, 'ws');
  try {
    buildWorkspace(ws, 'reference');
    await disk.readOnly();
    const files = tree(ws);
    saysPlainly(await runCli(['start', '--dir', ws]), /ws is read-only: .* could not be written\. Run idem-lab in a folder you can write to/);
    saysPlainly(await runCli(['hint', '02', '--dir', ws]), /is read-only/);
    const check = await runCli(['check', '07', '08', '--dir', ws]);
    assert.equal(check.exitCode, 0, check.stdout + check.stderr);
    assert.match(check.stdout, /2 of 2 steps pass/);
    assert.match(check.stderr, /The verdicts were not saved: .* is read-only/);
    assert.deepEqual(tree(ws), files, 'nothing was written');
    assert.deepEqual(serversUnder(disk.dir), []);
  } finally {
    stopRecorded(ws);
    await disk.remove();
  }
});

test("a full or read-only temporary folder of the grader's: check exits 2 with one sentence, reporters get status error", async (t) => {
  const disk = await skipUnlessMounted(t, 256);
  if (!disk) return;
  const ws = tempDir();
  try {
    buildWorkspace(ws.dir, 'reference');
    disk.fill();
    const full = await runCli(['check', '02', '--dir', ws.dir], { env: { TMPDIR: disk.dir } });
    saysPlainly(full, /The grader could not use its temporary folder .* \(ENOSPC\): point TMPDIR at a folder that exists, can be written to and has free space\. Your work was not graded\./);
    assert.doesNotMatch(full.stdout, /✗/, 'no step failed');
    assert.equal(readState(ws.dir).steps, undefined, 'no verdict was recorded');
    assert.deepEqual(tree(disk.dir), [], 'no temporary folder was left');
    await disk.readOnly();
    const json = path.join(ws.dir, 'results.json');
    const readOnly = await runCli(['check', '--dir', ws.dir, '--reporter', `json=${json}`], { env: { TMPDIR: disk.dir } });
    saysPlainly(readOnly, /could not use its temporary folder .* \(EROFS\)/);
    const report = JSON.parse(fs.readFileSync(json, 'utf8')) as { status: string; tests: Array<{ status: string }> };
    assert.equal(report.status, 'error');
    assert.ok(report.tests.length > 0 && report.tests.every((s) => s.status === 'error'), 'every step is an error, none a failure');
  } finally {
    await disk.remove();
    ws.remove();
  }
});

test('a grader that cannot make its temporary folder gives the live steps status error, not fail', async () => {
  const ws = tempDir();
  const saved = process.env.TMPDIR;
  try {
    buildWorkspace(ws.dir, 'reference');
    process.env.TMPDIR = path.join(ws.dir, 'no', 'such', 'folder');
    const results = await grade({ workspace: ws.dir, steps: selectSteps(['02', '07']) });
    assert.equal(results[0].status, 'error');
    assert.match(results[0].message, /could not use its temporary folder .*no\/such\/folder \(ENOENT\)/);
    assert.equal(results[1].status, 'pass', 'a file-only step is graded all the same');
    assert.equal(runningServerCount(), 0);
  } finally {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
    ws.remove();
  }
});
