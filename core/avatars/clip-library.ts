/**
 * The clip library of an avatar over HTTP: GET /avatars/{id}/clips (the envelope) and PUT
 * /avatars/{id}/clips (a declaration: a full replacement, against the current revision, with every
 * motion prompt and action description screened). The pure rules live in clips/declaration (validation, plan, round trip); this
 * file adds the database, the prompt screen, the asset checks, the clip render jobs, and the
 * mapping of refused declarations (clips' problems) to API errors.
 */
import type {
  ClipEnvelope,
  ClipEnvelopeRow,
  ClipPlan,
  CurrentClipRow,
  DeclarationProblem,
  NormalisedDeclaration,
} from '../../clips/declaration/index.ts';
import { planDeclaration, validateDeclaration } from '../../clips/declaration/index.ts';
import type { Principal } from '../auth/key-store.ts';
import type { Sql, Tx } from '../platform/db/index.ts';
import { ApiError, notFound } from '../platform/errors.ts';
import type { JobQueue } from '../platform/jobs/queue.ts';
import type { ObjectStorage } from '../platform/storage/index.ts';
import { randomBase62 } from '../platform/ids.ts';
import { clipPrefix, enqueueClip, enqueueClipCache } from './clips.ts';
import type { PortraitAssets } from './ports.ts';
import type { PromptScreen } from './screen.ts';
import { sourceReviewed } from './source-check.ts';
import type { Behavior } from '../../clips/behavior/index.ts';
import type { AvatarClipRow, AvatarRow, ClipPoseCheck } from './types.ts';
import { deleteObjects, renderObjectKeys } from './render-outputs.ts';
import { UPLOAD_CLIP_MAX_BYTES } from './upload-pose.ts';

/** Signed clip and anchor URLs last as long as the avatar's servingUrl. */
const URL_TTL_SECONDS = 3600;

/** The clip-library anchor: the avatar's source loop (its serving idle loop), which every clip starts and ends on. */
interface ClipAnchor {
  kind: 'source_loop';
  /** The avatar's portrait asset, null for a draft. */
  sourceAssetId: string | null;
  /** Signed URL of the serving idle loop (as the avatar's servingUrl), null until one published. */
  url: string | null;
}

/** A row of the clip library as the API shows it: clips' envelope row, with its pose check typed. */
interface ClipLibraryRow extends Omit<ClipEnvelopeRow, 'poseCheck'> {
  poseCheck: ClipPoseCheck | null;
}

/** The clip library as GET /avatars/{id}/clips shows it: clips' envelope, with its rows, anchor and behavior typed. */
export interface ClipLibraryEnvelope extends Omit<ClipEnvelope, 'data' | 'anchor' | 'behavior'> {
  data: ClipLibraryRow[];
  anchor: ClipAnchor;
  behavior: Behavior;
}

export type ClipPutAnswer = ClipLibraryEnvelope & { plan: ClipPlan };

/** The body of POST /avatars/{id}/clips/review. */
export interface ClipReviewInput {
  clipId: string;
  uploadAssetId: string;
  expectedRevision: number;
  expectedAnchorVersion: number;
  reason: string;
}

export interface ClipLibraryDeps {
  sql: Sql;
  jobs: JobQueue;
  storage: ObjectStorage;
  assets: PortraitAssets;
  screen: PromptScreen;
}

export class ClipLibrary {
  constructor(private readonly d: ClipLibraryDeps) {}

  private async avatarRow(q: Sql | Tx, tenantId: string, avatarId: string, forUpdate = false): Promise<AvatarRow> {
    const [row] = forUpdate
      ? await q<
          AvatarRow[]
        >`select * from avatars where id = ${avatarId} and tenant_id = ${tenantId} and deleted_at is null for update`
      : await q<
          AvatarRow[]
        >`select * from avatars where id = ${avatarId} and tenant_id = ${tenantId} and deleted_at is null`;
    if (!row) throw notFound(`Avatar ${avatarId}`);
    return row;
  }

  private async switchOn(q: Sql | Tx, tenantId: string): Promise<boolean> {
    const [t] = await q<{ on: boolean }[]>`select clip_library_enabled as on from tenants where id = ${tenantId}`;
    return Boolean(t?.on);
  }

  /** The GET envelope; readable whatever the switch (then `clipLibraryEligible` is false). */
  async envelope(tenantId: string, avatarId: string): Promise<ClipLibraryEnvelope> {
    const row = await this.avatarRow(this.d.sql, tenantId, avatarId);
    return this.toEnvelope(this.d.sql, row, await this.switchOn(this.d.sql, tenantId));
  }

  private async toEnvelope(q: Sql | Tx, avatar: AvatarRow, switchOn: boolean): Promise<ClipLibraryEnvelope> {
    const rows = await q<AvatarClipRow[]>`
      select * from avatar_clips where avatar_id = ${avatar.id} and retired_at is null order by created_at, clip_id`;
    const data: ClipLibraryRow[] = [];
    for (const r of rows) {
      data.push({
        clipId: r.clip_id,
        status: r.status,
        url: r.mp4_key ? await this.d.storage.signedUrl(r.mp4_key, URL_TTL_SECONDS) : null,
        source: r.source_kind,
        uploadAssetId: r.upload_asset_id,
        motionPrompt: r.motion_prompt,
        durationSeconds: r.duration_seconds,
        anchorVersion: r.anchor_version,
        poseCheck: r.pose_check ?? null,
        error: r.error,
        createdAt: r.created_at.toISOString(),
        updatedAt: r.updated_at.toISOString(),
      });
    }
    const anchor: ClipAnchor = {
      kind: 'source_loop',
      sourceAssetId: avatar.source_asset_id,
      url: avatar.serving_loop_key ? await this.d.storage.signedUrl(avatar.serving_loop_key, URL_TTL_SECONDS) : null,
    };
    return {
      data,
      avatarId: avatar.id,
      revision: avatar.clip_revision,
      anchorVersion: avatar.anchor_version,
      anchor,
      clipLibraryEligible: switchOn && avatar.source_asset_id !== null,
      defaultSourceAssetId: avatar.source_asset_id,
      behavior: avatar.clip_behavior ?? {},
    };
  }

  /**
   * PUT /avatars/{id}/clips. Order: 404, 403 (switch off, or no portrait), 422 (declaration), 409
   * (stale revision, early), screen (422 refused / 503 unavailable), 422 (upload assets), then one
   * transaction under the avatar's row lock: 409 again, plan, retire, upsert + enqueue, behaviour,
   * revision + 1. Nothing is written on any error.
   */
  async declare(principal: Principal, avatarId: string, raw: unknown): Promise<ClipPutAnswer> {
    const tenantId = principal.tenantId;
    const current = await this.avatarRow(this.d.sql, tenantId, avatarId);
    if (!(await this.switchOn(this.d.sql, tenantId))) {
      throw new ApiError(
        'clip_library_not_enabled',
        'The Clip Library is not enabled for this workspace: ask an operator to enable it',
      );
    }
    if (!current.source_asset_id) {
      throw new ApiError(
        'clip_library_not_enabled',
        'This avatar has no portrait (a draft): PATCH a sourceAssetId before declaring clips',
      );
    }
    const result = validateDeclaration(raw);
    if (!result.ok) throw declarationRejected(result.problems);
    const decl = result.declaration;
    if (decl.expectedRevision !== current.clip_revision) throw revisionConflict(current.clip_revision);
    await this.screenAll(decl);
    await this.checkUploads(tenantId, decl);

    return this.d.sql.begin(async (tx) => {
      const locked = await this.avatarRow(tx, tenantId, avatarId, true);
      if (decl.expectedRevision !== locked.clip_revision) throw revisionConflict(locked.clip_revision);
      await this.holdUploads(tx, tenantId, decl);
      const rows = await tx<AvatarClipRow[]>`select * from avatar_clips where avatar_id = ${avatarId}`;
      const plan = planDeclaration(rows.map(currentClipRowFromDb), decl);
      if (plan.retired.length > 0) {
        await tx`
          update avatar_clips set retired_at = now(), updated_at = now()
          where avatar_id = ${avatarId} and clip_id = any(${plan.retired}) and retired_at is null`;
      }
      const reviewed = await sourceReviewed(tx, locked);
      for (const clipId of plan.queued) {
        const source = decl.clips[clipId]!.source;
        const generated = source.kind === 'generated';
        // A live row keeps serving its previous outputs while the new source renders (its url stays
        // non-null during a replacement); a revived retired row starts without outputs.
        await tx`
          insert into avatar_clips (avatar_id, clip_id, status, source_kind, motion_prompt, duration_seconds, upload_asset_id, anchor_version)
          values (${avatarId}, ${clipId}, 'queued', ${source.kind}, ${generated ? source.motionPrompt : null},
                  ${generated ? source.durationSeconds : null}, ${generated ? null : source.assetId}, ${locked.anchor_version})
          on conflict (avatar_id, clip_id) do update set
            status = 'queued', source_kind = excluded.source_kind, motion_prompt = excluded.motion_prompt,
            duration_seconds = excluded.duration_seconds, upload_asset_id = excluded.upload_asset_id,
            anchor_version = excluded.anchor_version, pose_check = null, error = null, is_default = false,
            mp4_key = case when avatar_clips.retired_at is null then avatar_clips.mp4_key end,
            cache_key = case when avatar_clips.retired_at is null then avatar_clips.cache_key end,
            generation_id = case when avatar_clips.retired_at is null then avatar_clips.generation_id end,
            retired_at = null, updated_at = now()`;
        // Generated clips render through the default library's clip job; uploaded ones are
        // pose-validated by the same job (ClipWorker.validateUpload). Never inline in the PUT.
        await enqueueClip(tx, this.d.jobs, { tenantId, avatarId, clipId, reviewed });
      }
      const [updated] = await tx<AvatarRow[]>`
        update avatars set clip_behavior = ${tx.json(decl.behavior as never)}, clip_revision = clip_revision + 1, updated_at = now()
        where id = ${avatarId} returning *`;
      const envelope = await this.toEnvelope(tx, updated!, true);
      return { ...envelope, plan };
    });
  }

  /**
   * POST /avatars/{id}/clips/review: a person accepts an uploaded
   * clip whose pose validation refused it for its pose (`pose_mismatch`) or has not settled yet.
   * The machine verdict stays in `pose_check`, with `review: { reason, at, by }` added; the video is
   * copied under the clip's prefix (as the accepted path does), the clip serves (`ready`) and its
   * frame cache is queued (enqueueClipCache). Any
   * other refusal (no face, invalid media, over 18 MB) stays refused: 409 avatar_state_conflict.
   * 409 revision_conflict / avatar_state_conflict (with the current values) when the caller's
   * revision or anchor version is stale; 404 for an unknown avatar or clip.
   */
  async review(principal: Principal, avatarId: string, input: ClipReviewInput): Promise<void> {
    const tenantId = principal.tenantId;
    const check = (avatar: AvatarRow, clip: AvatarClipRow | undefined): AvatarClipRow => {
      if (input.expectedRevision !== avatar.clip_revision) throw revisionConflict(avatar.clip_revision);
      if (input.expectedAnchorVersion !== avatar.anchor_version) {
        throw new ApiError(
          'avatar_state_conflict',
          `The clip anchor changed (anchor version ${avatar.anchor_version}): GET the clip library again`,
          {
            currentAnchorVersion: avatar.anchor_version,
            currentRevision: avatar.clip_revision,
          },
        );
      }
      if (!clip) throw notFound(`Clip ${input.clipId}`);
      if (clip.source_kind !== 'upload' || clip.upload_asset_id !== input.uploadAssetId) {
        throw new ApiError(
          'avatar_state_conflict',
          `Clip ${input.clipId} is not an upload of asset ${input.uploadAssetId} (its source changed): GET the clip library again`,
          {
            currentRevision: avatar.clip_revision,
          },
        );
      }
      const verdict = (clip.pose_check as { verdict?: string } | null)?.verdict;
      const pending = clip.status === 'queued' || clip.status === 'rendering';
      const poseRefused = clip.status === 'failed' && verdict === 'pose_mismatch';
      if (!pending && !poseRefused) {
        const why =
          clip.status === 'ready'
            ? 'it already serves'
            : `its refusal (${verdict ?? 'processing failure'}) is not a pose refusal and stays refused`;
        throw new ApiError('avatar_state_conflict', `Clip ${input.clipId} cannot be reviewed: ${why}`, {
          currentRevision: avatar.clip_revision,
          clipStatus: clip.status,
        });
      }
      return clip;
    };
    const clipRow = async (q: Sql | Tx, lock: boolean) => {
      const [c] = lock
        ? await q<
            AvatarClipRow[]
          >`select * from avatar_clips where avatar_id = ${avatarId} and clip_id = ${input.clipId} and retired_at is null for update`
        : await q<
            AvatarClipRow[]
          >`select * from avatar_clips where avatar_id = ${avatarId} and clip_id = ${input.clipId} and retired_at is null`;
      return c;
    };

    // Early checks, then the copy outside any lock, then the same checks again under the locks.
    const avatar = await this.avatarRow(this.d.sql, tenantId, avatarId);
    check(avatar, await clipRow(this.d.sql, false));
    const [asset] = await this.d.sql<{ size_bytes: number | null }[]>`
      select size_bytes from assets
      where id = ${input.uploadAssetId} and tenant_id = ${tenantId} and status = 'ready' and kind = 'video' and deleted_at is null`;
    if (!asset)
      throw new ApiError(
        'avatar_state_conflict',
        `Asset ${input.uploadAssetId} is no longer a ready video of this workspace: it cannot be reviewed`,
      );
    if (asset.size_bytes != null && asset.size_bytes > UPLOAD_CLIP_MAX_BYTES) {
      throw new ApiError(
        'avatar_state_conflict',
        `The video is over the ${UPLOAD_CLIP_MAX_BYTES}-byte quality-check ceiling: it stays refused`,
      );
    }
    const video = await this.d.assets.readBytes(tenantId, input.uploadAssetId);
    if (video.length > UPLOAD_CLIP_MAX_BYTES) {
      throw new ApiError(
        'avatar_state_conflict',
        `The video is over the ${UPLOAD_CLIP_MAX_BYTES}-byte quality-check ceiling: it stays refused`,
      );
    }
    const generationId = `rev_${randomBase62(20)}`;
    const mp4Key = `${clipPrefix({ tenantId, avatarId, clipId: input.clipId }, generationId)}/clip.mp4`;
    await this.d.storage.put(mp4Key, video, { contentType: 'video/mp4' });
    let old: AvatarClipRow;
    try {
      old = await this.d.sql.begin(async (tx) => {
        const locked = await this.avatarRow(tx, tenantId, avatarId, true);
        const cur = check(locked, await clipRow(tx, true));
        const review = { reason: input.reason, at: new Date().toISOString(), by: principal.apiKeyId };
        const poseCheck = { ...((cur.pose_check as Record<string, unknown> | null) ?? { verdict: 'pending' }), review };
        await tx`
          update avatar_clips set status = 'ready', pose_check = ${tx.json(poseCheck as never)}, error = null,
            mp4_key = ${mp4Key}, cache_key = null, generation_id = ${generationId}, updated_at = now()
          where avatar_id = ${avatarId} and clip_id = ${input.clipId}`;
        // Calls play frame caches: build this clip's (ClipCacheWorker).
        await enqueueClipCache(tx, this.d.jobs, { tenantId, avatarId, clipId: input.clipId, generationId });
        return cur;
      });
    } catch (err) {
      await this.d.storage.delete(mp4Key).catch(() => {});
      throw err;
    }
    if (old.mp4_key && old.mp4_key !== mp4Key) {
      await deleteObjects(this.d.storage, undefined, renderObjectKeys(old.mp4_key, old.cache_key));
    }
  }

  /** Every motion prompt and action description through the avatar prompt screen, even on metadata-only writes. */
  private async screenAll(decl: NormalisedDeclaration): Promise<void> {
    const texts: { field: string; text: string }[] = [];
    for (const [id, { source }] of Object.entries(decl.clips)) {
      if (source.kind === 'generated')
        texts.push({ field: `clips.${id}.source.motionPrompt`, text: source.motionPrompt });
    }
    for (const [id, a] of Object.entries(decl.behavior.actions ?? {}))
      texts.push({ field: `actions.${id}.description`, text: a.description });
    // Sequential: a 503 from the screen (clip_screen_unavailable) propagates as is, nothing written.
    for (const t of texts) {
      const v = await this.d.screen.screen(t.text);
      if (!v.ok)
        throw declarationRejected([{ field: t.field, message: `was refused by the prompt screen: ${v.reason}` }]);
    }
  }

  /** Uploaded sources must be the tenant's ready video assets. */
  private async checkUploads(tenantId: string, decl: NormalisedDeclaration): Promise<void> {
    for (const [id, { source }] of Object.entries(decl.clips)) {
      if (source.kind !== 'upload') continue;
      const asset = await this.d.assets.get(tenantId, source.assetId);
      const field = `clips.${id}.source.assetId`;
      if (!asset)
        throw declarationRejected([
          { field, message: `names asset ${source.assetId}, which is not found or not this workspace's` },
        ]);
      if (asset.kind !== 'video')
        throw declarationRejected([{ field, message: `names a ${asset.kind} asset; uploaded clips are video assets` }]);
      if (asset.status !== 'ready')
        throw declarationRejected([{ field, message: `names an asset that is ${asset.status}, not ready` }]);
    }
  }

  /** Inside the declaring transaction: each uploaded source is held against a concurrent DELETE /assets/{id}, or was just deleted (422). */
  private async holdUploads(tx: Tx, tenantId: string, decl: NormalisedDeclaration): Promise<void> {
    for (const [id, { source }] of Object.entries(decl.clips)) {
      if (source.kind !== 'upload' || (await this.d.assets.holdForUse(tx, tenantId, source.assetId))) continue;
      throw declarationRejected([
        {
          field: `clips.${id}.source.assetId`,
          message: `names asset ${source.assetId}, which is not found or not this workspace's`,
        },
      ]);
    }
  }
}

/** A stored `avatar_clips` row as the pure clip rules read it. */
export function currentClipRowFromDb(r: AvatarClipRow): CurrentClipRow {
  return {
    clipId: r.clip_id,
    status: r.status,
    sourceKind: r.source_kind,
    motionPrompt: r.motion_prompt,
    durationSeconds: r.duration_seconds,
    uploadAssetId: r.upload_asset_id,
    mp4Key: r.mp4_key,
    generationId: r.generation_id,
    anchorVersion: r.anchor_version,
    poseCheck: r.pose_check,
    error: r.error,
    isDefault: r.is_default,
    retiredAt: r.retired_at,
  };
}

/** The API answer for a refused declaration: 422 `clip_declaration_rejected` naming the first problem's field. */
export function declarationRejected(problems: readonly DeclarationProblem[]): ApiError {
  const first = problems[0] ?? { field: '', message: 'is invalid' };
  return new ApiError('clip_declaration_rejected', `Invalid clip declaration: "${first.field}" ${first.message}`, {
    field: first.field || null,
    ...(problems.length > 1 ? { issues: problems.length } : {}),
  });
}

function revisionConflict(currentRevision: number): ApiError {
  return new ApiError(
    'revision_conflict',
    `The clip library changed (revision ${currentRevision}): GET it again and re-declare against that revision`,
    {
      currentRevision,
    },
  );
}
