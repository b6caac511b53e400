/** The shape of a language's word table for steps 07 and 08 (see index.ts for the phrase notation). */

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
