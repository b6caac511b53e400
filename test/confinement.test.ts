/**
 * Issue 18: no silent loss of confinement, and output hygiene.
 *
 * A fake bwrap that always fails (no sandbox starts) and one that fails only with
 * --unshare-net (a sandbox starts, but only on the host's network): `required` stops with
 * exit 2 and the reason; `auto` says the fallback in the human output, results.json, the
 * gradebook and as a GitHub warning. A server whose output, bodies and headers carry
 * terminal and workflow control sequences: every report shows them as escapes.
 */
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { XMLParser } from 'fast-xml-parser';
import { parse as parseCsv } from 'csv-parse/sync';
import { chooseSandboxFor, NoSandbox } from '../grader/sandbox.js';
import { noWorkflowCommands, visible, visibleDeep } from '../grader/visible.js';
import { runningServerCount } from '../grader/server.js';
import { FIXTURES_DIR, buildWorkspace, referenceFiles } from '../fixtures/build.js';
import { runCli, tempDir } from './support.js';

const saved = { ...process.env };
after(() => {
  process.env = { ...saved };
  assert.equal(runningServerCount(), 0);
});

/** The real bwrap, by absolute path (the fake execs it). */
function realBwrap(): string {
  for (const dir of (process.env.PATH ?? '/usr/bin:/bin').split(':')) {
    const file = path.join(dir, 'bwrap');
    if (dir && fs.existsSync(file)) return file;
  }
  throw new Error('bwrap is installed where the tests run (.ci/run installs bubblewrap)');
}

const fakes = tempDir('idem-lab-fake-bwrap-');
after(() => fakes.remove());
/** A bwrap that never starts a sandbox, as on a host that allows no user namespace. */
const FAILING = path.join(fakes.dir, 'bwrap-fails');
fs.writeFileSync(FAILING, "#!/bin/sh\necho 'bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n", { mode: 0o755 });
/** A bwrap that starts sandboxes, but none with a network namespace of its own (the real one otherwise). */
const NO_NET = path.join(fakes.dir, 'bwrap-no-net');
fs.writeFileSync(NO_NET, `#!/bin/sh\nfor a in "$@"; do if [ "$a" = --unshare-net ]; then echo 'bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted' >&2; exit 1; fi; done\nexec ${realBwrap()} "$@"\n`, { mode: 0o755 });

/** Control characters a student's text must never carry into an output (tab and newline are fine). */
// eslint-disable-next-line no-control-regex
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

test('chooseSandboxFor: required refuses no sandbox and a host-network one; auto says which fallback and why', async () => {
  process.env.IDEM_LAB_BWRAP = FAILING;
  await assert.rejects(chooseSandboxFor('required'), (err: unknown) => err instanceof NoSandbox && err.weakened === undefined && /No permissions/.test(err.message));
  const off = await chooseSandboxFor('auto');
  assert.equal(off.sandbox, undefined);
  assert.equal(off.confinement, 'off');
  assert.equal(off.fallback, true);
  assert.match(off.reason ?? '', /No permissions to create new namespace/);

  process.env.IDEM_LAB_BWRAP = NO_NET;
  await assert.rejects(chooseSandboxFor('required'), (err: unknown) => err instanceof NoSandbox && err.weakened === 'host-network' && /RTM_NEWADDR/.test(err.message));
  const host = await chooseSandboxFor('auto');
  assert.equal(host.sandbox?.network, 'host');
  assert.equal(host.confinement, 'host-network');
  assert.equal(host.fallback, true);
  assert.match(host.reason ?? '', /RTM_NEWADDR/);

  process.env.IDEM_LAB_BWRAP = realBwrap();
  const full = await chooseSandboxFor('required');
  assert.deepEqual([full.confinement, full.fallback, full.sandbox?.network], ['on', false, 'private']);
  const asked = await chooseSandboxFor('off');
  assert.deepEqual([asked.confinement, asked.fallback, asked.sandbox], ['off', false, undefined]);
  process.env = { ...saved };
});

test('check --sandbox auto says a fallback: a warning line, results.json, a GitHub ::warning; required stops with exit 2', async () => {
  const ws = tempDir('idem-lab-fallback-');
  const summary = path.join(ws.dir, '..', `${path.basename(ws.dir)}-summary.md`);
  try {
    buildWorkspace(ws.dir, 'reference');
    const failing = { IDEM_LAB_BWRAP: FAILING };
    const human = await runCli(['check', '02', '--dir', ws.dir], { env: failing });
    assert.equal(human.exitCode, 0, human.stdout + human.stderr);
    assert.match(human.stdout.split('\n')[0], /^warning: the servers run WITHOUT a sandbox \(bwrap: No permissions to create new namespace/, 'the first line says it');
    const ko = await runCli(['check', '02', '--dir', ws.dir], { env: { ...failing, LANG: 'ko_KR.UTF-8' } });
    assert.match(ko.stdout, /경고: 서버가 샌드박스 없이 실행됩니다/);

    const json = await runCli(['check', '02', '--dir', ws.dir, '--reporter', 'json'], { env: failing });
    assert.equal(json.exitCode, 0, json.stderr);
    const results = JSON.parse(json.stdout);
    assert.equal(results.sandbox, 'off');
    assert.match(results.sandbox_reason, /No permissions to create new namespace/);
    assert.match(json.stderr, /warning: the servers run WITHOUT a sandbox/, 'said on stderr when stdout is a document');

    const github = await runCli(['check', '02', '--dir', ws.dir, '--reporter', 'github'], { env: { ...failing, GITHUB_STEP_SUMMARY: summary } });
    assert.equal(github.exitCode, 0, github.stderr);
    assert.match(github.stdout, /^::warning title=idem-lab%3A the servers ran without full confinement::The servers ran without a sandbox \(--sandbox auto fell back: bwrap%3A No permissions|^::warning title=idem-lab%3A the servers ran without full confinement::The servers ran without a sandbox \(--sandbox auto fell back: bwrap: No permissions/m);
    assert.match(fs.readFileSync(summary, 'utf8'), /\*\*Warning, sandbox off:\*\*/);

    const noNet = { IDEM_LAB_BWRAP: NO_NET };
    const host = await runCli(['check', '02', '--dir', ws.dir, '--reporter', 'human,json=' + path.join(ws.dir, 'r.json')], { env: noNet });
    assert.equal(host.exitCode, 0, host.stdout + host.stderr);
    assert.match(host.stdout, /^warning: the servers run in a sandbox that keeps this machine's network \(bwrap: loopback: Failed RTM_NEWADDR/);
    const hostResults = JSON.parse(fs.readFileSync(path.join(ws.dir, 'r.json'), 'utf8'));
    assert.deepEqual([hostResults.sandbox, /RTM_NEWADDR/.test(hostResults.sandbox_reason)], ['host-network', true]);

    const required = await runCli(['check', '02', '--dir', ws.dir, '--sandbox', 'required'], { env: noNet });
    assert.equal(required.exitCode, 2, required.stdout + required.stderr);
    assert.match(required.stderr, /cannot have a network of its own here \(bwrap: loopback: Failed RTM_NEWADDR.*--sandbox required does not grade with the host's network/s);

    const full = await runCli(['check', '02', '--dir', ws.dir, '--reporter', 'json']);
    assert.equal(full.exitCode, 0, full.stderr);
    assert.deepEqual([JSON.parse(full.stdout).sandbox, JSON.parse(full.stdout).sandbox_reason], ['on', undefined], 'a full sandbox is said too, with no reason');
    assert.doesNotMatch(full.stderr, /warning/);
  } finally {
    ws.remove();
    fs.rmSync(summary, { force: true });
  }
});

test('grade: required stops on a host-network sandbox; auto puts the fallback in the gradebook (CSV and JSON column)', async () => {
  const root = tempDir('idem-lab-fallback-cohort-');
  try {
    const ws = path.join(root.dir, 'alice');
    fs.mkdirSync(ws);
    buildWorkspace(ws, 'reference');
    const stopped = await runCli(['grade', ws], { env: { IDEM_LAB_BWRAP: NO_NET } });
    assert.equal(stopped.exitCode, 2, stopped.stderr);
    assert.match(stopped.stderr, /cannot have a network of its own here \(bwrap: loopback: Failed RTM_NEWADDR/);

    const csv = path.join(root.dir, 'book.csv');
    const json = path.join(root.dir, 'book.json');
    const graded = await runCli(['grade', ws, '--sandbox', 'auto', '--csv', csv, '--json', json], { env: { IDEM_LAB_BWRAP: FAILING }, timeoutMs: 180_000 });
    assert.equal(graded.exitCode, 0, graded.stderr);
    assert.match(graded.stderr, /warning: the servers run WITHOUT a sandbox/);
    const [row] = parseCsv(fs.readFileSync(csv, 'utf8'), { columns: true }) as Array<Record<string, string>>;
    assert.match(row.sandbox, /^off \(bwrap: No permissions to create new namespace/);
    const book = JSON.parse(fs.readFileSync(json, 'utf8'));
    assert.equal(book.students[0].sandbox, 'off');
    assert.match(book.students[0].sandbox_reason, /No permissions/);
    assert.equal(book.students[0].results.sandbox, 'off');
  } finally {
    root.remove();
  }
});

/** Each sequence the fixture sends, as it must read once made visible. */
const SHOWN = ['\\x1b[31mred\\x1b[0m', '\\x1b]0;pwned-title\\x07', 'c1:\\u009b2J', 'bell:\\x07', 'back:ab\\x08\\x08XY', 'cr:abc\\x0dZZ', 'rlo:\\u202eevil'];
/** Legit Unicode that must come out untouched: Korean, Chinese, emoji with zero-width joiners. */
const UNICODE = '한국어 中文 🎉👨‍👩‍👧';

test('visible: each control sequence is shown as an escape; tab, newline, Korean, Chinese and emoji are kept', () => {
  assert.equal(visible('\x1b[31mred\x1b[0m'), '\\x1b[31mred\\x1b[0m');
  assert.equal(visible('\x1b]0;title\x07'), '\\x1b]0;title\\x07');
  assert.equal(visible('\u009b2J \u0085'), '\\u009b2J \\u0085');
  assert.equal(visible('a\bb\rc\r\nd\te\n'), 'a\\x08b\\x0dc\nd\te\n');
  assert.equal(visible('x\u202ey\u2066z'), 'x\\u202ey\\u2066z');
  assert.equal(visible(UNICODE), UNICODE);
  assert.equal(visible(visible('\x1b\u009b')), visible('\x1b\u009b'), 'idempotent');
  assert.deepEqual(visibleDeep({ a: ['\x07', 1, null], b: { c: '\x1b' } }), { a: ['\\x07', 1, null], b: { c: '\\x1b' } });
  assert.equal(noWorkflowCommands('ok\n::add-mask::s\n  ::set-output name=x::y\n##[error]z\na::b'), 'ok\n\\x3a:add-mask::s\n  \\x3a:set-output name=x::y\n\\x23#[error]z\na::b');
});

/** A workspace whose server prints and answers control sequences, with answer files that carry them too. */
function escapingWorkspace(dir: string): void {
  fs.mkdirSync(dir, { recursive: true });
  fs.copyFileSync(path.join(FIXTURES_DIR, 'misbehaving', 'prints-escapes', 'server.py'), path.join(dir, 'server.py'));
  for (const [file, text] of Object.entries(referenceFiles())) fs.writeFileSync(path.join(dir, file), `\x1b]0;answer-title\x07\u009b2J ${UNICODE}\n${text}\n::add-mask::from-answer\n`);
}

function assertShown(where: string, text: string, expected = SHOWN): void {
  assert.doesNotMatch(text, RAW_CONTROL, `${where}: no raw control character`);
  for (const shown of expected) assert.ok(text.includes(shown), `${where}: ${shown} is shown`);
}

test('output hygiene: check (human, JSON, JUnit, TAP, GitHub) and the gradebook show every control sequence as an escape', async () => {
  const root = tempDir('idem-lab-escapes-');
  try {
    const ws = path.join(root.dir, 'ws');
    escapingWorkspace(ws);
    const human = await runCli(['check', '02', '--dir', ws, '--sandbox', 'off']);
    assert.equal(human.exitCode, 1, human.stdout + human.stderr);
    assertShown('human', human.stdout);
    assert.ok(human.stdout.includes(UNICODE), 'human: Unicode untouched');
    assert.match(human.stdout, /Idempotency-Replayed: true\\u009b2J/, 'a response header is shown');

    const files = { json: path.join(root.dir, 'r.json'), junit: path.join(root.dir, 'r.xml'), tap: path.join(root.dir, 'r.tap') };
    const docs = await runCli(['check', '01', '02', '--dir', ws, '--sandbox', 'off', '--reporter', `json=${files.json},junit=${files.junit},tap=${files.tap}`]);
    assert.equal(docs.exitCode, 1, docs.stderr);
    const json = fs.readFileSync(files.json, 'utf8');
    assertShown('json file', json.replace(/\\\\/g, '\\'));
    const parsedJson = JSON.parse(json);
    assertShown('json output', parsedJson.tests[1].output);
    assert.ok(parsedJson.tests[1].output.includes(UNICODE), 'json: Unicode untouched');
    const junit = fs.readFileSync(files.junit, 'utf8');
    assertShown('junit', junit);
    new XMLParser().parse(junit);
    assertShown('tap', fs.readFileSync(files.tap, 'utf8'));

    const summary = path.join(root.dir, 'summary.md');
    const github = await runCli(['check', '01', '02', '--dir', ws, '--sandbox', 'off', '--reporter', 'github'], { env: { GITHUB_STEP_SUMMARY: summary } });
    assertShown('github log', github.stdout);
    const ours = /^::(group|endgroup|stop-commands|error|warning|notice)\b|^::[0-9a-f]{32}::$/;
    const forged = github.stdout.split('\n').filter((line) => /^\s*(::|##\[)/.test(line) && !ours.test(line));
    assert.deepEqual(forged, [], 'no line of the student starts a workflow command');
    // As text: escaped where it would start a line, or behind the label of the server that printed it.
    assert.match(github.stdout, /(\\x3a:|\[[A-Z]\] ::)add-mask::student-secret/, 'the forged line is there, as text');
    const summaryText = fs.readFileSync(summary, 'utf8');
    assert.doesNotMatch(summaryText, RAW_CONTROL);
    assert.doesNotMatch(summaryText, /^\s*(::|##\[)/m, 'nor in the job summary');

    // The gradebook: a folder name with a title-setting sequence, and the same server.
    const named = path.join(root.dir, 'stu\x1b]0;x\x07dent');
    escapingWorkspace(named);
    const csv = path.join(root.dir, 'book.csv');
    const book = path.join(root.dir, 'book.json');
    const graded = await runCli(['grade', named, '--sandbox', 'off', '--csv', csv, '--json', book], { timeoutMs: 180_000 });
    assert.ok(graded.exitCode === 0 || graded.exitCode === 1, `graded: ${graded.exitCode} ${graded.stderr}`);
    for (const [where, text] of [['gradebook table', graded.stdout], ['progress', graded.stderr], ['csv', fs.readFileSync(csv, 'utf8')], ['json', fs.readFileSync(book, 'utf8').replace(/\\\\/g, '\\')]] as const) {
      assertShown(where, text, ['stu\\x1b]0;x\\x07dent']);
    }
    assertShown('gradebook json transcript', JSON.stringify(JSON.parse(fs.readFileSync(book, 'utf8')).students[0].results).replace(/\\\\/g, '\\'));
  } finally {
    root.remove();
  }
});
