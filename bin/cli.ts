/**
 * idem-lab: the command line (loaded by idem-lab.ts, the entry point). Parses arguments and hands off to lab/ (the runner) and
 * grader/ (the checks). Exit codes: 0 done or all passed, 1 a check failed, 2 usage or setup error.
 */
import fs from 'node:fs';
import path from 'node:path';
import stringWidth from 'string-width';
import { Command, CommanderError, Help, InvalidArgumentError } from 'commander';
import { SetupError } from '../grader/failure.js';
import { fileProblem } from '../lab/safe-fs.js';
import { findWorkspace, workspaceDir } from '../lab/paths.js';
import { chooseLanguage, language, setLanguage, t } from '../i18n/index.js';

// The commands load their modules when they run, so `--help` does not pay for undici,
// better-sqlite3, execa and marked.
const lab = () => import('./commands.js');
const grader = () => import('./check-command.js');
const cohort = () => import('./grade-command.js');
const ci = () => import('./ci.js');

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
    const state = JSON.parse(fs.readFileSync(path.join(dir !== undefined ? path.resolve(dir) : findWorkspace(), '.idem-lab', 'state.json'), 'utf8')) as { lang?: unknown };
    return typeof state.lang === 'string' ? state.lang : undefined;
  } catch {
    return undefined;
  }
}

// The language is chosen before anything is printed: --lang, else the workspace's, else the locale.
const args = process.argv.slice(2);
const chosen = chooseLanguage(argValue(args, 'lang'), workspaceLanguage(argValue(args, 'dir')));
setLanguage(chosen.lang);
// An unknown --lang is a usage error (exit 2), said in the language the run would otherwise speak.
if (chosen.unknown !== undefined) {
  console.error(`idem-lab: ${t('cli.lang.unknown', { lang: chosen.unknown })}`);
  process.exit(2);
}

/**
 * commander's own error, as it writes it (`error: unknown command 'x'\n(Did you mean y?)`),
 * in the learner's language. commander 14 builds these texts in English inside; each has a
 * fixed form, read back here. A form not known is passed on in the catalog's frame.
 */
export function translateCommanderError(text: string): string {
  const suggestion = /\n?\(Did you mean (?:one of )?(.+?)\?\)/.exec(text);
  const body = text.replace(/\n?\(Did you mean (?:one of )?.+?\?\)/, '').trim().replace(/^error: /, '');
  const forms: Array<[RegExp, (m: RegExpExecArray) => string]> = [
    [/^unknown command '(.+?)'$/, (m) => t('cli.err.unknownCommand', { command: m[1] })],
    [/^unknown option '(.+?)'$/, (m) => t('cli.err.unknownOption', { option: m[1] })],
    [/^missing required argument '(.+?)'$/, (m) => t('cli.err.missingArgument', { argument: m[1] })],
    [/^option '(.+?)' argument missing$/, (m) => t('cli.err.optionMissingArgument', { option: m[1] })],
    [/^too many arguments(?: for '(.+?)')?\. Expected (\d+) arguments? but got (\d+)\.$/, (m) => t('cli.err.tooMany', { command: m[1] ?? 'idem-lab', expected: m[2], got: m[3] })],
    [/^option '(.+?)' argument '(.*?)' is invalid\. ([\s\S]*)$/, (m) => t('cli.err.invalidArgument', { value: m[2], what: m[1], reason: m[3] })],
    [/^command-argument value '(.*?)' is invalid for argument '(.+?)'\. ([\s\S]*)$/, (m) => t('cli.err.invalidArgument', { value: m[1], what: m[2], reason: m[3] })],
  ];
  let message = t('cli.err.other', { detail: body });
  for (const [form, say] of forms) {
    const m = form.exec(body);
    if (m) {
      message = say(m);
      break;
    }
  }
  const hint = suggestion ? `\n${t('cli.err.didYouMean', { suggestion: suggestion[1] })}` : '';
  return `${t('cli.err.prefix', { message })}${hint}\n`;
}

/** commander's `[options]` and `[command]` in a usage line, in the learner's language. */
function localPlaceholders(usage: string): string {
  return usage.replace(/\[options\]/g, t('help.usage.options')).replace(/\[command\]/g, t('help.usage.command'));
}

/** commander's help with its headings and `default:` notes in the learner's language. */
class LabHelp extends Help {
  styleTitle(title: string): string {
    const titles: Record<string, Parameters<typeof t>[0]> = {
      'Usage:': 'help.usage',
      'Arguments:': 'help.arguments',
      'Options:': 'help.options',
      'Commands:': 'help.commands',
      'Global Options:': 'help.globalOptions',
    };
    return super.styleTitle(titles[title] ? t(titles[title]) : title);
  }

  /** `idem-lab [options] [command]` with the placeholders in the learner's language (`idem-lab [选项] [命令]`). */
  commandUsage(command: Command): string {
    return localPlaceholders(super.commandUsage(command));
  }

  /** Columns a term takes in a terminal: a Chinese or Korean character takes two (commander counts one). */
  displayWidth(text: string): number {
    return stringWidth(text);
  }

  subcommandTerm(command: Command): string {
    return localPlaceholders(super.subcommandTerm(command));
  }

  optionDescription(option: Parameters<Help['optionDescription']>[0]): string {
    return super.optionDescription(option).replace(/\(default: ([^)]*)\)/, (_, value: string) => `(${t('help.default', { value })})`);
  }

  formatHelp(command: Command, helper: Help): string {
    // Chinese full-width punctuation takes no space after it.
    const text = super.formatHelp(command, helper);
    return language() === 'zh' ? text.replace(`${t('help.usage')} `, t('help.usage')) : text;
  }

  argumentDescription(argument: Parameters<Help['argumentDescription']>[0]): string {
    return super.argumentDescription(argument).replace(/\(default: ([^)]*)\)/, (_, value: string) => `(${t('help.default', { value })})`);
  }
}

const program = new Command('idem-lab')
  .description(t('help.program'))
  .version('0.1.0', '-V, --version', t('help.version'))
  .helpOption('-h, --help', t('help.help'))
  .helpCommand('help [command]', t('help.helpCommand'))
  .option('--lang <lang>', t('help.lang'))
  .exitOverride()
  .showHelpAfterError(t('help.afterError'));
// Every command, also those added below, writes its errors and help in the learner's language.
function speakTheLanguage(command: Command): void {
  command.configureOutput({ outputError: (text, write) => write(translateCommanderError(text)) });
  command.createHelp = () => Object.assign(new LabHelp(), command.configureHelp());
}
speakTheLanguage(program);

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
  .option('--track <track>', t('help.start.track'))
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
program.command('statement').description(t('help.statement')).option('--dir <dir>', t('help.dir')).action((opts) => run(async () => (await lab()).statementCommand(opts))());
program.command('show').description(t('help.show')).argument('[step]', t('help.step.current')).option('--dir <dir>', t('help.dir')).action((step, opts) => run(async () => (await lab()).showCommand(step, opts))());
program
  .command('hint')
  .description(t('help.hint'))
  .argument('[step]', t('help.step.current'))
  .option('--dir <dir>', t('help.dir'))
  .option('--reset', t('help.hint.reset'))
  .action((step, opts) => run(async () => (await lab()).hintCommand(step, opts))());

program.command('solution').description(t('help.solution')).argument('[step]', t('help.step.current')).option('--dir <dir>', t('help.dir')).action((step, opts) => run(async () => (await lab()).solutionCommand(step, opts))());
program.command('reset').description(t('help.reset')).argument('<step>', t('help.step')).option('--dir <dir>', t('help.dir')).action((step, opts) => run(async () => (await lab()).resetCommand(step, opts))());
program.command('restore').description(t('help.restore')).argument('[backup]', t('help.restore.backup')).option('--dir <dir>', t('help.dir')).action((backup, opts) => run(async () => (await lab()).restoreCommand(backup, opts))());
program.command('track').description(t('help.track')).argument('[track]', t('help.track.id')).option('--dir <dir>', t('help.dir')).action((track, opts) => run(async () => (await import('./track-command.js')).trackCommand(track, opts))());

const collect = (value: string, previous: string[] = []) => [...previous, value];

program
  .command('check')
  .description(t('help.check'))
  .argument('[steps...]', t('help.check.steps'))
  .option('--dir <dir>', t('help.dir'))
  .option('--reporter <name>', t('help.check.reporter'), collect)
  .option('--output <file>', t('help.check.output'))
  .option('--config <file>', t('help.check.config'))
  .option('--seed <n>', t('help.check.seed'))
  .option('--sandbox <mode>', t('help.sandbox') + ' (default: auto)')
  .option('--track <track>', t('help.check.track'))
  .option('--config-sha256 <hex>', t('help.check.configSha256'))
  .option('--time-limit <seconds>', t('help.check.timeLimit'))
  .addHelpText('after', `\n${t('help.check.exit')}`)
  .action((steps, opts) =>
    run(async () => {
      // The interpreter look-up and the sandbox probe run while the grader's modules load.
      const { prewarm } = await import('../grader/prewarm.js');
      prewarm(workspaceDir(opts), opts.sandbox);
      return (await grader()).checkCommand(steps, opts);
    })(),
  );

program
  .command('grade')
  .description(t('help.grade'))
  .argument('<dirs...>', t('help.grade.dirs'))
  .option('--jobs <n>', t('help.grade.jobs'), '1')
  .option('--csv <file>', t('help.grade.csv'))
  .option('--json <file>', t('help.grade.json'))
  .option('--config <file>', t('help.grade.config'))
  .option('--timeout <seconds>', t('help.grade.timeout'), '180')
  .option('--shard <k/n>', t('help.grade.shard'))
  .option('--sandbox <mode>', t('help.sandbox') + ' (default: required)')
  .option('--track <track>', t('help.grade.track'))
  .option('--feedback <dir>', t('help.grade.feedback'))
  .addHelpText('after', `\n${t('help.grade.exit')}`)
  .action((dirs, opts) => run(async () => (await cohort()).gradeCommand(dirs, opts))());

program
  .command('gradebook')
  .description(t('help.gradebook'))
  .command('merge')
  .description(t('help.gradebook.merge'))
  .argument('<files...>', t('help.gradebook.merge.files'))
  .option('--json <file>', t('help.gradebook.merge.json'))
  .option('--csv <file>', t('help.gradebook.merge.csv'))
  .option('--update <file>', t('help.gradebook.merge.update'))
  .option('--feedback <dir>', t('help.grade.feedback'))
  .addHelpText('after', `\n${t('help.gradebook.merge.exit')}`)
  .action((files, opts) => run(async () => (await cohort()).mergeCommand(files, opts))());

program
  .command('roster')
  .description(t('help.roster'))
  .argument('<file>', t('help.roster.file'))
  .option('--org <org>', t('help.roster.org'))
  .option('--assignment <prefix>', t('help.roster.assignment'))
  .option('--only <repo>', t('help.roster.only'))
  .action((file, opts) => run(async () => (await import('./roster.js')).rosterCommand(file, opts))());

program
  .command('ci')
  .description(t('help.ci'))
  .command('init')
  .description(t('help.ci.init'))
  .option('--dir <dir>', t('help.ci.dir'))
  .option('--classroom', t('help.ci.classroom'))
  .option('--package <spec>', t('help.ci.package'))
  .option('--cohort', t('help.ci.cohort'))
  .option('--shards <n>', t('help.ci.shards'))
  .option('--gradescope', t('help.ci.gradescope'))
  .option('--exercism', t('help.ci.exercism'))
  .option('--track <track>', t('help.ci.track'))
  .option('--before <date>', t('help.ci.before'))
  .option('--force', t('help.ci.force'))
  .action((opts) => run(async () => (await ci()).ciInitCommand(opts))());

program
  .command('chaos')
  .description(t('help.chaos'))
  .option('--dir <dir>', t('help.dir'))
  .option('--payments <n>', t('help.chaos.payments'))
  .option('--loss <p>', t('help.chaos.loss'))
  .option('--seed <n>', t('help.chaos.seed'))
  .option('--no-key', t('help.chaos.noKey'))
  .option('--timeout <seconds>', t('help.chaos.timeout'))
  .option('--ascii', t('help.chaos.ascii'))
  .option('--sandbox <mode>', t('help.sandbox') + ' (default: auto)')
  .addHelpText('after', `\n${t('help.chaos.exit')}`)
  .action((opts) => run(async () => (await import('./chaos-command.js')).chaosCommand(opts))());

program
  .command('watch')
  .description(t('help.watch'))
  .argument('[step]', t('help.watch.step'))
  .option('--dir <dir>', t('help.dir'))
  .action((step, opts) => run(async () => (await import('./watch.js')).watchCommand(step, opts))());

program
  .command('menu')
  .description(t('help.menu'))
  .option('--dir <dir>', t('help.dir'))
  .action((opts) => run(async () => (await import('./menu.js')).menuCommand(opts))());

// Every command takes --lang (read above); start documents its own.
for (const command of program.commands) {
  if (!command.options.some((o) => o.long === '--lang')) command.option('--lang <lang>', t('help.lang'));
}
const everyCommand = (command: Command): Command[] => [command, ...command.commands.flatMap(everyCommand)];
for (const command of everyCommand(program)) speakTheLanguage(command);

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
    exitCode = await (await import('./menu.js')).menuCommand({ dir: argValue(args, 'dir') });
  } else {
    await program.parseAsync(process.argv);
  }
} catch (err) {
  if (err instanceof CommanderError) {
    exitCode = err.exitCode === 0 ? 0 : 2;
  } else if (err instanceof SetupError) {
    console.error(`idem-lab: ${err.message}`);
    exitCode = 2;
  } else if (fileProblem(err)) {
    // a full disk, a read-only folder, a refused permission: one sentence, no stack trace
    console.error(`idem-lab: ${fileProblem(err)?.message}`);
    exitCode = 2;
  } else {
    console.error(`idem-lab: ${(err as Error).stack ?? err}`);
    exitCode = 2;
  }
}
process.exitCode = exitCode;
