/**
 * The sheets run: every `sh` block of LAB.md and ADVANCED.md, in every language, runs in
 * order on a fresh workspace, as a learner pastes it, and does what the text beside it
 * says: the block exits 0 (bash -e), every line whose comment names an HTTP status gets
 * that status, a line whose comment says `Idempotency-Replayed: true` gets that header,
 * and every `idem-lab check` in a block passes. The learner's server.py is the starter for
 * step 01 (which shows the duplicate charge), the reference from 02 on, and the advanced
 * reference on the advanced track; a block that opens a file in $EDITOR finds the
 * reference answer written there. A block reaches the lab's server through ./probe.sh or
 * the address `idem-lab status` shows, never a fixed port: the workspace's server runs on
 * a port other than 8000 here, as it does for a learner whose 8000 was taken (the
 * advanced sheet's curl lines once said localhost:8000). Step 12's second server is named
 * by its default port, 8012: the test gives it a port it got instead.
 */
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execa } from 'execa';
import { freePort } from '../grader/server.js';
import { LAB_DIR } from '../lab/paths.js';
import { updateState } from '../lab/workspace.js';
import { referenceFiles, serverSource } from '../fixtures/build.js';
import { CLI, killGroupIn, serversUnder, stopRecorded, tempDir } from './support.js';

/** A shell block of a sheet and the step whose section holds it. */
interface Block {
  step: string;
  lines: string[];
}

/** The `sh` blocks of a sheet, in order, each with its step. */
function shellBlocks(sheet: string): Block[] {
  const blocks: Block[] = [];
  let step = '';
  const lines = sheet.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const heading = /^## (\d\d) /.exec(lines[i]);
    if (heading) step = heading[1];
    if (lines[i] !== '```sh') continue;
    const start = ++i;
    while (lines[i] !== '```') i++;
    blocks.push({ step, lines: lines.slice(start, i) });
  }
  return blocks;
}

/** What a line's comment says it gets: an HTTP status, and whether the answer is marked a replay. */
function promised(line: string): { status?: string; replayed: boolean } {
  const comment = /\s#\s(.*)$/.exec(line)?.[1] ?? '';
  return { status: /(?:^|[^\d.])([1-5]\d\d)(?![\d.])/.exec(comment)?.[1], replayed: /Idempotency-Replayed: true/.test(comment) };
}

for (const lang of ['en', 'ko', 'zh'] as const) {
  test(`every shell block of LAB.${lang}.md and ADVANCED.${lang}.md runs in order on a fresh workspace and does what its text says`, { timeout: 900_000 }, async () => {
    const ws = tempDir(`idem-lab-sheets-${lang}-`);
    const bin = tempDir('idem-lab-bin-');
    try {
      fs.writeFileSync(path.join(bin.dir, 'idem-lab'), `#!/bin/sh\nexec node ${JSON.stringify(CLI)} "$@"\n`, { mode: 0o755 });
      const [labPort, secondPort] = [await freePort(), await freePort()];
      // The port the lab's server gets, recorded before start as a learner's earlier start would.
      updateState(ws.dir, (s) => {
        s.port = labPort;
      });
      const env = { PATH: `${bin.dir}:${process.env.PATH}`, EDITOR: 'true', NO_COLOR: '1', LANG: `${lang === 'en' ? 'en_US' : lang === 'ko' ? 'ko_KR' : 'zh_CN'}.UTF-8` };
      const answers = referenceFiles();
      const sheets: Array<['LAB' | 'ADVANCED', Block[]]> = ['LAB', 'ADVANCED'].map((name) => [name as 'LAB' | 'ADVANCED', shellBlocks(fs.readFileSync(path.join(LAB_DIR, `${name}.${lang}.md`), 'utf8'))]);
      for (const [sheet, blocks] of sheets) {
        if (sheet === 'ADVANCED') {
          const track = await execa('idem-lab', ['track', 'advanced'], { cwd: ws.dir, env, reject: false });
          assert.equal(track.exitCode, 0, track.stdout + track.stderr);
          fs.writeFileSync(path.join(ws.dir, 'server.py'), serverSource('advanced/reference'));
        }
        for (const block of blocks) {
          if (sheet === 'LAB' && block.step === '02') fs.writeFileSync(path.join(ws.dir, 'server.py'), serverSource('reference'));
          // The learner writes the file the block opens.
          for (const line of block.lines) {
            const opened = /^\$EDITOR (\S+)/.exec(line)?.[1];
            if (opened) fs.writeFileSync(path.join(ws.dir, opened), answers[opened]);
          }
          const where = `${sheet}.${lang}.md, step ${block.step}`;
          for (const line of block.lines) assert.doesNotMatch(line, /:8000\b/, `${where}: "${line}" names port 8000, where the workspace's server may not be`);
          const script = block.lines
            .map((line, i) => `echo "@@line ${i}"\n${line.replace(/\b8012\b/g, String(secondPort))}`)
            .join('\n');
          const run = await execa('bash', ['-e', '-c', script], { cwd: ws.dir, env, reject: false, all: true, timeout: 300_000 });
          const output = run.all ?? '';
          assert.equal(run.exitCode, 0, `${where}: the block exits 0\n${output}`);
          const parts = output.split(/^@@line (\d+)\n?/m);
          const outputOf = new Map<number, string>();
          for (let i = 1; i < parts.length; i += 2) outputOf.set(Number(parts[i]), parts[i + 1] ?? '');
          block.lines.forEach((line, i) => {
            const said = outputOf.get(i) ?? '';
            const { status, replayed } = promised(line);
            if (status) assert.match(said, new RegExp(`^HTTP(?:/1\\.[01])? ${status}\\b`, 'm'), `${where}: "${line}" gets ${status}\n${said}`);
            if (replayed) assert.match(said, /^Idempotency-Replayed: true/im, `${where}: "${line}" is a replay\n${said}`);
            if (/^idem-lab check /.test(line)) assert.doesNotMatch(said, /✗|^! /m, `${where}: "${line}" passes\n${said}`);
          });
        }
      }
      assert.deepEqual(serversUnder(ws.dir).filter((pid) => pid !== undefined).length, 1, 'only the lab\'s own server is left running: the sheets stop what they start');
    } finally {
      stopRecorded(ws.dir);
      // A block that failed half-way may leave a server the state does not record (a second
      // instance, a restart): every server still running in the workspace is stopped.
      for (const pid of serversUnder(ws.dir)) killGroupIn(pid, ws.dir);
      ws.remove();
      bin.remove();
    }
  });
}
