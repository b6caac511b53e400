import { expect } from '../../grader/failure.js';
import { t } from '../../i18n/index.js';
import { describeResponse, parsePaste, paymentId } from '../../grader/paste.js';
import type { Step } from '../../grader/track.js';

/**
 * Step 01: reproduce the duplicate charge. The file must show two successful responses
 * for one key with different payment_ids, and a ledger holding both rows (lab sheet, step 1).
 */
export const step: Step = {
  id: '01',
  slug: 'duplicate',
  get title() {
    return t('step.01.title');
  },
  file: {
    name: '01-duplicate.txt',
    check(text) {
      const paste = parsePaste(text);
      const paid = paste.responses.filter((r) => r.status === 201 && paymentId(r) !== undefined);
      const why = t('step.01.why');
      expect(
        paid.length >= 2,
        t('step.01.twoResponses', { count: paid.length }),
        why,
        { details: paste.responses.map(describeResponse) },
      );
      const ids = new Set(paid.map((r) => paymentId(r)));
      expect(
        ids.size >= 2,
        t('step.01.samePaymentId', { id: String([...ids][0]) }),
        t('step.01.samePaymentId.why'),
        { details: paid.map(describeResponse) },
      );
      expect(paste.ledger.length > 0, t('step.01.noLedger'), t('step.01.noLedger.why'), {
        details: paid.map(describeResponse),
      });
      const keyOf = (id: number | undefined) => paste.ledger.find((row) => row.payment_id === id)?.idempotency_key;
      const byKey = new Map<string, Set<number>>();
      for (const r of paid) {
        const id = paymentId(r) as number;
        const key = typeof r.key === 'string' && r.key !== '' ? r.key : keyOf(id);
        if (!key) continue;
        if (!byKey.has(key)) byKey.set(key, new Set());
        byKey.get(key)?.add(id);
      }
      const duplicated = [...byKey.entries()].find(([key, payIds]) => {
        const rows = paste.ledger.filter((row) => row.idempotency_key === key);
        return payIds.size >= 2 && rows.length >= 2 && [...payIds].filter((id) => rows.some((row) => row.payment_id === id)).length >= 2;
      });
      expect(
        duplicated !== undefined,
        t('step.01.oneKeyTwice'),
        why,
        { details: paid.map(describeResponse), ledger: paste.ledger },
      );
      const [key, payIds] = duplicated;
      return t('step.01.pass', { key: JSON.stringify(key), ids: [...payIds].join(t('step.01.and')) });
    },
  },
  get hints() {
    return [t('step.01.hint.1'), t('step.01.hint.2')];
  },
};
