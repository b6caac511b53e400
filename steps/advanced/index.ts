import { step as replayed } from './09-replayed.js';
import { step as scope } from './10-scope.js';
import { step as expiry } from './11-expiry.js';
import { step as crash } from './12-crash.js';
import { step as minimal } from './13-minimal.js';
import { step as state } from './14-state.js';
import { step as keyless } from './15-keyless.js';
import type { Step, Track } from '../../grader/track.js';
import { BASIC } from '../basic/index.js';

/**
 * Every step of the advanced track, in order: the essay's second half (the replay header,
 * keys scoped per user, expiry, a claim stuck in flight after a crash, a minimal record, a
 * stored response against the payment's state now, keyless clients). Each is graded live
 * against the advanced server contract (docs/server-contract.md, "The advanced track").
 */
export const ADVANCED_STEPS: readonly Step[] = [replayed, scope, expiry, crash, minimal, state, keyless];

/**
 * The advanced track: steps 09 on, laid out with `idem-lab track advanced`. It builds on
 * the basic track (its files stay, its steps should pass first) and adds its sheet
 * (ADVANCED.md). Its checks need lab/server.py's newer frame (charge() with the provider's
 * key, GET /payments/{id}, the refund), which a workspace laid before may lack: the frame
 * is known by payment_link, which only that frame defines.
 */
export const ADVANCED: Track = {
  id: 'advanced',
  steps: ADVANCED_STEPS,
  buildsOn: BASIC,
  sheet: { source: (lang) => `ADVANCED.${lang}.md`, name: 'ADVANCED.md' },
  frame: { name: 'server.py', source: 'server.py', current: /^def payment_link\(/m },
};
