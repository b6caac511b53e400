/**
 * Turns a learner's Markdown (07-retry.md, 08-notes.md) into statements: one per heading,
 * table row, list item, or sentence of a paragraph (the lines of a paragraph hard-wrapped
 * at some width are joined first), with the heading above carried into each. A nested
 * list item knows the items it sits in, and a list item the items nested in it. Parsed
 * with marked's lexer.
 */
import { createRequire } from 'node:module';
import type { marked as Marked, Token, Tokens } from 'marked';

let markedLoaded: typeof Marked | undefined;
/** marked (its CommonJS build), loaded on first use: only the file checks of 07 and 08 parse Markdown, and loading it takes about 20 ms of every command's start. */
function markedLexer(): typeof Marked {
  markedLoaded ??= (createRequire(import.meta.url)('marked') as { marked: typeof Marked }).marked;
  return markedLoaded;
}

/** One thing the learner wrote. A table row keeps its cells and the table's header. */
export interface Statement {
  /** A heading, a table row, or a list item or sentence of a paragraph. */
  kind: 'heading' | 'row' | 'line';
  /** All of the statement's text, Markdown markup removed. */
  text: string;
  /** For a table row: its cells, and the header cells of its table. */
  cells?: string[];
  header?: string[];
  /** The heading above the statement, when there is one. */
  heading?: string;
  /** For a nested list item: the texts of the list items it sits in, outermost first. */
  within?: string[];
  /** For a list item with items nested in it: their statements (each also listed on its own, after this one). */
  children?: Statement[];
  /** The block the statement comes from: the sentences of one paragraph share it; each heading, row and list item has its own. */
  block: number;
  /** For a list item: which list of the document it belongs to (0, 1, ...; nested items share their outermost list's). */
  list?: number;
  /** For a list item: the paragraph line right before its list when that line ends with a colon (`Do not retry:`). */
  intro?: string;
  /**
   * For a sentence of a paragraph that began on the line right after a list item without
   * being indented under it, and does not continue the item's sentence: the list it ran on
   * from (Markdown would read the line as part of the item; a learner means a paragraph).
   */
  runOn?: number;
}

/** Markdown inline markup removed: emphasis, code ticks, links, HTML tags. Linear time: no part scans past the next bracket of its kind. */
export function plain(text: string): string {
  return text
    .replace(/<[^<>]+>/g, ' ')
    .replace(/\[([^[\]]*)\]\([^()[\]]*\)/g, '$1')
    .replace(/[*_`~]+/g, '')
    .replace(/\s+/g, ' ')
    .trim();
}

/**
 * Whether the end of `text` (its last `window` characters) matches `pattern`, an
 * end-anchored pattern that reads at most `window - 1` characters: linear time however
 * long the text, where an unanchored search from every position would not be. A match
 * that begins where the window was cut is not counted (a `\b` there is not a word's start).
 */
function endMatches(pattern: RegExp, text: string, window = 32): boolean {
  if (text.length <= window) return pattern.test(text);
  const m = pattern.exec(text.slice(-window));
  return m !== null && m.index > 0;
}

/** How many columns a text takes on a terminal: a CJK or Hangul character takes two. */
function columns(text: string): number {
  return text.length + (text.match(/[\u1100-\u115f\u2e80-\ua4cf\uac00-\ud7a3\uf900-\ufaff\uff00-\uff60]/g) ?? []).length;
}

/** A line that starts like a labelled statement of its own: `503: retry`, `Timeout — yes`, `400 -> no`. */
const LABEL_START = /^[^\s:：].{0,40}?(?:[:：](?:\s|$)|\s[—–-]\s|\s?(?:→|->|=>)\s?)/;
/** Words a sentence does not end on: a line ending in one was wrapped. */
const OPEN_END = /(?:[,(\-–—/]|\b(?:a|an|the|and|or|but|nor|of|to|in|on|at|by|for|from|with|into|than|then|that|which|who|so|as|if|when|whether|because|since|is|are|was|were|be|been|not|no|it|its|this|these|those|can|could|will|would|should|may|might|must|do|does|did|has|have|had|same|every|each|any|some))$/i;
/** The end of a sentence: `.`, `!`, `?`, a colon, or their CJK forms. */
const SENTENCE_END = /[.!?:。！？：]["')\]]*$/;

/** Whether `line` goes on with the sentence of `last` (both without markup): see unwrap. */
function continues(last: string, line: string): boolean {
  return endMatches(OPEN_END, last) || (!endMatches(SENTENCE_END, last) && !LABEL_START.test(line) && (columns(last) >= 60 || /^[a-z,;)\]]/.test(line)));
}

/**
 * The lines of a paragraph joined where a line was hard-wrapped: this line stops on a word
 * or mark no sentence ends on (`the`, `and`, a comma), or it stops without a full stop, the
 * next does not start like a labelled statement (`503: ...`) and either goes on in lower
 * case or this line is long (60 columns or more). Lines that each state a thing of their own
 * (`Timeout: retry` over `400: no`) stay apart. Returns each joined line, markup removed.
 */
export function unwrap(lines: string[]): string[] {
  const out: string[] = [];
  let last = '';
  for (const raw of lines) {
    const line = plain(raw);
    if (!line) continue;
    const wrapped = out.length > 0 && continues(last, line);
    if (wrapped) out[out.length - 1] += `\n${raw}`;
    else out.push(raw);
    last = line;
  }
  return out.map(plain);
}

/** Abbreviations a full stop does not end a sentence after. */
const ABBREVIATION = /(?:\b(?:e\.g|i\.e|etc|vs|cf|approx|incl|resp|esp|ca|Mr|Mrs|Dr|St)|\b[A-Za-z])\.$/;

/**
 * The sentences of a text: split after `.`, `!` or `?` followed by a space (not after an
 * abbreviation such as `e.g.`, nor inside `0.5` or `...)`), and after `。`, `！`, `？`.
 */
export function sentences(text: string): string[] {
  const out: string[] = [];
  let start = 0;
  // A scan rather than a global regex: a run of 1 MB of dots must cost 1 MB, not its square.
  const n = text.length;
  let i = 0;
  while (i < n) {
    const ch = text[i];
    const western = ch === '.' || ch === '!' || ch === '?';
    const cjk = ch === '。' || ch === '！' || ch === '？';
    if (!western && !cjk) {
      i++;
      continue;
    }
    let j = i;
    const marks = western ? '.!?' : '。！？';
    while (j < n && marks.includes(text[j])) j++;
    const run = j - i;
    const closers = western ? `"')]` : `"')]」』”`;
    while (j < n && closers.includes(text[j])) j++;
    if (western && !(j < n && /\s/.test(text[j]))) {
      i = j;
      continue;
    }
    const end = j;
    i = j;
    if (ch === '.' && run === 1 && end - start > 0 && endMatches(ABBREVIATION, text.slice(start, end), 16)) continue;
    const sentence = text.slice(start, end).trim();
    if (sentence) out.push(sentence);
    start = end;
  }
  const rest = text.slice(start).trim();
  if (rest) out.push(rest);
  return out;
}

/** A list item's first line: its indent, marker and the spaces after it, then its text. */
const ITEM = /^( *)([-*+]|\d{1,9}[.)])(?: +|$)(.*)$/;
const FENCE = /^ {0,3}(?:`{3,}|~{3,})/;

/**
 * The Markdown with a blank line put before each line that runs on from a list item into a
 * paragraph of its own: a line right under an item, not indented to the item's text,
 * that does not go on with the item's sentence (see unwrap): `- 422` over `These are final.`,
 * `- 503` over `Do not retry:`. CommonMark reads such a line as part of the item (a lazy
 * continuation line); a learner means a new paragraph, or the label of the next list.
 * Returns the text and where each paragraph so split off starts (offsets in the text).
 * One pass over the lines: linear time.
 */
export function splitRunOns(markdown: string): { text: string; runOns: Set<number> } {
  const out: string[] = [];
  const runOns = new Set<number>();
  let offset = 0;
  let fence = false;
  /** The text column of the outermost item the lines are in, and the last line of the item's text; none outside a list item. */
  let item: { indent: number; last: string } | undefined;
  for (const line of markdown.split('\n')) {
    const push = (l: string) => {
      out.push(l);
      offset += l.length + 1;
    };
    if (fence) {
      if (FENCE.test(line)) fence = false;
      push(line);
      continue;
    }
    const m = ITEM.exec(line);
    if (!line.trim()) {
      item = undefined;
    } else if (m) {
      // A new outermost item, or one nested in the item the lines are in.
      if (!item || m[1].length < item.indent) item = { indent: line.length - m[3].length, last: plain(m[3]) };
      else item.last = plain(m[3]);
    } else if (item) {
      const indent = line.length - line.trimStart().length;
      if (indent < item.indent && !/^\s*>/.test(line) && !continues(item.last, plain(line))) {
        push('');
        runOns.add(offset);
        item = undefined;
      } else {
        item.last = plain(line);
      }
    }
    if (FENCE.test(line)) fence = true;
    push(line);
  }
  return { text: out.join('\n'), runOns };
}

interface Walk {
  out: Statement[];
  block: number;
  /** Lists of the document so far. */
  lists: number;
}

function listItems(list: Tokens.List, heading: string | undefined, within: string[], w: Walk, at: { list: number; intro?: string }): Statement[] {
  const items: Statement[] = [];
  for (const item of list.items) {
    const first = item.tokens.filter((t) => t.type !== 'list');
    const text = plain(first.map((t) => ('text' in t ? String(t.text) : '')).join(' '));
    const nested = item.tokens.filter((t): t is Tokens.List => t.type === 'list');
    let st: Statement | undefined;
    if (text) {
      st = { kind: 'line', text, heading, block: w.block++, list: at.list };
      if (within.length) st.within = within;
      if (at.intro) st.intro = at.intro;
      w.out.push(st);
      items.push(st);
    }
    const children = nested.flatMap((list) => listItems(list, heading, text ? [...within, text] : within, w, at));
    if (st && children.length) st.children = children;
    else if (!st) items.push(...children);
  }
  return items;
}

/**
 * Walks the tokens; `runOns` (top level only) are the offsets where a paragraph split off
 * a list item starts (see splitRunOns).
 */
function walk(tokens: Token[], heading: string | undefined, w: Walk, runOns?: Set<number>): string | undefined {
  let current = heading;
  let offset = 0;
  /** The last top-level list, and the last line of the paragraph just before this token. */
  let lastList: number | undefined;
  let lastLine: string | undefined;
  for (const token of tokens) {
    const start = offset;
    offset += token.raw.length;
    const introLine = lastLine;
    if (token.type !== 'space') lastLine = undefined;
    switch (token.type) {
      case 'heading':
        current = plain((token as Tokens.Heading).text);
        w.out.push({ kind: 'heading', text: current, block: w.block++ });
        break;
      case 'table': {
        const table = token as Tokens.Table;
        const header = table.header.map((cell) => plain(cell.text));
        for (const row of table.rows) {
          const cells = row.map((cell) => plain(cell.text));
          w.out.push({ kind: 'row', text: cells.join(' | '), cells, header, heading: current, block: w.block++ });
        }
        break;
      }
      case 'list': {
        lastList = w.lists++;
        const intro = introLine && /[:：]$/.test(introLine) ? introLine : undefined;
        listItems(token as Tokens.List, current, [], w, { list: lastList, intro });
        break;
      }
      case 'paragraph':
      case 'text': {
        const block = w.block++;
        const runOn = runOns?.has(start) ? lastList : undefined;
        const lines = unwrap((token as Tokens.Paragraph).text.split('\n'));
        for (const line of lines) {
          for (const text of sentences(line)) {
            const st: Statement = { kind: 'line', text, heading: current, block };
            if (runOn !== undefined) st.runOn = runOn;
            w.out.push(st);
          }
        }
        lastLine = lines[lines.length - 1];
        break;
      }
      case 'blockquote':
        walk((token as Tokens.Blockquote).tokens, current, w);
        break;
      default:
        break;
    }
  }
  return current;
}

/**
 * The most of a text parsed as Markdown by marked, in characters. marked's worst cases
 * grow faster than the text (`[a](` or nested `>` lines); an answer is a few KB, so a
 * longer text is read line by line instead (statementsByLine), in linear time.
 */
export const MARKDOWN_PARSE_LIMIT = 16 * 1024;

/** The most statements read from one text: hundreds of times what an answer has, few enough for any check to weigh them all quickly. */
export const MAX_STATEMENTS = 5000;

/** Every statement of a Markdown text, in document order. Never throws. Linear time beyond MARKDOWN_PARSE_LIMIT. */
export function statements(markdown: string): Statement[] {
  if (markdown.length > MARKDOWN_PARSE_LIMIT) return statementsByLine(markdown);
  const w: Walk = { out: [], block: 0, lists: 0 };
  const { text, runOns } = splitRunOns(markdown.replace(/\r\n?/g, '\n'));
  try {
    walk(markedLexer().lexer(text), undefined, w, runOns);
  } catch {
    // Too deep for the stack (nested quotes or lists): read it line by line.
    return statementsByLine(markdown);
  }
  return w.out.slice(0, MAX_STATEMENTS);
}

/**
 * Statements read line by line, without a Markdown parser: `#` headings, table rows (the
 * first `|` line of a run is the header, rule lines are passed over), list items, and
 * sentences of other lines. Linear time.
 */
export function statementsByLine(markdown: string): Statement[] {
  const out: Statement[] = [];
  let block = 0;
  let heading: string | undefined;
  let header: string[] | undefined;
  for (const raw of markdown.split('\n')) {
    if (out.length >= MAX_STATEMENTS) break;
    const line = raw.trim().replace(/^(?:>\s*)+/, '');
    if (line === '') {
      header = undefined;
      continue;
    }
    const h = /^#{1,6}\s+(.*)$/.exec(line);
    if (h) {
      heading = plain(h[1].replace(/#+$/, ''));
      out.push({ kind: 'heading', text: heading, block: block++ });
      header = undefined;
      continue;
    }
    if (line.startsWith('|')) {
      const cells = line.replace(/^\|/, '').replace(/\|$/, '').split('|').map((c) => plain(c));
      if (/^[\s|:-]+$/.test(line)) continue;
      if (!header) header = cells;
      else out.push({ kind: 'row', text: cells.join(' | '), cells, header, heading, block: block++ });
      continue;
    }
    header = undefined;
    const item = /^(?:[-*+]|\d{1,9}[.)])\s+(.*)$/.exec(line);
    const text = plain(item ? item[1] : line);
    if (!text) continue;
    if (item) {
      out.push({ kind: 'line', text, heading, block: block++ });
      continue;
    }
    const b = block++;
    for (const sentence of sentences(text)) out.push({ kind: 'line', text: sentence, heading, block: b });
  }
  return out;
}

/** How many letters of text a statement has, counting a CJK or Hangul character as a word. */
export function wordCount(text: string): number {
  const cjk = (text.match(/[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]/g) ?? []).length;
  const words = (text.replace(/[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]/g, ' ').match(/[A-Za-z]{2,}/g) ?? []).length;
  return words + Math.ceil(cjk / 2);
}
