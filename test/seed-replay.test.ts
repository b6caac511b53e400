/**
 * A seed reproduces a run (issue 19): graded twice with one seed against a real server, a
 * step sends the same requests (keys, bodies, and their order on each server) and the
 * grader makes the same decisions at the provider's and the database's gate (the gates'
 * decision logs, grader/gate.ts GateDecision): which charges it held and let go together,
 * and the wave that forces a lockstep's interleaving, its first (every request's first
 * statement, the claims or look-ups, let run together). The waves after it follow the
 * server's own clock where it polls (the reference looks at a key in flight every 20 ms,
 * time.sleep): how many polls fall into each wave is the server's timing, not the grader's
 * choice, and is not compared. With another seed the keys, bodies and the charges it held
 * differ. Nothing here is timed: each run is compared with the other once it has ended.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { grade } from '../grader/engine.js';
import { openWorkspace } from '../lab/workspace.js';
import { selectSteps } from '../steps/index.js';
import { fixtureWorkspace } from './support.js';
import type { LiveContext } from '../grader/context.js';
import type { GateDecision } from '../grader/gate.js';
import type { PayRequest } from '../grader/http.js';
import type { ServerInstance } from '../grader/server.js';
import type { Step } from '../grader/track.js';

/** What one graded run of a step sent and decided: requests by server label in the order they were sent, gate decisions by server label. */
interface Run {
  status: string;
  message: string;
  sent: Record<string, string[]>;
  decisions: Record<string, GateDecision[]>;
}

/**
 * Grades `stepId` on the workspace once with `seed`, recording every request as it is sent
 * (before any answer: `METHOD path key body`, by server) and, once the step's check ends,
 * its gates' decisions. A step graded again by the engine (a starved try) keeps its last try's.
 */
async function gradeRecorded(dir: string, stepId: string, seed: number): Promise<Run> {
  const { command } = openWorkspace(dir);
  const [step] = selectSteps([stepId]);
  let sent: Record<string, string[]> = {};
  let decisions: Record<string, GateDecision[]> = {};
  const watched: Step = {
    ...step,
    live: async (ctx: LiveContext) => {
      const mine: Record<string, string[]> = {};
      const note = (server: ServerInstance, method: string, urlPath: string, req?: PayRequest) =>
        (mine[server.label] ??= []).push(`${method} ${urlPath} ${req?.key === undefined ? '(no key)' : JSON.stringify(req.key)} ${JSON.stringify(req?.body)}`);
      const pay = ctx.pay.bind(ctx);
      const paySimultaneously = ctx.paySimultaneously.bind(ctx);
      const request = ctx.request.bind(ctx);
      Object.assign(ctx, {
        pay: (server: ServerInstance, req: PayRequest, timeouts?: Parameters<LiveContext['pay']>[2]) => {
          note(server, 'POST', '/pay', req);
          return pay(server, req, timeouts);
        },
        paySimultaneously: (servers: ServerInstance[], requests: PayRequest[], ...rest: unknown[]) => {
          requests.forEach((req, i) => note(servers[i % servers.length], 'POST', '/pay', req));
          return (paySimultaneously as (...args: unknown[]) => ReturnType<LiveContext['paySimultaneously']>)(servers, requests, ...rest);
        },
        request: (server: ServerInstance, method: 'GET' | 'POST', urlPath: string, req?: PayRequest) => {
          note(server, method, urlPath, req);
          return request(server, method, urlPath, req);
        },
      });
      try {
        return await step.live!(ctx);
      } finally {
        sent = mine;
        decisions = ctx.gateDecisions();
      }
    },
  };
  const [result] = await grade({ workspace: dir, steps: [watched], command, seed });
  return { status: result.status, message: result.message, sent, decisions };
}

/** Every key a run sent. */
const keysOf = (run: Run) => new Set(Object.values(run.sent).flatMap((lines) => lines.map((line) => line.split(' ')[2])));
/** Every charge a run's grader held and let go. */
const heldOf = (run: Run) => Object.values(run.decisions).flatMap((ds) => ds.flatMap((d) => (d.kind === 'let-go' ? d.charges : [])));
/** Every wave of statements a run's grader let go. */
const wavesOf = (run: Run) => Object.values(run.decisions).flatMap((ds) => ds.filter((d) => d.kind === 'wave'));
/** What the grader chose at each gate of a run, by server: the charges it let go together, in order, and the first wave of statements (the forced one). */
const chosen = (run: Run) =>
  Object.fromEntries(
    Object.entries(run.decisions).map(([label, ds]) => [label, { letGo: ds.filter((d) => d.kind === 'let-go'), firstWave: ds.find((d) => d.kind === 'wave') }]),
  );

for (const [stepId, what] of [
  ['05', 'the held round (charges held at the provider), the slow-database round in lockstep, the plain rounds'],
  ['06', 'the restart, the other instance, the split race, and the slow split in lockstep'],
] as const) {
  test(`a seed replays step ${stepId} (${what}): the same requests in the same order on each server and the same gate decisions; another seed differs`, async () => {
    const ws = fixtureWorkspace('reference');
    try {
      const first = await gradeRecorded(ws.dir, stepId, 4242);
      assert.equal(first.status, 'pass', first.message);
      const requests = Object.values(first.sent).flat().length;
      assert.ok(requests > 20, `the step sent its rounds: ${requests} requests`);
      // The forced wave: every request of the lockstep round's first statement, together (05: ten with one key and three of their own; 06: ten split over D and E).
      const firsts = Object.values(chosen(first)).map((c) => c.firstWave?.statements.length ?? 0);
      assert.equal(firsts.reduce((sum, n) => sum + n, 0), stepId === '05' ? 13 : 10, `the first waves hold every request's first statement: ${JSON.stringify(first.decisions)}`);
      assert.ok(wavesOf(first).length > 1, `the lockstep let statements go in waves: ${JSON.stringify(first.decisions)}`);
      if (stepId === '05') assert.ok(heldOf(first).length >= 4, `the grader held charges at the provider: ${JSON.stringify(first.decisions)}`);

      const again = await gradeRecorded(ws.dir, stepId, 4242);
      assert.equal(again.status, 'pass', again.message);
      assert.deepEqual(again.sent, first.sent, 'the same seed sent the same requests, in the same order on each server');
      assert.deepEqual(chosen(again), chosen(first), 'the same seed made the same decisions at the gates');

      const other = await gradeRecorded(ws.dir, stepId, 4243);
      assert.equal(other.status, 'pass', other.message);
      const shared = [...keysOf(other)].filter((k) => keysOf(first).has(k));
      assert.deepEqual(shared, [], 'another seed sends none of the first seed\'s keys');
      assert.notDeepEqual(other.sent, first.sent);
      const held = new Set(heldOf(first));
      assert.ok(!heldOf(other).some((c) => held.has(c)), 'another seed holds other charges');
    } finally {
      ws.remove();
    }
  });
}
