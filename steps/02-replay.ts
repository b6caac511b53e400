import { DEFAULT_PAYMENT } from '../grader/http.js';
import { expectCharges, expectReplay, expectRows, expectStatus, paymentOf } from '../grader/expect-http.js';
import type { Step } from './types.js';

/** Another payment of the same user, made between the first request and its retries. */
const OTHER_PAYMENT = { user: DEFAULT_PAYMENT.user, amount: 2500 } as const;

/**
 * Step 02: the same Idempotency-Key and body sent again, twice, with another payment of
 * the same user in between: every retry 201 and equal to the first response in every
 * field, one ledger row, one charge (lab sheet, step 2; IETF Idempotency-Key draft).
 */
export const step: Step = {
  id: '02',
  slug: 'replay',
  title: 'Replay the stored response',
  async live(ctx) {
    const WHY = 'A retry is the same request sent again: the client must get the same success, never a second charge or an error.';
    const server = await ctx.startServer();
    const key = ctx.freshKey('replay');
    const first = await ctx.pay(server, { key, body: DEFAULT_PAYMENT });
    expectStatus(first, 201, 'The first request with a new key must charge and answer 201.', 'Nothing can be replayed before the first payment succeeds.');
    paymentOf(first);
    const other = await ctx.pay(server, { key: ctx.freshKey('other'), body: OTHER_PAYMENT });
    expectStatus(other, 201, 'A request with another new key must charge and answer 201.', 'Each key is its own payment.');
    const retry = await ctx.pay(server, { key, body: DEFAULT_PAYMENT });
    expectReplay(first, retry, `${WHY} The stored response of this key, not a payment made since.`);
    const again = await ctx.pay(server, { key, body: DEFAULT_PAYMENT });
    expectReplay(first, again, `${WHY} A key is remembered for every retry, not only the first one.`);
    const exchanges = [first, other, retry, again];
    expectRows(ctx, key, 1, exchanges, 'Three requests with one key are one payment: the retries must not add a ledger row.');
    expectCharges(ctx, DEFAULT_PAYMENT, 1, exchanges, 'A retry must return the stored response before calling charge(): the payment provider moves money on every call.');
    if (retry.replayed === undefined) {
      ctx.warn('Mark a replayed answer with the header Idempotency-Replayed: true, so clients and logs can tell a replay from a new charge.');
    }
    return `Two retries with key ${JSON.stringify(key)} got the first response back, with another payment in between; one ledger row, one charge.`;
  },
  hints: [
    'Before charging, look the key up in the idem table; after charging, store the response there.',
    'The idem table already has columns for the key, the request hash, the status and the response (as JSON text).',
    'When the key is found, return the stored status and the stored body, parsed back from JSON, unchanged: do not rebuild it.',
  ],
};
