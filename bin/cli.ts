/**
 * idem-lab: the command line. `main(argv, out)` parses the arguments and hands off to lab/
 * (the runner) and grader/ (the checks), writing through `out`, and returns the exit code:
 * 0 done or all passed, 1 a check failed, 2 usage or setup error. It never ends the process:
 * the entry point (idem-lab.ts) calls it and exits with its code, a test calls it in process.
 */
import fs from 'node:fs';
import path from 'node:path';
import stringWidth from 'string-width';
import { Command, CommanderError, Help, InvalidArgumentError } from 'commander';
import { SetupError } from '../grader/failure.js';
import { fileProblem } from '../lab/safe-fs.js';
import { findWorkspace, workspaceDir } from '../lab/paths.js';
import { chooseLanguage, language, setLanguage, t } from '../i18n/index.js';
import { processOutput, type Output } from './shared/output.js';

// The commands load their modules when they run, so `--help` does not pay for undici,
// better-sqlite3, execa and marked.
const lab = () => import('./commands.js');
const labServer = () => import('./shared/lab-server.js');
const stepTexts = () => import('./shared/step-texts.js');
const grader = () => import('./shared/check.js');
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

/** The arguments without --lang and --dir and their values: none left means the menu. */
function withoutGlobalOptions(list: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < list.length; i++) {
    if (list[i] === '--lang' || list[i] === '--dir') i++;
    else if (!/^--(?:lang|dir)=/.test(list[i])) out.push(list[i]);
  }
  return out;
}

/**
 * Runs the command line once, in this process: `argv` are the arguments after the program
 * (`process.argv.slice(2)`), `out` where everything is written (default: the process's own
 * streams). The language is chosen first (--lang, else the workspace's, else the locale in
 * `env`: LC_ALL, LC_MESSAGES, LANG; default process.env) and put back as it was on return,
 * and the commands are built anew for each call, so two calls in one process share no
 * options, language or colour (that comes from `out`). The contract's variables and limits
 * (IDEM_LAB_SEED, IDEM_LAB_REQUEST_TIMEOUT_MS, ...) are still read from process.env.
 * @returns the exit code: 0 done or all passed, 1 a check failed, 2 usage or setup error;
 *   never ends the process and never rejects for a command's error (it is printed, exit 2)
 */
export async function main(argv: readonly string[], out: Output = processOutput(), env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const before = language();
  try {
    return await runCommandLine([...argv], out, env);
  } finally {
    setLanguage(before);
  }
}

async function runCommandLine(args: string[], out: Output, env: NodeJS.ProcessEnv): Promise<number> {
  // The language is chosen before anything is printed: --lang, else the workspace's, else the locale.
  const chosen = chooseLanguage(argValue(args, 'lang'), workspaceLanguage(argValue(args, 'dir')), env);
  setLanguage(chosen.lang);
  // An unknown --lang is a usage error (exit 2), said in the language the run would otherwise speak.
  if (chosen.unknown !== undefined) {
    out.error(`idem-lab: ${t('cli.lang.unknown', { lang: chosen.unknown })}`);
    return 2;
  }

  const program = new Command('idem-lab')
    .description(t('help.program'))
    .version('0.1.0', '-V, --version', t('help.version'))
    .helpOption('-h, --help', t('help.help'))
    .helpCommand('help [command]', t('help.helpCommand'))
    .option('--lang <lang>', t('help.lang'))
    .exitOverride()
    .showHelpAfterError(t('help.afterError'));
  // Every command, also those added below, writes its errors and help in the learner's language, through `out`.
  const speakTheLanguage = (command: Command): void => {
    command.configureOutput({
      writeOut: (text) => out.write(text),
      writeErr: (text) => out.error(text.replace(/\n$/, '')),
      // Help is as wide as the report's terminal (none: commander's 80), and coloured as `out` is.
      getOutHelpWidth: () => out.columns as number, // undefined (no terminal) is commander's own default too
      getErrHelpWidth: () => (out.errStream?.isTTY ? out.errStream.columns : undefined) as number,
      getOutHasColors: () => out.c.level > 0,
      getErrHasColors: () => out.c.level > 0,
      outputError: (text, write) => write(translateCommanderError(text)),
    });
    command.createHelp = () => Object.assign(new LabHelp(), command.configureHelp());
  };
  speakTheLanguage(program);

  let exitCode = 0;
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
    .action((opts) => run(async () => (await labServer()).startCommand({ ...opts, out }))());

  program.command('stop').description(t('help.stop')).option('--dir <dir>', t('help.dir')).action((opts) => run(async () => (await labServer()).stopCommand({ ...opts, out }))());
  program.command('restart').description(t('help.restart')).option('--dir <dir>', t('help.dir')).action((opts) => run(async () => (await labServer()).restartCommand({ ...opts, out }))());
  program.command('status').description(t('help.status')).option('--dir <dir>', t('help.dir')).action((opts) => run(async () => (await lab()).statusCommand({ ...opts, out }))());

  program
    .command('probe')
    .description(t('help.probe'))
    .argument('[key]', t('help.probe.key'))
    .argument('[body]', t('help.probe.body'))
    .option('--dir <dir>', t('help.dir'))
    .option('--port <port>', t('help.probe.port'), port)
    .action((key, body, opts) => run(async () => (await lab()).probeCommand(key, body, { ...opts, out }))());

  program.command('ledger').description(t('help.ledger')).option('--dir <dir>', t('help.dir')).action((opts) => run(async () => (await lab()).ledgerCommand({ ...opts, out }))());
  program.command('statement').description(t('help.statement')).option('--dir <dir>', t('help.dir')).action((opts) => run(async () => (await lab()).statementCommand({ ...opts, out }))());
  program.command('show').description(t('help.show')).argument('[step]', t('help.step.current')).option('--dir <dir>', t('help.dir')).action((step, opts) => run(async () => (await stepTexts()).showCommand(step, { ...opts, out }))());
  program
    .command('hint')
    .description(t('help.hint'))
    .argument('[step]', t('help.step.current'))
    .option('--dir <dir>', t('help.dir'))
    .option('--reset', t('help.hint.reset'))
    .action((step, opts) => run(async () => (await stepTexts()).hintCommand(step, { ...opts, out }))());

  program.command('solution').description(t('help.solution')).argument('[step]', t('help.step.current')).option('--dir <dir>', t('help.dir')).action((step, opts) => run(async () => (await lab()).solutionCommand(step, { ...opts, out }))());
  program.command('reset').description(t('help.reset')).argument('<step>', t('help.step')).option('--dir <dir>', t('help.dir')).action((step, opts) => run(async () => (await lab()).resetCommand(step, { ...opts, out }))());
  program.command('restore').description(t('help.restore')).argument('[backup]', t('help.restore.backup')).option('--dir <dir>', t('help.dir')).action((backup, opts) => run(async () => (await lab()).restoreCommand(backup, { ...opts, out }))());
  program.command('track').description(t('help.track')).argument('[track]', t('help.track.id')).option('--dir <dir>', t('help.dir')).action((track, opts) => run(async () => (await import('./track-command.js')).trackCommand(track, { ...opts, out }))());

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
        return (await grader()).checkCommand(steps, { ...opts, out });
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
    .action((dirs, opts) => run(async () => (await cohort()).gradeCommand(dirs, { ...opts, out }))());

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
    .action((files, opts) => run(async () => (await cohort()).mergeCommand(files, { ...opts, out }))());

  program
    .command('roster')
    .description(t('help.roster'))
    .argument('<file>', t('help.roster.file'))
    .option('--org <org>', t('help.roster.org'))
    .option('--assignment <prefix>', t('help.roster.assignment'))
    .option('--only <repo>', t('help.roster.only'))
    .action((file, opts) => run(async () => (await import('./roster.js')).rosterCommand(file, { ...opts, out }))());

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
    .action((opts) => run(async () => (await ci()).ciInitCommand({ ...opts, out }))());

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
    .action((opts) => run(async () => (await import('./chaos-command.js')).chaosCommand(opts, out.write, out.c))());

  program
    .command('watch')
    .description(t('help.watch'))
    .argument('[step]', t('help.watch.step'))
    .option('--dir <dir>', t('help.dir'))
    .action((step, opts) => run(async () => (await import('./watch.js')).watchCommand(step, { ...opts, out }))());

  program
    .command('menu')
    .description(t('help.menu'))
    .option('--dir <dir>', t('help.dir'))
    .action((opts) => run(async () => (await import('./menu.js')).menuCommand({ ...opts, out }))());

  // Every command takes --lang (read above); start documents its own.
  for (const command of program.commands) {
    if (!command.options.some((o) => o.long === '--lang')) command.option('--lang <lang>', t('help.lang'));
  }
  const everyCommand = (command: Command): Command[] => [command, ...command.commands.flatMap(everyCommand)];
  for (const command of everyCommand(program)) speakTheLanguage(command);

  try {
    if (withoutGlobalOptions(args).length === 0) {
      exitCode = await (await import('./menu.js')).menuCommand({ dir: argValue(args, 'dir'), out });
    } else {
      await program.parseAsync(args, { from: 'user' });
    }
  } catch (err) {
    if (err instanceof CommanderError) {
      exitCode = err.exitCode === 0 ? 0 : 2;
    } else if (err instanceof SetupError) {
      out.error(`idem-lab: ${err.message}`);
      exitCode = 2;
    } else if (fileProblem(err)) {
      // a full disk, a read-only folder, a refused permission: one sentence, no stack trace
      out.error(`idem-lab: ${fileProblem(err)?.message}`);
      exitCode = 2;
    } else {
      out.error(`idem-lab: ${(err as Error).stack ?? err}`);
      exitCode = 2;
    }
  }
  return exitCode;
}
