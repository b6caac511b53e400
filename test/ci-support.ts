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
