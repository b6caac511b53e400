import { DEFAULT_PAYMENT } from '../grader/http.js';
import { expectCharges, expectReplay, expectRows, expectStatus, paymentOf } from '../grader/expect-http.js';
import { t } from '../i18n/index.js';
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
  get title() {
    return t('step.02.title');
  },
  async live(ctx) {
    const WHY = t('step.02.retry.why');
    const server = await ctx.startServer();
    const key = ctx.freshKey('replay');
    const first = await ctx.pay(server, { key, body: DEFAULT_PAYMENT });
    expectStatus(first, 201, t('check.first201'), t('step.02.first201.why'));
    paymentOf(first);
    const other = await ctx.pay(server, { key: ctx.freshKey('other'), body: OTHER_PAYMENT });
    expectStatus(other, 201, t('step.02.other'), t('step.02.other.why'));
    const retry = await ctx.pay(server, { key, body: DEFAULT_PAYMENT });
    expectReplay(first, retry, t('step.02.retry.thisKey', { why: WHY }));
    const again = await ctx.pay(server, { key, body: DEFAULT_PAYMENT });
    expectReplay(first, again, t('step.02.retry.every', { why: WHY }));
    const exchanges = [first, other, retry, again];
    expectRows(ctx, key, 1, exchanges, t('step.02.rows.why'));
    expectCharges(ctx, DEFAULT_PAYMENT, 1, exchanges, t('step.02.charges.why'));
    if (retry.replayed === undefined) {
      ctx.warn(t('step.02.replayedHeader'));
    }
    return t('step.02.pass', { key: JSON.stringify(key) });
  },
  get hints() {
    return [t('step.02.hint.1'), t('step.02.hint.2'), t('step.02.hint.3')];
  },
};
