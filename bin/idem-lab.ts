#!/usr/bin/env node
/**
 * idem-lab: the command line. Parses arguments and hands off to lab/ (the runner) and
 * grader/ (the checks). Exit codes: 0 done or all passed, 1 a check failed, 2 usage or setup error.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { SetupError } from '../grader/failure.js';
import { chooseLanguage, setLanguage, t } from '../i18n/index.js';

// The commands load their modules when they run, so `--help` does not pay for undici,
// better-sqlite3, execa and marked.
const lab = () => import('../lab/commands.js');
const grader = () => import('../grader/check-command.js');
const cohort = () => import('../grader/grade-command.js');
const ci = () => import('../lab/ci.js');

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 65535) throw new InvalidArgumentError(t('help.portInvalid'));
  return n;
}


/** The value of `--name V` or `--name=V` on the command line, before any `--`. */
function argValue(args: string[], name: string): string | undefined {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--') break;
    if (args[i] === `--${name}`) return args[i + 1];
    if (args[i].startsWith(`--${name}=`)) return args[i].slice(name.length + 3);
  }
  return undefined;
}

/** The language the workspace of this run was started in (.idem-lab/state.json), if any. */
function workspaceLanguage(dir: string | undefined): string | undefined {
  try {
    const state = JSON.parse(fs.readFileSync(path.join(path.resolve(dir ?? '.'), '.idem-lab', 'state.json'), 'utf8')) as { lang?: unknown };
    return typeof state.lang === 'string' ? state.lang : undefined;
  } catch {
    return undefined;
  }
}

// The language is chosen before anything is printed: --lang, else the workspace's, else the locale.
const args = process.argv.slice(2);
const chosen = chooseLanguage(argValue(args, 'lang'), workspaceLanguage(argValue(args, 'dir')));
setLanguage(chosen.lang);
if (chosen.unknown !== undefined) console.error(t('cli.lang.unknown', { lang: chosen.unknown, using: chosen.lang }));

const program = new Command('idem-lab')
  .description(t('help.program'))
  .version('0.1.0', '-V, --version', t('help.version'))
  .helpOption('-h, --help', t('help.help'))
  .helpCommand('help [command]', t('help.helpCommand'))
  .exitOverride()
  .showHelpAfterError(t('help.afterError'));

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
  .description(t('help.start'))
  .option('--dir <dir>', t('help.dir'))
  .option('--lang <lang>', t('help.start.lang'))
  .option('--port <port>', t('help.start.port'), port)
  .option('--force', t('help.start.force'))
  .action((opts) => run(async () => (await lab()).startCommand(opts))());

program.command('stop').description(t('help.stop')).option('--dir <dir>', t('help.dir')).action((opts) => run(async () => (await lab()).stopCommand(opts))());
program.command('restart').description(t('help.restart')).option('--dir <dir>', t('help.dir')).action((opts) => run(async () => (await lab()).restartCommand(opts))());
program.command('status').description(t('help.status')).option('--dir <dir>', t('help.dir')).action((opts) => run(async () => (await lab()).statusCommand(opts))());

program
  .command('probe')
  .description(t('help.probe'))
  .argument('[key]', t('help.probe.key'))
  .argument('[body]', t('help.probe.body'))
  .option('--dir <dir>', t('help.dir'))
  .option('--port <port>', t('help.probe.port'), port)
  .action((key, body, opts) => run(async () => (await lab()).probeCommand(key, body, opts))());

program.command('ledger').description(t('help.ledger')).option('--dir <dir>', t('help.dir')).action((opts) => run(async () => (await lab()).ledgerCommand(opts))());
program.command('show').description(t('help.show')).argument('<step>', t('help.step')).option('--dir <dir>', t('help.dir')).action((step, opts) => run(async () => (await lab()).showCommand(step, opts))());
program
  .command('hint')
  .description(t('help.hint'))
  .argument('<step>', t('help.step'))
  .option('--dir <dir>', t('help.dir'))
  .option('--reset', t('help.hint.reset'))
  .action((step, opts) => run(async () => (await lab()).hintCommand(step, opts))());

const collect = (value: string, previous: string[] = []) => [...previous, value];

program
  .command('check')
  .description(t('help.check'))
  .argument('[steps...]', t('help.check.steps'))
  .option('--dir <dir>', t('help.dir'))
  .option('--reporter <name>', 'human (default), json, junit, tap or github; repeat or use commas for several; NAME=FILE writes json, junit or tap to FILE', collect)
  .option('--output <file>', 'the file the json, junit or tap reporter writes (default: stdout)')
  .option('--config <file>', 'grading config with "points" and "required" (default: idem-lab.json in the workspace)')
  .option('--sandbox <mode>', t('help.sandbox') + ' (default: auto)')
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
  .option('--sandbox <mode>', t('help.sandbox') + ' (default: required)')
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

program
  .command('watch')
  .description(t('help.watch'))
  .argument('[step]', t('help.watch.step'))
  .option('--dir <dir>', t('help.dir'))
  .action((step, opts) => run(async () => (await import('../lab/watch.js')).watchCommand(step, opts))());

program
  .command('menu')
  .description(t('help.menu'))
  .option('--dir <dir>', t('help.dir'))
  .action((opts) => run(async () => (await import('../lab/menu.js')).menuCommand(opts))());

// Every command takes --lang (read above); start documents its own.
for (const command of program.commands) {
  if (!command.options.some((o) => o.long === '--lang')) command.option('--lang <lang>', t('help.lang'));
}

/** The arguments without --lang and --dir and their values: none left means the menu. */
function withoutGlobalOptions(list: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < list.length; i++) {
    if (list[i] === '--lang' || list[i] === '--dir') i++;
    else if (!/^--(?:lang|dir)=/.test(list[i])) out.push(list[i]);
  }
  return out;
}

try {
  if (withoutGlobalOptions(args).length === 0) {
    exitCode = await (await import('../lab/menu.js')).menuCommand({ dir: argValue(args, 'dir') });
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
