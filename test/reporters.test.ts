/**
 * Every machine reporter's output parsed back with a real parser and checked against the
 * verdicts: results.json against a JSON schema (ajv), JUnit with an XML parser
 * (fast-xml-parser), TAP with tap-parser, the github log with a model of the runner's
 * workflow-command parsing, its job summary with a Markdown lexer (marked), and the
 * Classroom result decoded from base64 against its schema. The verdicts are real: the
 * starter graded, and a server that prints workflow commands and XML then crashes.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Ajv } from 'ajv';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { marked, type Tokens } from 'marked';
import { Parser } from 'tap-parser';
import { grade } from '../grader/engine.js';
import { DEFAULT_COMMAND, runningServerCount, resolveInterpreter } from '../grader/server.js';
import { defaultGradingConfig, parseGradingConfig, scoreResults, setupErrorReport, type GradeReport } from '../grader/grading.js';
import { formatJson, learnerOutput, resultsStatus } from '../grader/reporters/json.js';
import { formatJunit, testcaseFile } from '../grader/reporters/junit.js';
import { formatTap } from '../grader/reporters/tap.js';
import { escapeData, formatGithub, formatStepSummary, markdownText } from '../grader/reporters/github.js';
import { stepName, visibleControls } from '../grader/reporters/plain.js';
import { chooseReporters } from '../grader/reporters/index.js';
import type { StepResult } from '../grader/types.js';
import { STEPS } from '../steps/index.js';
import { fixtureWorkspace, tempDir } from './support.js';
import { execa } from 'execa';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { PACKAGE_ROOT } from '../lab/paths.js';
import { CLASSROOM_SCHEMA, GRADESCOPE_SCHEMA, RESULTS_SCHEMA, misbehavingWorkspace, verdict } from './ci-support.js';
import { formatGradescope } from '../grader/reporters/gradescope.js';

const ajv = new Ajv({ allErrors: true });
const validResults = ajv.compile(RESULTS_SCHEMA);
const validClassroom = ajv.compile(CLASSROOM_SCHEMA);
const validGradescope = ajv.compile(GRADESCOPE_SCHEMA);

let starter: StepResult[];
let forged: StepResult[];

before(async () => {
  const s = fixtureWorkspace('starter');
  const f = misbehavingWorkspace('prints-commands');
  try {
    starter = await grade({ workspace: s.dir, steps: STEPS, command: await resolveInterpreter(DEFAULT_COMMAND, s.dir) });
    forged = await grade({ workspace: f.dir, steps: STEPS, command: await resolveInterpreter(DEFAULT_COMMAND, f.dir), stopAfterStartFailure: true });
  } finally {
    s.remove();
    f.remove();
  }
});

after(() => {
  assert.equal(runningServerCount(), 0);
});

/** The reports every reporter is checked on: real verdicts under two configs, a step in error, a setup error. */
function reports(): Array<[string, GradeReport]> {
  const weighted = parseGradingConfig({ points: { '02': 2, '05': 3, '08': 0.5 }, required: ['01', '02'] }, 'test', STEPS);
  return [
    ['starter', scoreResults(starter, defaultGradingConfig())],
    ['starter, weighted', scoreResults(starter, weighted)],
    ['server printing commands', scoreResults(forged, defaultGradingConfig())],
    ['a step in error', scoreResults([verdict('01', 'pass'), verdict('02', 'error', 'The grader could not grade this step: EMFILE\n::error::x')], defaultGradingConfig())],
    ['setup error', setupErrorReport('no workspace at /x: there is no server.py', defaultGradingConfig(), STEPS.slice(0, 3))],
  ];
}

test('the verdicts the reporters are checked on are the expected ones', () => {
  assert.deepEqual(starter.map((r) => r.status), ['pass', 'fail', 'fail', 'fail', 'fail', 'fail', 'pass', 'pass']);
  assert.deepEqual(forged.map((r) => r.status), ['pass', 'fail', 'fail', 'fail', 'fail', 'fail', 'pass', 'pass']);
  assert.ok(forged[1].startFailed);
  assert.match(forged[1].serverOutput ?? '', /::add-mask::secret/);
});

test('json: results.json matches the schema and every test its verdict and points', () => {
  for (const [name, report] of reports()) {
    const parsed = JSON.parse(formatJson(report));
    assert.ok(validResults(parsed), `${name}: ${ajv.errorsText(validResults.errors)}`);
    assert.equal(parsed.status, resultsStatus(report), name);
    const statuses = report.steps.map((s) => s.result.status);
    assert.equal(parsed.status, report.status, `${name}: the run's own status, as in every other output`);
    assert.equal(parsed.status === 'pass', statuses.every((x) => x === 'pass'), name);
    for (const t of parsed.tests as Array<{ output?: string }>) {
      // Only what the servers printed: the grader's label on a line only when several servers printed, to say whose each line is.
      const labels = new Set([...(t.output ?? '').matchAll(/^\[([A-Z])\](?: |$)/gm)].map((m) => m[1]));
      assert.notEqual(labels.size, 1, `${name}: one server's output holds only what it printed`);
    }
    assert.equal(parsed.score, report.score);
    assert.equal(parsed.max_score, report.maxScore);
    assert.deepEqual(
      parsed.tests.map((t: { name: string; status: string; score: number; max_score: number; task_id: number }) => [t.name, t.status, t.score, t.max_score, t.task_id]),
      report.steps.map((s) => [stepName(s.result), s.result.status, s.score, s.points, Number(s.result.id)]),
      name,
    );
  }
  const starterJson = JSON.parse(formatJson(reports()[0][1]));
  assert.match(starterJson.tests[1].message, /What was sent and what came back:\n {2}\[A\] POST \/pay {2}Idempotency-Key: [0-9a-f-]{36} {2}(?:[A-Za-z-]+: [^\n]*? {2})*\{"user":"[a-z]+_\d{5}"/);
  assert.match(starterJson.tests[1].output, /POST \/pay HTTP\/1\.1" 201/, 'output is what the server printed');
  const weighted = JSON.parse(formatJson(reports()[1][1]));
  assert.deepEqual([weighted.score, weighted.max_score], [1 + 1 + 0.5, 1 + 2 + 1 + 1 + 3 + 1 + 1 + 0.5], '01, 07 and 08 pass');
  const forgedJson = JSON.parse(formatJson(reports()[2][1]));
  assert.equal(forgedJson.status, 'error', 'a server that cannot start: no live test ran (Exercism\'s "runtime error" case), as the gradebook and Classroom say');
  assert.match(forgedJson.message, /The server could not start/);
  assert.match(forgedJson.tests[1].message, /server\.py exited during start-up \(exit code 3\)/);
  assert.match(forgedJson.tests[1].output, /::add-mask::secret/, 'the server\'s own output');
  const oneError = JSON.parse(formatJson(reports()[3][1]));
  assert.equal(oneError.status, 'error', 'a step the grader could not grade makes the run an error, in every output');
  assert.match(oneError.message, /Step 02 could not be graded/);
  const setup = JSON.parse(formatJson(reports()[4][1]));
  assert.deepEqual([setup.status, setup.message, setup.tests.length, setup.score, setup.max_score], ['error', 'no workspace at /x: there is no server.py', 3, 0, 3]);
});

test('json: output is only the server\'s text, its last 500 characters, nothing added', () => {
  assert.equal(learnerOutput('[A] hello\n[A]\n[A] world\n'), 'hello\n\nworld', "one server's labels taken out");
  assert.equal(learnerOutput('[A] hello\n[B] world\n'), '[A] hello\n[B] world', "several servers' labels kept");
  const long = 'x'.repeat(400) + '\n' + 'y'.repeat(400);
  assert.equal(learnerOutput(long), long.slice(-500));
  assert.equal(learnerOutput(long).length, 500);
  const report = scoreResults([verdict('02', 'fail', 'no', { serverOutput: long.split('\n').map((l) => `[A] ${l}`).join('\n') })], defaultGradingConfig());
  assert.equal(JSON.parse(formatJson(report)).tests[0].output, long.slice(-500));
});

/** Surefire's report schema as published (../shared/schemas). */
function surefireSchema(): string {
  const xsd = path.resolve(PACKAGE_ROOT, '..', 'shared', 'schemas', 'surefire-test-report-3.0.2.xsd');
  return fs.existsSync(xsd) ? xsd : '/work/shared/schemas/surefire-test-report-3.0.2.xsd';
}

/** The SHA-256 of JUnit.xsd as published by windyroad/JUnit-Schema (commit cfa434d), the Apache Ant JUnit schema. */
const ANT_SCHEMA_SHA256 = '147ff89ef34a82f9a1b2951e7cad251b98c9a7a48a0e0c8e44937141791f57a8';

/**
 * The Ant JUnit schema as published, when this machine has it: $IDEM_LAB_ANT_XSD, or
 * JUnit.xsd beside Surefire's in ../shared/schemas. Its licence keeps it out of this
 * repository; a copy that differs from the published file (its SHA-256) is refused.
 */
function antSchema(): string | undefined {
  const candidates = [process.env.IDEM_LAB_ANT_XSD, path.join(path.dirname(surefireSchema()), 'JUnit.xsd')].filter((f): f is string => !!f);
  const found = candidates.find((f) => fs.existsSync(f));
  if (!found) return undefined;
  const digest = crypto.createHash('sha256').update(fs.readFileSync(found)).digest('hex');
  assert.equal(digest, ANT_SCHEMA_SHA256, `${found} is the Ant schema as published, unpatched`);
  return found;
}

/** xmllint's complaints about `xml` against the schema file `xsd`, as is; '' when valid. */
async function schemaErrors(xml: string, xsd: string): Promise<string> {
  const tmp = tempDir('idem-lab-junit-');
  try {
    const file = path.join(tmp.dir, 'report.xml');
    fs.writeFileSync(file, xml);
    const run = await execa('xmllint', ['--noout', '--schema', xsd, file], { reject: false });
    return run.exitCode === 0 ? '' : String(run.stderr);
  } finally {
    tmp.remove();
  }
}

test('junit: valid against Surefire\'s report schema as published (xmllint); junit-ant against Ant\'s; junit-file adds file', async (t) => {
  const surefire = surefireSchema();
  const ant = antSchema();
  for (const [name, report] of reports()) {
    for (const timestamp of [new Date('2026-01-02T03:04:05Z'), undefined]) {
      assert.equal(await schemaErrors(formatJunit(report, { timestamp }), surefire), '', `${name}: junit is Surefire-valid`);
    }
    if (ant) {
      assert.equal(await schemaErrors(formatJunit(report, { flavour: 'ant', hostname: 'grader' }), ant), '', `${name}: junit-ant is Ant-valid`);
      assert.notEqual(await schemaErrors(formatJunit(report, { flavour: 'ant' }), surefire), '', 'no document is valid against both: Ant requires the suite\'s system-out, Surefire forbids it');
    }
    assert.notEqual(await schemaErrors(formatJunit(report, { flavour: 'file', workspacePath: 'lab' }), surefire), '', 'junit-file has the one attribute Surefire does not declare');
  }
  if (!ant) t.diagnostic('the Ant JUnit schema (JUnit.xsd of windyroad/JUnit-Schema) is not on this machine: set IDEM_LAB_ANT_XSD or put it beside Surefire\'s to check junit-ant');
  const parser = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '', isArray: (tag) => tag === 'testcase' });
  const suite = parser.parse(formatJunit(reports()[0][1], { flavour: 'file', workspacePath: 'labs/alice', serverFile: 'server.py' })).testsuite;
  assert.deepEqual(
    suite.testcase.map((tc: { file: string }) => tc.file),
    ['labs/alice/01-duplicate.txt', 'labs/alice/server.py', 'labs/alice/server.py', 'labs/alice/server.py', 'labs/alice/server.py', 'labs/alice/server.py', 'labs/alice/07-retry.md', 'labs/alice/08-notes.md'],
    'live failures point at server.py, file steps at their file',
  );
  const plain = parser.parse(formatJunit(reports()[0][1], { workspacePath: 'labs/alice' })).testsuite;
  assert.ok(plain.testcase.every((tc: { file?: string }) => tc.file === undefined), 'the default junit has no file attribute');
  const antSuite = parser.parse(formatJunit(reports()[0][1], { flavour: 'ant', hostname: 'grader', timestamp: new Date('2026-01-02T03:04:05.678Z') })).testsuite;
  assert.deepEqual([antSuite.hostname, antSuite.timestamp], ['grader', '2026-01-02T03:04:05']);
  assert.equal(testcaseFile(verdict('03', 'fail', 'x', { failedPart: 'file' }), { workspacePath: '' }), '03-nokey.txt');
  assert.equal(testcaseFile(verdict('02', 'pass')), 'server.py');
  const invalid = await schemaErrors('<testsuites><testsuite name="x" tests="0" errors="0" failures="0" skipped="0"/></testsuites>', surefire);
  assert.match(invalid, /testsuites/, 'the check can fail: a <testsuites> root is not Surefire\'s');
  assert.match(await schemaErrors('<testsuite name="x" tests="1" errors="0" failures="0" skipped="0"><testcase name="a" time="0" file="x"/></testsuite>', surefire), /file/, 'nor a testcase file attribute');
});

test('junit: well-formed XML with one testcase per step, failures carrying the message and the transcript', () => {
  const parser = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '', isArray: (tag) => ['testcase', 'property', 'testsuite'].includes(tag) });
  for (const [name, report] of reports()) {
    const xml = formatJunit(report, { timestamp: new Date('2026-01-02T03:04:05Z') });
    assert.equal(XMLValidator.validate(xml), true, `${name}: well-formed`);
    const doc = parser.parse(xml);
    assert.equal(doc.testsuite.length, 1, 'one suite, the root');
    const suite = doc.testsuite[0];
    assert.equal(suite.timestamp, '2026-01-02T03:04:05');
    assert.equal(Number(suite.tests), report.steps.length, name);
    assert.equal(Number(suite.failures), report.steps.filter((s) => s.result.status === 'fail').length);
    assert.equal(Number(suite.errors), report.steps.filter((s) => s.result.status === 'error').length);
    const props = Object.fromEntries(suite.properties.property.map((p: { name: string; value: string }) => [p.name, p.value]));
    assert.equal(Number(props.score), report.score);
    assert.equal(Number(props.max_score), report.maxScore);
    assert.equal(props.status, report.status);
    assert.equal(suite.testcase.length, report.steps.length, `${name}: no forged testcase`);
    suite.testcase.forEach((tc: Record<string, { message: string; '#text': string } | string>, i: number) => {
      const { result, points } = report.steps[i];
      assert.equal(tc.name, stepName(result));
      assert.equal(Number(props[`points.${result.id}`]), points);
      const failure = tc.failure as { message: string; '#text': string } | undefined;
      const error = tc.error as { message: string; '#text': string } | undefined;
      if (result.status === 'pass') assert.ok(!failure && !error, `${result.id} passes`);
      const carried = result.status === 'fail' ? failure : result.status === 'error' ? error : undefined;
      if (result.status !== 'pass') {
        assert.ok(carried, `${name} ${result.id}: <${result.status === 'fail' ? 'failure' : 'error'}>`);
        assert.equal(carried.message, visibleControls(result.message).replace(/\s*\n\s*/g, ' '), 'the message attribute is one line');
        assert.ok(carried['#text'].startsWith(visibleControls(result.message)));
      }
    });
  }
  const forgedSuite = parser.parse(formatJunit(reports()[2][1])).testsuite[0];
  const text = forgedSuite.testcase[1].failure['#text'] as string;
  assert.match(text, /<\/failure><\/testcase><testcase name="forged"\/><!\[CDATA\[ \]\]>/, 'markup from the server is text');
  assert.match(text, /\\x1b\[31mred\\x1b\[0m nul:\\x00 bell:\\x07/, 'control characters are shown, not embedded');
  const starterSuite = parser.parse(formatJunit(reports()[0][1])).testsuite[0];
  assert.match(starterSuite.testcase[1].failure['#text'], /What was sent and what came back:/);
  const fileSuite = parser.parse(formatJunit(reports()[0][1], { flavour: 'file' })).testsuite[0];
  assert.equal(fileSuite.testcase[1].file, 'server.py', '02 has no learner file: its file is the server');
  assert.equal(fileSuite.testcase[0].file, '01-duplicate.txt');
});

test('gradescope: results.json matches Gradescope\'s spec; each step a test with its points, status and visibility', () => {
  for (const [name, report] of reports()) {
    const parsed = JSON.parse(formatGradescope(report));
    assert.ok(validGradescope(parsed), `${name}: ${ajv.errorsText(validGradescope.errors)}`);
    assert.equal(parsed.score, report.score, name);
    assert.equal(parsed.tests.reduce((sum: number, t: { max_score: number }) => sum + t.max_score, 0), report.maxScore);
    assert.deepEqual(
      parsed.tests.map((t: { number: string; status: string; score: number }) => [t.number, t.status, t.score]),
      report.steps.map((s) => [s.result.id, s.result.status === 'pass' ? 'passed' : 'failed', s.score]),
      name,
    );
    assert.match(parsed.output, new RegExp(`Status: ${report.status}`), `${name}: the run's status, as in every output`);
  }
  const hidden = parseGradingConfig({ points: { '07': 2 }, required: ['01', '02'], visibility: { '07': 'hidden', replay: 'after_due_date' } }, 'test', STEPS);
  const parsed = JSON.parse(formatGradescope(scoreResults(starter, hidden)));
  assert.deepEqual(parsed.tests.map((t: { visibility: string }) => t.visibility), ['visible', 'after_due_date', 'visible', 'visible', 'visible', 'visible', 'hidden', 'visible']);
  assert.equal(parsed.tests[6].max_score, 2);
  assert.match(parsed.tests[2].name, /\(optional\)$/);
  assert.match(parsed.tests[1].output, /What was sent and what came back:/);
  assert.throws(() => parseGradingConfig({ visibility: { '07': 'secret' } }, 'c.json', STEPS), /visibility of step "07" must be one of visible, hidden, after_due_date, after_published, not "secret"/);
  assert.ok(!validGradescope({ ...parsed, tests: [{ ...parsed.tests[0], status: 'pass' }] }), 'the schema check can fail: Exercism\'s "pass" is not Gradescope\'s "passed"');
  assert.match(JSON.parse(formatGradescope(scoreResults([verdict('02', 'pass')], defaultGradingConfig()))).output, /1 of 1 step passes/);
});

test('tap: valid TAP 13 with one test point per step and its points in the YAML block', () => {
  for (const [name, report] of reports()) {
    const tap = formatTap(report);
    const events = Parser.parse(tap);
    const kinds = events.map((e) => e[0]);
    assert.ok(!kinds.includes('extra'), `${name}: every line is TAP: ${JSON.stringify(events.filter((e) => e[0] === 'extra'))}`);
    assert.ok(!kinds.includes('bailout'), `${name}: no bail out`);
    assert.equal(events[0][0], 'version');
    assert.equal(events[0][1], 13);
    const plan = events.find((e) => e[0] === 'plan')?.[1];
    assert.deepEqual([plan.start, plan.end], [1, report.steps.length]);
    const asserts = events.filter((e) => e[0] === 'assert').map((e) => e[1]);
    assert.equal(asserts.length, report.steps.length, `${name}: no forged test point`);
    asserts.forEach((point, i) => {
      const { result, points, score, required } = report.steps[i];
      assert.equal(point.id, i + 1);
      assert.equal(point.ok, result.status === 'pass', `${name} ${result.id}`);
      assert.equal(point.name, stepName(result));
      assert.equal(point.diag.status, result.status);
      assert.deepEqual([point.diag.points, point.diag.score, point.diag.required], [points, score, required]);
      if (result.status !== 'pass') assert.equal(point.diag.message, visibleControls(result.message).replace(/\s+$/, ''));
    });
    const complete = events.find((e) => e[0] === 'complete')?.[1];
    assert.equal(complete.ok, report.status === 'pass');
    assert.equal(complete.pass, report.steps.filter((s) => s.result.status === 'pass').length);
  }
  const forgedPoint = Parser.parse(formatTap(reports()[2][1])).filter((e) => e[0] === 'assert')[1][1];
  assert.match(forgedPoint.diag.details, /\n {2}\[A\] not ok 99 - forged test point\n {2}\[A\] {3}\.\.\.\n {2}\[A\] Bail out! forged\n/, 'TAP from the server stays inside the YAML block, unchanged');
});

/** One workflow command as the Actions runner would see it. */
interface Command {
  name: string;
  properties: string;
  data: string;
}

/**
 * The workflow commands a runner would act on in `log`: `::name props::data` on a line
 * (leading whitespace allowed), none between ::stop-commands::TOKEN and ::TOKEN::, and
 * the legacy `##[` form anywhere in a line.
 */
function workflowCommands(log: string): Command[] {
  const commands: Command[] = [];
  let stoppedUntil: string | undefined;
  for (const raw of log.split(/\r?\n/)) {
    const line = raw.trim();
    if (stoppedUntil !== undefined) {
      if (line === `::${stoppedUntil}::`) stoppedUntil = undefined;
      continue;
    }
    if (line.includes('##[')) commands.push({ name: 'legacy', properties: '', data: line });
    const match = /^::([A-Za-z-]+)(?: ([^:]*))?::(.*)$/.exec(line);
    if (!match) continue;
    const [, name, properties = '', data] = match;
    if (name === 'stop-commands') stoppedUntil = data;
    commands.push({ name, properties, data });
  }
  return commands;
}

function unescapeData(data: string): string {
  return data.replace(/%0D/g, '\r').replace(/%0A/g, '\n').replace(/%25/g, '%');
}

test('github: only the reporter issues workflow commands; learner text is stopped or escaped', () => {
  for (const [name, report] of reports()) {
    const github = formatGithub(report, { workspacePath: 'lab', serverFile: 'server.py' });
    const commands = workflowCommands(github.log);
    assert.deepEqual([...new Set(commands.map((c) => c.name))].filter((n) => !['group', 'endgroup', 'stop-commands', 'error', 'warning', 'notice'].includes(n)), [], name);
    assert.equal(commands.filter((c) => c.name === 'group').length, report.steps.length, `${name}: one group per step`);
    assert.equal(commands.filter((c) => c.name === 'endgroup').length, report.steps.length, `${name}: no forged endgroup`);
    const errors = commands.filter((c) => c.name === 'error');
    const failing = report.steps.filter((s) => s.result.status !== 'pass');
    assert.equal(errors.length, failing.length + (report.status === 'error' ? 1 : 0), `${name}: one ::error per step that did not pass`);
    for (const { result } of failing) {
      const annotation = errors.find((c) => c.properties.includes(`title=${result.id} ${result.slug}%3A`));
      assert.ok(annotation, `${name} ${result.id} annotated`);
      const file = result.failedPart === 'file' ? `lab/${result.file}` : result.failedPart === 'live' ? 'lab/server.py' : undefined;
      assert.equal(/file=([^,]*)/.exec(annotation.properties)?.[1], file, `${name} ${result.id} points at the learner's file`);
      assert.ok(unescapeData(annotation.data).startsWith(visibleControls(result.message).replace(/::/g, ': :').replace(/##\[/g, '# #[')), `${name} ${result.id} message round-trips`);
    }
    assert.ok(!commands.some((c) => /forged|secret/.test(c.properties) || (c.name !== 'error' && /forged|secret/.test(c.data))), `${name}: no forged command`);
    const notice = commands.find((c) => c.name === 'notice');
    assert.match(notice?.data ?? '', new RegExp(`${report.steps.filter((s) => s.result.status === 'pass').length} of ${report.steps.length} steps pass · ${report.score}/${report.maxScore} points`));
  }
  const forgedLog = formatGithub(reports()[2][1]).log;
  // Inside ::stop-commands:: too, a learner's line never starts with `::` (visible.ts noWorkflowCommands): the log reads the same, nothing depends on the token alone.
  assert.match(forgedLog, /\n {2}\[A\] ::set-output name=result::eyJ2ZXJzaW9uIjoxfQ==\n/, 'the forged lines are in the log, as text');
  assert.doesNotMatch(forgedLog.split('\n').filter((line) => !/^::(group|endgroup|stop-commands|error|warning|notice)\b|^::[0-9a-f]{32}::$/.test(line)).join('\n'), /^\s*::/m, 'no learner line starts a command');
});

test('github: an annotation message cannot start a new line or a second command', () => {
  const escaped = escapeData('first\r\n::error::second\n%0A 100%');
  assert.equal(escaped, 'first%0A: :error: :second%0A%250A 100%25');
  assert.ok(!/[\r\n]/.test(escaped));
  const report = scoreResults([verdict('03', 'fail', 'bad\n::set-output name=x::y\n##[error]z', { failedPart: 'file' })], defaultGradingConfig());
  const commands = workflowCommands(formatGithub(report).log);
  assert.deepEqual(commands.filter((c) => !['group', 'endgroup', 'stop-commands'].includes(c.name)).map((c) => c.name), ['error', 'notice']);
});

test('github: the job summary is a Markdown table, one row per step, transcripts in code blocks', () => {
  for (const [name, report] of reports()) {
    const tokens = marked.lexer(formatGithub(report).summary);
    const table = tokens.find((t): t is Tokens.Table => t.type === 'table');
    assert.ok(table, name);
    assert.deepEqual(table.header.map((h) => h.text), ['Step', 'Result', 'Points', 'Required', 'What the grader found']);
    assert.equal(table.rows.length, report.steps.length, `${name}: no forged row`);
    table.rows.forEach((row, i) => {
      const { result, points, score } = report.steps[i];
      assert.equal(row.length, 5);
      assert.match(row[1].text, new RegExp(result.status));
      assert.equal(row[2].text, `${score}/${points}`);
    });
  }
  const forgedTokens = marked.lexer(formatGithub(reports()[2][1]).summary);
  const code = forgedTokens.filter((t): t is Tokens.Code => t.type === 'code');
  assert.equal(code.length, 5, 'one transcript per failed step');
  assert.match(code[0].text, /\[A\] ```\n {2}\[A\] \\x1b\[31mred/, 'a fence in the server output does not close the block');
  assert.match(code[0].text, /\| forged \| table \| row \|/);
});

test('github: the job summary shows a hostile student string as written: no link, code, HTML, row or line of its own', () => {
  const hostile = 'a | b | c\n| x | y |\n`code` ``` <script>alert(1)</script> [x](javascript:alert(1)) ![i](https://e.test/i.png) **bold** _it_ ~~s~~ # h &amp; &#60; \\| end';
  const report = scoreResults([verdict('03', 'fail', hostile, { failedPart: 'file' }), verdict('04', 'error', hostile)], defaultGradingConfig());
  const tokens = marked.lexer(formatStepSummary(report));
  const table = tokens.find((t): t is Tokens.Table => t.type === 'table');
  assert.ok(table);
  assert.equal(table.rows.length, 2, 'no forged row');
  const kinds = new Set<string>();
  const walk = (list: Tokens.Generic[] | undefined) => {
    for (const token of list ?? []) {
      kinds.add(token.type === 'html' ? `html:${token.raw}` : token.type);
      walk(token.tokens as Tokens.Generic[] | undefined);
    }
  };
  for (const row of table.rows) {
    assert.equal(row.length, 5, 'no forged column');
    walk(row[4].tokens as Tokens.Generic[]);
  }
  assert.deepEqual([...kinds].sort(), ['escape', 'html:<br>', 'text'], 'only text, escapes and our own line breaks');
  const html = marked.parse(formatStepSummary(report)) as string;
  assert.doesNotMatch(html, /<script|<a |<img|<em>|<del>|<h1/, 'nothing rendered as markup');
  const cell = /<td>([^]*?)<\/td>/g;
  const cells = [...html.matchAll(cell)].map((m) => m[1]);
  for (const c of cells) assert.doesNotMatch(c, /<(?!br>)/, `a cell holds no markup but <br>: ${c}`);
  assert.match(html, /<summary>✗ 03 nokey: Refuse/, 'the details\' summary, an HTML block, shows its text without Markdown escapes');
  const shown = cells[4].replace(/<br>/g, '\n').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, '&');
  assert.equal(shown, hostile, 'the text reads back exactly');
  assert.equal(markdownText('a\nb'), 'a<br>b');
});

test('github: the Classroom result decodes to the autograding reporter format', () => {
  const [[, starterReport], [, weighted], [, forgedReport]] = reports();
  for (const [report, status] of [
    [starterReport, 'fail'],
    [weighted, 'fail'],
    [forgedReport, 'error'],
    [scoreResults(starter, parseGradingConfig({ required: ['01', '07'] }, 't', STEPS)), 'pass'],
  ] as const) {
    const { output } = formatGithub(report);
    const match = /^result=([A-Za-z0-9+/=]+)\n$/.exec(output);
    assert.ok(match, 'one line: result=<base64>');
    const decoded = JSON.parse(Buffer.from(match[1], 'base64').toString('utf8'));
    assert.ok(validClassroom(decoded), ajv.errorsText(validClassroom.errors));
    assert.equal(decoded.status, status, 'pass when every required step passed');
    assert.equal(decoded.max_score, report.maxScore);
    assert.equal(decoded.tests.reduce((sum: number, t: { score: number }) => sum + t.score, 0), report.score, 'the reporter sums the tests\' scores');
    assert.deepEqual(decoded.tests.map((t: { status: string }) => t.status), report.steps.map((s) => s.result.status));
  }
});

test('reporter choice: names, files, --output, and what may share stdout', () => {
  assert.deepEqual(chooseReporters([]), [{ name: 'human' }]);
  assert.deepEqual(chooseReporters(['json'], 'r.json'), [{ name: 'json', file: 'r.json' }]);
  assert.deepEqual(chooseReporters(['github,json'], 'r.json'), [{ name: 'github' }, { name: 'json', file: 'r.json' }]);
  assert.deepEqual(chooseReporters(['github', 'junit=j.xml', 'json'], 'r.json'), [{ name: 'github' }, { name: 'junit', file: 'j.xml' }, { name: 'json', file: 'r.json' }]);
  assert.deepEqual(chooseReporters(['TAP']), [{ name: 'tap' }]);
  assert.deepEqual(chooseReporters(['human', 'github']), [{ name: 'human' }, { name: 'github' }]);
  assert.throws(() => chooseReporters(['xml']), /unknown reporter "xml"; the reporters are human, json, junit, junit-ant, junit-file, gradescope, tap, github/);
  assert.deepEqual(chooseReporters(['junit=out,v2.xml,json=r,1.json']), [{ name: 'junit', file: 'out,v2.xml' }, { name: 'json', file: 'r,1.json' }], 'a comma in a file stays in it');
  assert.deepEqual(chooseReporters(['github,junit-ant=a.xml,gradescope=g,h.json']), [{ name: 'github' }, { name: 'junit-ant', file: 'a.xml' }, { name: 'gradescope', file: 'g,h.json' }]);
  assert.throws(() => chooseReporters(['json,xml']), /unknown reporter "xml"/, 'after a name without =FILE a comma starts another reporter');
  assert.throws(() => chooseReporters(['json', 'json']), /named twice/);
  assert.throws(() => chooseReporters(['github=x']), /takes no file/);
  assert.throws(() => chooseReporters([], 'r.json'), /--output r\.json needs --reporter json, junit/);
  assert.throws(() => chooseReporters(['json', 'junit'], 'r'), /would both write to it/);
  assert.throws(() => chooseReporters(['json', 'junit']), /would all write to stdout/);
  assert.throws(() => chooseReporters(['github', 'json']), /would all write to stdout: send json to a file/);
});
