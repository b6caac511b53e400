import { expect } from '../grader/failure.js';
import { describeResponse, parsePaste } from '../grader/paste.js';
import { expectCharges, expectReplay, expectRows, expectStatus, paymentOf } from '../grader/expect-http.js';
import type { Step } from './types.js';

const WHY = 'Answering the 99999 request with the stored 1000 response hides a reused key: the client believes 99999 was paid when nothing was.';

/**
 * Step 04: a key reused with a different body (another amount, or another user) is
 * refused with 422 and changes nothing;
 * the first body under that key still replays (lab sheet, step 4; the request fingerprint
 * of the IETF Idempotency-Key draft).
 */
export const step: Step = {
  id: '04',
  slug: 'conflict',
  title: 'Refuse a reused key with a different body',
  file: {
    name: '04-conflict.txt',
    check(text) {
      const paste = parsePaste(text);
      const conflict = paste.responses.find((r) => r.status === 422);
      expect(
        conflict !== undefined,
        '04-conflict.txt must show the server answering HTTP 422 to a key reused with a different amount.',
        WHY,
        { details: paste.responses.map(describeResponse) },
      );
      return `04-conflict.txt shows the reused key refused with 422 (line ${conflict.line}).`;
    },
  },
  async live(ctx) {
    const server = await ctx.startServer();
    const key = ctx.freshKey('conflict');
    const first = await ctx.pay(server, { key, body: { user: 'u1', amount: 1000 } });
    expectStatus(first, 201, 'The first request with a new key must charge and answer 201.', 'The conflict is only visible once a first payment is stored.');
    paymentOf(first);
    const other = await ctx.pay(server, { key, body: { user: 'u1', amount: 99999 } });
    expectStatus(other, 422, 'The same key with a different body (amount 99999 instead of 1000) must be refused with 422.', WHY);
    const otherUser = await ctx.pay(server, { key, body: { user: 'u2', amount: 1000 } });
    expectStatus(
      otherUser,
      422,
      'The same key with another user (u2 instead of u1, same amount) must be refused with 422: the whole body is the request, not just the amount.',
      'Answering u2 with u1\'s receipt tells u2 a payment went through that never happened.',
    );
    const rows = expectRows(ctx, key, 1, [first, other, otherUser], 'The refused requests must not charge.');
    expect(rows[0].amount === 1000 && rows[0].user === 'u1', `The one ledger row for the key must keep u1 and 1000, it holds ${rows[0].user} and ${rows[0].amount}.`, WHY, {
      exchanges: [first, other, otherUser],
      ledger: rows,
    });
    const again = await ctx.pay(server, { key, body: { user: 'u1', amount: 1000 } });
    expectReplay(first, again, 'After a refused conflict the key still belongs to the first payment: its retry must replay it.');
    const exchanges = [first, other, otherUser, again];
    expectRows(ctx, key, 1, exchanges, 'The replay must not charge.');
    expectCharges(ctx, { user: 'u1', amount: 1000 }, 1, exchanges, 'Only the first request may reach the payment provider; a conflict or a replay is answered before charge().');
    return 'A different amount and a different user under a used key were refused with 422; the first body still replayed; one ledger row, one charge.';
  },
  hints: [
    'Store a fingerprint of the request body next to the key when you first see it.',
    'The fingerprint() helper hashes a body canonically, so the order of its fields does not matter.',
    'When the key is known but the fingerprint differs, answer 422 and do not touch the ledger.',
  ],
};
