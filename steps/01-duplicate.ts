import { expect } from '../grader/failure.js';
import { describeResponse, parsePaste, paymentId } from '../grader/paste.js';
import type { Step } from './types.js';

/**
 * Step 01: reproduce the duplicate charge. The file must show two successful responses
 * for one key with different payment_ids, and a ledger holding both rows (lab sheet, step 1).
 */
export const step: Step = {
  id: '01',
  slug: 'duplicate',
  title: 'Reproduce the duplicate charge',
  file: {
    name: '01-duplicate.txt',
    check(text) {
      const paste = parsePaste(text);
      const paid = paste.responses.filter((r) => r.status === 201 && paymentId(r) !== undefined);
      const why = 'The lab starts from the bug: a retry with the same key charged a second time.';
      expect(
        paid.length >= 2,
        `01-duplicate.txt must show two successful responses (HTTP 201 with a payment_id) to the same request; it shows ${paid.length}.`,
        why,
        { details: paste.responses.map(describeResponse) },
      );
      const ids = new Set(paid.map((r) => paymentId(r)));
      expect(
        ids.size >= 2,
        `The responses in 01-duplicate.txt all carry payment_id ${[...ids][0]}: that is one payment answered twice, not the duplicate charge.`,
        'Run the probe twice against the starter server: each call charges again and gets a new payment_id.',
        { details: paid.map(describeResponse) },
      );
      expect(paste.ledger.length > 0, '01-duplicate.txt must also show the ledger (./ledger.sh) with both charges.', 'The ledger is where a duplicate charge becomes money: show it.', {
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
        '01-duplicate.txt must show one key charged twice: two responses with different payment_ids, and both rows in the ledger under that key.',
        why,
        { details: paid.map(describeResponse), ledger: paste.ledger },
      );
      const [key, payIds] = duplicated;
      return `Key ${JSON.stringify(key)} was charged twice: payment_ids ${[...payIds].join(' and ')}, both in the ledger.`;
    },
  },
  hints: [
    'Start the server, then run ./probe.sh k1 twice and ./ledger.sh; paste all of it into the file.',
    'Each probe prints the status line and the body with its payment_id; the ledger prints one row per charge.',
  ],
};
