/**
 * Where a command writes, given to it rather than taken from the process: the process's
 * own streams at the entry (cli.ts), a capture in a test that runs the command, the menu or
 * watch mode in process (test/commands-inprocess.test.ts). Every command of bin/ prints
 * through one.
 */
import { PassThrough, Writable } from 'node:stream';
import { Chalk, type ChalkInstance } from 'chalk';
import { colourFor } from '../../grader/reporters/human.js';

/** The keys side of a terminal: what the menu's prompts and watch mode's keys read. */
export interface KeyInput extends NodeJS.ReadableStream {
  /** True for a terminal (keys can be read one at a time). */
  isTTY?: boolean;
  /** Raw mode on or off, on a real terminal (node:tty ReadStream); absent on other streams. */
  setRawMode?(mode: boolean): unknown;
}

/** A command's output. */
export interface Output {
  /** Writes `text` and a newline to the report (stdout). */
  log(text?: string): void;
  /** Writes `text` and a newline to the complaints (stderr). */
  error(text: string): void;
  /** Writes `text` to the report as it is, with no newline added (a screen clear, say). */
  write(text: string): void;
  /** Whether the report goes to a terminal: the screen may be cleared, colour is on unless NO_COLOR. */
  isTTY: boolean;
  /** The terminal's width in columns; undefined when the report goes to no terminal. */
  columns: number | undefined;
  /** chalk, colouring or not as human.ts colourFor decides for the report's stream (NO_COLOR, FORCE_COLOR, a terminal). */
  c: ChalkInstance;
  /**
   * The terminal the menu and watch mode take keys from, and the stream a prompt draws on
   * (the report's); undefined when keys cannot be read one at a time (stdin is no
   * terminal, as in CI): then nothing waits for a key. The menu also needs `isTTY`.
   */
  terminal: { input: KeyInput; output: NodeJS.WritableStream } | undefined;
  /**
   * The complaints side as the stream it is, where progress may be rewritten in place on a
   * terminal (`grade`'s one line): the process's stderr; absent for a capture, where
   * progress goes through `error` a line at a time.
   */
  errStream?: { isTTY?: boolean; columns?: number; write(text: string): unknown };
}

/** The process's own streams: stdout and stderr, and stdin as the keys side when it is a terminal. */
export function processOutput(): Output {
  const { stdout, stderr, stdin } = process;
  const isTTY = stdout.isTTY === true;
  return {
    log: (text = '') => void stdout.write(`${text}\n`),
    error: (text) => void stderr.write(`${text}\n`),
    write: (text) => void stdout.write(text),
    isTTY,
    columns: isTTY ? stdout.columns : undefined,
    c: colourFor(stdout),
    terminal: stdin.isTTY === true ? { input: stdin, output: stdout } : undefined,
    errStream: stderr,
  };
}

/** The output a command was given (`options.out`), else the process's own. */
export function outputOf(options: { out?: Output } | undefined): Output {
  return options?.out ?? processOutput();
}

/** A captured Output (see captureOutput): what was written to each side, and the keys side to type into. */
export interface CapturedOutput extends Output {
  /** Everything written to the report so far, as written (colour codes and screen clears included). */
  stdout(): string;
  /** Everything written to the complaints so far. */
  stderr(): string;
  /** Keys for the menu or watch mode: write `\r`, `\x1b[B` (Down), `q` ... (present when `keys` was asked for). */
  keys: PassThrough | undefined;
}

/**
 * An Output that keeps what is written, for a test or any caller that wants the text.
 * @param options.tty report to a "terminal" (screen clears, colour unless NO_COLOR; default false)
 * @param options.columns its width (default 80 when `tty`)
 * @param options.keys give it a keys side (a PassThrough), so the menu prompts and watch
 *   mode reads keys; default false: no terminal, as in CI
 * @param options.colour colour on or off (default: as colourFor decides for a terminal when `tty`, else off)
 */
export function captureOutput(options: { tty?: boolean; columns?: number; keys?: boolean; colour?: boolean } = {}): CapturedOutput {
  let out = '';
  let err = '';
  const tty = options.tty ?? false;
  // The stream a prompt draws on (@inquirer/select writes there), kept with the rest of the
  // report. Like a terminal it is never ended: each prompt ends the stream it drew on
  // (its output is piped into this one), and the next prompt draws on the same.
  const screen = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      out += chunk.toString();
      done();
    },
  });
  screen.end = function (this: Writable) {
    return this;
  } as Writable['end'];
  const keys = options.keys ? Object.assign(new PassThrough(), { isTTY: true }) : undefined;
  const c = options.colour === undefined ? colourFor({ isTTY: tty } as NodeJS.WriteStream) : new Chalk({ level: options.colour ? 1 : 0 });
  return {
    log: (text = '') => void (out += `${text}\n`),
    error: (text) => void (err += `${text}\n`),
    write: (text) => void (out += text),
    isTTY: tty,
    columns: tty ? (options.columns ?? 80) : undefined,
    c,
    terminal: keys ? { input: keys, output: screen } : undefined,
    stdout: () => out,
    stderr: () => err,
    keys,
  };
}
