import { DEFAULT_PAYMENT } from '../grader/http.js';
import { t } from '../i18n/index.js';
import { expectReplay, expectRows, expectStatus, paymentOf } from '../grader/expect-http.js';
import type { Step } from './types.js';

/**
 * Step 02: the same Idempotency-Key and body twice: both 201, the second response equal
 * to the first in every field, one ledger row (lab sheet, step 2; IETF Idempotency-Key draft).
 */
export const step: Step = {
  id: '02',
  slug: 'replay',
  get title() {
    return t('step.02.title');
  },
  async live(ctx) {
    const server = await ctx.startServer();
    const key = ctx.freshKey('replay');
    const first = await ctx.pay(server, { key, body: DEFAULT_PAYMENT });
    expectStatus(first, 201, t('check.first201'), t('step.02.first201.why'));
    paymentOf(first);
    const retry = await ctx.pay(server, { key, body: DEFAULT_PAYMENT });
    expectReplay(first, retry, t('step.02.retry.why'));
    expectRows(ctx, key, 1, [first, retry], t('step.02.rows.why'));
    if (retry.replayed === undefined) {
      ctx.warn(t('step.02.replayedHeader'));
    }
    return t('step.02.pass', { key: JSON.stringify(key) });
  },
  get hints() {
    return [t('step.02.hint.1'), t('step.02.hint.2'), t('step.02.hint.3')];
  },
};
