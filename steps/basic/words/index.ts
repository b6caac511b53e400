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

/** A phrase, or a phrase that does not count when one of `notBefore` follows it (`give up` but not `give up after 5 tries`). */
export type Phrase = string | { say: string; notBefore: string[] };

/** The words of one language for steps 07 and 08. */
export interface Words {
  /** Whether words are separated by spaces (a space in a phrase must then match at least one). */
  spaced: boolean;
  /** Whether phrases match whole words only. */
  bounded: boolean;

  /** Step 07: how a learner says no response came back at all. */
  timeout: Phrase[];
  /** Step 07: the backoff half of "exponential backoff with jitter" (a warning when missing). */
  backoff: Phrase[];
  /** Step 07: the jitter half. */
  jitter: Phrase[];

  /** Step 07: the retry verdicts. */
  retry: {
    /** Sending the same request again: retry, resend, send it again (a "retry" verdict on its own; step 08's retry idea too). */
    again: Phrase[];
    /** Said right before `again`, they turn it into "do not retry": do not, never, no need to. */
    notBefore: Phrase[];
    /** May stand between `notBefore` and `again`: should not *be* retried, 不要*再*重试. */
    between: Phrase[];
    /** Said right after `again`, they turn it into "do not retry": 재시도 *하지 않*. */
    notAfter: Phrase[];
    /** "Do not retry" on their own: non-retryable, give up, fail fast. */
    no: Phrase[];
    /** "Retry" on their own besides `again`: don't give up. */
    yes: Phrase[];
    /**
     * "Retrying is futile": `after` (default: `again`), then within `gap` one of `then`
     * (`retrying [the same request] won't help`); with `clauseEnd`, only at the end of a
     * clause (`resending gives the same error.`).
     */
    futile: { after?: Phrase[]; then: Phrase[]; clauseEnd?: boolean }[];
    /** How far a futile phrase may be from the retry word: up to some words, or some characters not across a mark. */
    gap: { words: number } | { chars: number; stopAt: string };
    /** A whole answer: yes / no, always / never, 예 / 아니오, 是 / 否. */
    bareYes: Phrase[];
    bareNo: Phrase[];
    /** Bare words that also begin ordinary phrases (`no way to know`, `never arrives`): a verdict only before a mark or the end. */
    ambiguous: string[];
    /** What follows such a word when it begins a phrase (`No way to know`), even in a verdict cell. */
    goesOn: Phrase[];
    /** A label a bare answer follows: `Retry: no`, `재시도 여부: X`, `是否重试：否`. */
    label: Phrase[];
    /** The header of a table's verdict column (matched anywhere in the header). */
    verdictHeader: Phrase[];
    /** The header of a table's "what to do" column, used when no verdict column is found. */
    actionHeader: Phrase[];
    /** Words that make a heading or list item a question or a title, never a verdict label: which, policy, 어떤, 哪些. */
    notALabel: Phrase[];
    /** Words a verdict label may have besides its verdict (`Retry these`, `Do not retry (client errors)`). */
    labelFiller: Phrase[];
    /** A sentence giving the verdict of the sentence before it to another response: the same goes for, 마찬가지. */
    likewise: Phrase[];
    /** Words joining two clauses with opposite verdicts: `503 retry, but 400 never`. */
    contrast: string[];
    /** Words joining two clauses that may have verdicts of their own: `retry 503 and do not retry 400`. */
    and: string[];
    /** Words that end a clause with the verdict of the clause before it: `..., and 504 too`. */
    too: Phrase[];
    /** Words that alone, at the start or end of a clause after `contrast`, say "not": `but never 400`, `while 400 should not`. */
    not: Phrase[];
    /** Words that alone, at the start or end of a clause after `contrast`, say "do": `400 never, but 503 always`. */
    so: Phrase[];
    /** "Except": the responses named get the verdict opposite to the one given (`retry everything except 400`). */
    except: Phrase[];
    /** With a retry, a verdict for every response: `retry everything`, `모든 실패를 재시도`. */
    everything: Phrase[];
    /** With a "do not", a verdict for every response: `never retry anything` (`do not retry everything` is not one). */
    anything: Phrase[];
  };

  /** Step 08: the ideas of 08-notes.md (the idea "why retries are unavoidable" is `retry.again`). */
  notes: {
    /** The idempotency key itself: a line about "a different request" counts for the body idea only with one. */
    key: Phrase[];
    /** Where keys are kept: stored, saved, the database, remembered. */
    store: Phrase[];
    /** Kept somewhere that lasts: `kept in a table every instance shares` (phrases about keeping in a place). */
    keptIn: Phrase[];
    /** The request body: body, payload, 본문, 请求体. */
    body: Phrase[];
    /** Another request under the same key (counts for the body idea in a line naming the key): a different amount. */
    differentRequest: Phrase[];
  };
}

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
