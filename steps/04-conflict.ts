import { expect } from '../grader/failure.js';
import { describeResponse, parsePaste } from '../grader/paste.js';
import { t } from '../i18n/index.js';
import { expectCharges, expectReplay, expectRows, expectStatus, paymentOf } from '../grader/expect-http.js';
import type { Step } from './types.js';

const why = () => t('step.04.why');

/**
 * Step 04: a key reused with a different body (another amount, or another user) is
 * refused with 422 and changes nothing;
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
    const key = ctx.freshKey('conflict');
    const first = await ctx.pay(server, { key, body: { user: 'u1', amount: 1000 } });
    expectStatus(first, 201, t('check.first201'), t('step.04.first201.why'));
    paymentOf(first);
    const other = await ctx.pay(server, { key, body: { user: 'u1', amount: 99999 } });
    expectStatus(other, 422, t('step.04.other'), why());
    const otherUser = await ctx.pay(server, { key, body: { user: 'u2', amount: 1000 } });
    expectStatus(
      otherUser,
      422,
      t('step.04.otherUser'),
      t('step.04.otherUser.why'),
    );
    const rows = expectRows(ctx, key, 1, [first, other, otherUser], t('step.04.refusedRows.why'));
    expect(rows[0].amount === 1000 && rows[0].user === 'u1', t('step.04.amount', { user: rows[0].user, amount: rows[0].amount }), why(), {
      exchanges: [first, other, otherUser],
      ledger: rows,
    });
    const again = await ctx.pay(server, { key, body: { user: 'u1', amount: 1000 } });
    expectReplay(first, again, t('step.04.again.why'));
    const exchanges = [first, other, otherUser, again];
    expectRows(ctx, key, 1, exchanges, t('step.04.againRows.why'));
    expectCharges(ctx, { user: 'u1', amount: 1000 }, 1, exchanges, t('step.04.charges.why'));
    return t('step.04.pass');
  },
  get hints() {
    return [t('step.04.hint.1'), t('step.04.hint.2'), t('step.04.hint.3')];
  },
};
