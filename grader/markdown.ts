/**
 * Turns a learner's Markdown (07-retry.md, 08-notes.md) into statements: one per heading,
 * table row, list item, or sentence of a paragraph (the lines of a paragraph hard-wrapped
 * at some width are joined first), with the heading above carried into each. A nested
 * list item knows the items it sits in, and a list item the items nested in it. Parsed
 * with marked's lexer.
 */
import { marked, type Token, type Tokens } from 'marked';

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

/** Markdown inline markup removed: emphasis, code ticks, links, HTML tags. */
export function plain(text: string): string {
  return text
    .replace(/<[^>]+>/g, ' ')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[*_`~]+/g, '')
    .replace(/\s+/g, ' ')
    .trim();
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
  return OPEN_END.test(last) || (!SENTENCE_END.test(last) && !LABEL_START.test(line) && (columns(last) >= 60 || /^[a-z,;)\]]/.test(line)));
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
  for (const m of text.matchAll(/[.!?]+["')\]]*(?=\s)|[。！？]+["')\]」』”]*/g)) {
    const end = (m.index ?? 0) + m[0].length;
    if (m[0].startsWith('.') && m[0].length === 1 && ABBREVIATION.test(text.slice(start, end))) continue;
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

/** Every statement of a Markdown text, in document order. Never throws. */
export function statements(markdown: string): Statement[] {
  const w: Walk = { out: [], block: 0, lists: 0 };
  const { text, runOns } = splitRunOns(markdown.replace(/\r\n?/g, '\n'));
  walk(marked.lexer(text), undefined, w, runOns);
  return w.out;
}

/** How many letters of text a statement has, counting a CJK or Hangul character as a word. */
export function wordCount(text: string): number {
  const cjk = (text.match(/[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]/g) ?? []).length;
  const words = (text.replace(/[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]/g, ' ').match(/[A-Za-z]{2,}/g) ?? []).length;
  return words + Math.ceil(cjk / 2);
}
