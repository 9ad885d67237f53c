import { createReadStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { AssetStore } from '../assets/index.ts';
import { loopPrefix } from '../avatars/generation.ts';
import { deleteObjects, uploadRender } from '../avatars/render-outputs.ts';
import { RenderRefused, type RenderProcesses } from '../avatars/render-process.ts';
import { newGenerationId, type AvatarService } from '../avatars/service.ts';
import type { Sql } from '../platform/db/index.ts';
import { ApiError } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import type { Logger } from '../platform/log.ts';
import type { ObjectStorage } from '../platform/storage/index.ts';
import type { FetchedMedia } from './media.ts';

/** An avatar that can be lip-synced now: its id and the storage key of its idle loop's frame cache. */
export interface SpeakingAvatar {
  avatarId: string;
  cacheKey: string;
}

export interface LipsyncPortraitsDeps {
  sql: Sql;
  storage: ObjectStorage;
  assets: AssetStore;
  avatars: AvatarService;
  renders: RenderProcesses;
  log: Logger;
  /** Seconds of the idle loop generated for a registered portrait. */
  loopSeconds: number;
}

/**
 * Portraits registered on the fly by lipsync requests (`portraitUrl`). A portrait is registered
 * once per workspace, by the SHA-256 of its bytes: rigged and animated into a short idle loop in a
 * child process, stored as an image asset, and made a `ready` avatar with that loop (table
 * lipsync_portraits, migration 0013). The same bytes again find that avatar and are not rigged again
 * while it lives; a deleted one is registered anew.
 */
export class LipsyncPortraits {
  /** Registrations under way in this process, by tenant and hash: concurrent requests share one. */
  private readonly inFlight = new Map<string, Promise<SpeakingAvatar>>();

  constructor(private readonly d: LipsyncPortraitsDeps) {}

  /** The live, ready avatar registered for these bytes, if any. */
  async find(tenantId: string, sha256: string): Promise<SpeakingAvatar | undefined> {
    const [row] = await this.d.sql<{ avatar_id: string; serving_cache_key: string }[]>`
      select p.avatar_id, a.serving_cache_key from lipsync_portraits p join avatars a on a.id = p.avatar_id
      where p.tenant_id = ${tenantId} and p.sha256 = ${sha256}
        and a.deleted_at is null and a.status = 'ready' and a.serving_cache_key is not null`;
    return row && { avatarId: row.avatar_id, cacheKey: row.serving_cache_key };
  }

  /**
   * The avatar of this portrait: found, or registered now. A portrait the rig cannot animate (no
   * face, several, too small or turned away) is a 422 portrait_rejected naming `portraitUrl`.
   */
  async obtain(tenantId: string, portrait: FetchedMedia, signal?: AbortSignal): Promise<SpeakingAvatar> {
    const found = await this.find(tenantId, portrait.sha256);
    if (found) return found;
    const key = `${tenantId}:${portrait.sha256}`;
    let p = this.inFlight.get(key);
    if (!p) {
      p = this.register(tenantId, portrait, signal).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, p);
    }
    return p;
  }

  private async register(tenantId: string, portrait: FetchedMedia, signal?: AbortSignal): Promise<SpeakingAvatar> {
    const work = await mkdtemp(path.join(os.tmpdir(), 'lipsync-portrait-'));
    const uploaded: string[] = [];
    try {
      let rendered;
      try {
        rendered = await this.d.renders.render(
          {
            portraitPath: portrait.path,
            outDir: path.join(work, 'out'),
            seed: portrait.sha256,
            motionPrompt: null,
            seconds: this.d.loopSeconds,
            reviewed: false,
          },
          { signal },
        );
      } catch (err) {
        if (err instanceof RenderRefused)
          throw new ApiError('portrait_rejected', `Invalid field "portraitUrl": ${err.message}`, {
            field: 'portraitUrl',
          });
        throw err;
      }
      const asset = await this.d.assets.createUploaded({
        tenantId,
        source: createReadStream(portrait.path),
        declaredKind: 'image',
      });
      const avatarId = newId('avatar');
      const generationId = newGenerationId();
      const { mp4Key, cacheKey } = await uploadRender(
        this.d.storage,
        loopPrefix({ tenantId, avatarId, generationId }),
        rendered,
        'idle.mp4',
        uploaded,
      );
      await this.d.sql.begin(async (tx) => {
        // Held against a concurrent DELETE /assets/{id} of the fresh asset (listed from the moment it is stored).
        if (!(await this.d.assets.holdForUse(tx, tenantId, asset.id))) {
          throw new ApiError(
            'not_found',
            `The portrait's asset ${asset.id} was deleted while the portrait was registered: send the request again`,
          );
        }
        await this.d.avatars.createReady(
          tenantId,
          {
            id: avatarId,
            displayName: `Portrait ${portrait.sha256.slice(0, 8)}`,
            sourceAssetId: asset.id,
            generationId,
            loopKey: mp4Key,
            cacheKey,
          },
          tx,
        );
        await tx`
          insert into lipsync_portraits (tenant_id, sha256, avatar_id) values (${tenantId}, ${portrait.sha256}, ${avatarId})
          on conflict (tenant_id, sha256) do update set avatar_id = excluded.avatar_id, updated_at = now()`;
      });
      this.d.log.info(
        { tenantId, avatarId, frames: rendered.frames, renderMs: rendered.renderMs },
        'lipsync portrait registered',
      );
      return { avatarId, cacheKey };
    } catch (err) {
      await deleteObjects(this.d.storage, this.d.log, uploaded);
      throw err;
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }
}
