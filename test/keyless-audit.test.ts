/**
 * How the audit groups keyless requests into payments (grader/audit.ts paymentsOf): every
 * keyless 201 its own payment by default, as the basic track needs; with `same-answer`,
 * keyless 201s of one body that answered one payment_id are one payment, and nothing else
 * is merged (another payment_id, another body, an empty key, a keyed request).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { paymentsOf } from '../grader/audit.js';
import type { Exchange } from '../grader/types.js';

/** A POST /pay exchange as the grader records one. */
function pay(body: { user: string; amount: number }, status: number, paymentId?: number, key?: string): Exchange {
  const answer = paymentId === undefined ? { error: 'no' } : { payment_id: paymentId, ...body, charged_at: '2026-01-01T00:00:00.000Z' };
  return { server: 'A', port: 1, method: 'POST', path: '/pay', key, requestBody: JSON.stringify(body), status, responseBody: JSON.stringify(answer), ms: 1 };
}

const p = { user: 'u1', amount: 100 };
const q = { user: 'u2', amount: 100 };

test('by default every keyless 201 is a payment of its own, a replay of one included', () => {
  const { payments } = paymentsOf([pay(p, 201, 1), pay(p, 201, 1)]);
  assert.equal(payments.length, 2);
});

test('same-answer: keyless 201s of one body and one payment_id are one payment with both requests', () => {
  const first = pay(p, 201, 1);
  const replay = pay(p, 201, 1);
  const { payments } = paymentsOf([first, replay], 'same-answer');
  assert.equal(payments.length, 1);
  assert.equal(payments[0].first, first);
  assert.deepEqual(payments[0].requests, [first, replay]);
});

test('same-answer merges nothing else: another payment_id, another body, an empty key, a keyed request, a refusal', () => {
  const exchanges = [pay(p, 201, 1), pay(p, 201, 2), pay(q, 201, 1), pay(p, 201, 1, ''), pay(p, 201, 1, 'k1'), pay(p, 409)];
  const { payments, refused } = paymentsOf(exchanges, 'same-answer');
  assert.deepEqual(
    payments.map((x) => x.first),
    exchanges.slice(0, 5),
  );
  assert.equal([...refused.values()].flat().length, 1);
});
