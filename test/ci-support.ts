/**
 * Test helpers for the CI reporters and cohort grading: workspaces whose server.py
 * misbehaves (fixtures/misbehaving/<name>/server.py) and made-up verdicts.
 */
import fs from 'node:fs';
import path from 'node:path';
import { FIXTURES_DIR, referenceFiles } from '../fixtures/build.js';
import type { StepResult } from '../grader/types.js';
import { STEPS } from '../steps/index.js';
import { tempDir } from './support.js';

/**
 * A temporary workspace holding fixtures/misbehaving/<name>/server.py and the reference
 * learner files, so the file-only steps pass and only the server misbehaves.
 */
export function misbehavingWorkspace(name: string): { dir: string; remove: () => void } {
  const tmp = tempDir(`idem-lab-${name}-`);
  fs.copyFileSync(path.join(FIXTURES_DIR, 'misbehaving', name, 'server.py'), path.join(tmp.dir, 'server.py'));
  for (const [file, text] of Object.entries(referenceFiles())) fs.writeFileSync(path.join(tmp.dir, file), text);
  return tmp;
}

/** A verdict on step `id` (01..08) with the given status and message, nothing else. */
export function verdict(id: string, status: StepResult['status'], message = `step ${id} ${status}`, extra: Partial<StepResult> = {}): StepResult {
  const step = STEPS.find((s) => s.id === id);
  if (!step) throw new Error(`no step ${id}`);
  const result: StepResult = { id, slug: step.slug, title: step.title, status, message, details: [], warnings: [], exchanges: [], ms: 12, ...extra };
  if (step.file && result.file === undefined) result.file = step.file.name;
  return result;
}

const STATUS = { enum: ['pass', 'fail', 'error'] };

/** Exercism's results.json, version 3, with idem-lab's score and max_score. */
export const RESULTS_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['version', 'status', 'message', 'tests', 'score', 'max_score'],
  properties: {
    version: { const: 3 },
    status: STATUS,
    message: { type: ['string', 'null'] },
    score: { type: 'number', minimum: 0 },
    max_score: { type: 'number', minimum: 0 },
    // idem-lab's own: how confined the servers were, and why less than on (issue 18).
    sandbox: { enum: ['on', 'host-network', 'off'] },
    sandbox_reason: { type: 'string', minLength: 1 },
    tests: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['name', 'status', 'message', 'test_code', 'task_id', 'score', 'max_score', 'required'],
        properties: {
          name: { type: 'string', minLength: 1 },
          status: STATUS,
          message: { type: ['string', 'null'] },
          output: { type: 'string', maxLength: 500 },
          test_code: { type: 'string' },
          task_id: { type: 'integer', minimum: 1, maximum: 8 },
          score: { type: 'number', minimum: 0 },
          max_score: { type: 'number', minimum: 0 },
          required: { type: 'boolean' },
        },
        if: { properties: { status: { const: 'pass' } } },
        then: { properties: { message: { type: 'null' } } },
        else: { properties: { message: { type: 'string', minLength: 1 } } },
      },
    },
  },
  if: { properties: { status: { const: 'error' } } },
  then: { properties: { message: { type: 'string', minLength: 1 } } },
  else: { properties: { message: { type: 'null' } } },
} as const;

/** The runner `result` GitHub Classroom's autograding reporter reads. */
export const CLASSROOM_SCHEMA = {
  type: 'object',
  required: ['version', 'status', 'max_score', 'tests'],
  properties: {
    version: { const: 1 },
    status: STATUS,
    max_score: { type: 'number', minimum: 0 },
    tests: {
      type: 'array',
      items: {
        type: 'object',
        required: ['name', 'status', 'score', 'message'],
        properties: { name: { type: 'string' }, status: STATUS, score: { type: 'number', minimum: 0 }, message: { type: 'string' }, filename: { type: 'string' }, line_no: { type: 'integer' } },
      },
    },
  },
} as const;


const VISIBILITY = { enum: ['hidden', 'after_due_date', 'after_published', 'visible'] };

/**
 * Gradescope's results.json as its autograder harness reads it
 * (https://gradescope-autograders.readthedocs.io/en/latest/specs/): the fields of the
 * spec only (additionalProperties false on what idem-lab writes), test status `passed` or
 * `failed`, the four visibilities, execution_time in seconds.
 */
export const GRADESCOPE_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['score', 'execution_time', 'output', 'visibility', 'stdout_visibility', 'tests'],
  properties: {
    score: { type: 'number', minimum: 0 },
    execution_time: { type: 'integer', minimum: 0 },
    output: { type: 'string', minLength: 1 },
    visibility: VISIBILITY,
    stdout_visibility: VISIBILITY,
    tests: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['name', 'number', 'score', 'max_score', 'status', 'output', 'visibility'],
        properties: {
          name: { type: 'string', minLength: 1 },
          number: { type: 'string', pattern: '^\\d+$' },
          score: { type: 'number', minimum: 0 },
          max_score: { type: 'number', minimum: 0 },
          status: { enum: ['passed', 'failed'] },
          output: { type: 'string' },
          visibility: VISIBILITY,
        },
      },
    },
  },
} as const;
