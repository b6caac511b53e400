/**
 * The tap reporter: TAP version 13 (https://testanything.org/tap-version-13-specification.html)
 * for any CI system that reads it: one test point per step, a YAML block under each with
 * its points and, when it did not pass, the message and the whole transcript; the score
 * in a closing comment.
 */
import { formatPoints, type GradeReport } from '../grading.js';
import { plainBody, stepName, visibleControls, stepsPass } from './plain.js';

/** A test point's description: no newlines, and `#` escaped so it never starts a directive. */
function description(text: string): string {
  return visibleControls(text).replace(/\s+/g, ' ').replace(/\\/g, '\\\\').replace(/#/g, '\\#');
}

/**
 * A YAML scalar for `text` at `indent` spaces: a literal block (`|-`) for several lines
 * whose first line does not start with a space and none of which is a YAML document
 * marker, else a JSON-quoted string (JSON's escapes are YAML's). Control characters are
 * shown as `\xNN`.
 */
function yamlString(text: string, indent: string): string {
  const safe = visibleControls(text).replace(/\s+$/, '');
  // A line that is only `...` or `---` ends a YAML block for some TAP readers: quote instead.
  if (!safe.includes('\n') || /^[ \t\n]/.test(safe) || /^\s*(\.\.\.|---)\s*$/m.test(safe)) return JSON.stringify(safe);
  return '|-\n' + safe.split('\n').map((line) => (line === '' ? '' : indent + line)).join('\n');
}

/** The tap reporter: the report as TAP version 13 text, ending in a newline. */
export function formatTap(report: GradeReport): string {
  const out = ['TAP version 13', `1..${report.steps.length}`];
  if (report.status === 'error' && report.message) out.push(...visibleControls(report.message).split('\n').map((l) => `# ${l}`));
  report.steps.forEach(({ result, points, score, required }, i) => {
    out.push(`${result.status === 'pass' ? 'ok' : 'not ok'} ${i + 1} - ${description(stepName(result))}`);
    const yaml = [`status: ${result.status}`, `points: ${formatPoints(points)}`, `score: ${formatPoints(score)}`, `required: ${required}`, `duration_ms: ${result.ms}`];
    if (result.file) yaml.push(`file: ${JSON.stringify(result.file)}`);
    if (result.status !== 'pass') {
      yaml.push(`message: ${yamlString(result.message, '  ')}`);
      yaml.push(`details: ${yamlString(plainBody(result), '  ')}`);
    } else if (result.warnings.length > 0) {
      yaml.push(`notes: ${yamlString(result.warnings.join('\n'), '  ')}`);
    }
    out.push('  ---', ...yaml.join('\n').split('\n').map((line) => (line === '' ? '' : `  ${line}`)), '  ...');
  });
  const passed = report.steps.filter((s) => s.result.status === 'pass').length;
  out.push(`# ${stepsPass(passed, report.steps.length)}. Score: ${formatPoints(report.score)} of ${formatPoints(report.maxScore)} points.`);
  return out.join('\n') + '\n';
}
