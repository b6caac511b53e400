/**
 * The grader never counts its own requests against the learner (issue 19): a part of a
 * check the grader gave up on without a verdict (05's held round tried again because the
 * machine was too busy) leaves requests of its own in flight or unanswered, whose charges
 * and ledger rows the final audit must not take for the server's. Real server, real HTTP,
 * real sqlite; nothing timed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { LiveContext } from '../grader/context.js';
import { auditPayments } from '../grader/audit.js';
import { send } from '../grader/http.js';
import { makeGraderTempDir } from '../grader/engine.js';
import { resolveInterpreter } from '../grader/server.js';
import { openWorkspace } from '../lab/workspace.js';
import { fixtureWorkspace } from './support.js';

test('a payment the grader left out (a try given up on) is not audited; one it did not leave out still is', async () => {
  const ws = fixtureWorkspace('reference');
  const tmp = makeGraderTempDir('lab-');
  const { command } = openWorkspace(ws.dir);
  const ctx = new LiveContext(ws.dir, tmp, '05', await resolveInterpreter(command, ws.dir), 7);
  try {
    const server = await ctx.startServer();
    const judged = await ctx.pay(server, { key: ctx.freshKey(), body: ctx.data.payment() });
    assert.equal(judged.status, 201);
    // A request of an abandoned try: charged and written, its exchange never recorded (as
    // one still in flight when the servers stop, or answered after the audit read them).
    const abandoned = ctx.data.payment();
    const unrecorded = await send(server, 'POST', '/pay', { key: ctx.freshKey(), body: abandoned });
    assert.equal(unrecorded.status, 201);
    await ctx.stopAll();
    assert.throws(() => auditPayments(ctx), (err: Error) => err.message.includes(JSON.stringify(abandoned.user)), 'unless left out, the audit counts it against the server');
    ctx.leaveOut([abandoned]);
    auditPayments(ctx);
    // Leaving one body out hides nothing else: a charge nobody asked for is still found.
    const other = ctx.data.payment();
    const again = await ctx.startServer();
    const stray = await send(again, 'POST', '/pay', { key: ctx.freshKey(), body: other });
    assert.equal(stray.status, 201);
    await ctx.stopAll();
    assert.throws(() => auditPayments(ctx), (err: Error) => err.message.includes(JSON.stringify(other.user)));
  } finally {
    await ctx.stopAll();
    fs.rmSync(tmp, { recursive: true, force: true });
    ws.remove();
  }
});
