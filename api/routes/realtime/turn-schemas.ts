import { z } from '@hono/zod-openapi';
import { IDEMPOTENCY_KEY_MAX } from '../../../core/idempotency.ts';
import {
  CONVERSATION_ID_PATTERN,
  TURN_MODES,
  TURN_TEXT_MAX_CHARS,
  VIDEO_CACHE_LIMITS,
  type TurnInput,
} from '../../../core/realtime/index.ts';
import { checkAvatarId, utf16Max } from '../avatars/schemas.ts';

/** Prepare, turn and video-cache plan payloads are snake_case, strict. */

const AvatarIdField = z.string().max(200).openapi({
  example: 'ava_0123456789ABCDEFGHij',
  description: "The avatar's id (starts with ava_). Any id that names no live avatar of the workspace is 404.",
});

export const PrepareRealtimeRequest = z.object({ avatar_id: AvatarIdField }).strict().openapi('PrepareRealtimeRequest');

export const PrepareRealtimeAnswer = z
  .object({
    avatar_id: z.string(),
    renderer_avatar_id: z.string().openapi({
      description:
        "The avatar's media as this renderer holds it: `<avatar_id>:<cacheVersion>` (it changes when a new loop publishes).",
    }),
    model_id: z.string().openapi({ example: 'builtin-rig-v1' }),
    backend_id: z.string().openapi({
      description: 'The lip-sync engine and device: `builtin:cpu`, `neural:cuda`...',
      example: 'builtin:cpu',
    }),
    status: z.enum(['ready']),
    registered: z.boolean().openapi({
      description:
        'True when this call loaded the media; false when this process had it open already (prepare is idempotent).',
    }),
    source_kind: z.enum(['portrait']),
    timings: z.record(z.string(), z.number()).openapi({
      description:
        'Milliseconds spent: engine_ms, fetch_ms, open_ms, faces_ms, tts_ms, total_ms (0 for steps already done).',
    }),
    video_cache: z
      .object({
        clip_id: z.string(),
        cache_version: z.number().int(),
        fps: z.number(),
        width: z.number().int(),
        height: z.number().int(),
        frames: z.number().int(),
        codec: z.string(),
        quality: z.number().int().nullable(),
        bytes: z.number().int(),
        digest: z.string(),
      })
      .openapi({ description: 'The frame cache turns play: the idle loop.' }),
  })
  .openapi('PrepareRealtimeResponse');

export const TurnRequest = z
  .object({
    avatar_id: AvatarIdField,
    mode: z.enum(TURN_MODES).openapi({
      description: "`repeat`: speak `text` verbatim. `talk`: answer `text` through the LLM with the avatar's persona.",
    }),
    text: utf16Max(z.string(), TURN_TEXT_MAX_CHARS)
      .refine((v) => v.trim().length > 0, 'must not be blank')
      .openapi({
        description: `What to say (repeat) or what the user said (talk). 1 to ${TURN_TEXT_MAX_CHARS} characters (UTF-16 code units), not blank.`,
      }),
    conversation_id: z
      .string()
      .regex(CONVERSATION_ID_PATTERN, 'must be 1 to 64 letters, digits, _ or -')
      .optional()
      .openapi({
        description:
          'Keeps a server-side history of this conversation with the avatar (your id: 1 to 64 letters, digits, _ or -).',
        example: 'support-42',
      }),
  })
  .strict()
  .openapi('TurnRequest');

/** A turn's request as core takes it (and as its Idempotency-Key remembers it); the avatar id checked. */
export const fromTurnWire = (body: z.infer<typeof TurnRequest>): TurnInput => ({
  avatarId: checkAvatarId(body.avatar_id),
  mode: body.mode,
  text: body.text,
  ...(body.conversation_id ? { conversationId: body.conversation_id } : {}),
});

export const TurnHeaders = z.object({
  'idempotency-key': z
    .string()
    .min(1)
    .max(IDEMPOTENCY_KEY_MAX)
    .optional()
    .openapi({
      description: `1 to ${IDEMPOTENCY_KEY_MAX} characters. A turn cannot be replayed: any reuse of a key that started a turn is 409 idempotency_conflict.`,
    }),
});

const limit = (name: keyof typeof VIDEO_CACHE_LIMITS) =>
  z.number().int().min(VIDEO_CACHE_LIMITS[name].min).max(VIDEO_CACHE_LIMITS[name].max);
const even = (s: z.ZodNumber) => s.refine((v) => v % 2 === 0, 'must be even');

const VideoCacheSettingsInput = z
  .object({
    fps: limit('fps')
      .optional()
      .openapi({ description: `Frames per second, ${VIDEO_CACHE_LIMITS.fps.min} to ${VIDEO_CACHE_LIMITS.fps.max}.` }),
    width: even(limit('width'))
      .optional()
      .openapi({
        description: `Even, ${VIDEO_CACHE_LIMITS.width.min} to ${VIDEO_CACHE_LIMITS.width.max} pixels. Alone, the height follows the aspect ratio.`,
      }),
    height: even(limit('height'))
      .optional()
      .openapi({
        description: `Even, ${VIDEO_CACHE_LIMITS.height.min} to ${VIDEO_CACHE_LIMITS.height.max} pixels. Alone, the width follows the aspect ratio.`,
      }),
    quality: limit('quality')
      .optional()
      .openapi({
        description: `JPEG quality, ${VIDEO_CACHE_LIMITS.quality.min} to ${VIDEO_CACHE_LIMITS.quality.max}.`,
      }),
  })
  .strict()
  .openapi('VideoCacheSettingsInput', { description: "Overrides of the settings the avatar's loop was generated at." });

export const VideoCachePlanRequest = z
  .object({ avatar_id: AvatarIdField, video_cache: VideoCacheSettingsInput.optional() })
  .strict()
  .openapi('VideoCachePlanRequest');

const Settings = z.object({
  fps: z.number(),
  width: z.number().int(),
  height: z.number().int(),
  quality: z.number().int(),
});

export const VideoCachePlanAnswer = z
  .object({
    status: z.enum(['ready', 'queued']).openapi({
      description: 'ready: every entry exists at these settings; queued: some are being made (ask again).',
    }),
    plan: z
      .object({
        settings: Settings,
        entries: z.array(
          z.object({
            clip_id: z.string().openapi({ description: '`source` is the idle loop.' }),
            status: z
              .enum(['queued', 'rendering', 'ready', 'failed', 'waiting'])
              .openapi({ description: 'waiting: the clip has no frame cache yet to make one from.' }),
            native: z
              .boolean()
              .openapi({ description: "The clip's own cache (these are the settings it was generated at)." }),
            error: z.string().nullable(),
          }),
        ),
        queued: z.number().int().openapi({ description: 'Entries this call queued.' }),
      })
      .nullable(),
    manifest: z
      .object({
        id: z.string().nullable().openapi({ description: "The avatar's cacheManifestId." }),
        avatar_id: z.string(),
        cache_version: z.number().int(),
        settings: Settings,
        entries: z.array(
          z.object({
            clip_id: z.string(),
            frames: z.number().int(),
            fps: z.number(),
            width: z.number().int(),
            height: z.number().int(),
            quality: z.number().int(),
            codec: z.enum(['jpeg']),
            duration_seconds: z.number(),
            bytes: z.number().int(),
            digest: z.string().openapi({ description: 'sha256 (hex) of the frames then the landmarks.' }),
          }),
        ),
      })
      .openapi({ description: 'The avatar cache manifest record: the entries ready at these settings.' }),
  })
  .openapi('VideoCachePlanResponse');
