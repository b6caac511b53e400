import type { Exchange, LedgerRow } from './types.js';

/** What a failing check attaches so the learner sees the evidence. */
export interface Evidence {
  /** Lines of what was found, shown under the message. */
  details?: string[];
  /** The exchanges that show the failure; when absent the step's last exchanges are shown. */
  exchanges?: Exchange[];
  /** The ledger rows that show the failure. */
  ledger?: LedgerRow[];
  /** The tail of the server's output. */
  serverOutput?: string;
}

/**
 * Thrown by a check when the learner's work does not meet the step.
 * `message` is one sentence: what was expected; `why` says why it matters.
 */
export class CheckFailed extends Error {
  readonly why: string;
  readonly evidence: Evidence;

  constructor(expected: string, why: string, evidence: Evidence = {}) {
    super(expected);
    this.name = 'CheckFailed';
    this.why = why;
    this.evidence = evidence;
  }
}

/**
 * `err` with `note` added to its details when it is a CheckFailed: a new one of the same
 * class (a ServerStartFailed stays one), message, why and evidence otherwise; anything else
 * as it is.
 */
export function withNote(err: unknown, note: string): unknown {
  if (!(err instanceof CheckFailed)) return err;
  const Kind = err.constructor as new (expected: string, why: string, evidence?: Evidence) => CheckFailed;
  return new Kind(err.message, err.why, { ...err.evidence, details: [...(err.evidence.details ?? []), note] });
}

/**
 * A CheckFailed raised when a server under test never came up: it exited during start-up
 * or never answered GET /health within the start time limit. Reporters treat a step whose
 * first server failed this way as "the server could not start" (see StepResult.startFailed).
 */
export class ServerStartFailed extends CheckFailed {
  constructor(expected: string, why: string, evidence: Evidence = {}) {
    super(expected, why, evidence);
    this.name = 'ServerStartFailed';
  }
}

/**
 * Throws CheckFailed unless `condition` holds.
 * @throws CheckFailed with the given sentence, reason and evidence
 */
export function expect(condition: unknown, expected: string, why: string, evidence: Evidence = {}): asserts condition {
  if (!condition) throw new CheckFailed(expected, why, evidence);
}

/**
 * Thrown when the workspace cannot be graded at all (no server.py, python3 missing):
 * the CLI exits 2 on it.
 */
export class SetupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SetupError';
  }
}

/** Full-width punctuation at the end of a text (U+3000–U+303F, U+FF00–U+FFEF): no space follows it. */
const FULL_WIDTH_END = /[\u3000-\u303f\uff00-\uffef]$/;

/**
 * Runs one part of a check and names it in its failure (`After a restart: ...`), so the
 * learner knows which promise broke; a failure already named so is passed on as it is.
 * A name ending in full-width punctuation (Chinese `重启之后：`) is joined without a space,
 * as Chinese writes it.
 * @returns what the part returns
 * @throws CheckFailed with the part's name before the message; any other error as it is
 */
export async function inPart<T>(name: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (!(err instanceof CheckFailed) || err.message.startsWith(name)) throw err;
    throw new CheckFailed(`${name}${FULL_WIDTH_END.test(name) ? '' : ' '}${err.message}`, err.why, err.evidence);
  }
}
