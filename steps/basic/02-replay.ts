import { CheckFailed, inPart } from '../../grader/failure.js';
import { SECOND_CLIENT_ADDRESS } from '../../grader/http.js';
import { Inconclusive } from '../../grader/gate.js';
import { expectReplay, expectRows, expectStatus, paymentOf } from '../../grader/expect-http.js';
import { t } from '../../i18n/index.js';
import type { LiveContext } from '../../grader/context.js';
import type { ServerInstance } from '../../grader/server.js';
import type { Exchange } from '../../grader/types.js';
import type { Step } from '../../grader/track.js';

/**
 * Keys that are different keys, each a payment of its own, in groups of keys that a
 * careless server takes for one: they differ only in case,
 * share a 200-character prefix, are 255 characters long (the longest the contract
 * allows) and differ only in the last, or hold `/`, `.`, `:` or a space; and keys as a web
 * framework's helpers would rewrite them: `%41` beside the `A` it decodes to, `+` beside
 * the space URL-decoding makes of it, `%2B` beside `+` and `%2b` (URL-decoding, case
 * folding), `%20` beside a space, one space, two spaces or none (stripping spaces). A server that folds case,
 * cuts keys short, URL-decodes them, strips their spaces or normalises their punctuation
 * makes two of them one payment. Then keys with Latin-1 characters (a header carries each
 * as one byte, which undici, Python's http.server and Node's http read back as the same
 * character): `²`, `³`, `ª`, `º` beside the `2`, `3`, `a`, `o` Unicode NFKC makes of them, a
 * no-break space (U+00A0) beside a space (NFKC; Python's `str.split`), `ß` beside `ss` and
 * `É` beside `é` (`casefold`, `upper`, `lower`), and `é` beside `e`, nothing and `?`
 * (accents stripped; `encode("ascii", "ignore")` or `"replace"`). Keys are opaque (IETF
 * Idempotency-Key draft, section 2: the key is compared as sent). No key starts or ends
 * with a space or a no-break space: HTTP (and Python's strip) takes those off before any
 * server sees the key.
 * @returns 12 groups of 2 to 4 keys (38 keys), no key in two groups
 */
function distinctKeys(ctx: LiveContext): string[][] {
  const word = ctx.data.word(10);
  const prefix = ctx.data.word(200);
  const stem = ctx.data.word(12);
  const tail = ctx.data.word(6);
  const long = ctx.data.word(254);
  const [a, b] = [ctx.data.word(8), ctx.data.word(8)];
  const [c, d] = [ctx.data.word(8), ctx.data.word(8)];
  const [e, f] = [ctx.data.word(8), ctx.data.word(8)];
  const [g, h] = [ctx.data.word(8), ctx.data.word(8)];
  const [i, j] = [ctx.data.word(8), ctx.data.word(8)];
  const [k, l] = [ctx.data.word(8), ctx.data.word(8)];
  const [m, n] = [ctx.data.word(8), ctx.data.word(8)];
  const [o, p] = [ctx.data.word(8), ctx.data.word(8)];
  return [
    [`Ab${word}`, `aB${word}`],
    [`${prefix}x1`, `${prefix}y2`],
    [`${long}x`, `${long}y`],
    [`${stem}/${tail}`, `${stem}.${tail}`, `${stem}:${tail}`, `${stem} ${tail}`],
    [`${a}%41${b}`, `${a}A${b}`, `${a}+${b}`, `${a} ${b}`],
    [`${c}%2B${d}`, `${c}+${d}`, `${c}%2b${d}`, `${c.toUpperCase()}+${d}`],
    [`${e} ${f}`, `${e}${f}`, `${e}  ${f}`, `${e.toUpperCase()} ${f}`],
    [`${g}%20${h}`, `${g} ${h}`],
    // Latin-1, one byte each on the wire (see above).
    [`${i}\u00b2${j}\u00aa`, `${i}2${j}a`, `${i}\u00b3${j}\u00ba`, `${i}3${j}o`],
    [`${k}\u00a0${l}`, `${k} ${l}`],
    [`${m}\u00df${n}`, `${m}ss${n}`, `${m}\u00c9${n}`, `${m}\u00e9${n}`],
    [`${o}\u00e9${p}`, `${o}e${p}`, `${o}${p}`, `${o}?${p}`],
  ];
}

/**
 * Payments with keys of their own made after the waves of distinct keys and before the
 * first key's last retry, two at a time (at most two requests at once: a correct server
 * that lines its payments up behind one lock answers them within the request bound on a
 * loaded machine). With the distinct keys and the two other payments, 146 keys newer than
 * the first one: more than a server keeps that holds only the newest 100 records (records
 * are deleted by age, never by count: server contract).
 */
export const LATER_PAYMENTS = 106;

/** How many of the later payments are sent at once. */
const LATER_AT_ONCE = 2;

/**
 * The client headers a retry may carry other values of than its first request: the proxy
 * headers a load balancer or proxy on another path adds (X-Forwarded-For, X-Real-IP,
 * Forwarded), and User-Agent (a client retries from its other app, or its HTTP library was
 * updated in between). The first request sends each with its `first` value, then one retry
 * per header sends that one with its `other` value (the others as the first had them).
 * Addresses of the documentation ranges (RFC 5737).
 */
const FIRST_HOP = '203.0.113.7';
const OTHER_HOP = '198.51.100.23';
const CLIENT_HEADERS: ReadonlyArray<{ name: string; first: string; other: string }> = [
  { name: 'X-Forwarded-For', first: FIRST_HOP, other: OTHER_HOP },
  { name: 'X-Real-IP', first: FIRST_HOP, other: OTHER_HOP },
  { name: 'Forwarded', first: `for=${FIRST_HOP}`, other: `for=${OTHER_HOP}` },
  { name: 'User-Agent', first: 'checkout-web/3.2', other: 'checkout-android/5.1 okhttp/4.12' },
];
/** The client headers of the first request, each with its first value. */
const firstHeaders = (): Record<string, string> => Object.fromEntries(CLIENT_HEADERS.map((h) => [h.name, h.first]));

/**
 * A first response is not a replay: Idempotency-Replayed (or Stripe's Idempotent-Replayed)
 * `true` on it tells the client that an earlier request was paid, which is false.
 * @throws CheckFailed when the header says true
 */
function notReplayed(first: Exchange): void {
  if (first.replayed?.trim().toLowerCase() === 'true') {
    throw new CheckFailed(t('step.02.firstReplayed'), t('step.02.firstReplayed.why'), { exchanges: [first] });
  }
}

const paymentId = (e: Exchange) => paymentOf(e).payment_id as number;

/** A key's first request among the distinct keys: the body it sent and its answer. */
interface DistinctFirst {
  body: unknown;
  exchange: Exchange;
}

/**
 * Waves of keys that are each a payment of their own, for expectDistinctPayments.
 * `groups`: the keys a careless server takes for one, each group sent one key a wave;
 * `bodies`: the body each group's keys send (one per group); `atOnce`: the most requests
 * of a wave sent at once (a wave larger is sent in batches of it; Infinity: all at once);
 * `alongside`: a request sent with wave 0 and checked (`check`, which throws CheckFailed)
 * before that wave's answers; `why`: the reason a key refused or joined to another fails
 * with; `same`: the failure of `key` answered with the payment `id` of `earlier` (keys
 * as JSON strings).
 */
interface DistinctWaves {
  groups: string[][];
  bodies: unknown[];
  atOnce: number;
  alongside?: { send: () => Promise<Exchange>; check: (answer: Exchange) => void };
  why: string;
  same: (key: string, earlier: string, id: number) => string;
}

/**
 * Sends the keys of `waves.groups` as payments of their own: wave i sends the i-th key of
 * every group (in batches of `atOnce`), so the keys a server might take for one come one
 * after another. Each key must get 201 with a payment_id that no key of an earlier batch
 * got. The keys are not sent again here: replayEach does that.
 * @returns every key's first request, in the order sent
 * @throws CheckFailed for the first key (in the order sent) refused or answered with an
 *   earlier key's payment, or `alongside.check`'s failure
 */
async function expectDistinctPayments(ctx: LiveContext, server: ServerInstance, waves: DistinctWaves): Promise<DistinctFirst[]> {
  const firsts: DistinctFirst[] = [];
  const count = Math.max(...waves.groups.map((g) => g.length));
  for (let wave = 0; wave < count; wave++) {
    const sent = waves.groups.flatMap((g, group) => (g[wave] === undefined ? [] : [{ group, key: g[wave] }]));
    for (let i = 0; i < sent.length; i += waves.atOnce) {
      const batch = sent.slice(i, i + waves.atOnce);
      const distinct = Promise.all(batch.map((s) => ctx.pay(server, { key: s.key, body: waves.bodies[s.group] })));
      const alongside = wave === 0 && i === 0 ? waves.alongside : undefined;
      const [answers, alongAnswer] = await Promise.all([distinct, alongside?.send()]);
      if (alongside && alongAnswer) alongside.check(alongAnswer);
      answers.forEach((answer, j) => {
        const k = batch[j].key;
        expectStatus(answer, 201, t('step.02.distinct', { key: JSON.stringify(k) }), waves.why);
        const earlier = firsts.find((e) => paymentId(e.exchange) === paymentId(answer));
        if (earlier) {
          throw new CheckFailed(waves.same(JSON.stringify(k), JSON.stringify(earlier.exchange.key), paymentId(answer)), waves.why, { exchanges: [earlier.exchange, answer] });
        }
      });
      firsts.push(...answers.map((exchange, j) => ({ body: waves.bodies[batch[j].group], exchange })));
    }
  }
  return firsts;
}

/**
 * Sends each key of `firsts` once more with its body, `atOnce` at a time.
 * @returns the retries, in the order of `firsts`
 */
async function replayEach(ctx: LiveContext, server: ServerInstance, firsts: DistinctFirst[], atOnce: number): Promise<Exchange[]> {
  const retries: Exchange[] = [];
  for (let i = 0; i < firsts.length; i += atOnce) {
    const batch = firsts.slice(i, i + atOnce);
    retries.push(...(await Promise.all(batch.map((f) => ctx.pay(server, { key: f.exchange.key, body: f.body })))));
  }
  return retries;
}

/**
 * Each retry of replayEach must replay its own key's first answer.
 * @throws CheckFailed (expectReplay's) for the first one, in the order of `firsts`, that did not
 */
function expectOwnReplays(firsts: DistinctFirst[], retries: Exchange[]): void {
  retries.forEach((r, i) => expectReplay(firsts[i].exchange, r, t('step.02.distinctReplay', { key: JSON.stringify(firsts[i].exchange.key) })));
}

// ---- UUID-shaped keys (issue 20): one UUID written several ways is several keys. ----

/** How many UUID-shaped keys are sent at most at once (a wave: one key of every group). */
export const UUID_WAVE = 15;

/**
 * Groups of UUID-shaped keys, each group one UUID (32 hex digits) written several ways that
 * a server which parses keys as UUIDs (Python's `uuid.UUID(key)`, stored as `str()`), folds
 * their case, or drops their hyphens takes for one key: lower and upper case, without
 * hyphens, in braces `{...}`, and with its hyphens moved (the same hex digits grouped
 * 4-4-4-4-4-4-4-4, 12-4-4-4-8 or 8-8-16). Every group holds two ways that differ only in
 * their hyphens (a server that strips `-` joins them) and two that differ only in case or
 * braces (a UUID parser joins them). Keys are opaque: each is a payment of its own.
 * @returns 8 groups of 4 keys (32 keys), no key in two groups
 */
export function uuidKeyGroups(ctx: LiveContext): string[][] {
  const groups: string[][] = [];
  const at = (hex: string, sizes: number[]) => {
    const parts: string[] = [];
    let i = 0;
    for (const n of sizes) parts.push(hex.slice(i, (i += n)));
    return parts.join('-');
  };
  const std = (hex: string) => at(hex, [8, 4, 4, 4, 12]);
  const quads = (hex: string) => at(hex, [4, 4, 4, 4, 4, 4, 4, 4]);
  const reversed = (hex: string) => at(hex, [12, 4, 4, 4, 8]);
  const halves = (hex: string) => at(hex, [8, 8, 16]);
  const shapes: Array<(h: string, H: string) => string[]> = [
    (h, H) => [std(h), std(H), `{${std(h)}}`, h],
    (h, H) => [std(h), h, quads(h), std(H)],
    (h, H) => [h, std(h), `{${std(H)}}`, H],
    (h, H) => [std(H), H, `{${std(h)}}`, reversed(h)],
    (h, H) => [quads(h), halves(h), std(H), `{${h}}`],
    (h, H) => [`{${std(h)}}`, std(h), reversed(H), std(H)],
    (h, H) => [reversed(H), std(H), h, `{${std(H)}}`],
    (h, H) => [halves(h), std(h), H, `{${std(h)}}`],
  ];
  for (const shape of shapes) {
    const h = ctx.data.key().replace(/-/g, '');
    groups.push(shape(h, h.toUpperCase()));
  }
  return groups;
}

/**
 * The UUID-shaped keys of uuidKeyGroups, each a payment of its own: wave i sends the i-th
 * key of every group at once (at most UUID_WAVE requests), so the ways of one UUID come one
 * after another and a server that joins two of them replays the first one's payment (each
 * group sends one body under all its keys). Each key must get a new 201 with a payment_id
 * no other key got, and each key sent again must replay its own first answer; that each
 * is charged once (a group's body as many times as it has keys) is the step's closing
 * audit's to check (every distinct key and body answered 201 is one payment).
 * @returns how many keys were sent (32)
 * @throws CheckFailed naming the two keys that became one, or a refusal
 */
async function uuidShapedKeys(ctx: LiveContext, server: ServerInstance): Promise<number> {
  const groups = uuidKeyGroups(ctx);
  const bodies = groups.map(() => ctx.data.payment());
  const firsts = await expectDistinctPayments(ctx, server, {
    groups,
    bodies,
    atOnce: UUID_WAVE,
    why: t('step.02.uuid.why'),
    same: (key, earlier, id) => t('step.02.uuidSame', { key, earlier, id }),
  });
  expectOwnReplays(firsts, await replayEach(ctx, server, firsts, UUID_WAVE));
  return firsts.length;
}

// ---- end of UUID-shaped keys. ----

/**
 * expectReplay(first, retry, why) as a part of the step named `part` (inPart: the failure
 * starts with it); a retry answered with another payment fails with `why` too (expectReplay
 * gives that failure a reason of its own), which says what made this retry different.
 * @throws CheckFailed as expectReplay, its message after `part`
 */
async function replayIn(part: string, first: Exchange, retry: Exchange, why: string): Promise<void> {
  await inPart(part, async () => {
    try {
      expectReplay(first, retry, why);
    } catch (err) {
      if (err instanceof CheckFailed && err.message === t('check.replayBody')) throw new CheckFailed(err.message, why, err.evidence);
      throw err;
    }
  });
}

/**
 * Retries `key` with `body` (the first request's) as it might come from elsewhere: once
 * from a second client address (127.3.4.5: through the sandbox relay's second socket, or
 * bound unsandboxed), then once per client header with that header's value changed
 * (X-Forwarded-For, X-Real-IP, Forwarded: for=, User-Agent), each of which must replay `first`. Where
 * the second address could not be bound (unsandboxed), the retry came from 127.0.0.1: a
 * warning says so.
 * @returns the retries' exchanges, in the order sent
 * @throws CheckFailed naming the address or header of the first retry that was not a replay;
 *   Inconclusive when the sandbox relay's second socket was gone (ClientAddress.relayMissing)
 */
async function retryFromElsewhere(ctx: LiveContext, server: ServerInstance, first: Exchange, key: string, body: unknown): Promise<Exchange[]> {
  const why = t('step.02.retry.elsewhere.why');
  const fromSecond = await ctx.pay(server, { key, body, headers: firstHeaders(), client: 'second' });
  const fallback = fromSecond.client?.fallback;
  // Behind a sandbox relay the second socket is always made: gone, the server beside it most
  // likely removed it, so a pass here would be one it arranged. No verdict (exit 2), never a pass.
  if (fromSecond.client?.relayMissing) throw new Inconclusive(t('step.02.noSecondSocket', { address: SECOND_CLIENT_ADDRESS }));
  if (fallback !== undefined) ctx.warn(t('step.02.noSecondClient', { address: SECOND_CLIENT_ADDRESS, why: fallback }));
  const part = fallback === undefined ? t('step.02.part.client', { address: SECOND_CLIENT_ADDRESS }) : t('step.02.part.clientFallback', { address: SECOND_CLIENT_ADDRESS, why: fallback });
  await replayIn(part, first, fromSecond, why);
  const sent = [fromSecond];
  for (const header of CLIENT_HEADERS) {
    const headers = { ...firstHeaders(), [header.name]: header.other };
    const exchange = await ctx.pay(server, { key, body, headers });
    sent.push(exchange);
    await replayIn(t('step.02.part.header', { header: `${header.name}: ${header.other}`, first: header.first }), first, exchange, why);
  }
  return sent;
}

/**
 * Step 02: the same Idempotency-Key and body sent again, twice, with another payment of
 * the same user in between: every retry 201 and equal to the first response in every
 * field, one ledger row, one charge. A new key with the same body is a second payment,
 * and keys are opaque: keys that differ only in case, length, punctuation or a non-ASCII
 * (Latin-1) character that Unicode normalisation, case folding or accent stripping would
 * change are each a payment of their own, each replayed (lab sheet, step 2; IETF
 * Idempotency-Key draft).
 * A record is the key's whoever sends the retry: one from a second client address, and
 * ones with other X-Forwarded-For, X-Real-IP, Forwarded or User-Agent values, replay too; so does the
 * first key's retry after 146 newer keys (records are deleted by age, never by count).
 * A retry of the same fields in another order or spacing should replay too: a 422 there
 * is a warning (the fingerprint should be of the parsed body), a second charge a failure.
 */
export const step: Step = {
  id: '02',
  slug: 'replay',
  get title() {
    return t('step.02.title');
  },
  async live(ctx) {
    const WHY = t('step.02.retry.why');
    // Served early in the queue of starts: about 190 requests follow, a few seconds of work.
    const server = await ctx.startServer({ priority: 1000 });
    const key = ctx.freshKey();
    const body = ctx.data.payment();
    const first = await ctx.pay(server, { key, body, headers: firstHeaders() });
    expectStatus(first, 201, t('check.first201'), t('step.02.first201.why'));
    paymentOf(first);
    notReplayed(first);
    const other = await ctx.pay(server, { key: ctx.freshKey(), body: { user: body.user, amount: ctx.data.amount() } });
    expectStatus(other, 201, t('step.02.other'), t('step.02.other.why'));
    notReplayed(other);
    const retry = await ctx.pay(server, { key, body, headers: firstHeaders() });
    expectReplay(first, retry, t('step.02.retry.thisKey', { why: WHY }));
    // The same retry from a second client address, then with each client header changed:
    // a record is the key's (and its user's), whoever sent the request and through whichever proxy.
    const fromElsewhere = await retryFromElsewhere(ctx, server, first, key, body);
    const again = await ctx.pay(server, { key, body });
    expectReplay(first, again, t('step.02.retry.every', { why: WHY }));
    expectRows(ctx, key, 1, [first, other, retry, ...fromElsewhere, again], t('step.02.rows.why'));

    // Keys are opaque: each of these is a payment of its own, and each replays its own.
    // The keys a careless server takes for one are sent one after another, the groups at
    // once (wave i: the i-th key of every group); with the first wave, the same body as the
    // first payment under a new key (a new payment, not a replay).
    const shared = ctx.data.payment();
    const groups = distinctKeys(ctx);
    const firsts = await expectDistinctPayments(ctx, server, {
      groups,
      bodies: groups.map(() => shared),
      atOnce: Infinity,
      alongside: {
        send: () => ctx.pay(server, { key: ctx.freshKey(), body }),
        check: (second) => {
          expectStatus(second, 201, t('step.02.second'), t('step.02.second.why'));
          if (paymentId(second) === paymentId(first)) {
            throw new CheckFailed(t('step.02.secondSame', { id: paymentId(first) }), t('step.02.second.why'), { exchanges: [first, second] });
          }
        },
      },
      why: t('step.02.distinct.why'),
      same: (k, earlier, id) => t('step.02.distinctSame', { key: k, earlier, id }),
    });
    // Then payments with keys of their own, two at a time, so that more keys than a server
    // that keeps only its newest hundred records holds come after the first one.
    for (let sent = 0; sent < LATER_PAYMENTS; sent += LATER_AT_ONCE) {
      const pair = Array.from({ length: Math.min(LATER_AT_ONCE, LATER_PAYMENTS - sent) }, () => ctx.pay(server, { key: ctx.freshKey(), body: ctx.data.payment() }));
      const answers = await Promise.all(pair);
      const refused = answers.findIndex((e) => e.status !== 201);
      if (refused >= 0) expectStatus(answers[refused], 201, t('step.02.later', { n: sent + refused + 1, count: LATER_PAYMENTS }), t('step.02.later.why'));
    }
    // Each key once more, and the first key, after all of them: a server that keeps only
    // its newest keys has forgotten it by then. The first key is judged first: it has the
    // most keys after it.
    const newer = LATER_PAYMENTS + firsts.length + 2;
    const [retries, last] = await Promise.all([replayEach(ctx, server, firsts, Infinity), ctx.pay(server, { key, body })]);
    await replayIn(t('step.02.part.late', { count: newer }), first, last, t('step.02.retry.late', { why: WHY }));
    expectOwnReplays(firsts, retries);

    // The same fields in another order and spacing are the same request.
    const reordered = await ctx.pay(server, { key, body: `{ "amount": ${body.amount},  "user": ${JSON.stringify(body.user)} }` });
    if (reordered.status === 422) ctx.warn(t('step.02.reordered422'));
    else expectReplay(first, reordered, t('step.02.reordered.why'));
    if (retry.replayed === undefined) {
      ctx.warn(t('step.02.replayedHeader'));
    }
    // UUID-shaped keys written several ways (a phase of its own: uuidShapedKeys).
    const uuidKeys = await uuidShapedKeys(ctx, server);
    return t('step.02.pass', { key: JSON.stringify(key), keys: firsts.length + uuidKeys, newer });
  },
  get hints() {
    return [t('step.02.hint.1'), t('step.02.hint.2'), t('step.02.hint.3')];
  },
};
