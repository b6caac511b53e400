import { DEFAULT_PAYMENT } from '../grader/http.js';
import { expect } from '../grader/failure.js';
import { t } from '../i18n/index.js';
import { describeResponse, parsePaste, paymentId, type PastedResponse } from '../grader/paste.js';
import { expectCharges, expectReplay, expectRows, expectStatus, paymentOf } from '../grader/expect-http.js';
import { raceRound } from '../grader/race.js';
import { RACE_ROUNDS } from './05-race.js';
import type { Step } from './types.js';

const RESTART = /restart|\bstop\b|\bkill\b|server\.py|재시작|다시 시작|重启|重新启动/i;

/**
 * Step 06: what the server remembers survives a restart and is shared by every instance
 * on the same database: a retry after a restart, or on another instance, replays; a race
 * split over two instances charges once (lab sheet, step 6).
 */
export const step: Step = {
  id: '06',
  slug: 'persist',
  get title() {
    return t('step.06.title');
  },
  file: {
    name: '06-persist.txt',
    check(text, notes) {
      const paste = parsePaste(text);
      const paid = paste.responses.filter((r) => r.status === 201 && paymentId(r) !== undefined);
      const byId = new Map<number, PastedResponse[]>();
      for (const r of paid) byId.set(paymentId(r) as number, [...(byId.get(paymentId(r) as number) ?? []), r]);
      const repeated = [...byId.values()].find((rs) => rs.length >= 2);
      expect(
        repeated !== undefined,
        t('step.06.file.noRepeat'),
        t('step.06.file.noRepeat.why'),
        { details: paste.responses.map(describeResponse) },
      );
      const [first, ...later] = repeated;
      const same = later.find((r) => r.body?.charged_at === first.body?.charged_at);
      expect(
        same !== undefined,
        t('step.06.file.rebuilt', { id: String(paymentId(first)) }),
        t('step.06.file.rebuilt.why'),
        { details: repeated.map(describeResponse) },
      );
      const between = paste.lines.slice(first.line, same.line - 1);
      if (!between.some((line) => RESTART.test(line))) {
        notes.warn(t('step.06.file.showRestart'));
      }
      return t('step.06.file.pass', { id: String(paymentId(first)), first: first.line, second: same.line });
    },
  },
  cost: 4,
  async live(ctx) {
    const WHY_RESTART = t('step.06.restart.why');
    const a = await ctx.startServer();
    const key = ctx.freshKey('restart');
    const RESTART_PAYMENT = { user: 'u6-restart', amount: DEFAULT_PAYMENT.amount };
    const first = await ctx.pay(a, { key, body: RESTART_PAYMENT });
    expectStatus(first, 201, t('check.first201'), t('step.06.first201.why'));
    paymentOf(first);
    await ctx.stopServer(a);
    // B restarts on A's database; C, the second instance for the shared checks, starts alongside.
    const [b, c] = await Promise.all([ctx.startServer(), ctx.startServer()]);
    const retry = await ctx.pay(b, { key, body: RESTART_PAYMENT });
    expectReplay(first, retry, WHY_RESTART);
    expectRows(ctx, key, 1, [first, retry], WHY_RESTART);
    expectCharges(ctx, RESTART_PAYMENT, 1, [first, retry], WHY_RESTART);

    const WHY_SHARED = t('step.06.shared.why');
    const key2 = ctx.freshKey('shared');
    const SHARED_PAYMENT = { user: 'u6-shared', amount: DEFAULT_PAYMENT.amount };
    const onB = await ctx.pay(b, { key: key2, body: SHARED_PAYMENT });
    expectStatus(onB, 201, t('check.first201'), WHY_SHARED);
    paymentOf(onB);
    const onC = await ctx.pay(c, { key: key2, body: SHARED_PAYMENT });
    expectReplay(onB, onC, WHY_SHARED);
    expectRows(ctx, key2, 1, [onB, onC], WHY_SHARED);
    expectCharges(ctx, SHARED_PAYMENT, 1, [onB, onC], WHY_SHARED);

    for (let round = 1; round <= RACE_ROUNDS; round++) {
      await raceRound(ctx, [b, c], round, { lockDatabase: round === 1 });
    }
    return t('step.06.pass', { rounds: RACE_ROUNDS });
  },
  get hints() {
    return [t('step.06.hint.1'), t('step.06.hint.2'), t('step.06.hint.3')];
  },
};
