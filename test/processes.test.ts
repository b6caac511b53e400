/**
 * stop, restart, start and status act only on a process proven to be this workspace's
 * server (pid, start time, working folder), and start records the server before it waits
 * for it. Real CLI processes, real detached servers, a real `sleep` standing in for
 * another program.
 */
import fs from 'node:fs';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as delay } from 'node:timers/promises';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execa } from 'execa';
import { freePort } from '../grader/server.js';
import { serverSource } from '../fixtures/build.js';
import { processIdentity } from '../lab/procs.js';
import { readState, statePath, writeState } from '../lab/workspace.js';
import { CLI, fixtureWorkspace, runCli, serversUnder, stopRecorded, tempDir } from './support.js';

/** A `sleep 120` in `cwd`, in its own process group: another program that must survive. */
function otherProgram(cwd: string): ChildProcess {
  const child = spawn('sleep', ['120'], { cwd, detached: true, stdio: 'ignore' });
  child.unref();
  return child;
}

function alive(pid: number): boolean {
  const identity = processIdentity(pid);
  return identity !== undefined && identity.state !== 'Z';
}

function killByPid(child: ChildProcess): void {
  try {
    if (child.pid) process.kill(child.pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

test('stop, restart and status leave alone a recorded pid that is another program now', async () => {
  const ws = fixtureWorkspace('starter');
  const elsewhere = tempDir();
  const inOtherFolder = otherProgram(elsewhere.dir);
  const inThisFolder = otherProgram(ws.dir);
  try {
    const other = processIdentity(inOtherFolder.pid!);
    const here = processIdentity(inThisFolder.pid!);
    assert.ok(other && here);
    const cases: Array<[string, Parameters<typeof writeState>[1]]> = [
      // the right start time, but another folder: e.g. a state file copied from elsewhere
      ['another folder', { pid: other.pid, startTime: other.startTime, cwd: elsewhere.dir, port: 1 }],
      // this folder, but another start time: the pid was reused
      ['a reused pid', { pid: here.pid, startTime: here.startTime + 1, cwd: ws.dir, port: 1 }],
      // a record from before start times were kept: not proven, not touched
      ['no start time', { pid: here.pid, port: 1 }],
    ];
    for (const [what, state] of cases) {
      writeState(ws.dir, state);
      const status = await runCli(['status', '--dir', ws.dir]);
      assert.match(status.stdout, new RegExp(`the recorded pid ${state.pid} is now another program`), `${what}: ${status.stdout}`);
      writeState(ws.dir, state);
      const stop = await runCli(['stop', '--dir', ws.dir]);
      assert.equal(stop.exitCode, 0, `${what}: ${stop.stdout}${stop.stderr}`);
      assert.match(stop.stdout, new RegExp(`The recorded pid ${state.pid} is no longer this workspace's payment server`), what);
      assert.doesNotMatch(stop.stdout, /Stopped/, `${what}: stop does not claim what it did not do`);
      assert.ok(alive(state.pid!), `${what}: the other program is still running`);
      assert.equal(readState(ws.dir).pid, undefined, `${what}: the record is forgotten`);
    }
    // restart refuses it too, then starts this workspace's own server
    const [, state] = cases[0];
    writeState(ws.dir, { ...state, port: await freePort() });
    const restart = await runCli(['restart', '--dir', ws.dir]);
    assert.equal(restart.exitCode, 0, restart.stdout + restart.stderr);
    assert.match(restart.stdout, /is no longer this workspace's payment server/);
    assert.ok(alive(other.pid), 'restart left the other program running');
    assert.equal(serversUnder(ws.dir).length, 1);
  } finally {
    stopRecorded(ws.dir);
    killByPid(inOtherFolder);
    killByPid(inThisFolder);
    ws.remove();
    elsewhere.remove();
  }
});

test("a state file copied from another workspace does not stop that workspace's server", async () => {
  const first = fixtureWorkspace('starter');
  const second = fixtureWorkspace('starter');
  try {
    const start = await runCli(['start', '--port', String(await freePort()), '--dir', first.dir]);
    assert.equal(start.exitCode, 0, start.stdout + start.stderr);
    const [server] = serversUnder(first.dir);
    assert.ok(server);
    fs.mkdirSync(path.dirname(statePath(second.dir)), { recursive: true });
    fs.copyFileSync(statePath(first.dir), statePath(second.dir));
    const stop = await runCli(['stop', '--dir', second.dir]);
    assert.match(stop.stdout, /is no longer this workspace's payment server/);
    assert.deepEqual(serversUnder(first.dir), [server], "the first workspace's server still runs");
    const stopFirst = await runCli(['stop', '--dir', first.dir]);
    assert.match(stopFirst.stdout, new RegExp(`Stopped the payment server \\(pid ${server}\\)`));
    assert.deepEqual(serversUnder(first.dir), []);
  } finally {
    stopRecorded(first.dir);
    first.remove();
    second.remove();
  }
});

test('two starts at once end with one server, recorded', async () => {
  const ws = fixtureWorkspace('starter');
  try {
    const port = String(await freePort());
    const runs = await Promise.all([runCli(['start', '--port', port, '--dir', ws.dir]), runCli(['start', '--port', port, '--dir', ws.dir])]);
    for (const run of runs) assert.equal(run.exitCode, 0, run.stdout + run.stderr);
    const said = runs.map((r) => (/Started the payment server/.test(r.stdout) ? 'started' : /already running/.test(r.stdout) ? 'already' : r.stdout)).sort();
    assert.deepEqual(said, ['already', 'started']);
    const servers = serversUnder(ws.dir);
    assert.equal(servers.length, 1, 'one server');
    assert.equal(readState(ws.dir).pid, servers[0], 'and it is the recorded one');
    const stop = await runCli(['stop', '--dir', ws.dir]);
    assert.match(stop.stdout, /Stopped the payment server/);
    assert.deepEqual(serversUnder(ws.dir), []);
  } finally {
    stopRecorded(ws.dir);
    ws.remove();
  }
});

test('a start interrupted (Ctrl-C) while it waits for the server leaves a server that stop knows', async () => {
  const ws = fixtureWorkspace('starter');
  try {
    // A server that takes 3 s to listen, so the start is still waiting when it is interrupted.
    fs.writeFileSync(path.join(ws.dir, 'server.py'), serverSource('starter').replace('\ndef main():\n', '\ndef main():\n    time.sleep(3)\n'));
    const start = execa('node', [CLI, 'start', '--port', String(await freePort()), '--dir', ws.dir], {
      env: { NO_COLOR: '1', LANG: 'C.UTF-8' },
      reject: false,
      stdin: 'ignore',
      timeout: 30_000,
    });
    for (let i = 0; i < 400 && readState(ws.dir).pid === undefined; i++) await delay(25);
    const recorded = readState(ws.dir).pid;
    assert.ok(recorded, 'start recorded the server before waiting for it');
    start.kill('SIGINT');
    const run = await start;
    assert.notEqual(run.exitCode, 0, 'the interrupted start did not report success');
    // An interpreter shim such as pyenv's is a shell that forks helpers (their command lines
    // name server.py too) before it execs python: a moment with one such process says
    // nothing (a full run saw the next look find a fork). Wait until the recorded process is
    // python itself and alone; a bound of 20 s for a loaded machine.
    const isPython = (pid: number) => {
      try {
        return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('python');
      } catch {
        return false;
      }
    };
    for (let i = 0; i < 800 && !(isPython(recorded) && serversUnder(ws.dir).length === 1); i++) await delay(25);
    assert.deepEqual(serversUnder(ws.dir), [recorded], 'the server runs, and it is the recorded one');
    const stop = await runCli(['stop', '--dir', ws.dir]);
    assert.match(stop.stdout, new RegExp(`Stopped the payment server \\(pid ${recorded}\\)`));
    assert.deepEqual(serversUnder(ws.dir), []);
  } finally {
    stopRecorded(ws.dir);
    ws.remove();
  }
});
