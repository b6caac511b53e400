/**
 * What a Korean or Chinese text must not hold: an English sentence, or a Korean particle
 * template such as 을(를) or a particle glued to a placeholder whose value decides it.
 * Shared by the catalog scan and the scan of every command's output (test/texts.test.ts).
 */

/** English words that make a run of Latin words a sentence rather than a name or a list of tokens. */
const FUNCTION_WORDS = new Set(
  'a an the is are was were be been being to of in on at for with without from by and or not no nor must should can could will would this that these those it its your you we our what which when then than there here has have had do does did got get gets into as if but all every each one more only also still so just any some again before after'.split(' '),
);

/** Output lines that are transcripts (requests, responses, ledger rows, curl lines, server logs), not the tool's prose. */
const TRANSCRIPT = [
  /^\s*\$ /, // a command to run again
  /^\s*(?:\[[A-Z]\] )?(?:POST|GET) \//, // a request line
  /^\s*HTTP \d{3}/, // a status line
  /^\s*Idempotency-Replayed:/,
  /^\s*\{/, // a JSON body
  /^\s*payment_id\s+idempotency_key/, // the ledger's header
  /^\s*\d+\s{2,}\S/, // a ledger row
  /^\s*\[[A-Z]\](?: |$)/, // a line a server printed, labelled with the server (grader/printed.ts)
  /^\s*127\.0\.0\.1 - - \[/, // the server's log
  /^\s*payment server on http:/, // the starter's first line
  /^\s*Traceback \(most recent call last\):/,
  /^\s*File "/,
  /^\s*\w+(?:\.\w+)*(?:Error|Exception|Exit)\b.*:/, // an exception line
  /^\s+\^+$/,
];

/** Removes what may be English in any language's text: placeholders, code in backticks, URLs, quoted text, JSON. */
function prose(text: string): string {
  return text
    .replace(/\{\w+\}/g, ' ')
    .replace(/`[^`]*`/g, ' ')
    .replace(/https?:\/\/\S+/g, ' ')
    .replace(/"[^"\n]*"|'[^'\n]*'/g, ' ')
    .replace(/\{[^{}\n]*\}/g, ' ');
}

/**
 * The English sentences in a text: runs of three or more English words (lower-case words
 * of two letters or more, with their punctuation) of which one is a function word
 * ("the", "is", "to" ...). Command names, flags, file names, identifiers and HTTP reason
 * phrases do not make such runs.
 * @param options.transcripts drop transcript lines first (requests, responses, ledger, logs)
 * @returns each run found, as text
 */
export function englishSentences(text: string, options: { transcripts?: boolean } = {}): string[] {
  const lines = text.split('\n').filter((line) => !options.transcripts || !TRANSCRIPT.some((re) => re.test(line)));
  const found: string[] = [];
  for (const line of lines) {
    let run: string[] = [];
    const flush = () => {
      if (run.length >= 3 && run.some((w) => FUNCTION_WORDS.has(w.toLowerCase().replace(/[^a-z']/g, '')))) found.push(run.join(' '));
      run = [];
    };
    for (const token of prose(line).split(/\s+/)) {
      if (/^\(?[A-Za-z][a-z]+(?:'[a-z]+)?[,.;:!?)]*$/.test(token)) {
        run.push(token);
        if (/[.;:!?]$/.test(token)) flush();
      } else flush();
    }
    flush();
  }
  return found;
}

/** Korean particle templates: 을(를), 이(가), 은(는), 과(와), (으)로, (이)라 ... */
const TEMPLATE = /(?:을|를)\((?:을|를)\)|(?:이|가)\((?:이|가)\)|(?:은|는)\((?:은|는)\)|(?:과|와)\((?:과|와)\)|(?:아|야)\((?:아|야)\)|\((?:을|를|이|가|은|는|과|와|아|야|으|이라)\)/g;

/** The particle templates in a text. */
export function particleTemplates(text: string): string[] {
  return [...text.matchAll(TEMPLATE)].map((m) => m[0]);
}

/**
 * Particles glued to a placeholder in a Korean message (`{file}을`, `{key}로`, `"{step}"라는`):
 * the right one depends on the value's last sound, which the message cannot know.
 * Invariant particles (에, 의, 도, 만, 에서, 까지, 부터) and counters (개, 단계) are fine.
 */
export function variableParticles(message: string): string[] {
  return [...message.matchAll(/\{\w+\}["'”’]?(?:이라는|이라고|이라|이며|라는|라고|으로|을|를|이|가|은|는|과|와|로|라)(?![가-힣])/g)].map((m) => m[0]);
}

/** A Chinese full stop, question or exclamation mark followed by a space (full-width punctuation takes none). */
export function spaceAfterFullStop(text: string): string[] {
  return [...text.matchAll(/[。！？：；，] +\S/g)].map((m) => m[0]);
}

/** Chinese characters and full-width punctuation. */
const CJK = /[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]/;

/**
 * Quotes that break a language's convention. Chinese quotes words with “…” and keeps
 * ASCII "…" for code, commands and JSON: ASCII quotes around Chinese text, a placeholder
 * quoted as a word with ASCII quotes (not a JSON key or value beside a colon), and “…”
 * around a bare ASCII name (a JSON field, which is code) are all wrong. Korean quotes with
 * ASCII "…" throughout: any curly quote is wrong. Code in backticks is not looked at.
 * @returns each wrongly quoted span, as written
 */
export function quoteProblems(lang: 'ko' | 'zh', text: string): string[] {
  const outsideCode = text.split('`').filter((_, i) => i % 2 === 0).join(' ` ');
  if (lang === 'ko') return [...outsideCode.matchAll(/[“”‘’]/g)].map((m) => m[0]);
  const found: string[] = [];
  for (const m of outsideCode.matchAll(/"([^"\n]*)"/g)) {
    const before = outsideCode.slice(0, m.index).trimEnd();
    const after = outsideCode.slice(m.index + m[0].length).trimStart();
    const json = before.endsWith(':') || after.startsWith(':');
    if (CJK.test(m[1]) || (/^\{\w+\}$/.test(m[1]) && !json)) found.push(m[0]);
  }
  for (const m of outsideCode.matchAll(/'\{\w+\}'|“[A-Za-z_][\w-]*”/g)) found.push(m[0]);
  return found;
}

/**
 * Lines of a Markdown text that break a paragraph: a prose line followed by another prose
 * line of the same paragraph (not a heading, list item, table row, code fence or blank).
 * Markdown joins them with a space, which Chinese does not write, and a sentence cut in
 * two is hard to edit in any language; each paragraph is one line.
 * @returns the first 40 characters of each line followed by a continuation, with its line number
 */
export function brokenParagraphs(markdown: string): string[] {
  const lines = markdown.split('\n');
  const block = /^\s*(?:#|\||```|[-*+] |\d+[.)] |$)/;
  const found: string[] = [];
  let fence = false;
  for (let i = 0; i + 1 < lines.length; i++) {
    if (lines[i].trimStart().startsWith('```')) fence = !fence;
    if (fence || (block.test(lines[i]) && !/^\s*(?:[-*+] |\d+[.)] )/.test(lines[i]))) continue;
    if (!block.test(lines[i + 1])) found.push(`${i + 1}: ${lines[i].slice(0, 40)}`);
  }
  return found;
}
