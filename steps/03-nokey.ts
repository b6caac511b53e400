import { DEFAULT_PAYMENT } from '../grader/http.js';
import { expect } from '../grader/failure.js';
import { describeResponse, parsePaste } from '../grader/paste.js';
import { expectRows, expectStatus } from '../grader/expect-http.js';
import type { Step } from './types.js';

const WHY = 'If a key is optional on a request that moves money, some client will leave it out, and its retries will charge twice.';

/**
 * Step 03: a request without an Idempotency-Key, or with an empty one, is refused with
 * 400 and charges nothing; a keyed request still succeeds (lab sheet, step 3).
 */
export const step: Step = {
  id: '03',
  slug: 'nokey',
  title: 'Refuse a request without a key',
  file: {
    name: '03-nokey.txt',
    check(text) {
      const paste = parsePaste(text);
      const charged = paste.responses.find((r) => (r.key === null || r.key === '') && r.status >= 200 && r.status < 300);
      expect(
        charged === undefined,
        `03-nokey.txt shows a request ${charged?.key === '' ? 'with an empty key' : 'without a key'} answered ${charged?.status}: it must be refused with 400.`,
        WHY,
        { details: paste.responses.map(describeResponse) },
      );
      const refused = paste.responses.find((r) => r.status === 400 && (r.key === undefined || r.key === null || r.key === ''));
      expect(
        refused !== undefined,
        '03-nokey.txt must show the server answering HTTP 400 to a request without an Idempotency-Key (the output of ./probe.sh with no arguments).',
        WHY,
        { details: paste.responses.map(describeResponse) },
      );
      return `03-nokey.txt shows a request without a key refused with 400 (line ${refused.line}).`;
    },
  },
  async live(ctx) {
    const server = await ctx.startServer();
    const noHeader = await ctx.pay(server, { body: DEFAULT_PAYMENT });
    expectStatus(noHeader, 400, 'A request without an Idempotency-Key header must be refused with 400.', WHY);
    const empty = await ctx.pay(server, { key: '', body: DEFAULT_PAYMENT });
    expectStatus(empty, 400, 'A request with an empty Idempotency-Key header must be refused with 400: an empty key is no key.', 'Every client that forgets its key would share the empty one, and get each other\'s payments back.');
    const rows = ctx.ledger();
    expect(rows.length === 0, 'A refused request must not charge: the ledger must stay empty.', WHY, { exchanges: [noHeader, empty], ledger: rows });
    const key = ctx.freshKey('keyed');
    const keyed = await ctx.pay(server, { key, body: DEFAULT_PAYMENT });
    expectStatus(keyed, 201, 'A request with a key must still be charged and answered 201.', 'Refusing requests without a key must not refuse the good ones.');
    expectRows(ctx, key, 1, [keyed], 'The keyed request is one payment.');
    return 'No key and an empty key were refused with 400 without a charge; a keyed request still paid.';
  },
  hints: [
    'Check the key before anything else in handle_pay, before charge() is called.',
    'The key arrives as None when the header is missing, and as an empty string when it is sent empty: refuse both.',
    'The error() helper builds a (status, {"error": ...}, headers) answer.',
  ],
};
