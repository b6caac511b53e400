import { CheckFailed } from '../../grader/failure.js';
import { describeCharge, expectReplay, expectStatus, paymentOf } from '../../grader/expect-http.js';
import { responseJson, type PayRequest } from '../../grader/http.js';
import { sendForced } from '../../grader/race.js';
import { t } from '../../i18n/index.js';
import type { LiveContext } from '../../grader/context.js';
import type { ServerInstance } from '../../grader/server.js';
import type { Exchange, LedgerRow } from '../../grader/types.js';
import type { Step } from '../../grader/track.js';

/** A payment request of one user under one key. */
interface Sent {
  key: string;
  body: { user: string; amount: number };
}

/**
 * Separators a scoped key might be joined with, '' for none: every printable ASCII
 * punctuation character, the space, TAB (a legal character in a JSON string and in an HTTP
 * field value, RFC 9110 §5.5), the two-character `::`, `||` and `->`, and `§` (U+00A7, a
 * Latin-1 character: an HTTP field value may carry it as the byte 0xA7, which servers
 * read as ISO-8859-1). For each, the check sends pairs that read alike when joined either
 * way round (joinedPairs): as user, separator, key and as key, separator, user. Only an
 * encoding that cannot be read two ways (a JSON list, a length prefix, a hash of either,
 * a NUL, which no field value holds) keeps the two apart.
 */
export const SEPARATORS: readonly string[] = ['', '::', '||', '->', '\u00a7', ' ', '\t', ...'!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~'];

/** The longest user the contract allows (lab/server.py MAX_USER_CHARS), in characters. */
export const MAX_USER_CHARS = 100;

/**
 * Pairs of different users that a server which changes the user before scoping would take
 * for one: two of MAX_USER_CHARS characters differing only in the last (a user cut to a
 * column's width), a user in fullwidth letters and the same in ASCII (NFKC folds them), and
 * "é" as one code point and as "e" with a combining acute (NFC/NFD), and a user with a
 * non-ASCII letter and the same with that letter replaced by "?" or dropped (an
 * `encode('ascii', 'replace')` or `'ignore'`); a run of spaces, a no-break space (U+00A0)
 * or a TAB against one space (whitespace squeezed); a zero-width space, joiner or byte
 * order mark (U+200B, U+200D, U+FEFF) against nothing (invisible characters dropped); and
 * "é" or "中" against a user who typed its Python escape `\xe9` or `\u4e2d`
 * (`encode('ascii', 'backslashreplace')`) or its XML character reference `&#233;` or
 * `&#20013;` (`'xmlcharrefreplace'`). The contract compares a user as sent, so each of
 * these is another user.
 * @param base an ASCII user of the run's test data, e.g. "mina_1"
 * @returns the pairs, each [the first user, the look-alike that sends the first one's key]
 */
export function lookAlikeUsers(base: string): Array<[string, string]> {
  const long = base.padEnd(MAX_USER_CHARS - 1, '_x');
  const fullwidth = [...base].map((c) => (c >= '!' && c <= '~' ? String.fromCharCode(c.charCodeAt(0) + 0xfee0) : c)).join('');
  return [
    [`${long}a`, `${long}b`],
    [fullwidth, base],
    [`${base}\u00e9`, `${base}e\u0301`],
    // An ASCII-only copy of the user: its other letters replaced by "?", or dropped.
    [`${base}\u00fc`, `${base}?`],
    [`${base}\u00f1x`, `${base}x`],
    // Whitespace squeezed (`re.sub(r"\s+", " ", user)`, `" ".join(user.split())`): a run of
    // spaces, a no-break space and a TAB against one space.
    [`${base}  ws`, `${base} ws`],
    [`${base}\u00a0nb`, `${base} nb`],
    [`${base}\ttb`, `${base} tb`],
    // Invisible characters present against dropped: zero-width space, zero-width joiner,
    // byte order mark (zero-width no-break space).
    [`${base}\u200bzw`, `${base}zw`],
    [`${base}\u200dzj`, `${base}zj`],
    [`${base}\ufeffbo`, `${base}bo`],
    // An ASCII copy with escapes (Python's `encode("ascii", "backslashreplace")` or
    // `"xmlcharrefreplace"`) against a user who typed that escape.
    [`${base}\u00e9b`, `${base}\\xe9b`],
    [`${base}\u4e2db`, `${base}\\u4e2db`],
    [`${base}\u00e9x`, `${base}&#233;x`],
    [`${base}\u4e2dx`, `${base}&#20013;x`],
  ];
}

/**
 * Two (user, key) pairs that read alike when joined with separator `s`: one joined as
 * user, `s`, key (user `X{s}Y` with key `K`, then user `X` with key `Y{s}K`: both
 * `X{s}Y{s}K`), one as key, `s`, user (user `A{s}B` with key `K`, then user `B` with key
 * `K{s}A`: both `K{s}A{s}B`). Each pair has an amount of its own, sent by both of its users.
 * @returns the two pairs, each [the first request, the one that reads like it]
 */
export function joinedPairs(ctx: LiveContext, s: string): Array<readonly [Sent, Sent]> {
  const x = ctx.data.user();
  const y = ctx.data.word(3);
  const k = ctx.freshKey();
  const userFirst = ctx.data.amount();
  const a = ctx.data.word(3);
  const b = ctx.data.user();
  const k2 = ctx.freshKey();
  const keyFirst = ctx.data.amount();
  return [
    [{ key: k, body: { user: `${x}${s}${y}`, amount: userFirst } }, { key: `${y}${s}${k}`, body: { user: x, amount: userFirst } }],
    [{ key: k2, body: { user: `${a}${s}${b}`, amount: keyFirst } }, { key: `${k2}${s}${a}`, body: { user: b, amount: keyFirst } }],
  ];
}

/** How many users race under one key in the race part, each with two requests (10 in all: the lab's race size). */
export const RACE_USERS = 5;

/**
 * What the check has seen answered 201: the (user, key) each payment_id was given to. A
 * payment_id given to two (user, key) pairs is one user's payment answered to another.
 */
class Owners {
  private readonly byId = new Map<unknown, { sent: Sent; exchange: Exchange }>();
  /** The first answer of each (user, key), by `user\0key`. */
  readonly firsts = new Map<string, Exchange>();

  /** @param ledger reads the ledger's rows now (a failure shows the row of the payment answered to the wrong user) */
  constructor(private readonly ledger: () => LedgerRow[]) {}

  /**
   * Requires `exchange` to be the sending user's own payment: 201, the user and amount as
   * sent, and a payment_id no other (user, key) was given.
   * @throws CheckFailed naming whose payment it was
   */
  own(exchange: Exchange, sent: Sent, usedBy: string | undefined): Record<string, unknown> {
    if (exchange.status !== 201) {
      expectStatus(exchange, 201, t(usedBy === undefined ? 'step.10.notPaid' : 'step.10.notOwn', { user: JSON.stringify(sent.body.user), owner: JSON.stringify(usedBy), status: String(exchange.status) }), t('step.10.notOwn.why'));
    }
    const answer = (responseJson(exchange) ?? {}) as Record<string, unknown>;
    const earlier = this.byId.get(answer.payment_id);
    const mine = earlier === undefined || (earlier.sent.body.user === sent.body.user && earlier.sent.key === sent.key);
    if (!mine || (typeof answer.user === 'string' && answer.user !== sent.body.user)) {
      const owner = earlier && !mine ? earlier.sent.body.user : answer.user;
      throw new CheckFailed(
        t('step.10.gotOthers', { user: JSON.stringify(sent.body.user), owner: JSON.stringify(owner), id: String(answer.payment_id) }),
        t('step.10.gotOthers.why'),
        { exchanges: earlier && !mine ? [earlier.exchange, exchange] : [exchange], ledger: this.rowsOf(answer.payment_id) },
      );
    }
    const payment = paymentOf(exchange);
    if (earlier === undefined) {
      this.byId.set(payment.payment_id, { sent, exchange });
      this.firsts.set(`${sent.body.user}\0${sent.key}`, exchange);
    }
    return payment;
  }

  /** The ledger rows of payment `id`, or none when the ledger cannot be read (the failure then shows the exchanges only). */
  private rowsOf(id: unknown): LedgerRow[] {
    try {
      return this.ledger().filter((r) => r.payment_id === id);
    } catch {
      return [];
    }
  }

  /** The first answer to this user's payment under this key. */
  first(sent: Sent): Exchange | undefined {
    return this.firsts.get(`${sent.body.user}\0${sent.key}`);
  }

  /** Every payment seen: the request and its first answer. */
  payments(): Array<{ sent: Sent; exchange: Exchange }> {
    return [...this.byId.values()];
  }
}

/**
 * Requires exactly one charge on the provider's statement and one ledger row, under the
 * key as sent and with the payment_id answered, for every payment the check saw.
 * @throws CheckFailed naming the first payment charged or recorded otherwise
 */
function expectOneEach(ctx: LiveContext, owners: Owners): void {
  const rows = ctx.ledger();
  const charges = ctx.charges() ?? [];
  for (const { sent, exchange } of owners.payments()) {
    const id = (responseJson(exchange) as { payment_id: unknown }).payment_id;
    const theirs = charges.filter((c) => c.user === sent.body.user && c.amount === sent.body.amount);
    if (theirs.length !== 1) {
      throw new CheckFailed(
        t('step.10.charges', { user: JSON.stringify(sent.body.user), amount: sent.body.amount, n: theirs.length }),
        t('step.10.charges.why'),
        { exchanges: [exchange], details: theirs.map(describeCharge) },
      );
    }
    const row = rows.filter((r) => r.user === sent.body.user && r.idempotency_key === sent.key);
    if (row.length !== 1 || row[0].payment_id !== id || row[0].amount !== sent.body.amount) {
      throw new CheckFailed(
        t('step.10.row', { user: JSON.stringify(sent.body.user), key: JSON.stringify(sent.key), id: String(id), n: row.length }),
        t('step.10.row.why'),
        { exchanges: [exchange], ledger: rows.filter((r) => r.idempotency_key === sent.key) },
      );
    }
  }
}

/**
 * Each of RACE_USERS users sends the same key (and the same amount) twice, all ten at once,
 * while the grader holds the database's write lock for LOCK_HOLD_MS: every request is in
 * flight at the same time, so anything that waits for a request in flight by the bare key
 * (a single-flight map, a lock, a claim) hands one user's answer to the others every time.
 * Every user must get their own payment: 201 (or 409 while their own is in flight), one
 * payment_id per user, a charge and a row each.
 * @throws CheckFailed naming the user who got another's payment, or was refused
 */
async function race(ctx: LiveContext, server: ServerInstance, owners: Owners): Promise<Exchange[]> {
  const key = ctx.freshKey();
  const amount = ctx.data.amount();
  const users = Array.from({ length: RACE_USERS }, () => ctx.data.user());
  const sent: Sent[] = [...users, ...users].map((user) => ({ key, body: { user, amount } }));
  const { exchanges: answers } = await sendForced(ctx, [server], sent as PayRequest[], { lockDatabase: true });
  const unanswered = answers.find((e) => e.error !== undefined);
  if (unanswered) expectStatus(unanswered, 201, t('check.first201'), t('step.10.notOwn.why'));
  for (const user of users) {
    const mine = answers.filter((_, i) => sent[i].body.user === user);
    const paid = mine.filter((e) => e.status === 201);
    const refused = mine.find((e) => e.status !== 201 && e.status !== 409) ?? (paid.length === 0 ? mine[0] : undefined);
    if (refused) {
      expectStatus(refused, 201, t('step.10.raceRefused', { user: JSON.stringify(user), status: String(refused.status), n: RACE_USERS }), t('step.10.notOwn.why'));
    }
    for (const answer of paid) owners.own(answer, { key, body: { user, amount } }, undefined);
  }
  return answers;
}

/**
 * How many of the joined pairs' requests are sent at once: a server in the sandbox has 1 GB
 * of address space (grader/sandbox.ts), and a thread per request with its stack and its
 * allocator arena leaves room for a few dozen at a time, not for every pair at once.
 */
export const PAIR_BATCH = 12;

/** Sends `requests` to `server` PAIR_BATCH at a time (each batch at once), and returns the exchanges in order. */
async function inBatches(ctx: LiveContext, server: ServerInstance, requests: readonly Sent[]): Promise<Exchange[]> {
  const answers: Exchange[] = [];
  for (let i = 0; i < requests.length; i += PAIR_BATCH) {
    answers.push(...(await ctx.paySimultaneously([server], requests.slice(i, i + PAIR_BATCH) as PayRequest[], ctx.timeouts())));
  }
  return answers;
}

/**
 * Step 10 (advanced track): idempotency keys are scoped per user. A key is the client's
 * name for one of its own payments, so another user's request under a used key is that
 * user's own new payment (201, a payment_id of its own, a charge and a ledger row of its
 * own), the first user's key still replays the first user's payment, and nobody ever gets
 * another user's response (the essay; Stripe scopes keys per account). A user is compared
 * as sent (docs/server-contract.md). Checked with users that differ from the first only in
 * case or by a space, with pairs whose user and key joined by any ASCII punctuation, a
 * space, a TAB, `::`, `||`, `->`, `§` or nothing read the same either way round
 * (SEPARATORS, joinedPairs), with look-alike users under one key (lookAlikeUsers: 100
 * characters differing in the last, fullwidth and ASCII, composed and decomposed "é", a
 * non-ASCII letter and "?" or nothing in its place, whitespace runs, no-break spaces and
 * TABs against one space, zero-width characters against none, and a letter against its
 * backslash escape or XML character reference), the pairs sent PAIR_BATCH at a time, and
 * in a race of five users sending one key
 * at once while the database is locked.
 */
export const step: Step = {
  id: '10',
  slug: 'scope',
  get title() {
    return t('step.10.title');
  },
  async live(ctx: LiveContext) {
    const server = await ctx.startServer({ priority: 600 });
    const owners = new Owners(() => ctx.ledger(server));
    const key = ctx.freshKey();
    const amount = ctx.data.amount();
    const first: Sent = { key, body: { user: ctx.data.user(), amount } };
    const a = await ctx.pay(server, first);
    expectStatus(a, 201, t('check.first201'), t('step.10.first.why'));
    owners.own(a, first, undefined);

    // Other users under the first user's key, with the same amount: a fresh user, and the
    // first user's name in capitals and with a space before or after it.
    const name = first.body.user;
    const others: Sent[] = [ctx.data.user(), name.toUpperCase(), ` ${name}`, `${name} `].map((user) => ({ key, body: { user, amount } }));
    for (const other of others) owners.own(await ctx.pay(server, other), other, name);

    // Every one of them replays its own payment, the first user's included.
    for (const again of [first, ...others]) {
      const replay = await ctx.pay(server, again);
      expectReplay(owners.first(again)!, replay, t('step.10.replay.why', { user: JSON.stringify(again.body.user) }));
      owners.own(replay, again, again === first ? undefined : name);
    }

    // Pairs whose user and key joined with a separator read the same, either way round
    // (joinedPairs); and pairs of look-alike users under one key (lookAlikeUsers). The
    // first halves PAIR_BATCH at a time, then the second halves.
    const pairs = SEPARATORS.flatMap((s) => joinedPairs(ctx, s).map((sent) => ({ joined: true, sent })));
    for (const [one, two] of lookAlikeUsers(ctx.data.user())) {
      const k = ctx.freshKey();
      const pairAmount = ctx.data.amount();
      pairs.push({ joined: false, sent: [{ key: k, body: { user: one, amount: pairAmount } }, { key: k, body: { user: two, amount: pairAmount } }] as const });
    }
    const firstHalves = await inBatches(ctx, server, pairs.map((p) => p.sent[0]));
    firstHalves.forEach((answer, i) => owners.own(answer, pairs[i].sent[0], undefined));
    const secondHalves = await inBatches(ctx, server, pairs.map((p) => p.sent[1]));
    secondHalves.forEach((answer, i) => {
      const [one, two] = pairs[i].sent;
      if (answer.status !== 201 && pairs[i].joined) {
        expectStatus(
          answer,
          201,
          t('step.10.joined', { user: JSON.stringify(two.body.user), key: JSON.stringify(two.key), other: JSON.stringify(one.body.user), otherKey: JSON.stringify(one.key), status: String(answer.status) }),
          t('step.10.joined.why'),
        );
      }
      owners.own(answer, two, one.body.user);
    });

    await race(ctx, server, owners);
    expectOneEach(ctx, owners);
    return t('step.10.pass', { users: owners.payments().length, pairs: 2 * SEPARATORS.length, race: RACE_USERS });
  },
  get hints() {
    return [t('step.10.hint.1'), t('step.10.hint.2'), t('step.10.hint.3')];
  },
};
