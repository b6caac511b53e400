/**
 * `npm run soak`: the race steps (05 and 06, and 12 of the advanced track) graded over and
 * over on the fixtures, to show that a wrong solution is caught every time, not by luck, and
 * that a correct one passes every time. For each fixture it grades the steps SOAK_RUNS
 * times (default 100) and prints how many runs gave the verdict fixtures/matrix.ts (or
 * fixtures/advanced-matrix.ts) expects; a run the grader found inconclusive (the machine
 * too busy, exit 2) is counted apart, never as right. `--load N` keeps N busy loops running
 * meanwhile, each in a session of its own (default 0), `--disk N` N disk writers (default 0:
 * each writes and fsyncs 8 MiB files in a temporary folder, over and over), as on a loaded
 * machine; they are stopped by pid, and end themselves if the soak is killed. `--jobs N` grades N runs at once (as `idem-lab grade --jobs N` does workspaces).
 * Under each fixture it lists what the failures said (each kind with its count), so a
 * wrong fixture is seen to fail for its reason. Exit 0 when every count is full, 1 otherwise. Not part of `npm test`: it takes long.
 *
 * Options: N or --runs N, --load N, --disk N, --jobs N, --track basic|advanced, --all (both
 * tracks: 05 and 06 of the basic fixtures, then 12 of the advanced ones), --list (print the
 * fixtures and steps it would soak, and stop), --only NAME[,NAME...] (fixtures), --steps
 * 05[,06] (default 05,06; 12 for the advanced track), --sandbox auto|required|off (default
 * auto, as `idem-lab check`: servers in bubblewrap where it starts). At the end, a table:
 * one row per fixture and step, with the verdict expected and how many runs gave it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { grade } from '../grader/engine.js';
import { runPool } from '../grader/pool.js';
import { resolveInterpreter } from '../grader/server.js';
import { sandboxFor } from '../bin/shared/check.js';
import { installExitHooks } from '../grader/cleanup.js';
import { MATRIX, P } from '../fixtures/matrix.js';
import { ADVANCED_MATRIX } from '../fixtures/advanced-matrix.js';
import { racySteps } from '../fixtures/build.js';
import { openWorkspace } from '../lab/workspace.js';
import { ADVANCED_STEPS, STEPS } from '../steps/index.js';
import { busyLoopSource, diskWriterSource, fixtureWorkspace } from '../test/support.js';
import { reasonText } from '../test/matrix/settle.js';

/** What `npm run soak -- --help` prints, and a bad option gets with exit code 2. */
const USAGE = `usage: npm run soak -- [N | --runs N] [--load N] [--disk N] [--jobs N] [--track basic|advanced | --all]
                        [--only NAME[,NAME...]] [--steps 05[,06]] [--sandbox auto|required|off] [--list] [--help]
  N, --runs N     runs per fixture and step (default SOAK_RUNS or 100)
  --load N        busy loops kept running meanwhile (default 0)
  --disk N        disk writers kept running meanwhile (default 0)
  --jobs N        runs graded at once (default 1)
  --track T       basic (default: 05 and 06) or advanced (12); --all soaks both
  --only NAMES    only these fixtures; --steps IDS only these steps
  --sandbox MODE  auto (default), required or off
  --list          print the fixtures and steps it would soak, and stop`;

/** The command line, or usage and exit code 2 for an option it does not know. */
function readArgs() {
  try {
    return parseArgs({
      allowPositionals: true,
      options: {
        help: { type: 'boolean', default: false },
        all: { type: 'boolean', default: false },
        list: { type: 'boolean', default: false },
        runs: { type: 'string', default: process.env.SOAK_RUNS ?? '100' },
        load: { type: 'string', default: '0' },
        disk: { type: 'string', default: '0' },
        jobs: { type: 'string', default: '1' },
        track: { type: 'string', default: 'basic' },
        only: { type: 'string' },
        steps: { type: 'string' },
        sandbox: { type: 'string', default: 'auto' },
      },
    });
  } catch (err) {
    console.error(`soak: ${(err as Error).message}\n${USAGE}`);
    process.exit(2);
  }
}
const { values, positionals } = readArgs();
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
for (const [name, value] of [['load', values.load], ['disk', values.disk], ['jobs', values.jobs]] as const) {
  const n = Number(value);
  if (!Number.isInteger(n) || n < (name === 'jobs' ? 1 : 0)) {
    console.error(`soak: --${name} must be a whole number of ${name === 'jobs' ? 1 : 0} or more (got ${value})\n${USAGE}`);
    process.exit(2);
  }
}
const runs = Number(positionals[0] ?? values.runs);
if (!Number.isInteger(runs) || runs < 1) {
  console.error(`soak: the number of runs must be a whole number from 1 (got ${positionals[0] ?? values.runs})`);
  process.exit(2);
}
const jobs = Math.max(1, Number(values.jobs));
let advanced = values.track === 'advanced';
let stepIds: string[] = [];
let steps: typeof STEPS = [];
/** Sets the track soaked now: its steps (--steps, or 05,06 and 12). */
const onTrack = (isAdvanced: boolean) => {
  advanced = isAdvanced;
  stepIds = (values.steps ?? (advanced ? '12' : '05,06')).split(',');
  steps = (advanced ? ADVANCED_STEPS : STEPS).filter((s) => stepIds.includes(s.id));
};
onTrack(advanced);

/**
 * The fixtures worth soaking: every correct design, and every wrong one that fails a race
 * step without being declared racy there (a race it must lose every time).
 */
function soaked(): Array<{ name: string; expect: Record<string, string> }> {
  if (advanced) {
    const chosen = values.only ? values.only.split(',') : Object.keys(ADVANCED_MATRIX);
    return chosen.flatMap((name) => {
      const row = ADVANCED_MATRIX[name];
      if (!row) throw new Error(`no advanced fixture ${name}`);
      const racy = racySteps(name);
      const expect = Object.fromEntries(steps.filter((s) => !racy.includes(s.id)).map((s) => [s.id, row[s.id] ?? P]));
      const fails = Object.values(expect).some((v) => v !== P);
      const correct = Object.keys(row).length === 0;
      return correct || fails ? [{ name, expect }] : [];
    });
  }
  const chosen = values.only ? values.only.split(',') : Object.keys(MATRIX);
  return chosen.flatMap((name) => {
    const row = MATRIX[name];
    if (!row) throw new Error(`no fixture ${name}`);
    const racy = racySteps(name);
    const expect = Object.fromEntries(steps.filter((s) => !racy.includes(s.id)).map((s) => [s.id, row[STEPS.indexOf(s)]]));
    const fails = Object.values(expect).some((v) => v !== P);
    const correct = row.every((v) => v === P);
    return correct || fails ? [{ name, expect }] : [];
  });
}

const diskDir = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-soak-disk-'));
const busy: ChildProcess[] = [
  // Each in a session of its own, as other jobs on a runner are: with the kernel's
  // autogroups (sched_autogroup_enabled), loops left in the soak's session would share that
  // one group's weight with the grader and hardly slow the servers (stopped by pid on exit).
  ...Array.from({ length: values.list ? 0 : Number(values.load) }, () => spawn(process.execPath, ['-e', busyLoopSource()], { stdio: 'ignore', detached: true })),
  ...Array.from({ length: values.list ? 0 : Number(values.disk) }, (_, i) => spawn(process.execPath, ['-e', diskWriterSource(), path.join(diskDir, `w${i}`)], { stdio: 'ignore', detached: true })),
];
/** Stops the busy loops by pid, once; never throws. */
const stopBusy = () => {
  fs.rmSync(diskDir, { recursive: true, force: true });
  for (const p of busy.splice(0)) {
    try {
      if (p.pid) process.kill(p.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
};
process.on('exit', stopBusy);
installExitHooks();

let allFull = true;
/** The final table's rows: fixture, step, verdict expected, right runs, inconclusive runs, runs. */
const table: Array<{ name: string; step: string; want: string; right: number; inconclusive: number; runs: number }> = [];
const { sandbox } = await sandboxFor(values.sandbox, 'auto');
for (const track of values.all ? [false, true] : [advanced]) {
onTrack(track);
if (values.list) {
  for (const { name, expect } of soaked()) console.log(`${name.padEnd(40)} ${Object.entries(expect).map(([id, v]) => `${id} ${v === P ? 'pass' : 'fail'}`).join('   ')}`);
  continue;
}
console.log(`soak: ${runs} runs of steps ${stepIds.join(', ')} per fixture, ${values.load} busy loop(s), ${values.disk} disk writer(s), ${jobs} at once, ${sandbox ? `sandboxed (${sandbox.network} network)` : 'no sandbox'}`);
for (const { name, expect } of soaked()) {
  const ws = fixtureWorkspace(name);
  try {
    const { command } = openWorkspace(ws.dir);
    const resolved = { ...(await resolveInterpreter(command, ws.dir)), ...(sandbox ? { sandbox } : {}) };
    const hits: Record<string, number> = Object.fromEntries(Object.keys(expect).map((id) => [id, 0]));
    const seen: string[] = [];
    // What the failures said, each kind once with its count: digits and quoted values blurred, first clause only.
    const reasons = new Map<string, number>();
    const started = performance.now();
    const inconclusive: Record<string, number> = Object.fromEntries(Object.keys(expect).map((id) => [id, 0]));
    await runPool(runs, jobs, async (i) => {
      const results = await grade({ workspace: ws.dir, steps, command: resolved });
      for (const r of results) {
        const want = expect[r.id];
        if (want === undefined) continue;
        if (r.inconclusive) {
          inconclusive[r.id]++;
          const reason = `${r.id}: ${r.message.replace(/\d+/g, 'N').slice(0, 110)}`;
          reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
          continue;
        }
        const ok = want === P ? r.status === 'pass' : r.status === 'fail' && new RegExp(want).test(reasonText(r, advanced ? 'advanced' : 'basic'));
        if (r.status !== 'pass') {
          const reason = `${r.id}: ${r.message.replace(/"[^"]*"/g, '"…"').replace(/\d+/g, 'N').slice(0, 110)}`;
          reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
        }
        if (ok) hits[r.id]++;
        else if (seen.length < 3) seen.push(`run ${i + 1}, step ${r.id} ${r.status} (seed ${r.seed}): ${r.message}`);
      }
    });
    const cells = Object.entries(hits).map(([id, n]) => `${id} ${expect[id] === P ? 'pass' : 'fail'} ${n}/${runs}${inconclusive[id] ? ` (${inconclusive[id]} inconclusive)` : ''}`);
    if (Object.values(hits).some((n) => n !== runs)) allFull = false;
    for (const [id, n] of Object.entries(hits)) table.push({ name, step: id, want: expect[id] === P ? 'pass' : 'fail', right: n, inconclusive: inconclusive[id], runs });
    console.log(`${name.padEnd(28)} ${cells.join('   ')}   (${((performance.now() - started) / 1000).toFixed(0)} s)`);
    for (const line of seen) console.log(`    ${line}`);
    for (const [reason, n] of reasons) console.log(`    ${String(n).padStart(4)} × ${reason}`);
  } finally {
    ws.remove();
  }
}
}
if (table.length > 0) {
  console.log('\n| fixture | step | expected | right | inconclusive |\n|---|---|---|---|---|');
  for (const r of table) console.log(`| ${r.name} | ${r.step} | ${r.want} | ${r.right}/${r.runs} | ${r.inconclusive} |`);
}
stopBusy();
process.exitCode = allFull ? 0 : 1;
