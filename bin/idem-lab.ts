#!/usr/bin/env node
/**
 * idem-lab: the command line. Parses arguments and hands off to lab/ (the runner) and
 * grader/ (the checks). Exit codes: 0 done or all passed, 1 a check failed, 2 usage or setup error.
 */
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { SetupError } from '../grader/failure.js';

// The commands load their modules when they run, so `--help` does not pay for undici,
// better-sqlite3, execa and marked.
const lab = () => import('../lab/commands.js');
const grader = () => import('../grader/check-command.js');
const cohort = () => import('../grader/grade-command.js');
const ci = () => import('../lab/ci.js');

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 65535) throw new InvalidArgumentError('a port is a whole number from 1 to 65535');
  return n;
}

const DIR_HELP = 'the workspace folder (default: the current directory)';

const program = new Command('idem-lab')
  .description('Press twice, charge once: a hands-on lab for idempotent APIs, and its grader.')
  .version('0.1.0')
  .exitOverride()
  .showHelpAfterError('(idem-lab --help lists the commands)');

let exitCode = 0;

// `idem-lab check | head` closes the pipe early: stop quietly (the exit hooks still stop servers).
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(exitCode);
    throw err;
  });
}
const run = (action: () => Promise<number> | number) => async () => {
  exitCode = await action();
};

program
  .command('start')
  .description('lay out the workspace (never overwriting your changes) and start the payment server')
  .option('--dir <dir>', DIR_HELP)
  .option('--lang <lang>', 'language of the lab sheet: en, ko or zh', 'en')
  .option('--port <port>', 'port for the server (default 8000)', port)
  .option('--force', 'reset every lab file to the original, even ones you changed')
  .action((opts) => run(async () => (await lab()).startCommand(opts))());

program.command('stop').description('stop the payment server started here (by its recorded pid)').option('--dir <dir>', DIR_HELP).action((opts) => run(async () => (await lab()).stopCommand(opts))());
program.command('restart').description('stop and start the payment server, e.g. after editing server.py').option('--dir <dir>', DIR_HELP).action((opts) => run(async () => (await lab()).restartCommand(opts))());
program.command('status').description("the server's state and every step's last verdict").option('--dir <dir>', DIR_HELP).action((opts) => run(async () => (await lab()).statusCommand(opts))());

program
  .command('probe')
  .description('send one POST /pay to the running server and print what came back (like ./probe.sh)')
  .argument('[key]', 'the Idempotency-Key; leave out to send no header')
  .argument('[body]', 'the JSON body (default {"user":"u1","amount":1000})')
  .option('--dir <dir>', DIR_HELP)
  .option('--port <port>', 'the server port (default: the one idem-lab start recorded)', port)
  .action((key, body, opts) => run(async () => (await lab()).probeCommand(key, body, opts))());

program.command('ledger').description("print every ledger row of the workspace's lab.db (like ./ledger.sh)").option('--dir <dir>', DIR_HELP).action((opts) => run(async () => (await lab()).ledgerCommand(opts))());
program.command('show').description("print a step's section of the lab sheet").argument('<step>', 'step id (03) or slug (nokey)').option('--dir <dir>', DIR_HELP).action((step, opts) => run(async () => (await lab()).showCommand(step, opts))());
program
  .command('hint')
  .description("show a step's hints, one more each time")
  .argument('<step>', 'step id (03) or slug (nokey)')
  .option('--dir <dir>', DIR_HELP)
  .option('--reset', 'start again from the first hint')
  .action((step, opts) => run(async () => (await lab()).hintCommand(step, opts))());

const collect = (value: string, previous: string[] = []) => [...previous, value];

program
  .command('check')
  .description('grade steps against your files and your server, live (all steps when none is named)')
  .argument('[steps...]', 'step ids (02) or slugs (replay)')
  .option('--dir <dir>', DIR_HELP)
  .option('--reporter <name>', 'human (default), json, junit, tap or github; repeat or use commas for several; NAME=FILE writes json, junit or tap to FILE', collect)
  .option('--output <file>', 'the file the json, junit or tap reporter writes (default: stdout)')
  .option('--config <file>', 'grading config with "points" and "required" (default: idem-lab.json in the workspace)')
  .addHelpText('after', '\nExit codes: 0 every required step passed, 1 a required step failed, 2 usage error or a workspace that cannot be graded\n(with json, junit, tap or github the results are still written then, with status error).')
  .action((steps, opts) => run(async () => (await grader()).checkCommand(steps, opts))());

program
  .command('grade')
  .description("grade a cohort: many student workspaces (checkouts of the students' repositories) into a gradebook")
  .argument('<dirs...>', 'the student workspaces')
  .option('--jobs <n>', 'how many workspaces to grade at once', '1')
  .option('--csv <file>', 'write the gradebook as CSV: one row per student, one column per step, score, first failure')
  .option('--json <file>', "write the gradebook as JSON, with every student's results")
  .option('--config <file>', 'grading config with "points" and "required" for every student (default: 1 point each, all required)')
  .option('--timeout <seconds>', 'how long one workspace may take before it is cut off as an error', '180')
  .addHelpText('after', '\nExit codes: 0 every workspace was graded, 1 some could not be (error rows), 2 usage error.')
  .action((dirs, opts) => run(async () => (await cohort()).gradeCommand(dirs, opts))());

program
  .command('ci')
  .description('set up grading in CI for instructors')
  .command('init')
  .description('write a GitHub Actions workflow (and idem-lab.json) into a student template repository')
  .option('--dir <dir>', 'the template repository (default: the current directory)')
  .option('--classroom', "add GitHub Classroom's autograding reporter step")
  .option('--package <spec>', 'what the workflow installs with npm install --global (default: this version of idem-lab)')
  .option('--force', 'replace an existing .github/workflows/idem-lab.yml')
  .action((opts) => run(async () => (await ci()).ciInitCommand(opts))());

try {
  if (process.argv.length <= 2) {
    console.log(`The steps:\n${(await lab()).stepList(process.cwd())}\n\nidem-lab start lays out a workspace and starts the server; idem-lab --help lists every command.`);
  } else {
    await program.parseAsync(process.argv);
  }
} catch (err) {
  if (err instanceof CommanderError) {
    exitCode = err.exitCode === 0 ? 0 : 2;
  } else if (err instanceof SetupError) {
    console.error(`idem-lab: ${err.message}`);
    exitCode = 2;
  } else {
    console.error(`idem-lab: ${(err as Error).stack ?? err}`);
    exitCode = 2;
  }
}
process.exitCode = exitCode;
