/** Matrix grading that tells a verdict from a machine too busy to give one. */
import { grade, type GradeOptions } from '../../grader/engine.js';
import fs from 'node:fs';
import assert from 'node:assert/strict';
import { resolveInterpreter } from '../../grader/server.js';
import type { Step } from '../../grader/track.js';
import type { StepResult } from '../../grader/types.js';
import { openWorkspace } from '../../lab/workspace.js';
import { fixtureWorkspace, serversUnder, tempDir } from '../support.js';

/** How many times a step the machine was too busy to judge is graded again, alone. */
export const REGRADES = 4;

/** The pause before the n-th regrade (from 0), ms: 1, 2, 4, 8 s, so that a burst of load (the other test lane starting servers) has passed. */
const regradePauseMs = (n: number): number => 1000 * 2 ** n;

/**
 * Grades like `grade(options)`, then grades each step that came back inconclusive (the
 * machine was too busy to judge it: StepResult.inconclusive) again on its own, up to
 * REGRADES times after a growing pause, so that a matrix row compares verdicts, not the load of the moment. A step
 * still inconclusive after that stays an 'error' and fails its row. Never re-grades a
 * verdict: a pass or a fail stands as first given.
 */
export async function gradeSettled(options: GradeOptions): Promise<StepResult[]> {
  const results = await grade(options);
  for (let i = 0; i < results.length; i++) {
    for (let n = 0; n < REGRADES && results[i].inconclusive; n++) {
      const step = options.steps.find((s) => s.id === results[i].id);
      if (!step) break;
      await new Promise((resolve) => setTimeout(resolve, regradePauseMs(n)));
      [results[i]] = await grade({ ...options, steps: [step] });
    }
  }
  return results;
}

/**
 * Grades the fixture `solution` (fixtures/build.ts) on `steps` with gradeSettled, in a
 * workspace of its own and with the servers' copies in a temporary folder of its own (TMPDIR
 * while it grades), so that what a check left there is found: asserts that no server is
 * left running there and that every copy was removed.
 * @throws AssertionError when a server or a copy was left behind
 */
export async function gradeFixture(solution: string, steps: readonly Step[]): Promise<StepResult[]> {
  const ws = fixtureWorkspace(solution);
  const tmp = tempDir('matrix-');
  const before = process.env.TMPDIR;
  process.env.TMPDIR = tmp.dir;
  try {
    const { command } = openWorkspace(ws.dir);
    const results = await gradeSettled({ workspace: ws.dir, steps, command: await resolveInterpreter(command, ws.dir) });
    assert.deepEqual(serversUnder(tmp.dir), [], "no server left running in the grader's copies");
    assert.deepEqual(fs.readdirSync(tmp.dir).filter((f) => !f.startsWith('.')), [], 'every copy of the workspace was removed');
    return results;
  } finally {
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
    ws.remove();
    tmp.remove();
  }
}

/** One exchange in a line: server, request, status or error, the start of the answer's body (at most 160 characters). */
function exchangeLine(e: StepResult['exchanges'][number]): string {
  const sent = `${e.server} ${e.method} ${e.path}${e.key !== undefined ? ` key=${JSON.stringify(e.key)}` : ''} ${e.requestBody.slice(0, 80)}`;
  const got = e.status !== undefined ? `${e.status} ${(e.responseBody ?? '').slice(0, 160)}` : `no answer (${e.errorCode ?? ''}: ${e.error ?? ''})`;
  return `    ${sent} -> ${got} [${Math.round(e.ms)} ms]`;
}

/**
 * The verdicts of a graded row as an assertion message: each step's status and message and,
 * for a step that did not pass, its details, the exchanges it names (at most 8) and the tail
 * of a server's output, so that a row that fails on a CI machine can be diagnosed from its log alone.
 */
export function verdictReport(results: readonly StepResult[]): string {
  return results
    .map((r) => {
      const lines = [`${r.id} ${r.status}: ${r.message}`];
      if (r.status !== 'pass') {
        lines.push(...r.details.map((d) => `    | ${d}`));
        lines.push(...r.exchanges.slice(0, 8).map(exchangeLine));
        if (r.serverOutput) lines.push(`    server output: ${r.serverOutput.slice(-600)}`);
      }
      return lines.join('\n');
    })
    .join('\n');
}

/**
 * The text of a failed result that its matrix cell's pattern is matched against (the
 * failure's reason): for the basic matrix the message, for the advanced one the message and
 * its details, one per line (a part's note, such as 15's whole-second one, is a detail).
 * The matrices and `npm run soak` both judge by it.
 */
export function reasonText(result: Pick<StepResult, 'message' | 'details'>, track: 'basic' | 'advanced'): string {
  return track === 'basic' ? result.message : [result.message, ...result.details].join('\n');
}
