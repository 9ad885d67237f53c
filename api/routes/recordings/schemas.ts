import { z } from '@hono/zod-openapi';
import { ApiError } from '../../../core/platform/errors.ts';
import type { Recording } from '../../../core/recordings/library.ts';
import { Timestamp } from '../../schemas/common.ts';

/** A recording's metadata on the wire (camelCase). docs/recordings.md describes each field. */
export const RecordingSchema = z
  .object({
    id: z.string().openapi({ example: 'rec_7Hq2vX9k1LmN0pR7sTuA' }),
    sessionId: z.string().openapi({ description: 'The live session recorded (ses_...).' }),
    status: z
      .enum(['processing', 'ready', 'failed'])
      .openapi({ description: 'processing while the call runs and the file is finalised, then ready or failed.' }),
    durationSeconds: z.number().nullable().openapi({ description: 'Set once ready.' }),
    sizeBytes: z.number().int().nullable().openapi({ description: 'Size of the MP4, set once ready.' }),
    contentType: z.string().openapi({ example: 'video/mp4' }),
    error: z.string().nullable().openapi({ description: 'Why it failed (failed only).' }),
    createdAt: Timestamp,
    readyAt: Timestamp.nullable(),
    retentionExpiresAt: Timestamp.openapi({
      description: "The media is deleted after this (the workspace's retention); the metadata stays.",
    }),
  })
  .openapi('Recording');

export function toWire(r: Recording): z.infer<typeof RecordingSchema> {
  return {
    id: r.id,
    sessionId: r.sessionId,
    status: r.status,
    durationSeconds: r.durationSeconds,
    sizeBytes: r.sizeBytes,
    contentType: r.contentType,
    error: r.error,
    createdAt: r.createdAt.toISOString(),
    readyAt: r.readyAt?.toISOString() ?? null,
    retentionExpiresAt: r.retentionExpiresAt.toISOString(),
  };
}

export const RecordingIdParam = z.object({
  recordingId: z.string().openapi({
    param: { name: 'recordingId', in: 'path' },
    example: 'rec_7Hq2vX9k1LmN0pR7sTuA',
    description: 'Starts with rec_',
  }),
});

const RECORDING_ID = /^rec_[0-9A-Za-z]{1,64}$/;

/** 404 at once for an id that cannot be a recording's (no database round trip). */
export function checkRecordingId(id: string): string {
  if (!RECORDING_ID.test(id))
    throw new ApiError('not_found', `Recording ${id.slice(0, 80)} not found, or it does not belong to this tenant`);
  return id;
}
