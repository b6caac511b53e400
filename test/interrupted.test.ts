/**
 * A test file stopped by a signal (npm test interrupted, a CI job's timeout) leaves nothing
 * behind: its temporary folders are removed and the servers started in them stopped, though
 * no finally ran (test/support.ts's exit tasks).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { PACKAGE_ROOT } from '../lab/paths.js';
import { freePort } from '../grader/server.js';
import { serversUnder, stopRecorded, tempDir } from './support.js';

test('a test process ended by SIGTERM stops the detached server in its folder and removes the folder', { timeout: 90_000 }, async () => {
  const outer = tempDir();
  const port = await freePort();
  const support = path.join(PACKAGE_ROOT, 'dist', 'test', 'support.js');
  // A stand-in test file: it lays out a workspace in a tempDir, starts its server
  // detached (idem-lab start, as cli.test does), says where, then waits to be stopped.
  const script = `
    import { tempDir, runCli } from ${JSON.stringify(support)};
    const ws = tempDir('idem-lab-interrupted-');
    const started = await runCli(['start', '--dir', ws.dir, '--port', '${port}']);
    console.log(JSON.stringify({ dir: ws.dir, exit: started.exitCode, out: started.stdout + started.stderr }));
    setInterval(() => {}, 1000);
  `;
  const child = execa(process.execPath, ['--input-type=module', '-e', script], { reject: false, env: { TMPDIR: outer.dir } });
  let dir = '';
  try {
    const line = await new Promise<string>((resolve, reject) => {
      child.stdout!.on('data', (chunk: Buffer) => resolve(String(chunk).trim()));
      child.on('exit', () => reject(new Error('the stand-in ended before it started its server')));
    });
    const started = JSON.parse(line) as { dir: string; exit: number; out: string };
    dir = started.dir;
    assert.equal(started.exit, 0, started.out);
    assert.equal(serversUnder(dir).length, 1, 'the stand-in started one server in its folder');
    child.kill('SIGTERM');
    const ended = await child;
    assert.equal(ended.exitCode, 143, 'its exit tasks ran, then it exited 128 + SIGTERM (not killed by the signal unhandled)');
    assert.deepEqual(serversUnder(dir), [], 'no server is left running in its folder');
    assert.equal(fs.existsSync(dir), false, 'its folder is removed');
  } finally {
    child.kill('SIGKILL');
    if (dir && fs.existsSync(dir)) {
      stopRecorded(dir);
      fs.rmSync(dir, { recursive: true, force: true });
    }
    outer.remove();
  }
});
