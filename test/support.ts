/**
 * What the tests share: temporary workspaces built from fixtures, the CLI run as a real
 * process, and a guard that no payment server outlives a test.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { buildWorkspace } from '../fixtures/build.js';
import { PACKAGE_ROOT } from '../lab/paths.js';
import { readState } from '../lab/workspace.js';
import { main } from '../bin/cli.js';
import { captureOutput } from '../bin/shared/output.js';
import { atExit, installExitHooks } from '../grader/cleanup.js';

/** The compiled CLI entry. */
export const CLI = path.join(PACKAGE_ROOT, 'dist', 'bin', 'idem-lab.js');

/** The temporary folder of the machine, as it was when the tests started. */
const MACHINE_TMP = os.tmpdir();

/**
 * Where the grader of this test process (and of every CLI it runs) copies workspaces for
 * its servers: TMPDIR points here, so that a server left running by any check is found
 * (serversUnder looks here too). Removed when the process exits.
 */
export const GRADER_TMP = fs.mkdtempSync(path.join(MACHINE_TMP, 'idem-lab-grader-'));
process.env.TMPDIR = GRADER_TMP;
// A test file stopped by SIGINT, SIGTERM or SIGHUP (npm test interrupted, a CI timeout) runs
// no finally: these exit tasks stop the servers left in its folders and remove the folders.
installExitHooks();
atExit(() => clearAway(GRADER_TMP));

/** Stops (SIGKILL, by process group) the servers whose working directory is under `dir`, then removes `dir`. */
function clearAway(dir: string): void {
  for (const pid of serversIn(dir)) killGroupIn(pid, dir);
  fs.rmSync(dir, { recursive: true, force: true });
}

/**
 * A new empty temporary folder; removed by the returned function, or, if the test process
 * ends first (a signal, an uncaught error), by an exit task that also stops the servers
 * left running in it (a detached `idem-lab start`).
 */
export function tempDir(prefix = 'idem-lab-test-'): { dir: string; remove: () => void } {
  const dir = fs.mkdtempSync(path.join(MACHINE_TMP, prefix));
  const forget = atExit(() => clearAway(dir));
  return {
    dir,
    remove: () => {
      forget();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A temporary workspace holding `solution`'s server.py and the given (default: reference) learner files. */
export function fixtureWorkspace(solution: string, files?: Record<string, string>): { dir: string; remove: () => void } {
  const tmp = tempDir(`idem-lab-${solution.replace(/\//g, '-')}-`);
  buildWorkspace(tmp.dir, solution, files);
  return tmp;
}

/** The result of one CLI run. */
export interface CliRun {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `idem-lab ARGS` as a real process with NO_COLOR set, the C locale and no terminal, killed
 * after `timeoutMs` (default 60 s) so a hang fails the test instead of stalling it.
 */
export async function runCli(args: string[], options: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {}): Promise<CliRun> {
  const result = await execa('node', [CLI, ...args], {
    cwd: options.cwd ?? PACKAGE_ROOT,
    // A neutral locale, so the language is English unless a test asks for another.
    env: { NO_COLOR: '1', LC_ALL: '', LC_MESSAGES: '', LANG: 'C.UTF-8', ...options.env },
    reject: false,
    timeout: options.timeoutMs ?? 60_000,
    stdin: 'ignore',
  });
  return { exitCode: result.exitCode ?? -1, stdout: String(result.stdout), stderr: String(result.stderr) };
}

/**
 * Runs `idem-lab ARGS` in this process (bin/cli.ts main) with a captured, colourless output
 * and the C locale, as runCli runs it in a process: for tests that assert only the output
 * and the exit code. There is no cwd: name the workspace with --dir. Exit codes through a
 * real process, pipes, detached servers and the first hour stay with runCli.
 */
export async function runMain(args: string[]): Promise<CliRun> {
  const out = captureOutput({ colour: false });
  const exitCode = await main(args, out, { LANG: 'C.UTF-8' });
  return { exitCode, stdout: out.stdout(), stderr: out.stderr() };
}

/**
 * The pids of processes running a server.py (or server.mjs) whose working directory is
 * under `root`, or under GRADER_TMP (where the grader runs its copies of any workspace):
 * what a test must not leave behind. Read from /proc, never by killing by name.
 */
export function serversUnder(root: string): number[] {
  return [...new Set([...serversIn(root), ...serversIn(GRADER_TMP)])];
}

function serversIn(root: string): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (!/server\.(py|mjs)\b/.test(cmdline)) continue;
      if (fs.readlinkSync(`/proc/${entry}/cwd`).startsWith(root)) pids.push(Number(entry));
    } catch {
      // the process ended while we looked
    }
  }
  return pids;
}

/** Stops whatever server a test's workspace recorded (`idem-lab start`), by its process group; for a test's finally. */
export function stopRecorded(dir: string): void {
  const { pid } = readState(dir);
  if (pid) killGroupIn(pid, dir);
}

/**
 * SIGKILLs process group `pid` (or, when `pid` leads no group, that process) only while it
 * still runs in `dir` (its cwd is under it): a test's finally often meets a server that its
 * test already stopped, and the test files run two at a time with servers that use up pids
 * (the sandbox's pid offset), so a bare `kill(-pid)` of a recorded pid could hit a process
 * of the other test that got it.
 */
export function killGroupIn(pid: number, dir: string): void {
  try {
    if (!fs.readlinkSync(`/proc/${pid}/cwd`).startsWith(dir)) return;
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // Not a group leader (a server a shell block started with `&`): that process alone.
      process.kill(pid, 'SIGKILL');
    }
  } catch {
    // already gone
  }
}

/**
 * The source of a busy loop for `node -e` (a CPU kept busy, as another job on the machine):
 * it ends itself once its parent is gone (checked every million turns, a millisecond or so),
 * and after `forMs` ms when given, so that a loop spawned in a session of its own (out of
 * reach of a signal to its parent's group) never outlives what started it.
 */
export function busyLoopSource(forMs?: number): string {
  const end = forMs === undefined ? 'Infinity' : `Date.now()+${forMs}`;
  return `const p=process.ppid,end=${end};for(let i=0;;i++){if((i&0xfffff)===0&&(process.ppid!==p||Date.now()>end))process.exit()}`;
}

/**
 * The source of a disk writer for `node -e FILE` (a disk kept busy): 8 MiB written to FILE and
 * fsynced, over and over, until its parent is gone (checked before each file), as busyLoopSource.
 */
export function diskWriterSource(): string {
  return `const fs=require('fs');const p=process.ppid;const b=Buffer.alloc(8<<20,1);for(;;){if(process.ppid!==p)process.exit();const fd=fs.openSync(process.argv[1],'w');fs.writeSync(fd,b);fs.fsyncSync(fd);fs.closeSync(fd);}`;
}
