/**
 * The junit reporter: JUnit XML as CI systems read it (Jenkins, GitLab, Azure DevOps,
 * CircleCI, the common GitHub Actions test-report actions): one <testsuite> "idem-lab"
 * as the root, in the shape of Apache Maven Surefire's report schema
 * (surefire-test-report-3.0.2.xsd: the reference format of JUnit XML), one <testcase> per
 * step; a failed step carries <failure message="..."> with the whole explanation and
 * transcript as its text, a step the grader could not grade <error>. Points go in the
 * suite's <properties>. Each <testcase> also has `file`, the file it grades relative to
 * the repository root (the answer file, or the server's source for a live check), which
 * the test-report actions read to annotate it: the one attribute Surefire's schema does not
 * declare. Written with xmlbuilder2, which escapes markup; control characters a server
 * printed are shown as `\xNN` (XML 1.0 cannot hold them).
 */
import { createRequire } from 'node:module';
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

/** Options of the junit reporter. */
export interface JunitOptions {
  /** When the run started, for the suite's `timestamp` attribute; omitted when absent. */
  timestamp?: Date;
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

/** The junit reporter: the report as a JUnit XML document (UTF-8, ending in a newline). */
export function formatJunit(report: GradeReport, options: JunitOptions = {}): string {
  const counts = {
    tests: String(report.steps.length),
    failures: String(report.steps.filter((s) => s.result.status === 'fail').length),
    errors: String(report.steps.filter((s) => s.result.status === 'error').length),
    skipped: '0',
    time: seconds(report.steps.reduce((total, s) => total + s.result.ms, 0)),
  };
  const doc = xmlbuilder().create({ version: '1.0', encoding: 'UTF-8', invalidCharReplacement: '\ufffd' });
  const suite = doc.ele('testsuite', { name: 'idem-lab', ...counts, ...(options.timestamp ? { timestamp: options.timestamp.toISOString().replace(/\.\d{3}Z$/, '') } : {}) });
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
  for (const { result } of report.steps) {
    const testcase = suite.ele('testcase', {
      name: stepName(result),
      classname: `idem-lab.${result.id}-${result.slug}`,
      time: seconds(result.ms),
      file: testcaseFile(result, options),
    });
    if (result.status === 'pass') {
      if (result.warnings.length > 0) testcase.ele('system-out').txt(visibleControls(result.warnings.map((w) => `note: ${w}`).join('\n')));
      continue;
    }
    testcase.ele(result.status === 'fail' ? 'failure' : 'error', { message: oneLine(result.message), type: result.status }).txt(visibleControls(plainBody(result)));
  }
  return doc.end({ prettyPrint: true }) + '\n';
}
