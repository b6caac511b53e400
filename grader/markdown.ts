/**
 * Turns a learner's Markdown (07-retry.md, 08-notes.md) into statements: one per table
 * row, list item or line of a paragraph, with a heading's text carried into the lines
 * under it when the heading names what they are about. Parsed with marked's lexer.
 */
import { marked, type Token, type Tokens } from 'marked';

/** One thing the learner wrote. A table row keeps its cells and the table's header. */
export interface Statement {
  /** A heading, a table row, or a list item or line of text. */
  kind: 'heading' | 'row' | 'line';
  /** All of the statement's text, Markdown markup removed. */
  text: string;
  /** For a table row: its cells, and the header cells of its table. */
  cells?: string[];
  header?: string[];
  /** The heading above the statement, when there is one. */
  heading?: string;
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

function walk(tokens: Token[], heading: string | undefined, out: Statement[]): string | undefined {
  let current = heading;
  for (const token of tokens) {
    switch (token.type) {
      case 'heading':
        current = plain((token as Tokens.Heading).text);
        out.push({ kind: 'heading', text: current });
        break;
      case 'table': {
        const table = token as Tokens.Table;
        const header = table.header.map((cell) => plain(cell.text));
        for (const row of table.rows) {
          const cells = row.map((cell) => plain(cell.text));
          out.push({ kind: 'row', text: cells.join(' | '), cells, header, heading: current });
        }
        break;
      }
      case 'list':
        for (const item of (token as Tokens.List).items) {
          const first = item.tokens.filter((t) => t.type !== 'list');
          const text = plain(first.map((t) => ('text' in t ? String(t.text) : '')).join(' '));
          if (text) out.push({ kind: 'line', text, heading: current });
          const nested = item.tokens.filter((t) => t.type === 'list');
          if (nested.length) walk(nested, current, out);
        }
        break;
      case 'paragraph':
      case 'text':
        for (const line of (token as Tokens.Paragraph).text.split('\n')) {
          const text = plain(line);
          if (text) out.push({ kind: 'line', text, heading: current });
        }
        break;
      case 'blockquote':
        walk((token as Tokens.Blockquote).tokens, current, out);
        break;
      default:
        break;
    }
  }
  return current;
}

/** Every statement of a Markdown text, in document order. Never throws. */
export function statements(markdown: string): Statement[] {
  const out: Statement[] = [];
  walk(marked.lexer(markdown), undefined, out);
  return out;
}

/** How many letters of text a statement has, counting a CJK or Hangul character as a word. */
export function wordCount(text: string): number {
  const cjk = (text.match(/[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]/g) ?? []).length;
  const words = (text.replace(/[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]/g, ' ').match(/[A-Za-z]{2,}/g) ?? []).length;
  return words + Math.ceil(cjk / 2);
}
