/**
 * A real terminal for tests: a tmux session on a private socket (a file of its own), running one command.
 * Tests type into it with `keys` and read the screen with `screen`, as a person would.
 * Stopped with `kill` (the private tmux server only: never anything by name).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';

/** Whether tmux is installed. */
export function tmuxAvailable(): boolean {
  return spawnSync('sh', ['-c', 'command -v tmux'], { stdio: 'ignore' }).status === 0;
}

/** Quotes one word for sh. */
function sh(word: string): string {
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** One tmux session running one command in a terminal of the given size. */
export class Terminal {
  /** The private tmux socket, a path unique per terminal, removed by `kill`. */
  readonly socket = path.join(os.tmpdir(), `idem-lab-tmux-${process.pid}-${crypto.randomBytes(4).toString('hex')}`);

  /**
   * Starts `argv` in `cwd` with `env` added to the environment (LANG=C.UTF-8 and LC_ALL,
   * LC_MESSAGES empty unless `env` says otherwise; a null value removes the variable). When the command ends the
   * pane shows `[exited N]` and stays open, so its last screen can still be read.
   * @param size columns and rows (default 120 × 45)
   */
  constructor(argv: string[], options: { cwd: string; env?: Record<string, string | null>; columns?: number; rows?: number }) {
    // A neutral locale unless the test asks for one, so the language is English by default.
    const vars = { LC_ALL: '', LC_MESSAGES: '', LANG: 'C.UTF-8', ...options.env };
    const env = Object.entries(vars)
      .map(([k, v]) => (v === null ? `-u ${k}` : `${k}=${sh(v)}`))
      .sort((a, b) => Number(b.startsWith('-u')) - Number(a.startsWith('-u')))
      .join(' ');
    const line = `env ${env} ${argv.map(sh).join(' ')}; echo "[exited $?]"; sleep 3600`;
    // -u: UTF-8 whatever the locale of the process running the tests.
    this.tmux('-u', '-f', '/dev/null', 'new-session', '-d', '-s', 'main', '-x', String(options.columns ?? 120), '-y', String(options.rows ?? 45), '-c', options.cwd, line);
  }

  private tmux(...args: string[]): string {
    return execFileSync('tmux', ['-S', this.socket, ...args], { encoding: 'utf8' });
  }

  /** The visible screen, wrapped lines joined, trailing blank lines dropped. */
  screen(): string {
    return this.tmux('capture-pane', '-p', '-J', '-t', 'main').replace(/\n+$/, '');
  }

  /** The visible screen with its colour escapes (SGR sequences) kept. */
  screenWithEscapes(): string {
    return this.tmux('capture-pane', '-p', '-e', '-J', '-t', 'main');
  }

  /**
   * Types keys, in tmux send-keys names: 'Enter', 'Down', 'Up', 'C-c', or literal text.
   */
  keys(...keys: string[]): void {
    this.tmux('send-keys', '-t', 'main', ...keys);
  }

  /** Types text literally (no key names). */
  type(text: string): void {
    this.tmux('send-keys', '-t', 'main', '-l', text);
  }

  /**
   * Waits until the screen matches `pattern`.
   * @returns the screen that matched
   * @throws Error with the last screen after `timeoutMs` (default 20 s)
   */
  async waitFor(pattern: RegExp, timeoutMs = 20_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    let last = '';
    while (Date.now() < deadline) {
      last = this.screen();
      if (pattern.test(last)) return last;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`the screen never showed ${pattern} within ${timeoutMs} ms; it shows:\n${last}`);
  }

  /** Stops this terminal's tmux server and so the command in it (SIGHUP), and removes its socket. Never throws. */
  kill(): void {
    try {
      this.tmux('kill-server');
    } catch {
      // already gone
    }
    fs.rmSync(this.socket, { force: true });
  }
}
