/**
 * The words the file checks of steps 07 and 08 look for, one table per language
 * (en.ts, ko.ts, zh.ts) that a translator can review, and the one place that turns them
 * into regular expressions. A learner may write in any language whatever the lab's
 * language is, so every check looks for the words of all tables.
 *
 * A phrase is plain text with a little notation:
 * - a space stands for any whitespace (in a table with `spaced: false`, also none:
 *   Korean `다시 보내` matches `다시보내`);
 * - `{a|b|c}` is one of a, b, c; `[a|b]` optionally one of them (never first);
 * - `*` is one more word, optionally; `…` up to six more words;
 * - a leading `-` (connectives only) means the word is the end of the word before it
 *   (Korean `-지만`: `재시도하지만`).
 * In a table with `bounded: true` a phrase matches whole words only (`retry` is not
 * `retrying`: list every form); otherwise it matches anywhere (Korean stems such as
 * `다시 보내` in `다시 보내도`). Matching ignores case.
 *
 * The expressions built here have no nested unbounded quantifiers, so they run in linear
 * time on any input (DESIGN.md: file checks read at most 1 MB in linear time).
 */
import { en } from './en.js';
import { ko } from './ko.js';
import { zh } from './zh.js';

export type { Phrase, Words } from './types.js';
import type { Phrase, Words } from './types.js';

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

interface Token {
  kind: 'text' | 'one' | 'maybe' | 'word' | 'gap';
  alts: string[];
  /** No space before it in the phrase. */
  glued: boolean;
}

/** A phrase's tokens: text, `{a|b}`, `[a|b]`, `*`, `…`, each knowing whether a space came before it. */
function tokens(phrase: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  let glued = true;
  while (i < phrase.length) {
    const c = phrase[i];
    if (c === ' ') {
      glued = false;
      i++;
      continue;
    }
    let token: Token;
    if (c === '{' || c === '[') {
      const end = phrase.indexOf(c === '{' ? '}' : ']', i);
      if (end < 0) throw new Error(`word table: unclosed ${c} in "${phrase}"`);
      token = { kind: c === '{' ? 'one' : 'maybe', alts: phrase.slice(i + 1, end).split('|'), glued };
      i = end + 1;
    } else if (c === '*' || c === '…') {
      token = { kind: c === '*' ? 'word' : 'gap', alts: [], glued };
      i++;
    } else {
      let end = i;
      while (end < phrase.length && !' {[*…'.includes(phrase[end])) end++;
      token = { kind: 'text', alts: [phrase.slice(i, end)], glued };
      i = end;
    }
    // Text glued to text (`retr{y|ies}`) is one token's continuation; keep them apart, joined with nothing.
    out.push(token);
    glued = true;
  }
  if (out.length === 0) throw new Error('word table: an empty phrase');
  if (out[0].kind !== 'text' && out[0].kind !== 'one') throw new Error(`word table: "${phrase}" starts with an optional part`);
  return out;
}

/** The expression source of one phrase (see the notation above). */
export function phraseSource(phrase: Phrase, words: Pick<Words, 'spaced' | 'bounded'>): string {
  const say = typeof phrase === 'string' ? phrase : phrase.say;
  const sep = words.spaced ? String.raw`\s+` : String.raw`\s*`;
  const alt = (alts: string[]) => `(?:${alts.map((a) => a.split(' ').map(escape).join(sep)).join('|')})`;
  let out = '';
  for (const token of tokens(say)) {
    const before = token.glued && out ? '' : out ? sep : '';
    switch (token.kind) {
      case 'text':
        out += before + escape(token.alts[0]);
        break;
      case 'one':
        out += before + alt(token.alts);
        break;
      case 'maybe':
        out += `(?:${before}${alt(token.alts)})?`;
        break;
      case 'word':
        out += String.raw`(?:\s+\S+)?`;
        break;
      case 'gap':
        out += String.raw`(?:\s+\S+){0,6}?`;
        break;
    }
  }
  if (words.bounded) {
    if (/^[{[]?\w/.test(say)) out = String.raw`\b` + out;
    if (/\w[}\]]?$/.test(say)) out += String.raw`\b`;
  }
  if (typeof phrase !== 'string' && phrase.notBefore.length) {
    out += `(?!${sep}(?:${phrase.notBefore.map(escape).join('|')}))`;
  }
  return out;
}

/** One alternation of phrases, longest first (so that `no response` is tried before `no`). */
export function anyOf(phrases: Phrase[], words: Pick<Words, 'spaced' | 'bounded'>): string {
  const sources = phrases.map((p) => phraseSource(p, words)).sort((a, b) => b.length - a.length);
  return `(?:${sources.join('|')})`;
}

/** A test for any phrase of one group in any of the tables, matching anywhere (bounded per table). */
export function pattern(tables: readonly Words[], group: (w: Words) => Phrase[], flags = 'i', bounded?: boolean): RegExp {
  const parts = tables
    .filter((w) => group(w).length > 0)
    .map((w) => anyOf(group(w), bounded === undefined ? w : { spaced: w.spaced, bounded }));
  return new RegExp(parts.length ? parts.join('|') : '(?!)', flags);
}


/** Every language's table: the checks look for the words of all of them. */
export const WORDS: readonly Words[] = [en, ko, zh];
