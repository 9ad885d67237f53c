import { z } from '@hono/zod-openapi';
import { DEFAULT_LANGUAGE, languageName, PROFILE_LIMITS } from '../../../core/avatars/index.ts';
import { AVATAR_STATUSES, CLIP_STATUSES, IDLE_VIDEO_STATUSES, type Avatar } from '../../../core/avatars/types.ts';
import { notFound } from '../../../core/platform/errors.ts';
import { MOTION_PROMPT_MAX } from '../../../render/generate/index.ts';
import { Timestamp } from '../../schemas/common.ts';
import { FREE_JSON_DESCRIPTION, refineStorableJson } from '../../schemas/json.ts';

/** Loose bound only: the prompt screen owns the real rules (nonempty, at most 1,200 characters: 422 loop_prompt_rejected). */
export const MotionPromptInput = z
  .string()
  .max(MOTION_PROMPT_MAX * 4)
  .openapi({
    description: `Art-directs the generated loop. Trimmed, nonempty, at most ${MOTION_PROMPT_MAX} characters; screened (422 loop_prompt_rejected).`,
  });

/**
 * A string of at most `max` UTF-16 code units (JavaScript length), the unit of every profile text limit.
 * zod's own max() counts code points (an emoji is 1 there, 2 here), so the refine does the real check.
 */
export const utf16Max = <T extends z.ZodString>(s: T, max: number) =>
  s.max(max).refine((v) => v.length <= max, `must be at most ${max} UTF-16 code units`);

export const DisplayName = utf16Max(z.string().trim().min(1), PROFILE_LIMITS.displayName);
export const VoiceId = z.string().trim().min(1).max(160);

/**
 * `settings` on create and update: the caller's own JSON object, but for the two keys a live call
 * reads, which are validated here like the profile text fields (a bad value: 422 naming
 * `settings.greeting` or `settings.language`, nothing written).
 */
export const AvatarSettingsInput = z
  .object({
    greeting: utf16Max(z.string().trim().min(1), PROFILE_LIMITS.greeting)
      .optional()
      .openapi({
        description: `Said as written, with no STT or LLM call, as the user joins a conversation call (before the user speaks). 1 to ${PROFILE_LIMITS.greeting} UTF-16 code units.`,
      }),
    language: z
      .string()
      .refine((v) => languageName(v) !== undefined, 'must be an ISO 639-1 code in lower case, such as "en" or "fr"')
      .optional()
      .openapi({
        description: `ISO 639-1 code of the language live calls are held in (default "${DEFAULT_LANGUAGE}"): the STT transcribes the user in it and the LLM is told to answer in it. The embedded TTS speaks English only: another language needs an OpenAI-compatible speech model (TTS_MODEL) on the platform, else 422.`,
        example: 'en',
      }),
  })
  .passthrough()
  .superRefine(refineStorableJson('field'))
  .openapi({ description: `${FREE_JSON_DESCRIPTION} Two keys have rules of their own: greeting and language.` });

/** Any avatarId that names no live avatar of the caller's tenant is 404, whatever its shape. */
export const AvatarIdParam = z.object({
  avatarId: z.string().openapi({
    param: { name: 'avatarId', in: 'path' },
    example: 'ava_0123456789ABCDEFGHij',
    description: 'Starts with ava_',
  }),
});

const AVATAR_ID = /^ava_[0-9A-Za-z]{1,64}$/;

/** 404 at once for an id that cannot be an avatar's (no database round trip). */
export function checkAvatarId(avatarId: string): string {
  if (!AVATAR_ID.test(avatarId)) throw notFound(`Avatar ${avatarId.slice(0, 80)}`);
  return avatarId;
}

/** A free-form object as stored: the caller's own structure, handed back as sent. */
const StoredJsonObject = z.record(z.string(), z.unknown());

const MotionLibraryClipSchema = z
  .object({
    clipId: z.string().openapi({ example: 'nod' }),
    status: z.enum(CLIP_STATUSES).openapi({
      description: "Progress of the clip's latest render; separate from url, which keeps serving during a replacement.",
    }),
    url: z
      .string()
      .nullable()
      .openapi({ description: "Signed URL (1 hour) of the clip's MP4; null until one rendered." }),
    motionPrompt: z.string().nullable(),
    durationSeconds: z.number().int().nullable(),
    error: z.string().nullable().openapi({ description: 'Why the latest render failed (status failed).' }),
  })
  .openapi('MotionLibraryClip');

export const AvatarSchema = z
  .object({
    id: z.string().openapi({ example: 'ava_0123456789ABCDEFGHij' }),
    tenantId: z.string(),
    displayName: z.string(),
    sourceKind: z
      .enum(['image', 'video'])
      .openapi({ description: 'Reads video once the generated loop attaches: do not branch on it.' }),
    modelId: z.string(),
    sourceAssetId: z.string().nullable(),
    status: z.enum(AVATAR_STATUSES),
    idleVideoStatus: z.enum(IDLE_VIDEO_STATUSES),
    servingUrl: z
      .string()
      .nullable()
      .openapi({ description: 'Signed URL (1 hour) of the loop MP4 serving now; null until one exists.' }),
    error: z
      .string()
      .nullable()
      .openapi({ description: 'Why generation failed (status failed, or idleVideoStatus failed).' }),
    defaultVoiceId: z.string().nullable(),
    cacheManifestId: z.string().nullable(),
    cacheVersion: z.number().int(),
    motionPrompt: z.string().nullable(),
    personality: z.string().nullable(),
    background: z.string().nullable(),
    artDirection: z.string().nullable(),
    replyStyle: z.string().nullable(),
    anchorTimeMs: z.number().int().nullable(),
    voice: StoredJsonObject.nullable(),
    llm: StoredJsonObject.nullable(),
    settings: StoredJsonObject,
    metadata: StoredJsonObject,
    createdAt: Timestamp,
    updatedAt: Timestamp,
    motionLibrary: z.array(MotionLibraryClipSchema).openapi({
      description:
        'The motion library: the default clips (listen, nod, smile, think) queued once the first idle loop publishes, rendering in the background after the avatar is ready.',
    }),
  })
  .openapi('Avatar');

export type AvatarWire = z.infer<typeof AvatarSchema>;

/** An avatar as the wire schema types it: core's Avatar is the wire shape (the compiler checks it, no cast). */
export const toWire = (avatar: Avatar): AvatarWire => avatar;

/** Body cap of avatar create and update: 128 KiB. */
export const AVATAR_BODY_LIMIT = 128 * 1024;

/** Body cap of POST /avatars/{avatarId}/clips/review: 4 KiB. */
export const CLIP_REVIEW_BODY_LIMIT = 4 * 1024;

const PoseFields = {
  yawDeg: z.number(),
  pitchDeg: z.number(),
  rollDeg: z.number(),
  faceSize: z.number().openapi({ description: 'Face box width over frame width.' }),
};

/** The machine verdict on an uploaded clip (stored as run), with the human review added once one accepted it. */
const PoseCheckSchema = z
  .object({
    verdict: z
      .enum(['accepted', 'pose_mismatch', 'refused', 'pending'])
      .openapi({ description: 'pending: accepted by a review before the check ran.' }),
    code: z
      .string()
      .optional()
      .openapi({ description: 'Why it was refused (refused): too_large, invalid_media, or the face rig refusal.' }),
    message: z.string().optional(),
    anchor: z
      .object(PoseFields)
      .optional()
      .openapi({ description: "The portrait's pose the frames are compared with." }),
    frames: z
      .array(
        z.object({
          at: z.string().openapi({ description: 'first, middle or last' }),
          code: z.string().optional(),
          ...z.object(PoseFields).partial().shape,
        }),
      )
      .optional(),
    tolerance: z
      .object({
        yawDeg: z.number(),
        pitchDeg: z.number(),
        rollDeg: z.number(),
        faceSizeRatioMin: z.number(),
        faceSizeRatioMax: z.number(),
      })
      .optional(),
    checkedAt: Timestamp.optional(),
    review: z
      .object({
        reason: z.string(),
        at: Timestamp,
        by: z.string().openapi({ description: 'The id of the API key that accepted it.' }),
      })
      .optional()
      .openapi({ description: 'Set by POST /avatars/{avatarId}/clips/review.' }),
  })
  // Not a named component: zod-to-openapi would make the component itself nullable.
  .openapi({ description: 'The machine verdict on an uploaded clip, with the review that accepted it, if any.' });

const ClipList = z.array(z.string());

/** The declared behavior, as the declaration set it. */
const BehaviorSchema = z
  .object({
    idle: z
      .object({
        clips: ClipList,
        weight: z.number().optional(),
        weights: z.record(z.string(), z.number()).optional(),
      })
      .optional(),
    on: z.object({ userSpeechStarted: z.object({ clips: ClipList }).optional() }).optional(),
    actions: z.record(z.string(), z.object({ description: z.string(), clips: ClipList })).optional(),
  })
  .openapi('ClipBehavior', {
    description: 'The declared idle, on and actions of the last accepted declaration; {} before the first.',
  });

const ClipRowSchema = z
  .object({
    clipId: z.string().openapi({ example: 'wave' }),
    status: z.enum(CLIP_STATUSES).openapi({
      description:
        "The clip's latest job; separate from url, which keeps serving during a replacement or after its failure.",
    }),
    url: z
      .string()
      .nullable()
      .openapi({ description: 'Signed URL (1 hour) of the serving MP4; null until one rendered.' }),
    source: z.enum(['generated', 'upload']),
    uploadAssetId: z.string().nullable(),
    motionPrompt: z.string().nullable(),
    durationSeconds: z.number().int().nullable(),
    anchorVersion: z.number().int(),
    poseCheck: PoseCheckSchema.nullable().openapi({
      description:
        'Pose validation of an uploaded clip; null while pending (not run yet, no review) and for generated clips.',
    }),
    error: z.string().nullable(),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  })
  .openapi('ClipLibraryClip');

const ClipEnvelopeFields = {
  data: z.array(ClipRowSchema).openapi({ description: 'The live (not retired) clips, oldest first.' }),
  avatarId: z.string(),
  revision: z
    .number()
    .int()
    .openapi({ description: 'Accepted declarations so far: send it back as expectedRevision.' }),
  anchorVersion: z.number().int(),
  anchor: z
    .object({
      kind: z.literal('source_loop'),
      sourceAssetId: z.string().nullable(),
      url: z
        .string()
        .nullable()
        .openapi({ description: 'Signed URL (1 hour) of the serving idle loop the clips start and end on.' }),
    })
    .openapi({ description: "The anchor: the avatar's source loop." }),
  clipLibraryEligible: z
    .boolean()
    .openapi({ description: 'The workspace switch is on and the avatar has a portrait: a PUT may be accepted.' }),
  defaultSourceAssetId: z.string().nullable(),
  behavior: BehaviorSchema,
};

export const ClipEnvelopeSchema = z.object(ClipEnvelopeFields).openapi('ClipLibrary');

export const ClipPutAnswerSchema = z
  .object({
    ...ClipEnvelopeFields,
    plan: z.object({ kept: z.array(z.string()), queued: z.array(z.string()), retired: z.array(z.string()) }),
  })
  .openapi('ClipLibraryDeclared');
