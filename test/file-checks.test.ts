/**
 * Every step's file check against the learner files in fixtures/files/: each
 * `<id>-<slug>/pass-*` file must pass with the sentence (and only the warnings) listed in
 * PASSES below, each `<id>-<slug>/fail-*` file must fail for the reason listed in
 * FAIL_REASONS, and every file of fixtures/files/reference/ must pass its step without a
 * warning. The verdict lives in the file name, never inside the file: the files are
 * exactly what a learner would paste.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { FIXTURES_DIR } from '../fixtures/build.js';
import { CheckFailed } from '../grader/failure.js';
import { STEPS } from '../steps/index.js';
import type { Step } from '../grader/track.js';

const FILES_DIR = path.join(FIXTURES_DIR, 'files');

/**
 * What each pass fixture must be read as: a pattern for the check's sentence, and one per
 * warning it must give (none when absent). A pass fixture without an entry fails the test.
 */
const PASSES: Record<string, { sentence: RegExp; warnings?: RegExp[] }> = {
  '01-duplicate/pass-probe-sh.txt': { sentence: /^Key "k1" was charged twice: payment_ids 1 and 2, both in the ledger\.$/ },
  '01-duplicate/pass-idem-lab-commands.txt': { sentence: /^Key "dup-1" was charged twice: payment_ids 4 and 5/ },
  '01-duplicate/pass-curl-i-sqlite3.txt': { sentence: /^Key "k1" was charged twice: payment_ids 3 and 4/ },
  '01-duplicate/pass-curl-v-ledger-json.txt': { sentence: /^Key "abc" was charged twice: payment_ids 1 and 2/ },

  '03-nokey/pass-probe-sh.txt': { sentence: /without a key refused with 400 \(line 8\)/ },
  '03-nokey/pass-curl-i-no-key.txt': { sentence: /without a key refused with 400 \(line 3\)/ },
  '03-nokey/pass-curl-multiline.txt': { sentence: /without a key refused with 400 \(line 5\)/ },
  '03-nokey/pass-curl-v-empty-header.txt': { sentence: /without a key refused with 400 \(line 14\)/ },
  '03-nokey/pass-ko-probe-output.txt': { sentence: /without a key refused with 400 \(line 3\)/ },

  '04-conflict/pass-probe-sh.txt': { sentence: /refused with 422 \(line 9\)/ },
  '04-conflict/pass-curl-v.txt': { sentence: /refused with 422 \(line 14\)/ },

  '05-race/pass-loop-key.txt': { sentence: /one ledger row for the raced key "r7"/ },
  '05-race/pass-xargs-sqlite-headers.txt': { sentence: /one ledger row for the raced key "race-b"/ },
  '05-race/pass-curl-loop.txt': { sentence: /one ledger row for the raced key "burst-1"/ },
  '05-race/pass-grep-ledger.txt': { sentence: /one ledger row for the raced key "r12"/ },
  '05-race/pass-dir-option.txt': { sentence: /one ledger row for the raced key "r5"/ },
  '05-race/pass-hey-header.txt': { sentence: /one ledger row for the raced key "r6"/ },
  '05-race/pass-xh-loop.txt': { sentence: /one ledger row for the raced key "r8"/ },

  '06-persist/pass-second-instance.txt': { sentence: /payment_id 3 answered again unchanged \(lines 4 and 11\)/ },
  '06-persist/pass-jq-pretty.txt': { sentence: /payment_id 12 answered again unchanged \(lines 3 and 20\)/ },
  '06-persist/pass-no-restart-shown.txt': {
    sentence: /payment_id 3 answered again unchanged \(lines 4 and 8\)/,
    warnings: [/Show the restart between the two probes/],
  },

  '07-retry/pass-table.md': { sentence: /classifies timeout, 500, 503, 429, 400, 422, 409 with reasons/ },
  '07-retry/pass-list.md': { sentence: /classifies timeout, 502, 503, 429, 400, 422, 404 with reasons/ },
  '07-retry/pass-list-labels.md': { sentence: /classifies 503, timeout, 400, 422, 500 with reasons/ },
  '07-retry/pass-ko-table.md': { sentence: /classifies timeout, 500, 503, 429, 400, 422 with reasons/ },
  '07-retry/pass-zh-table.md': { sentence: /classifies timeout, 502, 503, 429, 400, 422 with reasons/ },
  '07-retry/pass-zh-list.md': { sentence: /classifies timeout, 503, 500, 400, 422 with reasons/ },
  '07-retry/pass-doubtful-404.md': {
    sentence: /classifies timeout, 503, 400, 422, 404 with reasons/,
    warnings: [/says to retry 404; a client should not/, /exponential backoff with jitter/],
  },
  '07-retry/pass-wrapped-prose.md': { sentence: /classifies timeout, 503, 400, 422 with reasons/ },
  '07-retry/pass-timeout-no-way.md': { sentence: /classifies timeout, 503, 400, 422 with reasons/ },
  '07-retry/pass-retrying-wont-help.md': { sentence: /classifies 400, 422, 404, 503, timeout with reasons/ },
  '07-retry/pass-heading-sections.md': { sentence: /classifies timeout, 503, 500, 400, 422 with reasons/ },
  '07-retry/pass-always-never.md': { sentence: /classifies timeout, 503, 429, 400, 422 with reasons/ },
  '07-retry/pass-action-column.md': { sentence: /classifies timeout, 503, 500, 400, 422 with reasons/ },
  '07-retry/pass-ko-zh-action.md': { sentence: /classifies timeout, 503, 400, 422, 502 with reasons/ },
  '07-retry/pass-nested-items.md': { sentence: /classifies 503, timeout, 400, 422 with reasons/ },
  '07-retry/pass-unread-line.md': {
    sentence: /classifies timeout, 500, 400, 422 with reasons/,
    warnings: [/names 503 but no retry verdict could be read from the line "503 \| depends \| the server is overloaded/],
  },
  // A list's last item running on into a paragraph line: the line is a label, or the reason of the items above.
  '07-retry/pass-run-on-labels.md': { sentence: /classifies timeout, 503, 400, 422 with reasons/ },
  '07-retry/pass-ko-run-on-labels.md': { sentence: /classifies timeout, 503, 400, 422 with reasons/ },
  '07-retry/pass-zh-run-on-labels.md': { sentence: /classifies timeout, 503, 400, 422 with reasons/ },
  // One line giving two responses two verdicts.
  '07-retry/pass-two-verdicts-line.md': { sentence: /classifies 503, 400, 422, timeout, 500, 404 with reasons/ },
  '07-retry/pass-ko-two-verdicts.md': { sentence: /classifies 503, 400, timeout, 422 with reasons/ },
  '07-retry/pass-zh-two-verdicts.md': { sentence: /classifies 503, 400, timeout, 422 with reasons/ },
  // "Retry everything" as a default, with the exceptions listed: read as written.
  '07-retry/pass-retry-everything-by-default.md': { sentence: /classifies 400, 422, 503, timeout with reasons/ },

  '08-notes/pass-en.md': { sentence: /covers why retries are unavoidable, where idempotency keys are stored, why a different body/ },
  '08-notes/pass-ko.md': { sentence: /covers why retries are unavoidable/ },
  '08-notes/pass-zh.md': { sentence: /covers why retries are unavoidable/ },
  '08-notes/pass-mixed-paragraph.md': { sentence: /covers why retries are unavoidable/ },
  '08-notes/pass-send-again-remember.md': { sentence: /covers why retries are unavoidable, where idempotency keys are stored, why a different body/ },
  '08-notes/pass-one-line.md': { sentence: /covers why retries are unavoidable, where idempotency keys are stored, why a different body/ },
  '08-notes/pass-ko-synonyms.md': { sentence: /covers why retries are unavoidable, where idempotency keys are stored, why a different body/ },
  '08-notes/pass-zh-synonyms.md': { sentence: /covers why retries are unavoidable, where idempotency keys are stored, why a different body/ },
  // Short sentences of one's own still count (only keyword lists do not).
  '08-notes/pass-short-lines.md': { sentence: /covers why retries are unavoidable, where idempotency keys are stored, why a different body/ },
  '08-notes/pass-ko-short-lines.md': { sentence: /covers why retries are unavoidable, where idempotency keys are stored, why a different body/ },
  '08-notes/pass-zh-short-lines.md': { sentence: /covers why retries are unavoidable, where idempotency keys are stored, why a different body/ },
};

/**
 * Why each fail fixture must fail: a pattern the CheckFailed message must match, keyed by
 * `<folder>/<file>`. A fail fixture without an entry fails the test, so none slips in untested.
 */
const FAIL_REASONS: Record<string, RegExp> = {
  '01-duplicate/fail-same-payment-id.txt': /all carry payment_id 1: that is one payment answered twice/,
  '01-duplicate/fail-ledger-one-row.txt': /must show one key charged twice: .*both rows in the ledger/,
  '01-duplicate/fail-no-ledger.txt': /must also show the ledger/,
  '01-duplicate/fail-two-keys.txt': /must show one key charged twice/,
  '01-duplicate/fail-server-down.txt': /must show two successful responses .*; it shows 0\./,

  '03-nokey/fail-prose-says-400.txt': /shows a request without a key answered 201: it must be refused with 400/,
  '03-nokey/fail-old-keyless-201.txt': /shows a request without a key answered 201/,
  '03-nokey/fail-empty-key-201.txt': /shows a request with an empty key answered 201: it must be refused with 400/,
  '03-nokey/fail-keyed-400-only.txt': /must show the server answering HTTP 400 to a request without an Idempotency-Key/,
  '03-nokey/fail-curl-v-keyless-201.txt': /shows a request without a key answered 201/,
  // probe output in Korean and Chinese marks a missing and an empty key in its own words.
  '03-nokey/fail-ko-keyless-201.txt': /shows a request without a key answered 201: it must be refused with 400/,
  '03-nokey/fail-zh-keyless-201.txt': /shows a request without a key answered 201: it must be refused with 400/,
  '03-nokey/fail-zh-empty-key-201.txt': /shows a request with an empty key answered 201: it must be refused with 400/,

  '04-conflict/fail-prose-422-replayed-201.txt': /must show the server answering HTTP 422/,
  '04-conflict/fail-400-instead.txt': /must show the server answering HTTP 422/,
  '04-conflict/fail-409-instead.txt': /must show the server answering HTTP 422/,

  '05-race/fail-ten-rows.txt': /exactly one ledger row for the raced key "race"; it shows 10\./,
  '05-race/fail-no-ledger.txt': /must show the ledger/,
  '05-race/fail-two-rows.txt': /exactly one ledger row for the raced key "r7"; it shows 2\./,
  '05-race/fail-stale-ledger.txt': /exactly one ledger row for the raced key "r9"; it shows 0\./,
  '05-race/fail-no-loop-shown.txt': /does not show which key was raced: .*no row for "race"; paste the loop command you ran/,
  '05-race/fail-unread-key-repeated.txt': /the raced key could not be read from the paste, and the ledger shows key "burst" with 3 rows; paste the loop command/,

  '06-persist/fail-rebuilt-charged-at.txt': /payment_id 3 twice but with different charged_at/,
  '06-persist/fail-new-payment.txt': /must show the retry after the restart answered with the first payment/,
  '06-persist/fail-retry-500.txt': /must show the retry after the restart answered with the first payment/,

  '07-retry/fail-retry-400.md': /says to retry 400; a client should not/,
  '07-retry/fail-no-retry-503.md': /says not to retry 503; a client should retry it/,
  '07-retry/fail-three-rows.md': /must classify at least 4 responses .*; it classifies 3\./,
  '07-retry/fail-no-reasons.md': /must classify at least 4 responses .*each with a reason; it classifies 0\./,
  '07-retry/fail-no-retry-timeout.md': /says not to retry a timeout \(no response\)/,
  '07-retry/fail-always-400.md': /says to retry 400; a client should not/,
  '07-retry/fail-always-422.md': /says to retry 422; a client should not/,
  '07-retry/fail-resend-422.md': /says to retry 422; a client should not/,
  '07-retry/fail-resend-400.md': /says to retry 400; a client should not/,
  '07-retry/fail-give-up-503.md': /says not to retry 503; a client should retry it/,
  '07-retry/fail-give-up-timeout.md': /says not to retry a timeout \(no response\)/,
  '07-retry/fail-run-on-no-reasons.md': /must classify at least 4 responses .*each with a reason; it classifies 2\./,
  '07-retry/fail-run-on-retry-400.md': /says to retry 400; a client should not/,
  '07-retry/fail-ko-run-on-retry-422.md': /says to retry 422; a client should not/,
  '07-retry/fail-zh-run-on-no-retry-503.md': /says not to retry 503; a client should retry it/,
  '07-retry/fail-two-verdicts-never-503.md': /says not to retry 503; a client should retry it/,
  '07-retry/fail-ko-two-verdicts-retry-422.md': /says to retry 422; a client should not/,
  '07-retry/fail-zh-two-verdicts-no-retry-timeout.md': /says not to retry a timeout \(no response\)/,
  // Passing without doing the work: every code under both headings, "retry everything", status names as reasons.
  '07-retry/fail-both-headings.md': /gives 400 both verdicts, retry and do not retry; say one\./,
  '07-retry/fail-zh-both-headings.md': /gives 400 both verdicts, retry and do not retry; say one\./,
  '07-retry/fail-retry-everything.md': /says to retry 400; a client should not/,
  '07-retry/fail-ko-retry-everything.md': /says to retry 400; a client should not/,
  '07-retry/fail-status-names-only.md': /must classify at least 4 responses .*each with a reason; it classifies 0\./,

  '08-notes/fail-two-lines.md': /must have at least 3 lines of your own words; it has 2\./,
  '08-notes/fail-no-body.md': /does not say why a reused key with a different body is refused/,
  '08-notes/fail-keywords-only.md': /must have at least 3 lines of your own words; it has 0\./,
  '08-notes/fail-ko-no-storage.md': /does not say where the keys are kept/,
  '08-notes/fail-table-not-storage.md': /does not say where the keys are kept/,
  '08-notes/fail-different-request-no-key.md': /does not say why a reused key with a different body is refused/,
  // Passing without doing the work: keywords as sentences, one sentence pasted three times, the three keywords in one sentence.
  '08-notes/fail-keyword-sentences.md': /must have at least 3 lines of your own words; it has 0\./,
  '08-notes/fail-zh-keywords-only.md': /must have at least 3 lines of your own words; it has 0\./,
  '08-notes/fail-same-line-three-times.md': /must have at least 3 lines of your own words; it has 1\./,
  '08-notes/fail-keywords-in-one-sentence.md': /puts the three ideas \(.*\) in one sentence; explain each in a sentence of its own\./,
  '08-notes/fail-ko-keywords-one-sentence.md': /puts the three ideas \(.*\) in one sentence; explain each in a sentence of its own\./,
};

/** The fixture folders named `<id>-<slug>`, each with the step it belongs to. */
function fixtureFolders(): { folder: string; step: Step }[] {
  return fs
    .readdirSync(FILES_DIR, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && entry.name !== 'reference')
    .map((entry) => {
      const step = STEPS.find((s) => `${s.id}-${s.slug}` === entry.name);
      assert.ok(step, `fixtures/files/${entry.name} names no step (expected <id>-<slug>, e.g. 01-duplicate)`);
      return { folder: entry.name, step };
    })
    .sort((a, b) => a.folder.localeCompare(b.folder));
}

/** Runs the step's file check; the sentence, or the CheckFailed it threw; warnings in both cases. */
function runCheck(step: Step, text: string): { sentence?: string; failure?: CheckFailed; warnings: string[] } {
  assert.ok(step.file, `step ${step.id} has no file check`);
  const warnings: string[] = [];
  try {
    const sentence = step.file.check(text, { warn: (message) => warnings.push(message) });
    return { sentence, warnings };
  } catch (err) {
    if (err instanceof CheckFailed) return { failure: err, warnings };
    throw err;
  }
}

const folders = fixtureFolders();

test('every step with a file check has a fixture folder with at least 2 pass and 3 fail files', () => {
  for (const step of STEPS.filter((s) => s.file)) {
    const entry = folders.find((f) => f.step === step);
    assert.ok(entry, `no fixtures/files/${step.id}-${step.slug}/ folder`);
    const names = fs.readdirSync(path.join(FILES_DIR, entry.folder));
    assert.ok(names.filter((n) => n.startsWith('pass-')).length >= 2, `${entry.folder}: fewer than 2 pass- fixtures`);
    assert.ok(names.filter((n) => n.startsWith('fail-')).length >= 3, `${entry.folder}: fewer than 3 fail- fixtures`);
  }
});

test('every fixture is named pass-<what> or fail-<what> with the extension of its step file', () => {
  for (const { folder, step } of folders) {
    const ext = path.extname(step.file?.name ?? '');
    for (const name of fs.readdirSync(path.join(FILES_DIR, folder))) {
      assert.match(name, /^(?:pass|fail)-[a-z0-9-]+\.(?:txt|md)$/, `${folder}/${name}: not pass-<what> or fail-<what>`);
      assert.equal(path.extname(name), ext, `${folder}/${name}: ${step.file?.name} is a ${ext} file`);
    }
  }
});

/** Every `<folder>/<file>` whose name starts with `prefix`. */
function fixtureFiles(prefix: 'pass-' | 'fail-'): string[] {
  return folders.flatMap(({ folder }) =>
    fs
      .readdirSync(path.join(FILES_DIR, folder))
      .filter((n) => n.startsWith(prefix))
      .map((n) => `${folder}/${n}`),
  );
}

test('every fail fixture has an expected reason, and every reason a fixture', () => {
  const files = fixtureFiles('fail-');
  assert.deepEqual(files.filter((f) => !(f in FAIL_REASONS)), [], 'fail fixtures without an entry in FAIL_REASONS');
  assert.deepEqual(Object.keys(FAIL_REASONS).filter((f) => !files.includes(f)), [], 'FAIL_REASONS entries without a fixture file');
});

test('every pass fixture has an expected sentence, and every sentence a fixture', () => {
  const files = fixtureFiles('pass-');
  assert.deepEqual(files.filter((f) => !(f in PASSES)), [], 'pass fixtures without an entry in PASSES');
  assert.deepEqual(Object.keys(PASSES).filter((f) => !files.includes(f)), [], 'PASSES entries without a fixture file');
});

for (const { folder, step } of folders) {
  for (const name of fs.readdirSync(path.join(FILES_DIR, folder)).sort()) {
    const text = fs.readFileSync(path.join(FILES_DIR, folder, name), 'utf8');
    const id = `${folder}/${name}`;
    if (name.startsWith('pass-')) {
      test(`${id} passes`, () => {
        const { sentence, failure, warnings } = runCheck(step, text);
        assert.equal(failure, undefined, `${id} failed: ${failure?.message}`);
        assert.equal(typeof sentence, 'string');
        assert.ok(sentence && sentence.trim().length > 0, `${id}: the pass sentence is empty`);
        const expected = PASSES[id];
        assert.ok(expected, `${id} has no entry in PASSES`);
        assert.match(sentence, expected.sentence);
        const wanted = expected.warnings ?? [];
        assert.equal(warnings.length, wanted.length, `${id} warns: ${JSON.stringify(warnings)}`);
        wanted.forEach((pattern, n) => assert.match(warnings[n], pattern));
      });
    } else if (name.startsWith('fail-')) {
      test(`${id} fails for the right reason`, () => {
        const { sentence, failure } = runCheck(step, text);
        assert.ok(failure, `${id} passed: ${sentence}`);
        const reason = FAIL_REASONS[id];
        assert.ok(reason, `${id} has no entry in FAIL_REASONS`);
        assert.match(failure.message, reason);
        assert.ok(failure.why.trim().length > 0, `${id}: the failure says nothing about why`);
      });
    }
  }
}

test('every reference learner file passes its step', () => {
  const dir = path.join(FILES_DIR, 'reference');
  for (const name of fs.readdirSync(dir)) {
    const step = STEPS.find((s) => s.file?.name === name);
    assert.ok(step, `reference/${name} is no step's file`);
    const { sentence, failure, warnings } = runCheck(step, fs.readFileSync(path.join(dir, name), 'utf8'));
    assert.equal(failure, undefined, `reference/${name} failed: ${failure?.message}`);
    assert.ok(sentence && sentence.trim().length > 0);
    assert.deepEqual(warnings, [], `reference/${name} warns`);
  }
});
