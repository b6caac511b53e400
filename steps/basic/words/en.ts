/**
 * English words of the file checks of steps 07 and 08 (notation: steps/words/index.ts).
 * List every form a learner may write: phrases match whole words only.
 */
import type { Words } from './types.js';

export const en: Words = {
  spaced: true,
  bounded: true,

  // No response came back at all (matched anywhere: `ReadTimeout`, `timeouts`).
  timeout: [
    'timeout',
    'time-out',
    'time out',
    'timed out',
    'no {response|answer|reply}',
    'network {error|failure}',
    'connection {reset|refused|lost|error}',
  ],
  // Waiting longer and longer between tries.
  backoff: ['backoff', 'back-off', 'exponential'],
  // A random part in the wait, so clients do not retry in step.
  jitter: ['jitter', 'random'],

  retry: {
    // Sending the same request again.
    again: [
      'retry',
      'retried',
      'retries',
      'retrying',
      'retryable',
      'retriable',
      'resend',
      're-send',
      'resends',
      'resending',
      '{send|sends|sending} [it|them|this|that|the request|the same request|the payment|the same payment] again',
      '{try|tries|trying} [it|them] again',
    ],
    // Before a retry word: do *not* retry.
    notBefore: [
      'do not',
      "don't",
      'never',
      'no',
      'not',
      'must not',
      "mustn't",
      'should not',
      "shouldn't",
      "won't",
      'will not',
      'would not',
      "wouldn't",
      'cannot',
      "can't",
      'can not',
      'need not',
      "needn't",
      'no need to',
      'shall not',
      'better not',
      'not worth',
      'no point',
      'no point in',
      'no use',
      'no sense in',
      'pointless to',
      'useless to',
    ],
    // Between the two: should not *be* retried.
    between: ['be'],
    notAfter: [],
    // "Do not retry" on their own.
    no: [
      'non-retryable',
      'nonretryable',
      'non retryable',
      'non-retriable',
      'nonretriable',
      'non retriable',
      'non-retry',
      'nonretry',
      // "give up", but not "give up after 5 attempts" (a condition, not a verdict)
      { say: 'give up', notBefore: ['after', 'once', 'when', 'if', 'only', 'eventually', 'later', 'at'] },
      'fail fast',
      'fail-fast',
    ],
    // "Retry" on their own: do not give up.
    yes: ['{do not|don\'t|never|not} [to] give up'],
    // "Retrying [the same request] won't help", "resending is pointless", "...gives the same error."
    futile: [
      {
        then: [
          "{won't|will not|wouldn't|would not|doesn't|does not|can't|cannot|will never|never|isn't going to|is not going to|is unlikely to} {help|helps|succeed|succeeds|work|works|fix|fixes|change|changes|matter|matters|make a difference}",
          '{is|are|would be|will be|is just|is only} {pointless|useless|futile|meaningless|hopeless|no use|of no use|no good|a waste|wasted|wasteful|in vain|not going to help|not helpful|not useful}',
          'will [only|just|always] fail {again|the same way}',
          '{fail|fails} {again|the same way|every time}',
          '{only|just|always} {fail|fails} {again|the same way|every time}',
        ],
      },
      {
        then: [
          '{gives|give|returns|return|gets|get|yields|yield|produces|produce|ends with|end with|ends up with|end up with|results in|result in} the same [error|failure|result|status|rejection|refusal]',
        ],
        clauseEnd: true,
      },
    ],
    gap: { words: 8 },
    // A whole answer.
    bareYes: ['yes', 'always', 'y'],
    bareNo: ['no', 'never', 'n'],
    // ...that may also begin an ordinary phrase.
    ambiguous: ['no', 'never', 'always', 'y', 'n'],
    // How such phrases go on: "no way to know", "never arrives", "always fails".
    goesOn: [
      'way',
      'idea',
      'one',
      'telling',
      'guarantee',
      'clue',
      'knowing',
      'answer',
      'response',
      'reply',
      'know',
      'knows',
      'arrive',
      'arrives',
      'arrived',
      'reached',
      'get',
      'gets',
      'got',
      'fail',
      'fails',
    ],
    // "Retry: no", "retry? yes".
    label: ['retry'],
    // Table headers (matched anywhere in the header): "Retry?", "Verdict".
    verdictHeader: ['retry', 'verdict', 'again'],
    actionHeader: ['action', 'what to do', 'handling', 'decision'],
    // A question or a title, not a label: "Which failures to retry", "Retry policy".
    notALabel: [
      'which',
      'what',
      'when',
      'whether',
      'how',
      'why',
      'policy',
      'policies',
      'rule',
      'rules',
      'strategy',
      'strategies',
      'overview',
      'summary',
      'note',
      'notes',
      'plan',
      'or',
    ],
    // Words around a verdict in a label: "Retry these", "Do not retry the following".
    labelFiller: [
      'these',
      'those',
      'them',
      'it',
      'this',
      'the',
      'following',
      'response',
      'responses',
      'failure',
      'failures',
      'error',
      'errors',
      'code',
      'codes',
      'case',
      'cases',
      'status',
      'statuses',
      'outcome',
      'outcomes',
      'answer',
      'answers',
      'safe',
      'ok',
      'okay',
      'to',
      'can',
      'be',
      'should',
      'must',
      'always',
      'with',
      'backoff',
      'later',
      'after',
      'a',
      'pause',
      'wait',
      'delay',
      'yes',
      'no',
    ],
    // "The same goes for a 422."
    likewise: ['the same {goes|is true|holds|applies} for', 'same for', 'likewise', 'similarly'],
    // "503 retry, but 400 never"; "Timeouts should be retried while 400 should not."
    contrast: ['but', 'while', 'whereas', 'however'],
    // "Retry timeouts and do not retry 400."
    and: ['and'],
    // "..., and 504 too."
    too: ['too', 'as well', 'also', 'either', 'neither'],
    // Alone in a clause after "but": "but never 400", "while 400 should not".
    not: [
      'not',
      'never',
      'no',
      'do not',
      "don't",
      'does not',
      "doesn't",
      'should not',
      "shouldn't",
      'must not',
      "mustn't",
      'cannot',
      "can't",
      "won't",
      'will not',
    ],
    // Alone in a clause after "but": "400 never, but 503 always", "but 503 yes".
    so: ['always', 'yes', 'do', 'does', 'should', 'must', 'can'],
    // "Retry everything except 400 and 422": the responses named get the other verdict.
    except: ['except', 'except for', 'other than', 'apart from', 'save for', 'excluding'],
    // "Retry everything": with a retry, a verdict for every response.
    everything: [
      'everything',
      'anything',
      'every {failure|error|response|request}',
      'all {failures|errors|responses|requests|of them}',
      'any {failure|error|response}',
      'whatever fails',
    ],
    // "Never retry anything": with a "do not", a verdict for every response ("do not retry everything" is not one).
    anything: ['anything', 'any {failure|error|response|request}'],
  },

  notes: {
    // The idempotency key.
    key: ['key', 'keys', 'idempotency', 'idempotent'],
    // Where keys are kept.
    store: [
      'store',
      'stored',
      'stores',
      'storing',
      'storage',
      'save',
      'saved',
      'saves',
      'saving',
      'persist',
      'persists',
      'persisted',
      'persisting',
      'persistent',
      'persistence',
      'database',
      'databases',
      'DB',
      'redis',
      'sqlite',
      'sqlite3',
      'remember',
      'remembers',
      'remembered',
      'remembering',
    ],
    // Kept in a place that lasts or is shared, not just "a table" somewhere.
    keptIn: [
      '{keep|keeps|keeping|kept} … {in|on|inside} [a|an|the|one|its|our|their|some] * * {table|store|db|disk|file}',
      '{table|store} [that] {every|all|each|both} * {instance|instances|server|servers|process|processes}',
      'shared {table|store}',
    ],
    // The request body.
    body: ['body', 'bodies', 'payload', 'payloads'],
    // Another request under the same key.
    differentRequest: [
      '{different|other|another|changed|new} {amount|amounts|request|requests|data|parameters|content|contents}',
    ],
  },
};
