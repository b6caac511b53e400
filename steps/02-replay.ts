import { DEFAULT_PAYMENT } from '../grader/http.js';
import { expectReplay, expectRows, expectStatus, paymentOf } from '../grader/expect-http.js';
import type { Step } from './types.js';

/**
 * Step 02: the same Idempotency-Key and body twice: both 201, the second response equal
 * to the first in every field, one ledger row (lab sheet, step 2; IETF Idempotency-Key draft).
 */
export const step: Step = {
  id: '02',
  slug: 'replay',
  title: 'Replay the stored response',
  async live(ctx) {
    const server = await ctx.startServer();
    const key = ctx.freshKey('replay');
    const first = await ctx.pay(server, { key, body: DEFAULT_PAYMENT });
    expectStatus(first, 201, 'The first request with a new key must charge and answer 201.', 'Nothing can be replayed before the first payment succeeds.');
    paymentOf(first);
    const retry = await ctx.pay(server, { key, body: DEFAULT_PAYMENT });
    expectReplay(first, retry, 'A retry is the same request sent again: the client must get the same success, never a second charge or an error.');
    expectRows(ctx, key, 1, [first, retry], 'Two requests with one key are one payment: the second must not add a ledger row.');
    if (retry.replayed === undefined) {
      ctx.warn('Mark a replayed answer with the header Idempotency-Replayed: true, so clients and logs can tell a replay from a new charge.');
    }
    return `The retry with key ${JSON.stringify(key)} got the first response back and the ledger holds one row.`;
  },
  hints: [
    'Before charging, look the key up in the idem table; after charging, store the response there.',
    'The idem table already has columns for the key, the request hash, the status and the response (as JSON text).',
    'When the key is found, return the stored status and the stored body, parsed back from JSON, unchanged: do not rebuild it.',
  ],
};
