/**
 * From what GET /avatars/{avatarId}/clips shows back to a PUT body, so a client can re-declare
 * the library it reads: uploaded rows become `{ assetId }`, generated rows
 * `{ motionPrompt, durationSeconds }` (a null duration omitted), and older generated rows without
 * a prompt need one from the user. Behavior moves from the envelope to the top level.
 */
import type { Behavior } from '../behavior/types.ts';
import type { ClipStatus, CurrentClipRow } from './plan.ts';
import type { SourceBody } from './schema.ts';

/** The source fields of a row, as stored (CurrentClipRow) or shown (ClipEnvelopeRow via envelopeRowSource). */
export type RowSourceFields = Pick<
  CurrentClipRow,
  'clipId' | 'sourceKind' | 'motionPrompt' | 'durationSeconds' | 'uploadAssetId'
>;

export type RowSourceResult =
  | { ok: true; clipId: string; source: SourceBody }
  /**
   * needs_prompt: an older generated row without a prompt (tell the user to write one).
   * needs_asset: an uploaded row without an asset id (not expected; the row cannot be re-declared as is).
   */
  | { ok: false; clipId: string; reason: 'needs_prompt' | 'needs_asset' };

export function rowToSource(row: RowSourceFields): RowSourceResult {
  if (row.sourceKind === 'upload') {
    const assetId = row.uploadAssetId?.trim();
    return assetId
      ? { ok: true, clipId: row.clipId, source: { assetId } }
      : { ok: false, clipId: row.clipId, reason: 'needs_asset' };
  }
  const motionPrompt = row.motionPrompt?.trim();
  if (!motionPrompt) return { ok: false, clipId: row.clipId, reason: 'needs_prompt' };
  return {
    ok: true,
    clipId: row.clipId,
    source: row.durationSeconds === null ? { motionPrompt } : { motionPrompt, durationSeconds: row.durationSeconds },
  };
}

/**
 * A row of the GET envelope's `data`. `source` is the row's source kind; `status` is the clip's
 * latest job, separate from `url`, which keeps serving during a replacement or after its failure.
 */
export interface ClipEnvelopeRow {
  clipId: string;
  status: ClipStatus;
  url: string | null;
  source: 'generated' | 'upload';
  uploadAssetId: string | null;
  motionPrompt: string | null;
  durationSeconds: number | null;
  anchorVersion: number;
  poseCheck: unknown;
  error: string | null;
  createdAt: string;
  updatedAt: string;
}

/** The GET envelope: `{ data, avatarId, revision, anchorVersion, anchor, clipLibraryEligible, defaultSourceAssetId, behavior }`. */
export interface ClipEnvelope {
  data: ClipEnvelopeRow[];
  avatarId: string;
  revision: number;
  anchorVersion: number;
  anchor: unknown;
  clipLibraryEligible: boolean;
  defaultSourceAssetId: string | null;
  behavior: Behavior | null;
}

function envelopeRowSource(row: ClipEnvelopeRow): RowSourceFields {
  return {
    clipId: row.clipId,
    sourceKind: row.source,
    motionPrompt: row.motionPrompt,
    durationSeconds: row.durationSeconds,
    uploadAssetId: row.uploadAssetId,
  };
}

/** A PUT body in wire shape (what `DeclarationBodySchema` accepts). */
interface DeclarationPutBody extends Behavior {
  expectedRevision: number;
  clips: Record<string, { source: SourceBody }>;
}

export interface EnvelopeDeclaration {
  /** Ready to send only when `needsPrompt` and `needsAsset` are empty: otherwise those clips are left out (and a PUT would retire them). */
  body: DeclarationPutBody;
  needsPrompt: string[];
  needsAsset: string[];
}

/**
 * Builds the PUT body that re-declares exactly what the envelope shows: `expectedRevision` is the
 * envelope's revision, every row becomes a clip, `behavior.idle/on/actions` move to the top level.
 * `prompts` supplies new prompts for rows that need one (keyed by clip id).
 */
export function envelopeToDeclaration(
  envelope: ClipEnvelope,
  options: { prompts?: Readonly<Record<string, string>> } = {},
): EnvelopeDeclaration {
  const out: EnvelopeDeclaration = {
    body: { expectedRevision: envelope.revision, clips: {} },
    needsPrompt: [],
    needsAsset: [],
  };
  for (const row of envelope.data) {
    const mapped = rowToSource(envelopeRowSource(row));
    if (mapped.ok) out.body.clips[row.clipId] = { source: mapped.source };
    else if (mapped.reason === 'needs_prompt' && options.prompts && Object.hasOwn(options.prompts, row.clipId)) {
      const motionPrompt = options.prompts[row.clipId] as string;
      out.body.clips[row.clipId] = {
        source:
          row.durationSeconds === null ? { motionPrompt } : { motionPrompt, durationSeconds: row.durationSeconds },
      };
    } else if (mapped.reason === 'needs_prompt') out.needsPrompt.push(row.clipId);
    else out.needsAsset.push(row.clipId);
  }
  const behavior = structuredClone(envelope.behavior ?? {});
  if (behavior.idle) out.body.idle = behavior.idle;
  if (behavior.on) out.body.on = behavior.on;
  if (behavior.actions) out.body.actions = behavior.actions;
  return out;
}
