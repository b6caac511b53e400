/**
 * The junit reporters: JUnit XML as CI systems read it (Jenkins, GitLab, Azure DevOps,
 * CircleCI, the GitHub Actions test-report actions), one <testsuite> "idem-lab" as the
 * root, one <testcase> per step; a failed step carries <failure message="..."> with the
 * whole explanation and transcript as its text, a step the grader could not grade
 * <error>. Points go in the suite's <properties>. Three flavours, because the two
 * published schemas of the format disagree:
 *
 *   junit       valid against Apache Maven Surefire's surefire-test-report-3.0.2.xsd (the
 *               reference of JUnit XML), as published: advice on a passed step in the
 *               testcase's <system-out>.
 *   junit-ant   valid against the Apache Ant JUnit schema (windyroad/JUnit-Schema,
 *               JUnit.xsd), as published: `hostname` and `timestamp` on the suite, the
 *               suite's <system-out> (the advice) and <system-err>, which that schema
 *               requires and Surefire's forbids, and nothing but a failure or error in a
 *               testcase. No document can be valid against both.
 *   junit-file  junit with `file` on each testcase (the file it grades relative to the
 *               repository root: the answer file, or the server's source for a live
 *               check), which test-report actions read to annotate it; neither schema
 *               declares it.
 *
 * Written with xmlbuilder2, which escapes markup; control characters a server printed are
 * shown as `\xNN` (XML 1.0 cannot hold them).
 */
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { formatPoints, type GradeReport } from '../grading.js';
import { plainBody, stepName, visibleControls } from './plain.js';
import type { StepResult } from '../types.js';

/**
 * xmlbuilder2, loaded on the first report written: it takes a tenth of a second to load,
 * which every other command (and every other reporter) would pay at start-up.
 */
function xmlbuilder(): typeof import('xmlbuilder2') {
  return createRequire(import.meta.url)('xmlbuilder2') as typeof import('xmlbuilder2');
}

/** The flavours of JUnit XML (see the module's comment). */
export type JunitFlavour = 'surefire' | 'ant' | 'file';

/** Options of the junit reporter. */
export interface JunitOptions {
  /** Which schema the document follows (default surefire). */
  flavour?: JunitFlavour;
  /** When the run started, for the suite's `timestamp` attribute (UTC, no zone); omitted when absent, except in the ant flavour (now). */
  timestamp?: Date;
  /** The ant flavour's `hostname` (default os.hostname(), 'localhost' when empty). */
  hostname?: string;
  /** The workspace folder relative to the repository root (posix separators), '' or absent when it is the root. */
  workspacePath?: string;
  /** The server's source relative to the workspace (e.g. 'server.py'): the file of a live check; default 'server.py'. */
  serverFile?: string;
}

/**
 * The file a step's testcase names, relative to the repository root: the answer file when
 * the step has one and did not fail in its live part, else the server's source.
 */
export function testcaseFile(result: StepResult, options: JunitOptions = {}): string {
  const file = result.file && result.failedPart !== 'live' ? result.file : (options.serverFile ?? 'server.py');
  return path.posix.join(options.workspacePath ?? '', file);
}

/** An attribute value on one line: XML parsers turn newlines in attributes into spaces anyway. */
function oneLine(text: string): string {
  return visibleControls(text).replace(/\s*\n\s*/g, ' ');
}

function seconds(ms: number): string {
  return (ms / 1000).toFixed(3);
}

/** The junit reporter: the report as a JUnit XML document of the chosen flavour (UTF-8, ending in a newline). */
export function formatJunit(report: GradeReport, options: JunitOptions = {}): string {
  const flavour = options.flavour ?? 'surefire';
  const timestamp = options.timestamp ?? (flavour === 'ant' ? new Date() : undefined);
  const counts = {
    tests: String(report.steps.length),
    failures: String(report.steps.filter((s) => s.result.status === 'fail').length),
    errors: String(report.steps.filter((s) => s.result.status === 'error').length),
    skipped: '0',
    time: seconds(report.steps.reduce((total, s) => total + s.result.ms, 0)),
  };
  const doc = xmlbuilder().create({ version: '1.0', encoding: 'UTF-8', invalidCharReplacement: '\ufffd' });
  const suite = doc.ele('testsuite', {
    name: 'idem-lab',
    ...(timestamp ? { timestamp: timestamp.toISOString().replace(/\.\d{3}Z$/, '') } : {}),
    ...(flavour === 'ant' ? { hostname: options.hostname || os.hostname() || 'localhost' } : {}),
    ...counts,
  });
  const properties = suite.ele('properties');
  const property = (name: string, value: string) => properties.ele('property', { name, value: visibleControls(value) });
  property('status', report.status);
  property('score', formatPoints(report.score));
  property('max_score', formatPoints(report.maxScore));
  if (report.message) property('message', oneLine(report.message));
  for (const { result, points, required } of report.steps) {
    property(`points.${result.id}`, formatPoints(points));
    property(`required.${result.id}`, String(required));
  }
  const advice: string[] = [];
  for (const { result } of report.steps) {
    const testcase = suite.ele('testcase', {
      name: stepName(result),
      classname: `idem-lab.${result.id}-${result.slug}`,
      time: seconds(result.ms),
      ...(flavour === 'file' ? { file: testcaseFile(result, options) } : {}),
    });
    if (result.status === 'pass') {
      const notes = result.warnings.map((w) => `note: ${w}`).join('\n');
      if (notes === '') continue;
      if (flavour === 'ant') advice.push(`${stepName(result)}\n${notes}`);
      else testcase.ele('system-out').txt(visibleControls(notes));
      continue;
    }
    testcase.ele(result.status === 'fail' ? 'failure' : 'error', { message: oneLine(result.message), type: result.status }).txt(visibleControls(plainBody(result)));
  }
  if (flavour === 'ant') {
    suite.ele('system-out').txt(visibleControls(advice.join('\n\n')));
    suite.ele('system-err');
  }
  return doc.end({ prettyPrint: true }) + '\n';
}
