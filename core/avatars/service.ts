import type { Principal } from '../auth/key-store.ts';
import type { Sql, Tx } from '../platform/db/index.ts';
import { ApiError, notFound } from '../platform/errors.ts';
import { newId, randomBase62 } from '../platform/ids.ts';
import type { JobQueue } from '../platform/jobs/queue.ts';
import type { Logger } from '../platform/log.ts';
import type { ObjectStorage } from '../platform/storage/index.ts';
import type { UsageStore } from '../usage.ts';
import { enqueueClip, motionLibraries } from './clips.ts';
import type { PortraitAssets } from './ports.ts';
import { DEFAULT_LANGUAGE, liveSettings, sessionInstructions, SESSION_INSTRUCTIONS_MAX } from './profile.ts';
import type { PromptScreen } from './screen.ts';
import { checkSource, sourceReviewed, type SourceVerdict } from './source-check.ts';
import {
  AVATAR_LOOP_DEAD_JOB,
  AVATAR_LOOP_JOB,
  type Avatar,
  type AvatarRow,
  type LoopJobData,
  type MotionLibraryClip,
} from './types.ts';

/** How long a serving URL handed out in an Avatar stays valid. */
const SERVING_URL_TTL_SECONDS = 3600;
const AVATAR_LIST_MAX = 100;
/** A billed generation's reservation outlives any sane render; the janitor settles it at 0 if the job vanished. */
const GENERATION_RESERVATION_TTL_SECONDS = 6 * 3600;

type Json = Record<string, unknown>;

export interface CreateAvatarInput {
  displayName: string;
  sourceKind?: 'image';
  sourceAssetId?: string;
  motionPrompt?: string;
  voice?: Json | null;
  defaultVoiceId?: string | null;
  llm?: Json | null;
  settings?: Json;
  metadata?: Json;
}

export interface UpdateAvatarInput {
  displayName?: string;
  defaultVoiceId?: string | null;
  voice?: Json | null;
  llm?: Json | null;
  settings?: Json;
  metadata?: Json;
  motionPrompt?: string | null;
  personality?: string | null;
  background?: string | null;
  artDirection?: string | null;
  replyStyle?: string | null;
  portraitUrl?: unknown;
  sourceAssetId?: string;
  anchorTimeMs?: number;
  sourceReview?: { reason: string };
}

export interface AvatarServiceDeps {
  sql: Sql;
  jobs: JobQueue;
  storage: ObjectStorage;
  assets: PortraitAssets;
  screen: PromptScreen;
  usage: UsageStore;
  log: Logger;
  /** Price of one PUT loop generation. */
  loopPriceCreditMicros: number;
  /**
   * A TTS that speaks more than English is configured for live calls (TTS_MODEL: an
   * OpenAI-compatible speech model). Without one the embedded TTS speaks English only, and an
   * avatar in another language is refused.
   */
  multilingualTts: boolean;
  /** The automated source checks of a swap (the rig); replaceable in tests. */
  checkSource?: (bytes: Buffer) => Promise<SourceVerdict>;
}

const badPortrait = (why: string) =>
  new ApiError('validation_error', `Invalid field "sourceAssetId" in body: ${why}`, { field: 'sourceAssetId' });

const SWAP_FIELDS = new Set(['sourceAssetId', 'anchorTimeMs', 'sourceReview']);

/**
 * Avatars over the `avatars` table: creation from a portrait (image only; the idle loop and default
 * clips generate in the background), profile updates, portrait swaps (with an optional person's
 * review that overrides the automated source checks), loop re-direction, deletion, and the jobs
 * that generate their loops.
 */
export class AvatarService {
  private readonly check: (bytes: Buffer) => Promise<SourceVerdict>;

  constructor(private readonly d: AvatarServiceDeps) {
    this.check = d.checkSource ?? checkSource;
  }

  // ---------------------------------------------------------------------------------------------
  // Reads
  // ---------------------------------------------------------------------------------------------

  /** The wire Avatar; `library` when the caller already read it (a list reads all in one query). */
  async toAvatar(r: AvatarRow, library?: MotionLibraryClip[]): Promise<Avatar> {
    return {
      id: r.id,
      tenantId: r.tenant_id,
      displayName: r.display_name,
      sourceKind: r.source_kind,
      modelId: r.model_id,
      sourceAssetId: r.source_asset_id,
      status: r.status,
      idleVideoStatus: r.idle_video_status,
      servingUrl: r.serving_loop_key
        ? await this.d.storage.signedUrl(r.serving_loop_key, SERVING_URL_TTL_SECONDS)
        : null,
      error: r.error,
      defaultVoiceId: r.default_voice_id,
      cacheManifestId: r.cache_manifest_id,
      cacheVersion: r.cache_version,
      motionPrompt: r.motion_prompt,
      personality: r.personality,
      background: r.background,
      artDirection: r.art_direction,
      replyStyle: r.reply_style,
      anchorTimeMs: r.anchor_time_ms,
      voice: r.voice ?? null,
      llm: r.llm ?? null,
      settings: r.settings ?? {},
      metadata: r.metadata ?? {},
      createdAt: r.created_at.toISOString(),
      updatedAt: r.updated_at.toISOString(),
      motionLibrary: library ?? (await motionLibraries(this.d.sql, this.d.storage, [r.id])).get(r.id) ?? [],
    };
  }

  /** The row, or undefined when absent, another tenant's, or deleted. */
  async row(tenantId: string, avatarId: string, tx?: Tx, forUpdate = false): Promise<AvatarRow | undefined> {
    const q = tx ?? this.d.sql;
    const [row] = forUpdate
      ? await q<
          AvatarRow[]
        >`select * from avatars where id = ${avatarId} and tenant_id = ${tenantId} and deleted_at is null for update`
      : await q<
          AvatarRow[]
        >`select * from avatars where id = ${avatarId} and tenant_id = ${tenantId} and deleted_at is null`;
    return row;
  }

  private async mustRow(tenantId: string, avatarId: string, tx?: Tx, forUpdate = false): Promise<AvatarRow> {
    const row = await this.row(tenantId, avatarId, tx, forUpdate);
    if (!row) throw notFound(`Avatar ${avatarId}`);
    return row;
  }

  async get(tenantId: string, avatarId: string): Promise<Avatar> {
    return this.toAvatar(await this.mustRow(tenantId, avatarId));
  }

  async list(tenantId: string): Promise<Avatar[]> {
    const rows = await this.d.sql<AvatarRow[]>`
      select * from avatars where tenant_id = ${tenantId} and deleted_at is null
      order by updated_at desc, id desc limit ${AVATAR_LIST_MAX}`;
    const libraries = await motionLibraries(
      this.d.sql,
      this.d.storage,
      rows.map((r) => r.id),
    );
    return Promise.all(rows.map((r) => this.toAvatar(r, libraries.get(r.id) ?? [])));
  }

  // ---------------------------------------------------------------------------------------------
  // Writes
  // ---------------------------------------------------------------------------------------------

  private async requirePortrait(tenantId: string, assetId: string): Promise<void> {
    const asset = await this.d.assets.get(tenantId, assetId);
    if (!asset) throw badPortrait(`asset ${assetId} not found, or it does not belong to this tenant`);
    if (asset.kind !== 'image')
      throw badPortrait(`asset ${assetId} is a ${asset.kind}; avatars are created from an image (portrait)`);
    if (asset.status !== 'ready')
      throw badPortrait(`asset ${assetId} is ${asset.status}, not ready: wait until its upload completes`);
  }

  /** Inside the writing transaction: the portrait is held against a concurrent DELETE /assets/{id}, or it was just deleted (422). */
  private async holdPortrait(tx: Tx, tenantId: string, assetId: string): Promise<void> {
    if (!(await this.d.assets.holdForUse(tx, tenantId, assetId)))
      throw badPortrait(`asset ${assetId} not found, or it does not belong to this tenant`);
  }

  private async screenPrompt(text: string): Promise<string> {
    const v = await this.d.screen.screen(text);
    if (!v.ok) throw new ApiError('loop_prompt_rejected', v.reason, { field: 'motionPrompt' });
    return v.text;
  }

  private static checkInstructions(p: Parameters<typeof sessionInstructions>[0]): void {
    const length = sessionInstructions(p).length;
    if (length > SESSION_INSTRUCTIONS_MAX) {
      throw new ApiError(
        'validation_error',
        `The merged profile makes ${length} characters of session instructions (UTF-16 code units); at most ${SESSION_INSTRUCTIONS_MAX} are allowed. Shorten personality, background, reply style or metadata`,
        { field: null, instructionsLength: length, maxInstructionsLength: SESSION_INSTRUCTIONS_MAX },
      );
    }
  }

  /** A language the avatar's voice cannot speak is refused (422 naming settings.language) before anything is saved. */
  private checkLanguage(settings: Json | undefined): void {
    if (settings === undefined) return;
    const { language } = liveSettings(settings);
    if (language === DEFAULT_LANGUAGE || this.d.multilingualTts) return;
    throw new ApiError(
      'validation_error',
      `Invalid field "settings.language" in body: the embedded TTS speaks English only; a live call in "${language}" needs an OpenAI-compatible speech model (TTS_MODEL) configured on this platform`,
      { field: 'settings.language' },
    );
  }

  async create(principal: Principal, input: CreateAvatarInput): Promise<Avatar> {
    const tenantId = principal.tenantId;
    this.checkLanguage(input.settings);
    if (input.sourceAssetId !== undefined) await this.requirePortrait(tenantId, input.sourceAssetId);
    const motionPrompt = input.motionPrompt !== undefined ? await this.screenPrompt(input.motionPrompt) : null;
    AvatarService.checkInstructions({
      displayName: input.displayName,
      metadata: input.metadata ?? {},
      language: liveSettings(input.settings).language,
    });
    const id = newId('avatar');
    const portrait = input.sourceAssetId !== undefined;
    const generationId = portrait ? newGenerationId() : null;
    const row = await this.d.sql.begin(async (tx) => {
      if (portrait) await this.holdPortrait(tx, tenantId, input.sourceAssetId!);
      const [r] = await tx<AvatarRow[]>`
        insert into avatars (id, tenant_id, display_name, source_kind, source_asset_id, motion_prompt, status, idle_video_status,
                             default_voice_id, voice, llm, settings, metadata, generation_id)
        values (${id}, ${tenantId}, ${input.displayName}, 'image', ${input.sourceAssetId ?? null}, ${motionPrompt},
                ${portrait ? 'preprocessing' : 'draft'}, ${portrait ? 'queued' : 'none'}, ${input.defaultVoiceId ?? null},
                ${jsonOrNull(tx, input.voice)}, ${jsonOrNull(tx, input.llm)}, ${tx.json((input.settings ?? {}) as never)},
                ${tx.json((input.metadata ?? {}) as never)}, ${generationId})
        returning *`;
      if (portrait) {
        await this.enqueueLoop(tx, {
          tenantId,
          avatarId: id,
          generationId: generationId!,
          motionPrompt,
          reason: 'create',
          reviewed: false,
          usageSessionId: null,
          priceCreditMicros: 0,
        });
      }
      return r!;
    });
    return this.toAvatar(row as AvatarRow);
  }

  /**
   * An avatar whose first idle loop was rendered outside the job queue (a portrait a lipsync request
   * registered on the fly): `ready` at once, with that loop serving. No motion library is queued (a
   * clip declaration adds clips). Inside `tx` when given, so the caller can record it in the same
   * transaction.
   */
  async createReady(
    tenantId: string,
    input: {
      id: string;
      displayName: string;
      sourceAssetId: string;
      generationId: string;
      loopKey: string;
      cacheKey: string;
      metadata?: Json;
    },
    tx?: Tx,
  ): Promise<AvatarRow> {
    const run = async (t: Tx) => {
      const [r] = await t<AvatarRow[]>`
        insert into avatars (id, tenant_id, display_name, source_kind, source_asset_id, status, idle_video_status, metadata, generation_id,
                             serving_loop_key, serving_cache_key, cache_manifest_id, cache_version)
        values (${input.id}, ${tenantId}, ${input.displayName}, 'video', ${input.sourceAssetId}, 'ready', 'ready', ${t.json((input.metadata ?? {}) as never)},
                ${input.generationId}, ${input.loopKey}, ${input.cacheKey}, ${`cmf_${input.generationId.slice(4)}`}, 1)
        returning *`;
      return r!;
    };
    return tx ? run(tx) : (this.d.sql.begin(run) as Promise<AvatarRow>);
  }

  async update(principal: Principal, avatarId: string, input: UpdateAvatarInput): Promise<Avatar> {
    const tenantId = principal.tenantId;
    // Found (or 404) before any rule that reads the body, so another tenant's id never learns more.
    const current = await this.mustRow(tenantId, avatarId);
    if (input.portraitUrl !== undefined) {
      throw new ApiError(
        'portrait_url_not_supported',
        'portraitUrl is not supported over this API: upload the image as an asset and PATCH its id as sourceAssetId',
        { field: 'portraitUrl' },
      );
    }
    const keys = Object.keys(input).filter((k) => (input as Record<string, unknown>)[k] !== undefined);
    if (keys.some((k) => SWAP_FIELDS.has(k))) {
      const other = keys.find((k) => !SWAP_FIELDS.has(k));
      if (other) {
        throw new ApiError(
          'validation_error',
          `Invalid field "${other}" in body: a portrait swap (sourceAssetId) takes only anchorTimeMs and sourceReview`,
          { field: other },
        );
      }
      if (input.sourceAssetId === undefined) {
        const field = keys.find((k) => k !== 'sourceAssetId')!;
        throw new ApiError(
          'validation_error',
          `Invalid field "${field}" in body: only allowed with sourceAssetId (a portrait swap)`,
          { field },
        );
      }
      return this.swap(principal, current, input.sourceAssetId, input.anchorTimeMs ?? 0, input.sourceReview);
    }

    this.checkLanguage(input.settings);
    const motionPrompt =
      input.motionPrompt === undefined || input.motionPrompt === null
        ? input.motionPrompt
        : await this.screenPrompt(input.motionPrompt);
    const pick = <T>(v: T | undefined, cur: T): T => (v === undefined ? cur : v);
    const next = {
      displayName: pick(input.displayName, current.display_name),
      personality: pick(input.personality, current.personality),
      background: pick(input.background, current.background),
      replyStyle: pick(input.replyStyle, current.reply_style),
      metadata: pick(input.metadata, current.metadata),
      language: liveSettings(pick(input.settings, current.settings)).language,
    };
    AvatarService.checkInstructions(next);
    const row = await this.d.sql.begin(async (tx) => {
      const locked = await this.mustRow(tenantId, avatarId, tx, true);
      const [r] = await tx<AvatarRow[]>`
        update avatars set
          display_name = ${next.displayName},
          personality = ${next.personality},
          background = ${next.background},
          reply_style = ${next.replyStyle},
          metadata = ${tx.json(next.metadata as never)},
          art_direction = ${pick(input.artDirection, locked.art_direction)},
          motion_prompt = ${pick(motionPrompt, locked.motion_prompt)},
          default_voice_id = ${pick(input.defaultVoiceId, locked.default_voice_id)},
          voice = ${input.voice === undefined ? tx`voice` : jsonOrNull(tx, input.voice)},
          llm = ${input.llm === undefined ? tx`llm` : jsonOrNull(tx, input.llm)},
          settings = ${input.settings === undefined ? tx`settings` : tx.json(input.settings as never)},
          updated_at = now()
        where id = ${avatarId} returning *`;
      return r!;
    });
    return this.toAvatar(row as AvatarRow);
  }

  /** The swap lane: run the source checks, record them, and re-queue generation from the new portrait. */
  private async swap(
    principal: Principal,
    current: AvatarRow,
    assetId: string,
    anchorTimeMs: number,
    review?: { reason: string },
  ): Promise<Avatar> {
    const tenantId = principal.tenantId;
    await this.requirePortrait(tenantId, assetId);
    if (current.idle_video_status === 'queued' || current.idle_video_status === 'generating') {
      throw new ApiError(
        'avatar_state_conflict',
        'A loop generation of this avatar is still in flight: retry the swap once it settles',
      );
    }
    const bytes = await this.d.assets.readBytes(tenantId, assetId);
    const verdict = await this.check(bytes);
    const accepted = verdict.passed || review !== undefined;
    const record = (tx: Sql | Tx) => tx`
      insert into avatar_source_reviews (avatar_id, asset_id, machine_verdict, review_reason, accepted)
      values (${current.id}, ${assetId}, ${tx.json(verdict as never)}, ${review?.reason ?? null}, ${accepted})`;
    if (!accepted) {
      // The refusal is audited too.
      await record(this.d.sql);
      throw new ApiError(
        'validation_error',
        `Invalid field "sourceAssetId" in body: the portrait failed the automated source checks (${verdict.code}: ${verdict.message}). ` +
          'After a person has reviewed it, send sourceReview: { reason } to accept it anyway',
        { field: 'sourceAssetId', check: verdict.code },
      );
    }
    const generationId = newGenerationId();
    const row = await this.d.sql.begin(async (tx) => {
      const locked = await this.mustRow(tenantId, current.id, tx, true);
      if (locked.idle_video_status === 'queued' || locked.idle_video_status === 'generating') {
        throw new ApiError(
          'avatar_state_conflict',
          'A loop generation of this avatar is still in flight: retry the swap once it settles',
        );
      }
      await this.holdPortrait(tx, tenantId, assetId);
      await record(tx);
      // With a loop serving, the avatar stays ready on the previous loop until the new one publishes.
      const status = locked.serving_loop_key && locked.status === 'ready' ? 'ready' : 'preprocessing';
      const [r] = await tx<AvatarRow[]>`
        update avatars set source_asset_id = ${assetId}, anchor_time_ms = ${anchorTimeMs}, status = ${status},
          idle_video_status = 'queued', error = null, generation_id = ${generationId}, loop_render_pending = true,
          anchor_version = anchor_version + 1, updated_at = now()
        where id = ${current.id} returning *`;
      // A new portrait is a new anchor: every live clip is re-rendered (generated) or re-validated
      // (uploaded) against it, each still serving its previous outputs until the new ones publish.
      const live = await tx<{ clip_id: string }[]>`
        update avatar_clips set status = 'queued', error = null, updated_at = now()
        where avatar_id = ${current.id} and retired_at is null returning clip_id`;
      for (const { clip_id } of live) {
        await enqueueClip(tx, this.d.jobs, {
          tenantId,
          avatarId: current.id,
          clipId: clip_id,
          reviewed: review !== undefined,
        });
      }
      await this.enqueueLoop(tx, {
        tenantId,
        avatarId: current.id,
        generationId,
        motionPrompt: locked.motion_prompt,
        reason: 'swap',
        reviewed: review !== undefined,
        usageSessionId: null,
        priceCreditMicros: 0,
      });
      return r!;
    });
    return this.toAvatar(row as AvatarRow);
  }

  async remove(principal: Principal, avatarId: string): Promise<void> {
    const rows = await this.d.sql`
      update avatars set status = 'deleted', deleted_at = now(), updated_at = now(), generation_id = null, loop_render_pending = false
      where id = ${avatarId} and tenant_id = ${principal.tenantId} and deleted_at is null`;
    if (rows.count === 0) throw notFound(`Avatar ${avatarId}`);
  }

  /**
   * PUT /avatars/{id}/loop: screens the prompt, reserves the generation's price, and queues the
   * render, all or nothing. The avatar keeps serving its previous loop until the new one publishes.
   */
  async redirectLoop(principal: Principal, avatarId: string, prompt: string): Promise<Avatar> {
    const tenantId = principal.tenantId;
    const current = await this.mustRow(tenantId, avatarId);
    assertGeneratable(current);
    const motionPrompt = await this.screenPrompt(prompt);
    const generationId = newGenerationId();
    const row = await this.d.sql.begin(async (tx) => {
      const locked = await this.mustRow(tenantId, avatarId, tx, true);
      assertGeneratable(locked);
      const { sessionId } = await this.d.usage.open(
        {
          tenantId,
          apiKeyId: principal.apiKeyId,
          kind: 'generation',
          avatarId,
          reserveCreditMicros: this.d.loopPriceCreditMicros,
          ttlSeconds: GENERATION_RESERVATION_TTL_SECONDS,
        },
        tx,
      );
      const [r] = await tx<AvatarRow[]>`
        update avatars set idle_video_status = 'queued', generation_id = ${generationId}, loop_render_pending = true,
          status = case when status = 'failed' then 'preprocessing' else status end, error = null, updated_at = now()
        where id = ${avatarId} returning *`;
      await this.enqueueLoop(tx, {
        tenantId,
        avatarId,
        generationId,
        motionPrompt,
        reason: 'redirect',
        reviewed: await sourceReviewed(tx, locked),
        usageSessionId: sessionId,
        priceCreditMicros: this.d.loopPriceCreditMicros,
      });
      return r!;
    });
    return this.toAvatar(row as AvatarRow);
  }

  private async enqueueLoop(tx: Tx, data: LoopJobData): Promise<void> {
    await this.d.jobs.enqueue(
      AVATAR_LOOP_JOB,
      data,
      { singletonKey: `${data.avatarId}:${data.generationId}`, deadLetter: AVATAR_LOOP_DEAD_JOB },
      tx,
    );
  }
}

function assertGeneratable(row: AvatarRow): void {
  if (!row.source_asset_id) {
    throw new ApiError(
      'loop_not_generatable',
      'This avatar has no portrait to animate (a draft created without sourceAssetId): PATCH a sourceAssetId first',
    );
  }
  if (row.idle_video_status === 'queued' || row.idle_video_status === 'generating') {
    throw new ApiError(
      'loop_pending',
      'A loop render of this avatar is still in flight: retry once it publishes',
      {},
      {},
    );
  }
}

function jsonOrNull(tx: Tx, v: Json | null | undefined) {
  return v === undefined || v === null ? null : tx.json(v as never);
}

export function newGenerationId(): string {
  return `gen_${randomBase62(20)}`;
}
