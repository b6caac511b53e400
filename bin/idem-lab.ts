#!/usr/bin/env node
/**
 * idem-lab's entry point. Loading the command line (commander, the catalogs, the grader)
 * takes about a tenth of a second; a `check` begins its start-up work before that (the
 * interpreter look-up and the sandbox probe, grader/prewarm.ts), so that both processes
 * run while Node.js compiles the rest. Then cli.ts's main parses the arguments and runs the
 * command on the process's streams, and the process exits with its code: 0 done or all
 * passed, 1 a check failed, 2 usage or setup error.
 */
import { prewarm } from '../grader/prewarm.js';
import { checkTarget } from './early.js';

const args = process.argv.slice(2);
const target = checkTarget(args);
if (target) prewarm(target.workspace, target.sandbox);
const { main } = await import('./cli.js');
let exitCode = 0;
// `idem-lab check | head` closes the pipe early: stop quietly (the exit hooks still stop servers).
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(exitCode);
    throw err;
  });
}
exitCode = await main(args);
process.exitCode = exitCode;
