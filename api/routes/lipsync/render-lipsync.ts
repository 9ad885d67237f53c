import { createRoute, z } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';

const url = (description: string) => z.string().min(1).max(2048).openapi({ format: 'uri', description });

const LipsyncBody = z
  .object({
    audioUrl: url(
      'The audio to lip-sync: WAV, MP3, OGG (Vorbis or Opus), M4A (AAC) or FLAC. An http(s) URL on a public address (redirects checked), or one of ' +
        "this service's own signed media URLs (an uploaded asset's publicUrl), which is read from storage directly.",
    ),
    avatarId: z
      .string()
      .min(1)
      .max(64)
      .optional()
      .openapi({ description: 'A ready avatar of the workspace to speak. Exactly one of avatarId and portraitUrl.' }),
    portraitUrl: url(
      'A portrait (JPEG, PNG or WebP) to speak instead of an avatar: registered on the fly as an avatar (rigged, a short idle loop generated), ' +
        'once per distinct image. Same URL rules as audioUrl. Exactly one of avatarId and portraitUrl.',
    ).optional(),
  })
  .strict()
  .superRefine((b, ctx) => {
    if ((b.avatarId === undefined) === (b.portraitUrl === undefined)) {
      const both = b.avatarId !== undefined;
      ctx.addIssue({
        code: 'custom',
        path: [both ? 'portraitUrl' : 'avatarId'],
        message: both
          ? 'give exactly one of "avatarId" and "portraitUrl", not both'
          : 'give exactly one of "avatarId" and "portraitUrl"',
      });
    }
  })
  .openapi('LipsyncRequest', {
    oneOf: [{ required: ['avatarId'] }, { required: ['portraitUrl'] }],
  });

const LipsyncResponse = z
  .object({
    url: z.string().openapi({
      format: 'uri',
      description:
        'Signed GET URL of the MP4 (H.264 + AAC), valid for one hour, no API key needed; supports HTTP Range requests.',
    }),
    avatarId: z
      .string()
      .openapi({ description: 'The avatar that spoke: the one given, or the one the portrait was registered as.' }),
    frames: z.number().int().openapi({ description: 'Video frames in the MP4.' }),
    fps: z.number().openapi({ description: "Frames per second (the idle loop's rate)." }),
    durationSeconds: z.number().openapi({ description: 'frames / fps: the seconds billed.' }),
  })
  .openapi('LipsyncResponse');

export const route = createRoute({
  operationId: 'renderLipsync',
  method: 'post',
  path: `${V1}/lipsync`,
  tags: ['Realtime'],
  summary: 'Render audio to a lip-synced talking-head MP4',
  description:
    "Lip-syncs the audio over the avatar's idle loop (or a portrait registered on the fly) and answers the stored MP4's signed URL once it is " +
    'rendered: no language model, no speech synthesis, no streaming. Billed as realtime seconds like a turn: once the audio is read, its video ' +
    'seconds are reserved (402 before anything renders), and settled to the rendered seconds; a failed render bills nothing. Audio is capped in ' +
    'size and length (422 audio_too_long, 413). 422 for a URL that is not http(s), whose address is refused, that is not audio (or not an image), ' +
    'for a portrait without a usable face (portrait_rejected) or an expired signed media URL (media_url_expired); the error names the field. ' +
    '404 for an unknown avatar, 409 for one that is not ready. 502 when a download or the render fails (safe to retry). See docs/lipsync.md.',
  security: [{ bearerAuth: [] }],
  request: { body: { required: true, content: { 'application/json': { schema: LipsyncBody } } } },
  responses: {
    200: { description: 'The rendered MP4', content: { 'application/json': { schema: LipsyncResponse } } },
    ...errorResponses(400, 401, 402, 403, 404, 408, 409, 413, 415, 422, 502, 504),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const body = c.req.valid('json');
    const principal = c.get('principal');
    const { lipsync } = c.get('services');
    const result = await lipsync.render({
      tenantId: principal.tenantId,
      apiKeyId: principal.apiKeyId,
      audioUrl: body.audioUrl,
      ...(body.avatarId !== undefined ? { avatarId: body.avatarId } : { portraitUrl: body.portraitUrl! }),
      signal: c.req.raw.signal,
    });
    return c.json(
      {
        url: result.url,
        avatarId: result.avatarId,
        frames: result.frames,
        fps: result.fps,
        durationSeconds: result.durationSeconds,
      },
      200,
    );
  });
}
