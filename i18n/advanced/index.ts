/**
 * The advanced track's messages (steps 09 on), a module per step, merged into the
 * catalogs by i18n/en.ts, ko.ts and zh.ts.
 */
import * as replayed from './09-replayed.js';
import * as scope from './10-scope.js';
import * as expiry from './11-expiry.js';
import * as crash from './12-crash.js';
import * as minimal from './13-minimal.js';
import * as state from './14-state.js';
import * as keyless from './15-keyless.js';
import * as summaries from './summaries.js';

/** English, the source. */
export const en = { ...replayed.en, ...scope.en, ...expiry.en, ...crash.en, ...minimal.en, ...state.en, ...keyless.en, ...summaries.en } as const;
/** Korean. */
export const ko: Record<keyof typeof en, string> = { ...replayed.ko, ...scope.ko, ...expiry.ko, ...crash.ko, ...minimal.ko, ...state.ko, ...keyless.ko, ...summaries.ko };
/** Chinese. */
export const zh: Record<keyof typeof en, string> = { ...replayed.zh, ...scope.zh, ...expiry.zh, ...crash.zh, ...minimal.zh, ...state.zh, ...keyless.zh, ...summaries.zh };
