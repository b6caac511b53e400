/**
 * A check leaves nothing running once its verdict is out: no timer of a bound that lost its
 * race (a `delay()` beside a request that was answered first), so that `idem-lab check 05`
 * exits when it has printed, not seconds later when the bound would have run out.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { grade } from '../grader/engine.js';
import { resolveInterpreter, DEFAULT_COMMAND } from '../grader/server.js';
import { ADVANCED_STEPS, STEPS } from '../steps/index.js';
import { fixtureWorkspace } from './support.js';

/** The timers alive in this process now (Node's own count of active resources). */
function timers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
}

for (const [solution, id] of [['reference', '05'], ['advanced/reference', '12']] as const) {
  test(`step ${id} of ${solution} leaves no timer behind when its verdict is out`, async () => {
    const ws = fixtureWorkspace(solution);
    try {
      const before = timers();
      const [result] = await grade({ workspace: ws.dir, steps: [...STEPS, ...ADVANCED_STEPS].filter((s) => s.id === id), command: await resolveInterpreter(DEFAULT_COMMAND, ws.dir) });
      assert.notEqual(result.status, 'fail', result.message);
      // A moment for what the check closed to go (sockets, the gate); a bound's timer would stay for seconds.
      await new Promise((r) => setImmediate(r));
      assert.equal(timers(), before, `timers left running: ${process.getActiveResourcesInfo().join(', ')}`);
    } finally {
      ws.remove();
    }
  });
}
