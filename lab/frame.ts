/**
 * server.py's frame: everything but the learner's handle_pay section, which the markers
 * below enclose. The advanced track needs a newer frame than a workspace laid before it
 * may have (charge() with the provider's key, GET /payments/{id}, the refund); upgradeFrame
 * puts the bundled frame around the learner's own section, after a backup.
 */
import fs from 'node:fs';
import path from 'node:path';
import { LAB_DIR } from './paths.js';
import { backUp, lineage, sha256, updateState } from './workspace.js';
import type { Track, TrackFrame } from '../grader/track.js';
import { writeFileAtomic } from './safe-fs.js';

/** The line before the learner's part of server.py. */
export const HANDLE_PAY_START = '# --- handle_pay: the part you edit starts here ---';
/** The line after it. */
export const HANDLE_PAY_END = '# --- handle_pay: the part you edit ends here ---';

/** Whether a file's text has `frame` already (the advanced track's: payment_link, which only its frame defines). */
export function hasFrame(text: string, frame: TrackFrame): boolean {
  return frame.current.test(text);
}

/** The learner's section of a server.py text (between the markers, without them), or undefined when a marker is missing or they are out of order. */
export function handlePaySection(text: string): string | undefined {
  const start = text.indexOf(HANDLE_PAY_START);
  const end = text.indexOf(HANDLE_PAY_END);
  if (start < 0 || end < start) return undefined;
  return text.slice(start + HANDLE_PAY_START.length, end);
}

/**
 * A frame's text with its handle_pay section replaced by `section` (as handlePaySection returns one).
 * @throws Error when the frame lost its markers
 */
export function withSection(frame: string, section: string): string {
  const start = frame.indexOf(HANDLE_PAY_START);
  const end = frame.indexOf(HANDLE_PAY_END);
  if (start < 0 || end < start) throw new Error('lab/server.py lost its handle_pay markers');
  return `${frame.slice(0, start + HANDLE_PAY_START.length)}${section}${frame.slice(end)}`;
}

/** What upgradeFrame did. */
export type FrameUpgrade =
  /** The file already has the frame, or there is none (another server command): nothing to do. */
  | { kind: 'current' }
  /** The bundled frame now surrounds the learner's section; the old file is in `backup` (relative to the workspace). */
  | { kind: 'upgraded'; backup: string }
  /** The markers are gone, so the learner's part cannot be told from the frame: server.py is left as it is. */
  | { kind: 'no-markers' };

/**
 * Gives the workspace's file of `frame` (server.py) the bundled frame, keeping the
 * learner's handle_pay section as it is, after copying the old file into a backup
 * (`.idem-lab/backup/<time>/`).
 * @throws SetupError when the backup or the new file cannot be written
 */
export function upgradeFrame(workspace: string, frame: TrackFrame): FrameUpgrade {
  const file = path.join(workspace, frame.name);
  if (!fs.existsSync(file)) return { kind: 'current' };
  const text = fs.readFileSync(file, 'utf8');
  if (hasFrame(text, frame)) return { kind: 'current' };
  const section = handlePaySection(text);
  if (section === undefined) return { kind: 'no-markers' };
  const backup = backUp(workspace, [frame.name]);
  const bundled = path.resolve(LAB_DIR, frame.source);
  writeFileAtomic(file, withSection(fs.readFileSync(bundled, 'utf8'), section));
  // A section still as shipped makes the file the bundled one: the workspace then counts it as laid, not as the learner's.
  if (sha256(file) === sha256(bundled)) updateState(workspace, (s) => void (s.laid = { ...(s.laid ?? {}), [frame.name]: sha256(file) }));
  return { kind: 'upgraded', backup: path.relative(workspace, backup ?? workspace) };
}

/**
 * Renews the frames `track` and the tracks it builds on need (see upgradeFrame), the
 * first track's first; one result per frame, none for a track without one.
 */
export function upgradeFrames(workspace: string, track: Track): FrameUpgrade[] {
  return lineage(track).flatMap((t) => (t.frame ? [upgradeFrame(workspace, t.frame)] : []));
}
