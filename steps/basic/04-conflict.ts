import { expect } from '../../grader/failure.js';
import { describeResponse, parsePaste } from '../../grader/paste.js';
import { t } from '../../i18n/index.js';
import { CheckFailed } from '../../grader/failure.js';
import { expectCharges, expectReplay, expectRows, expectStatus, paymentOf } from '../../grader/expect-http.js';
import { rowsForKey } from '../../grader/ledger.js';
import { responseJson } from '../../grader/http.js';
import type { Step } from '../../grader/track.js';
import type { Exchange } from '../../grader/types.js';
import type { LiveContext } from '../../grader/context.js';
import type { ServerInstance } from '../../grader/server.js';

const why = () => t('step.04.why');
/** Why a conflict must be refused, quoting the amounts the check sent. */
const whyLive = (first: number, then: number) => t('step.04.live.why', { first, then });

/**
 * A refusal carries no payment: neither the first payment's id nor its charge time may
 * appear in its body (a 422 that answers with the stored payment hands one customer's
 * payment to another's request).
 * @throws CheckFailed naming the refusal
 */
function expectNoPayment(refusal: Exchange, first: Record<string, unknown>, exchanges: Exchange[]): void {
  const answer = responseJson(refusal) as Record<string, unknown> | undefined;
  const text = refusal.responseBody ?? '';
  const leaks = (answer && typeof answer === 'object' && answer.payment_id === first.payment_id) || (typeof first.charged_at === 'string' && text.includes(first.charged_at));
  if (leaks) {
    throw new CheckFailed(t('step.04.refusalLeaks', { status: String(refusal.status), id: String(first.payment_id) }), t('step.04.otherUser.why'), { exchanges });
  }
}

/** How many digits largeAmount has: under 10^12 (the contract's largest amount), more than `%g` keeps (6). */
export const LARGE_AMOUNT_DIGITS = 12;

/**
 * An amount of LARGE_AMOUNT_DIGITS digits, each from 1 to 8 (from the seed): the amount and
 * one more agree in every digit but the last, with no carry and no rounding edge between
 * them, so that any formatting that keeps fewer than 12 significant digits (`%g`: 6;
 * `%e`: 7) or drops the last two (amount // 100) writes both alike, every time (a
 * float32 nearly always; not counted on). Its second digit is not 0, so that its first
 * can move to the end of the user's name and leave a number of 11 digits (see the other
 * users below).
 * @returns an integer from 111,111,111,111 to 888,888,888,888
 */
export function largeAmount(ctx: LiveContext): number {
  const hex = ctx.data.key().replace(/-/g, '');
  return Number([...hex.slice(0, LARGE_AMOUNT_DIGITS)].map((c) => 1 + (parseInt(c, 16) % 8)).join(''));
}

/**
 * A user as the messages show it: JSON, with every character outside printable ASCII as a
 * `\uXXXX` escape, so that "é" as one code point and as "e" with a combining acute read
 * differently.
 */
function shownUser(user: string): string {
  return JSON.stringify(user).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** The first payment under a key: the key, its first answer, its body and the payment it answered. */
interface FirstPayment {
  key: string;
  first: Exchange;
  body: { user: string; amount: number };
  payment: Record<string, unknown>;
}

/**
 * Sends `first.key` with each of `others` (other users, or another user and amount) and
 * requires each to be refused with 422 and never charged (keys global), or to be that user's
 * own new payment, charged once (keys scoped per user); never the first user's payment.
 * Appends every exchange to `exchanges`.
 * @returns how many were answered as payments of their own (rows they added under the key)
 * @throws CheckFailed naming the user that got the first payment, or was neither refused nor paid
 */
async function expectOtherUsers(ctx: LiveContext, server: ServerInstance, first: FirstPayment, others: Array<{ user: string; amount: number }>, exchanges: Exchange[]): Promise<number> {
  const { key, body } = first;
  const firstPayment = first.payment;
  let theirOwn = 0;
  for (const otherUserBody of others) {
    const otherUser = await ctx.pay(server, { key, body: otherUserBody });
    exchanges.push(otherUser);
    if (otherUser.status === 201) {
      const theirs = (responseJson(otherUser) ?? {}) as Record<string, unknown>;
      if (theirs.payment_id === firstPayment.payment_id || theirs.user !== otherUserBody.user) {
        throw new CheckFailed(
          t('step.04.otherUserGotFirst', { user: shownUser(otherUserBody.user), first: shownUser(body.user), id: String(firstPayment.payment_id) }),
          t('step.04.otherUser.why'),
          { exchanges: [first.first, otherUser] },
        );
      }
      paymentOf(otherUser);
      expectCharges(ctx, otherUserBody, 1, exchanges, t('step.04.scoped.why'));
      theirOwn++;
    } else {
      const said =
        otherUserBody.amount === body.amount
          ? t('step.04.otherUser', { user: shownUser(otherUserBody.user), first: shownUser(body.user) })
          : t('step.04.otherUserAmount', { user: shownUser(otherUserBody.user), amount: otherUserBody.amount, first: shownUser(body.user), firstAmount: body.amount });
      expectStatus(otherUser, 422, said, t('step.04.otherUser.why'));
      expectNoPayment(otherUser, firstPayment, exchanges);
      expectCharges(ctx, otherUserBody, 0, exchanges, t('step.04.conflictCharged.why'));
    }
  }
  return theirOwn;
}

/**
 * Step 04: a key reused with a different body (another amount, or another user) is
 * refused with 422 and changes nothing (the first amount has 12 digits and the other is one
 * more: largeAmount);
 * the first body under that key still replays (lab sheet, step 4; the request fingerprint
 * of the IETF Idempotency-Key draft).
 */
export const step: Step = {
  id: '04',
  slug: 'conflict',
  get title() {
    return t('step.04.title');
  },
  file: {
    name: '04-conflict.txt',
    check(text) {
      const paste = parsePaste(text);
      const conflict = paste.responses.find((r) => r.status === 422);
      expect(
        conflict !== undefined,
        t('step.04.file.no422'),
        why(),
        { details: paste.responses.map(describeResponse) },
      );
      return t('step.04.file.pass', { line: conflict.line });
    },
  },
  async live(ctx) {
    const server = await ctx.startServer();
    const key = ctx.freshKey();
    const body = { user: ctx.data.user(), amount: largeAmount(ctx) };
    const first = await ctx.pay(server, { key, body });
    expectStatus(first, 201, t('check.first201'), t('step.04.first201.why'));
    const firstPayment = paymentOf(first);
    // A near amount (one more): a fingerprint of a rounded amount (amount // 100) or of the
    // amount written with fewer significant digits (`%g`) takes it for the first.
    const otherBody = { user: body.user, amount: body.amount + 1 };
    const other = await ctx.pay(server, { key, body: otherBody });
    expectStatus(other, 422, t('step.04.other', { first: body.amount, then: otherBody.amount }), whyLive(body.amount, otherBody.amount));
    expectNoPayment(other, firstPayment, [first, other]);
    expectCharges(ctx, otherBody, 0, [first, other], t('step.04.conflictCharged.why'));
    // Other users under the same key: refused (keys global), or each that user's own new
    // payment (keys scoped per user); never the first user's payment. The first user's
    // name in capitals, with a space after it (a fingerprint covers the user exactly as
    // sent: no trimming), and a name that joined to its amount reads like the first's
    // (a fingerprint of user + amount without a separator), are other users too.
    const digits = String(body.amount);
    const otherUsers = [
      { user: ctx.data.user(), amount: body.amount },
      { user: body.user.toUpperCase(), amount: body.amount },
      { user: `${body.user} `, amount: body.amount },
      { user: body.user + digits[0], amount: Number(digits.slice(1)) },
    ];
    const exchanges = [first, other];
    const theirOwn = await expectOtherUsers(ctx, server, { key, first, body, payment: firstPayment }, otherUsers, exchanges);
    const mine = rowsForKey(ctx.ledger(), key).filter((row) => row.user === body.user);
    if (mine.length !== 1 || mine[0].amount !== body.amount) {
      throw new CheckFailed(
        mine.length === 1
          ? t('step.04.amount', { user: mine[0].user, amount: mine[0].amount, first: body.amount })
          : t('check.rows.one', { count: 1, key: JSON.stringify(key), found: mine.length }),
        t('step.04.refusedRows.why'),
        { exchanges, ledger: rowsForKey(ctx.ledger(), key) },
      );
    }
    const again = await ctx.pay(server, { key, body });
    expectReplay(first, again, t('step.04.again.why'));
    // A conflict after the replay as well: a body compared only until a key is first replayed (a replay cache) lets it through.
    const laterBody = { user: body.user, amount: ctx.data.amount() };
    const later = await ctx.pay(server, { key, body: laterBody });
    exchanges.push(again, later);
    expectStatus(later, 422, t('step.04.afterReplay', { first: body.amount, then: laterBody.amount }), whyLive(body.amount, laterBody.amount));
    expectNoPayment(later, firstPayment, exchanges);
    expectCharges(ctx, laterBody, 0, exchanges, t('step.04.conflictCharged.why'));
    expectRows(ctx, key, 1 + theirOwn, exchanges, t('step.04.againRows.why'));
    expectCharges(ctx, body, 1, exchanges, t('step.04.charges.why'));
    // A user with a non-ASCII letter, and the same name with that letter decomposed (NFC and
    // NFD differ) or in fullwidth form (NFKC folds it): other users again, so a fingerprint
    // that normalises the user takes them for the first.
    const accentedKey = ctx.freshKey();
    const accented = { user: `${ctx.data.user()}_\u00e9`, amount: ctx.data.amount() };
    const accentedFirst = await ctx.pay(server, { key: accentedKey, body: accented });
    expectStatus(accentedFirst, 201, t('check.first201'), t('step.04.first201.why'));
    const accentedPayment = paymentOf(accentedFirst);
    const base = accented.user.slice(0, -1);
    const lookAlikes = [
      { user: `${base}e\u0301`, amount: accented.amount },
      { user: `${base}\uff45\u0301`, amount: accented.amount },
    ];
    const accentedExchanges = [accentedFirst];
    const accentedOwn = await expectOtherUsers(ctx, server, { key: accentedKey, first: accentedFirst, body: accented, payment: accentedPayment }, lookAlikes, accentedExchanges);
    expectRows(ctx, accentedKey, 1 + accentedOwn, accentedExchanges, t('step.04.againRows.why'));
    return t('step.04.pass');
  },
  get hints() {
    return [t('step.04.hint.1'), t('step.04.hint.2'), t('step.04.hint.3')];
  },
};
