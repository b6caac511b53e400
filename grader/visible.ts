/**
 * Output hygiene: text a student controls (a server's output, response bodies and headers,
 * ledger cells, answer files, file names) is made visible before it reaches a terminal, a
 * gradebook, a report or GitHub, so that nothing in it is acted on by a reader: no ANSI CSI
 * or OSC sequence (colours, cursor moves, a window title, a hyperlink), no C1 control (a
 * terminal may take U+009B for CSI), no BEL, backspace or lone CR rewriting a line, no
 * bidirectional override reordering what is read (CVE-2021-42574, "Trojan Source"), and no
 * line that starts a GitHub Actions workflow command.
 *
 * Tab and newline are kept (CRLF becomes LF); every other character, Korean, Chinese and
 * emoji (with their zero-width joiners) included, is kept as it is.
 */

/**
 * Control characters and invisible reordering marks: C0 but tab and newline, DEL, C1
 * (U+0080–U+009F), the bidirectional embeddings, overrides and isolates (U+202A–U+202E,
 * U+2066–U+2069), the line and paragraph separators (U+2028, U+2029) and the noncharacters
 * U+FFFE, U+FFFF.
 */
// eslint-disable-next-line no-control-regex
const INVISIBLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufffe\uffff]/g;

/**
 * `text` with every control character shown as an escape a reader sees and no terminal acts
 * on: `\x1b` for ESC (so `ESC[31m` reads `\x1b[31m`), `\x07` for BEL, `\x08` for backspace,
 * `\x0d` for a CR not followed by LF, `\u009b` for a C1 CSI, `\u202e` for a right-to-left
 * override. CRLF becomes LF; tab and LF stay. Idempotent: the result holds no such character.
 */
export function visible(text: string): string {
  return text.replace(/\r\n/g, '\n').replace(INVISIBLE, (ch) => {
    const code = ch.charCodeAt(0);
    return code <= 0x7f ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

/**
 * `value` with visible() applied to every string in it, however deep (plain objects and
 * arrays; numbers, booleans, null and undefined as they are): for a verdict (StepResult) or a
 * report, whose every text may quote a student. A new value; `value` is not changed.
 */
export function visibleDeep<T>(value: T): T {
  if (typeof value === 'string') return visible(value) as T;
  if (Array.isArray(value)) return value.map((item) => visibleDeep(item)) as T;
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, visibleDeep(item)])) as T;
  }
  return value;
}

/**
 * A line GitHub Actions would read as a workflow command: `::name ...::` (`::add-mask::`,
 * `::set-output`, `::stop-commands::`, `::error` ...) or the legacy `##[name ...]`, after
 * any leading white space (the runner trims a line before it looks).
 * (https://docs.github.com/actions/using-workflows/workflow-commands-for-github-actions)
 */
const COMMAND_START = /^(\s*)(::|##\[)/gm;

/**
 * `text` (visible() applied first) with every line that would start a GitHub workflow
 * command broken up: its first character shown as an escape (`\x3a:add-mask::…`,
 * `\x23#[set-output …]`), so a runner prints it and acts on nothing. For any student text
 * the github reporter writes to the log or the job summary.
 */
export function noWorkflowCommands(text: string): string {
  return visible(text).replace(COMMAND_START, (_all, space: string, start: string) => `${space}${start === '::' ? '\\x3a:' : '\\x23#['}`);
}
