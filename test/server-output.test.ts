import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Chalk } from 'chalk';
import { resolveInterpreter, type ServerInstance } from '../grader/server.js';
import { LiveContext } from '../grader/context.js';
import { makeGraderTempDir } from '../grader/engine.js';
import { collapseServerOutput, formatResult } from '../grader/reporters/human.js';
import { learnerOutput } from '../grader/reporters/json.js';
import { PrintedTail, splitLabel } from '../grader/printed.js';
import { openWorkspace } from '../lab/workspace.js';
import { fixtureWorkspace } from './support.js';

/**
 * A server that prints on request: `GET /say/<word>` prints `<word>` on stderr and answers
 * 200; `GET /burst/<name>` prints 12 numbered lines, each followed by the same traceback,
 * as fast as it can. Every server started from it runs the same code: only the grader's
 * label tells their lines apart.
 */
const PRINTING_SERVER = `
import os, sys, traceback, http.server

class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        parts = self.path.strip("/").split("/")
        if parts[0] == "say":
            print(parts[1], file=sys.stderr, flush=True)
        elif parts[0] == "burst":
            for i in range(12):
                print(f"line {i} of {parts[1]}", file=sys.stderr, flush=True)
                try:
                    raise RuntimeError("boom")
                except RuntimeError:
                    traceback.print_exc()
                    sys.stderr.flush()
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass

http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
`;

/** Waits (at most 10 s) until `server` has printed a line that is `text`. */
async function printedLine(server: ServerInstance, text: string): Promise<void> {
  for (let i = 0; i < 200 && !server.printed().some((l) => l.text === text); i++) await delay(50);
  assert.ok(server.printed().some((l) => l.text === text), `server ${server.label} printed ${text}`);
}

test('two servers printing at once: every line says which server printed it, lines in print order, nothing folded across servers', async () => {
  const ws = fixtureWorkspace('reference', {});
  fs.writeFileSync(path.join(ws.dir, 'server.py'), PRINTING_SERVER);
  const tmp = makeGraderTempDir('lab-');
  const { command } = openWorkspace(ws.dir);
  const ctx = new LiveContext(ws.dir, tmp, '06', await resolveInterpreter(command, ws.dir), 1);
  try {
    const [a, b] = await Promise.all([ctx.startServer(), ctx.startServer()]);
    assert.deepEqual([a.label, b.label], ['A', 'B']);

    // Taking turns: the order the lines were printed in is the order they are shown in.
    const turns: Array<[ServerInstance, string]> = [[a, 'first'], [b, 'second'], [a, 'third'], [b, 'fourth'], [b, 'fifth'], [a, 'sixth']];
    for (const [server, word] of turns) {
      await ctx.request(server, 'GET', `/say/${word}`);
      await printedLine(server, word);
    }
    assert.deepEqual(ctx.serverOutput().split('\n'), ['[A] first', '[B] second', '[A] third', '[B] fourth', '[B] fifth', '[A] sixth']);
    assert.deepEqual(ctx.serverOutput(['B']).split('\n'), ['[B] second', '[B] fourth', '[B] fifth']);

    // At once: both print 12 lines and 12 identical tracebacks in the same moments.
    await Promise.all([ctx.request(a, 'GET', '/burst/A'), ctx.request(b, 'GET', '/burst/B')]);
    await Promise.all([printedLine(a, 'line 11 of A'), printedLine(b, 'line 11 of B')]);
    const lines = ctx.serverOutput().split('\n');
    for (const server of [a, b]) {
      // Each server's own lines, taken from the whole output by their label, are what that server printed, in its order.
      const own = lines.map(splitLabel).filter((l) => l.label === server.label).map((l) => l.text);
      assert.deepEqual(own, server.printed().map((l) => l.text), `server ${server.label}'s lines, in its order`);
      const numbered = own.filter((l) => l.startsWith('line '));
      assert.deepEqual(numbered, Array.from({ length: 12 }, (_, i) => `line ${i} of ${server.label}`));
    }
    assert.ok(lines.every((l) => /^\[[AB]\]( |$)/.test(l)), 'every line carries its server');
    const switches = lines.filter((l, i) => i > 0 && l.slice(0, 3) !== lines[i - 1].slice(0, 3)).length;
    assert.ok(switches >= 1, 'both servers are in the output');

    // Folded, the same traceback printed by A and by B is shown once for each, each with its own count.
    const shown = collapseServerOutput(ctx.serverOutput());
    assert.ok(shown.every((l) => /^\[[AB]\]( |$)/.test(l)), `every line shown says whose it is:\n${shown.join('\n')}`);
    for (const label of ['A', 'B']) {
      assert.equal(shown.filter((l) => l === `[${label}] Traceback (most recent call last):`).length, 1, `${label}'s traceback shown once`);
      assert.equal(shown.filter((l) => l.startsWith(`[${label}] line `)).length, 12, `${label}'s numbered lines all shown`);
      const count = shown.filter((l) => new RegExp(`^\\[${label}\\] +\\(same as above, 11 more\\)$`).test(l));
      assert.equal(count.length, 1, `${label}'s traceback counted under ${label}: 11 more`);
    }
    // Print order holds after folding: A's numbered lines come in their order, interleaved with B's as printed.
    const order = (list: string[]) => list.filter((l) => / line \d+ of /.test(l));
    assert.deepEqual(order(shown), order(lines));

    // The report shows it so; the json reporter keeps the labels when several servers printed.
    const report = formatResult({ id: '06', slug: 'persist', title: 't', status: 'fail', message: 'm', details: [], exchanges: [], warnings: [], ms: 1, serverOutput: ctx.serverOutput() }, new Chalk({ level: 0 }));
    // The tail shown ends where the servers' printing ended: the last numbered line printed,
    // by whichever server the scheduler let finish last.
    const last = order(lines).at(-1)!;
    assert.match(last, /^\[[AB]\] line 11 of [AB]$/);
    assert.ok(report.split('\n').includes(`      ${last}`), `the report shows ${last}`);
    assert.ok(learnerOutput(ctx.serverOutput()).split('\n').includes(last), `the learner's output shows ${last}`);
    assert.equal(learnerOutput(ctx.serverOutput(['A'])).split('\n').at(-1), 'RuntimeError: boom', 'one server: its own words, without the label');
  } finally {
    await ctx.stopAll();
    fs.rmSync(tmp, { recursive: true, force: true });
    ws.remove();
  }
});

test('a server printing without end and without a newline makes the tail hold no more than its bound', () => {
  const tail = new PrintedTail(100);
  const out = {};
  for (let i = 0; i < 1000; i++) tail.add(out, 'x'.repeat(10_000));
  const held = tail.lines().reduce((n, l) => n + l.text.length, 0);
  assert.ok(held <= 100, `the unfinished line is cut to the bound (${held} characters held)`);
  tail.add(out, 'end\n' + 'y'.repeat(10_000) + '\n');
  assert.ok(tail.lines().every((l) => l.text.length <= 100), 'every kept line is within the bound');
});

test('a line a stream delivers in pieces stays one line; stdout and stderr never share one; the tail keeps whole lines', () => {
  const tail = new PrintedTail(30);
  const out = {};
  const err = {};
  tail.add(out, 'hel');
  tail.add(err, 'oops\n');
  tail.add(out, 'lo\nwor');
  assert.deepEqual(tail.lines().map((l) => l.text), ['hello', 'oops', 'wor']);
  tail.add(out, 'ld\n' + 'x'.repeat(20) + '\n');
  assert.deepEqual(tail.lines().map((l) => l.text), ['world', 'x'.repeat(20)], 'the oldest lines go first, past 30 characters');
  const seqs = tail.lines().map((l) => l.seq);
  assert.ok(seqs[0] < seqs[1]);
});
