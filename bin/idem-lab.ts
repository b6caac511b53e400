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

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 65535) throw new InvalidArgumentError('a port is a whole number from 1 to 65535');
  return n;
}

const DIR_HELP = 'the workspace folder (default: the current directory)';
const LANG_HELP = 'the language: en, ko or zh (default: the workspace\'s, else LANG / LC_ALL, else en)';

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
  .description('Press twice, charge once: a hands-on lab for idempotent APIs, and its grader.')
  .version('0.1.0')
  .exitOverride()
  .showHelpAfterError('(idem-lab --help lists the commands)');

let exitCode = 0;
const run = (action: () => Promise<number> | number) => async () => {
  exitCode = await action();
};

program
  .command('start')
  .description('lay out the workspace (never overwriting your changes) and start the payment server')
  .option('--dir <dir>', DIR_HELP)
  .option('--lang <lang>', 'the language of the lab sheet and of every message: en, ko or zh (kept by the workspace)')
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

program
  .command('check')
  .description('grade steps against your files and your server, live (all steps when none is named)')
  .argument('[steps...]', 'step ids (02) or slugs (replay)')
  .option('--dir <dir>', DIR_HELP)
  .action((steps, opts) => run(async () => (await grader()).checkCommand(steps, opts))());

program
  .command('watch')
  .description('check the current step each time you save server.py or its file, and move on when it passes')
  .argument('[step]', 'the step to start with (default: the first one not passing yet)')
  .option('--dir <dir>', DIR_HELP)
  .action((step, opts) => run(async () => (await import('../lab/watch.js')).watchCommand(step, opts))());

program
  .command('menu')
  .description('the menu `idem-lab` alone opens in a terminal: steps, their state, the server, and actions')
  .option('--dir <dir>', DIR_HELP)
  .action((opts) => run(async () => (await import('../lab/menu.js')).menuCommand(opts))());

// Every command takes --lang (read above); start documents its own.
for (const command of program.commands) {
  if (!command.options.some((o) => o.long === '--lang')) command.option('--lang <lang>', LANG_HELP);
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
