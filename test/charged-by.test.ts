/**
 * A failure that shows the provider's statement names the server that charged (`by server
 * C`), not the pid the server saw inside its sandbox's pid namespace, which the learner
 * cannot find on the machine (a newcomer read "by pid 15" in a failed 06).
 */
import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { grade } from '../grader/engine.js';
import { chooseSandbox } from '../grader/sandbox.js';
import { DEFAULT_COMMAND, resolveInterpreter, runningServerCount } from '../grader/server.js';
import { selectSteps } from '../grader/track.js';
import { STEPS } from '../steps/index.js';
import { fixtureWorkspace } from './support.js';

afterEach(() => assert.equal(runningServerCount(), 0, 'every server the grader started was stopped'));

test("a race split over two sandboxed servers that charged twice names each charge's server by its label, not by a sandbox's pid", async () => {
  const ws = fixtureWorkspace('thread-lock');
  try {
    const sandbox = await chooseSandbox('required', []);
    assert.ok(sandbox, 'a sandbox starts here (.ci/run installs bubblewrap)');
    const command = { ...(await resolveInterpreter(DEFAULT_COMMAND, ws.dir)), sandbox };
    const [result] = await grade({ workspace: ws.dir, steps: selectSteps(STEPS, ['06']), command });
    assert.equal(result.status, 'fail', result.message);
    const charges = result.details.filter((d) => /^charged /.test(d));
    assert.ok(charges.length >= 2, `the charges are listed: ${result.details.join(' | ')}`);
    for (const line of charges) assert.match(line, / by server [A-Z]$/, 'each charge names its server');
    assert.ok(new Set(charges.map((line) => line.slice(-1))).size >= 2, `the charges came from both servers: ${charges.join(' | ')}`);
    assert.ok(!result.details.some((d) => / by pid \d+/.test(d)), 'no pid of a sandbox is shown');
  } finally {
    ws.remove();
  }
});
