/**
 * .idem-lab/state.json under parallel commands and damage: every change kept (atomic
 * writes under a lock), and a damaged file said plainly, copied, and never replaced.
 */
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { setTimeout as delay } from 'node:timers/promises';
import { execa } from 'execa';
import { processIdentity } from '../lab/procs.js';
import { PACKAGE_ROOT } from '../lab/paths.js';
import { readState, statePath, updateState, writeState } from '../lab/workspace.js';
import { fixtureWorkspace, runCli, tempDir } from './support.js';

const WORKSPACE_JS = path.join(PACKAGE_ROOT, 'dist', 'lab', 'workspace.js');

test('20 processes recording at once lose no verdict and no hint count', async () => {
  const tmp = tempDir();
  try {
    writeState(tmp.dir, { hintsShown: { '01': 0 } });
    // Each process records its own verdict and adds one to a shared count, five times over.
    const script = `
      const { updateState } = await import(${JSON.stringify(WORKSPACE_JS)});
      const [dir, i] = process.argv.slice(1);
      for (let round = 0; round < 5; round++) {
        updateState(dir, (s) => {
          s.steps = { ...(s.steps ?? {}), ['p' + i + '-' + round]: { status: 'pass', checkedAt: new Date().toISOString() } };
          s.hintsShown = { ...(s.hintsShown ?? {}), '01': (s.hintsShown?.['01'] ?? 0) + 1 };
        });
      }`;
    const runs = await Promise.all(
      Array.from({ length: 20 }, (_, i) => execa('node', ['--input-type=module', '-e', script, tmp.dir, String(i)], { reject: false, timeout: 60_000 })),
    );
    for (const run of runs) assert.equal(run.exitCode, 0, String(run.stderr));
    const state = readState(tmp.dir);
    assert.equal(Object.keys(state.steps ?? {}).length, 100, 'every verdict of every process is there');
    assert.equal(state.hintsShown?.['01'], 100, 'every increment is there');
    const left = fs.readdirSync(path.join(tmp.dir, '.idem-lab')).sort();
    assert.deepEqual(left, ['state.json'], 'no lock and no temporary file is left behind');
  } finally {
    tmp.remove();
  }
});

test('hints of eight steps asked at once are all counted', async () => {
  const ws = fixtureWorkspace('starter');
  try {
    const ids = ['01', '02', '03', '04', '05', '06', '07', '08'];
    const runs = await Promise.all(ids.map((id) => runCli(['hint', id, '--dir', ws.dir])));
    for (const run of runs) assert.equal(run.exitCode, 0, run.stdout + run.stderr);
    assert.deepEqual(readState(ws.dir).hintsShown, Object.fromEntries(ids.map((id) => [id, 1])));
  } finally {
    ws.remove();
  }
});

test('a command waits for a live holder of the lock, and says who holds it when it waits too long', async () => {
  const ws = fixtureWorkspace('starter');
  const holder = spawn('sleep', ['120'], { detached: true, stdio: 'ignore' });
  try {
    writeState(ws.dir, {});
    const lock = path.join(ws.dir, '.idem-lab', 'state.lock');
    const identity = processIdentity(holder.pid!);
    assert.ok(identity);
    fs.writeFileSync(lock, `${identity.pid} ${identity.startTime}\n`);
    const waiting = runCli(['hint', '01', '--dir', ws.dir]);
    await delay(1000);
    assert.equal(readState(ws.dir).hintsShown, undefined, 'the hint waits while the lock is held');
    fs.rmSync(lock);
    const run = await waiting;
    assert.equal(run.exitCode, 0, run.stdout + run.stderr);
    assert.equal(readState(ws.dir).hintsShown?.['01'], 1);
    fs.writeFileSync(lock, `${identity.pid} ${identity.startTime}\n`);
    const stuck = await runCli(['hint', '01', '--dir', ws.dir]);
    assert.equal(stuck.exitCode, 2);
    assert.ok(stuck.stderr.includes(`Another idem-lab command (pid ${identity.pid}) has held ${lock} for more than 10 s`), stuck.stderr);
    assert.doesNotMatch(stuck.stderr, /^\s+at /m);
    assert.equal(readState(ws.dir).hintsShown?.['01'], 1, 'nothing was changed without the lock');
  } finally {
    if (holder.pid) process.kill(holder.pid, 'SIGKILL');
    ws.remove();
  }
});

test('a lock left by a process that died is broken', async () => {
  const tmp = tempDir();
  try {
    writeState(tmp.dir, {});
    const lock = path.join(tmp.dir, '.idem-lab', 'state.lock');
    // A holder that has ended: pid 1's start time is 1 or more, so "999999999 0" names no process.
    fs.writeFileSync(lock, '999999999 0\n');
    updateState(tmp.dir, (s) => {
      s.lang = 'ko';
    });
    assert.equal(readState(tmp.dir).lang, 'ko');
    assert.equal(fs.existsSync(lock), false);
  } finally {
    tmp.remove();
  }
});

/** Damaged state files, each with what the message says is wrong. */
const DAMAGED: Array<[string, string, RegExp]> = [
  ['truncated', '{"steps": {"01": {"status": "pa', /it is not valid JSON/],
  ['garbage', '\u0000\u0001garbage', /it is not valid JSON/],
  ['empty', '', /it is empty/],
  ['null', 'null', /it does not hold a JSON object/],
  ['a list', '[]', /it does not hold a JSON object/],
  ['a pid as text', '{"pid": "4242"}', /its "pid" has the wrong type/],
  ['steps as a number', '{"steps": 5}', /its "steps" has the wrong type/],
  ['a wrong verdict', '{"steps": {"02": {"status": "maybe", "checkedAt": "x"}}}', /its "steps\.02" has the wrong type/],
  ['hint counts as text', '{"hintsShown": {"01": "two"}}', /its "hintsShown" has the wrong type/],
];

for (const [what, content, problem] of DAMAGED) {
  test(`a damaged state file (${what}) is named, copied and left as it is; exit 2 without a stack trace`, async () => {
    const ws = fixtureWorkspace('reference');
    try {
      const file = statePath(ws.dir);
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, content);
      for (const args of [['status'], ['hint', '01'], ['check', '07']]) {
        const run = await runCli([...args, '--dir', ws.dir]);
        assert.equal(run.exitCode, 2, `${args.join(' ')}: ${run.stdout}${run.stderr}`);
        assert.ok(run.stderr.includes(`${file} is damaged`), run.stderr);
        assert.match(run.stderr, problem);
        assert.match(run.stderr, /kept a copy as .*state\.json\.broken-[0-9a-f]{8}/);
        assert.doesNotMatch(run.stderr, /^\s+at /m, 'no stack trace');
        assert.equal(fs.readFileSync(file, 'utf8'), content, `${args.join(' ')} left the file as it was`);
      }
      const copies = fs.readdirSync(path.dirname(file)).filter((f) => f.startsWith('state.json.broken-'));
      assert.equal(copies.length, 1, 'the same damage is copied once');
      assert.equal(fs.readFileSync(path.join(path.dirname(file), copies[0]), 'utf8'), content);
    } finally {
      ws.remove();
    }
  });
}
