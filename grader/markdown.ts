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
    const wrapped =
      out.length > 0 &&
      (OPEN_END.test(last) || (!SENTENCE_END.test(last) && !LABEL_START.test(line) && (columns(last) >= 60 || /^[a-z,;)\]]/.test(line))));
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

interface Walk {
  out: Statement[];
  block: number;
}

function listItems(list: Tokens.List, heading: string | undefined, within: string[], w: Walk): Statement[] {
  const items: Statement[] = [];
  for (const item of list.items) {
    const first = item.tokens.filter((t) => t.type !== 'list');
    const text = plain(first.map((t) => ('text' in t ? String(t.text) : '')).join(' '));
    const nested = item.tokens.filter((t): t is Tokens.List => t.type === 'list');
    let st: Statement | undefined;
    if (text) {
      st = { kind: 'line', text, heading, block: w.block++ };
      if (within.length) st.within = within;
      w.out.push(st);
      items.push(st);
    }
    const children = nested.flatMap((list) => listItems(list, heading, text ? [...within, text] : within, w));
    if (st && children.length) st.children = children;
    else if (!st) items.push(...children);
  }
  return items;
}

function walk(tokens: Token[], heading: string | undefined, w: Walk): string | undefined {
  let current = heading;
  for (const token of tokens) {
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
      case 'list':
        listItems(token as Tokens.List, current, [], w);
        break;
      case 'paragraph':
      case 'text': {
        const block = w.block++;
        for (const line of unwrap((token as Tokens.Paragraph).text.split('\n'))) {
          for (const text of sentences(line)) w.out.push({ kind: 'line', text, heading: current, block });
        }
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
  const w: Walk = { out: [], block: 0 };
  walk(marked.lexer(markdown), undefined, w);
  return w.out;
}

/** How many letters of text a statement has, counting a CJK or Hangul character as a word. */
export function wordCount(text: string): number {
  const cjk = (text.match(/[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]/g) ?? []).length;
  const words = (text.replace(/[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]/g, ' ').match(/[A-Za-z]{2,}/g) ?? []).length;
  return words + Math.ceil(cjk / 2);
}
