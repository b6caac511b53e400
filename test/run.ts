/**
 * `npm test`: every test file under Node's test runner, two files at a time by default
 * (IDEM_TEST_JOBS=1 runs them one by one). The fixture matrices are split into shards
 * (test/matrix/) and started first, longest first, so that the two lanes end together;
 * grading two solutions at once is what `idem-lab grade --jobs 2` promises instructors.
 * Exit code: the test runner's (0 all passed, 1 a test failed).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

/** Files that run longest (minutes), started first in this order; the rest follow by name. */
const LONGEST_FIRST = ['advanced.test.js', 'advanced-2.test.js', 'solutions.test.js', 'solutions-2.test.js'];

const jobs = Number(process.env.IDEM_TEST_JOBS ?? 2);
if (!Number.isInteger(jobs) || jobs < 1) {
  console.error(`IDEM_TEST_JOBS must be a whole number of at least 1 (got ${process.env.IDEM_TEST_JOBS})`);
  process.exit(2);
}
const named = process.argv.slice(2);
const all = fs.readdirSync(here).filter((f) => f.endsWith('.test.js'));
const chosen = named.length > 0 ? all.filter((f) => named.some((n) => f.startsWith(n))) : all;
const order = (f: string) => (LONGEST_FIRST.includes(f) ? LONGEST_FIRST.indexOf(f) : LONGEST_FIRST.length);
const files = chosen.sort((a, b) => order(a) - order(b) || a.localeCompare(b)).map((f) => path.join(here, f));
if (files.length === 0) {
  console.error(`no test file starts with ${named.join(', ')}`);
  process.exit(2);
}
// Named files: say which ran, so that a name that matched more (or fewer) files than meant shows at once.
if (named.length > 0) console.error(`running ${files.length} test file(s): ${files.map((f) => path.basename(f)).join(', ')}`);
// The test runner leads a process group of its own, and a signal sent to this process (a CI
// timeout's SIGTERM, a Ctrl-C) is passed to the whole group: every test file then runs its
// exit tasks (test/support.ts), which stop the servers it started and remove its folders.
const run = spawn(process.execPath, ['--test', `--test-concurrency=${jobs}`, ...files], { stdio: 'inherit', detached: true });
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    try {
      process.kill(-run.pid!, signal);
    } catch {
      // the runner has ended
    }
  });
}
run.on('exit', (code, signal) => process.exit(code ?? (signal ? 128 + os.constants.signals[signal] : 1)));
