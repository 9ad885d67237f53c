import { z } from '@hono/zod-openapi';
import {
  SCENE_CONTINUATIONS,
  SCENE_ERRORS,
  SCENE_PROFILES,
  SCENE_STATUSES,
  type Scene,
} from '../../../core/scenes/types.ts';
import { Timestamp } from '../../schemas/common.ts';

/** A scene on the wire (snake_case, like the other realtime payloads). docs/scenes.md describes each field. */
export const SceneSchema = z
  .object({
    scene_id: z.string().openapi({
      example: 'scn_5d41402abc4b2a76b9719d911017c592',
      description:
        'scn_ + 32 hex digits derived from the clip\'s md5 and byte length (the same bytes always give the same id); the literal "unresolved" on a failed answer whose download failed before the id could be known.',
    }),
    status: z.enum(SCENE_STATUSES).openapi({ description: 'building, then ready or failed.' }),
    profile: z.enum(SCENE_PROFILES),
    continuation: z.enum(SCENE_CONTINUATIONS).openapi({
      description:
        'How a call continues the clip at its end: loop (from the first frame again) or pingpong (backwards, then forwards again).',
    }),
    source: z
      .object({
        md5: z
          .string()
          .nullable()
          .openapi({ description: 'Lowercase hex md5 of the clip (named by the client or measured).' }),
        bytes: z.number().int().nullable().openapi({ description: 'Byte length of the clip.' }),
      })
      .openapi({ description: 'The content the scene is built from (the URL is not echoed).' }),
    video_cache_id: z.string().nullable().openapi({
      example: 'vc_9f86d081884c7d659a2feaa0c55ad015',
      description: 'Set once ready: pass it to a session mint as scene.video_cache_id.',
    }),
    frame_count: z.number().int().nullable().openapi({ description: 'Frames of the clip as built (ready only).' }),
    cycle_frame_count: z.number().int().nullable().openapi({
      description:
        'Frames before the picture repeats under the continuation: frame_count for loop, 2 x (frame_count - 1) for pingpong (ready only).',
    }),
    fps: z.number().nullable().openapi({ description: 'Frames per second of the built clip (25; ready only).' }),
    width: z.number().int().nullable().openapi({ description: 'Picture width in pixels (ready only).' }),
    height: z.number().int().nullable().openapi({ description: 'Picture height in pixels (ready only).' }),
    duration_seconds: z.number().nullable().openapi({ description: 'frame_count / fps (ready only).' }),
    error: z.enum(SCENE_ERRORS).nullable().openapi({ description: 'Why the scene failed (failed only).' }),
    error_message: z.string().nullable().openapi({ description: 'What happened, for people (failed only).' }),
    created_at: Timestamp.nullable().openapi({
      description: 'When this preparation started; null on an unresolved answer.',
    }),
    ready_at: Timestamp.nullable(),
    expires_at: Timestamp.nullable().openapi({
      description:
        'After this the scene is gone (404 scene_not_found); every POST of the clip moves it. Null on an unresolved answer.',
    }),
  })
  .openapi('Scene');

export type SceneWire = z.infer<typeof SceneSchema>;

export function toWire(s: Scene): SceneWire {
  return {
    scene_id: s.sceneId,
    status: s.status,
    profile: s.profile,
    continuation: s.continuation,
    source: { md5: s.md5, bytes: s.bytes },
    video_cache_id: s.videoCacheId,
    frame_count: s.frameCount,
    cycle_frame_count: s.cycleFrameCount,
    fps: s.fps,
    width: s.width,
    height: s.height,
    duration_seconds: s.durationSeconds,
    error: s.error,
    error_message: s.errorMessage,
    created_at: s.createdAt?.toISOString() ?? null,
    ready_at: s.readyAt?.toISOString() ?? null,
    expires_at: s.expiresAt?.toISOString() ?? null,
  };
}
