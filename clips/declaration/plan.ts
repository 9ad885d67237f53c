/**
 * The plan of a clip-library PUT: a full replacement of the avatar's clip records (omitted clips
 * retire), computed from the current rows and the validated declaration. Only source changes
 * queue media work; selection or action metadata never re-renders an unchanged source.
 *
 * - kept: declared, and the current row has the same source (same asset id, or same trimmed
 *   prompt and duration). Never re-rendered, whatever changed in selection or action metadata.
 * - queued: declared with a new or changed source (or a source kind change): media work.
 * - retired: a current (not retired) row the declaration omits.
 */
import { DEFAULT_DURATION_SECONDS } from './limits.ts';
import type { NormalisedDeclaration, NormalisedSource } from './validate.ts';

/** Progress of a clip's latest render (or pose validation, for an uploaded clip). */
export const CLIP_STATUSES = ['queued', 'rendering', 'ready', 'failed'] as const;
export type ClipStatus = (typeof CLIP_STATUSES)[number];

/** One stored clip record in camelCase, as the plan and the round trip read it. */
export interface CurrentClipRow {
  clipId: string;
  status: ClipStatus;
  sourceKind: 'generated' | 'upload';
  motionPrompt: string | null;
  durationSeconds: number | null;
  uploadAssetId: string | null;
  mp4Key: string | null;
  generationId: string | null;
  anchorVersion: number;
  poseCheck: unknown;
  error: string | null;
  isDefault: boolean;
  retiredAt: Date | null;
}

export interface ClipPlan {
  /** Declaration order. */
  kept: string[];
  /** Declaration order. */
  queued: string[];
  /** Order of `current`. */
  retired: string[];
}

/**
 * Whether a row already holds `source`. A generated row with a null duration was made at the
 * default duration (5 s), so it matches a declared 5 (the round trip omits a null duration and the
 * declaration defaults it to 5). A generated row with a null prompt matches nothing.
 */
function sameSource(
  row: Pick<CurrentClipRow, 'sourceKind' | 'motionPrompt' | 'durationSeconds' | 'uploadAssetId'>,
  source: NormalisedSource,
): boolean {
  if (source.kind === 'upload')
    return row.sourceKind === 'upload' && row.uploadAssetId !== null && row.uploadAssetId.trim() === source.assetId;
  return (
    row.sourceKind === 'generated' &&
    row.motionPrompt !== null &&
    row.motionPrompt.trim() === source.motionPrompt &&
    (row.durationSeconds ?? DEFAULT_DURATION_SECONDS) === source.durationSeconds
  );
}

/** Rows with `retiredAt` set are history, not current: a declared id matching only those is queued anew. */
export function planDeclaration(
  current: readonly CurrentClipRow[],
  next: Pick<NormalisedDeclaration, 'clips'>,
): ClipPlan {
  const live = new Map<string, CurrentClipRow>();
  for (const row of current) if (row.retiredAt === null) live.set(row.clipId, row);
  const plan: ClipPlan = { kept: [], queued: [], retired: [] };
  for (const [clipId, { source }] of Object.entries(next.clips)) {
    const row = live.get(clipId);
    (row && sameSource(row, source) ? plan.kept : plan.queued).push(clipId);
  }
  for (const row of live.values()) if (!Object.hasOwn(next.clips, row.clipId)) plan.retired.push(row.clipId);
  return plan;
}
