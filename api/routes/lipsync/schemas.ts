import { z } from '@hono/zod-openapi';
import type { LipsyncRequest, LipsyncResult } from '../../../core/lipsync/index.ts';

/** POST /lipsync's payloads (camelCase, strict), and their mapping to and from core's. */

const url = (description: string) => z.string().min(1).max(2048).openapi({ format: 'uri', description });

export const LipsyncBody = z
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

export const LipsyncResponse = z
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

/** A lipsync request as core takes it: the audio and exactly one of the avatar and the portrait. */
export const fromLipsyncWire = (
  body: z.infer<typeof LipsyncBody>,
): Pick<LipsyncRequest, 'audioUrl' | 'avatarId' | 'portraitUrl'> => ({
  audioUrl: body.audioUrl,
  ...(body.avatarId !== undefined ? { avatarId: body.avatarId } : { portraitUrl: body.portraitUrl! }),
});

/** A rendered lipsync on the wire (its usage row stays internal). */
export const toLipsyncWire = (result: LipsyncResult): z.infer<typeof LipsyncResponse> => ({
  url: result.url,
  avatarId: result.avatarId,
  frames: result.frames,
  fps: result.fps,
  durationSeconds: result.durationSeconds,
});
