#!/usr/bin/env node
/**
 * idem-lab's entry point. Loading the command line (commander, the catalogs, the grader)
 * takes about a tenth of a second; a `check` begins its start-up work before that (the
 * interpreter look-up and the sandbox probe, grader/prewarm.ts), so that both processes
 * run while Node.js compiles the rest. Then cli.ts parses the arguments and runs the
 * command. Exit codes: 0 done or all passed, 1 a check failed, 2 usage or setup error.
 */
import { prewarm } from '../grader/prewarm.js';
import { checkTarget } from './early.js';

const target = checkTarget(process.argv.slice(2));
if (target) prewarm(target.workspace, target.sandbox);
await import('./cli.js');
