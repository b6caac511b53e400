import { t } from '../../i18n/index.js';
import { expect } from '../../grader/failure.js';
import { describeResponse, parsePaste } from '../../grader/paste.js';
import { expectCharges, expectRows, expectStatus } from '../../grader/expect-http.js';
import type { Step } from '../../grader/track.js';

const why = () => t('step.03.why');

/**
 * Step 03: a request without an Idempotency-Key, or with an empty one, is refused with
 * 400 and charges nothing; a keyed request still succeeds (lab sheet, step 3).
 */
export const step: Step = {
  id: '03',
  slug: 'nokey',
  get title() {
    return t('step.03.title');
  },
  file: {
    name: '03-nokey.txt',
    check(text) {
      const paste = parsePaste(text);
      const charged = paste.responses.find((r) => (r.key === null || r.key === '') && r.status >= 200 && r.status < 300);
      expect(
        charged === undefined,
        t(charged?.key === '' ? 'step.03.file.charged.empty' : 'step.03.file.charged.none', { status: String(charged?.status) }),
        why(),
        { details: paste.responses.map(describeResponse) },
      );
      const refused = paste.responses.find((r) => r.status === 400 && (r.key === undefined || r.key === null || r.key === ''));
      expect(
        refused !== undefined,
        t('step.03.file.noRefusal'),
        why(),
        { details: paste.responses.map(describeResponse) },
      );
      return t('step.03.file.pass', { line: refused.line });
    },
  },
  async live(ctx) {
    const server = await ctx.startServer();
    const noKeyBody = ctx.data.payment();
    const noHeader = await ctx.pay(server, { body: noKeyBody });
    expectStatus(noHeader, 400, t('step.03.noHeader'), why());
    const emptyBody = ctx.data.payment();
    const empty = await ctx.pay(server, { key: '', body: emptyBody });
    expectStatus(empty, 400, t('step.03.emptyHeader'), t('step.03.emptyHeader.why'));
    const rows = ctx.ledger();
    expect(rows.length === 0, t('step.03.noCharge'), why(), { exchanges: [noHeader, empty], ledger: rows });
    expectCharges(ctx, noKeyBody, 0, [noHeader], t('step.03.charged.why'));
    expectCharges(ctx, emptyBody, 0, [empty], t('step.03.charged.why'));
    const key = ctx.freshKey();
    const keyed = await ctx.pay(server, { key, body: ctx.data.payment() });
    expectStatus(keyed, 201, t('step.03.keyed'), t('step.03.keyed.why'));
    expectRows(ctx, key, 1, [keyed], t('step.03.keyedRows.why'));
    return t('step.03.pass');
  },
  get hints() {
    return [t('step.03.hint.1'), t('step.03.hint.2'), t('step.03.hint.3')];
  },
};
