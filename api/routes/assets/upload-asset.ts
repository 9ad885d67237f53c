import { Readable, Transform, type TransformCallback } from 'node:stream';
import { createRoute, z } from '@hono/zod-openapi';
import busboy from 'busboy';
import type { Context } from 'hono';
import {
  ASSET_KINDS,
  LARGEST_ASSET_BYTES,
  type AssetKind,
  type AssetRecord,
  type StoredBytes,
} from '../../../core/assets/index.ts';
import { ApiError } from '../../../core/platform/errors.ts';
import { newId } from '../../../core/platform/ids.ts';
import { SizeLimitError } from '../../../core/platform/storage/index.ts';
import { V1, type App, type AppEnv } from '../../context.ts';
import { authenticate } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { wellFormed } from '../../schemas/json.ts';
import { assetError, AssetSchema, CAPS_TEXT, toWire } from './common.ts';

/**
 * Cap of the whole multipart body: the largest per-kind cap plus room for the part headers and the
 * kind field. The per-kind cap is enforced on the file part itself while it streams.
 */
export const UPLOAD_BODY_LIMIT = LARGEST_ASSET_BYTES + 64 * 1024;

const UploadForm = z
  .object({
    file: z
      .string()
      .openapi({ type: 'string', format: 'binary', description: 'The file. Its type is sniffed from the bytes.' }),
    kind: z.enum(ASSET_KINDS).optional().openapi({ description: 'When given, must agree with the sniffed type.' }),
  })
  .openapi('UploadAssetForm');

export const route = createRoute({
  operationId: 'uploadAsset',
  method: 'post',
  path: `${V1}/assets`,
  tags: ['Assets'],
  summary: 'Upload an asset (multipart)',
  description:
    'multipart/form-data with one `file` part and an optional `kind` field; nothing else. The body streams into storage (never ' +
    `buffered whole), hashed on the way. Accepted: image (jpeg, png, webp), video (mp4, quicktime, webm), audio (wav, mp3, ogg, flac, m4a). ${CAPS_TEXT} ` +
    'Over the cap: 413 and nothing is stored.',
  security: [{ bearerAuth: [] }],
  request: { body: { required: true, content: { 'multipart/form-data': { schema: UploadForm } } } },
  responses: {
    201: { description: 'The stored asset (status ready)', content: { 'application/json': { schema: AssetSchema } } },
    ...errorResponses(400, 401, 403, 413, 415, 422),
  },
});

/** Counts the request bytes and fails past the cap, whatever Content-Length said. */
class BodyCap extends Transform {
  private seen = 0;
  constructor(private readonly max: number) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.seen += chunk.length;
    if (this.seen > this.max) return cb(new SizeLimitError(this.max));
    cb(null, chunk);
  }
}

const tooLarge = () =>
  new ApiError('payload_too_large', `Request body exceeds this route's cap of ${UPLOAD_BODY_LIMIT} bytes`, {
    maxBytes: UPLOAD_BODY_LIMIT,
  });

// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/g;

/** A file name safe to keep and echo: no control characters, at most 255 characters. */
function cleanFilename(name: string | undefined): string | null {
  // (only unpaired surrogates are replaced: an emoji's pair is text; the cut at 255 may split a pair, so after it)
  const cleaned = wellFormed((name ?? '').replace(CONTROL_CHARACTERS, '').trim().slice(0, 255));
  return cleaned || null;
}

/**
 * Parses the multipart body with busboy straight from the request stream: the file part goes to
 * the asset store as it arrives. Resolves once the asset row exists.
 */
function receive(c: Context<AppEnv>, contentType: string): Promise<AssetRecord> {
  const { assets } = c.get('services');
  const tenantId = c.get('principal').tenantId;
  const webBody = c.req.raw.body;
  if (!webBody)
    return Promise.reject(new ApiError('validation_error', 'Missing required field "file" in form', { field: 'file' }));

  let bb: busboy.Busboy;
  try {
    bb = busboy({
      headers: { 'content-type': contentType },
      defParamCharset: 'utf8',
      limits: { files: 1, fields: 4, parts: 5, fieldSize: 1024, fieldNameSize: 100, headerPairs: 20 },
    });
  } catch {
    return Promise.reject(
      new ApiError('bad_request', 'Malformed multipart/form-data: the Content-Type needs a boundary'),
    );
  }
  const source = Readable.fromWeb(webBody as never);
  const cap = new BodyCap(UPLOAD_BODY_LIMIT);

  return new Promise<AssetRecord>((resolve, reject) => {
    const assetId = newId('asset');
    let declared: AssetKind | undefined;
    let fileSeen = false;
    let stored: Promise<StoredBytes> | undefined;
    let filename: string | null = null;
    let fileStream: Readable | undefined;
    let settled = false;

    /** Stops parsing; the rest of the body is read and dropped (the cap still bounds it). */
    const fail = (err: unknown) => {
      if (settled) return;
      settled = true;
      cap.unpipe(bb);
      bb.removeAllListeners();
      bb.on('error', () => {});
      cap.on('error', () => {});
      cap.resume();
      // A file part still streaming is cut off; one already stored must not stay. Answer after that.
      fileStream?.destroy();
      const cleanup = stored
        ? stored.then((s) => assets.storage.delete(s.storageKey)).catch(() => {})
        : Promise.resolve();
      void cleanup.then(() => reject(err));
    };

    source.on('error', (err) => fail(err));
    cap.on('error', (err) => fail(err instanceof SizeLimitError ? tooLarge() : err));

    bb.on('field', (name, value) => {
      if (name !== 'kind')
        return fail(
          new ApiError('validation_error', `Unknown field "${name}" in form (expected "file" and optionally "kind")`, {
            field: name,
          }),
        );
      if (declared !== undefined)
        return fail(new ApiError('validation_error', 'Invalid field "kind" in form: given twice', { field: 'kind' }));
      if (!(ASSET_KINDS as readonly string[]).includes(value)) {
        return fail(
          new ApiError('validation_error', `Invalid field "kind" in form: must be one of ${ASSET_KINDS.join(', ')}`, {
            field: 'kind',
          }),
        );
      }
      declared = value as AssetKind;
    });

    bb.on('file', (name, stream, info) => {
      if (name !== 'file' || fileSeen) {
        stream.resume();
        const msg =
          name !== 'file'
            ? `Unknown file field "${name}" in form (the file goes in "file")`
            : 'Only one "file" part is accepted';
        return fail(new ApiError('validation_error', msg, { field: name }));
      }
      fileSeen = true;
      fileStream = stream;
      filename = cleanFilename(info.filename);
      stored = assets.storeBytes(tenantId, assetId, stream, declared);
      // Refused bytes (type, kind, cap) answer at once; the rest of the body is dropped.
      stored.catch((err: unknown) => fail(assetError(err, 'file')));
    });

    for (const limit of ['partsLimit', 'filesLimit', 'fieldsLimit'] as const) {
      bb.on(limit, () =>
        fail(
          new ApiError('validation_error', 'Too many parts in form: send one "file" and optionally "kind"', {
            field: null,
          }),
        ),
      );
    }
    bb.on('error', () => fail(new ApiError('bad_request', 'Malformed multipart/form-data body')));

    bb.on('close', () => {
      if (settled) return;
      if (!stored)
        return fail(new ApiError('validation_error', 'Missing required field "file" in form', { field: 'file' }));
      stored.then(
        async (s) => {
          if (settled) return;
          // A kind field after the file part is checked here, once the type is known.
          if (declared && declared !== s.kind) {
            return fail(
              new ApiError(
                'validation_error',
                `Invalid field "kind": declared ${declared}, but the bytes are ${s.contentType} (${s.kind})`,
                {
                  field: 'kind',
                  detectedType: s.contentType,
                },
              ),
            );
          }
          try {
            const record = await assets.recordUploaded({
              tenantId,
              id: assetId,
              stored: s,
              originalFilename: filename,
            });
            settled = true;
            resolve(record);
          } catch (err) {
            fail(err);
          }
        },
        () => {}, // handled above
      );
    });

    source.pipe(cap).pipe(bb);
  });
}

export function register(app: App) {
  // Registered by hand rather than with app.openapi: its form validator would buffer the whole
  // body. The route is still in the OpenAPI document, and the auth guard runs first as everywhere.
  app.openAPIRegistry.registerPath(route);
  app.post(route.path, authenticate('uploadAsset'), async (c) => {
    const contentType = c.req.header('content-type') ?? '';
    if (!/^multipart\/form-data\s*(;|$)/i.test(contentType)) {
      throw new ApiError(
        'unsupported_media_type',
        'Unsupported Content-Type: send multipart/form-data with a "file" part',
      );
    }
    const declaredLength = c.req.header('content-length');
    if (declaredLength && /^\d+$/.test(declaredLength) && Number(declaredLength) > UPLOAD_BODY_LIMIT) throw tooLarge();
    const record = await receive(c, contentType);
    return c.json(await toWire(c.get('services').assets, record), 201);
  });
}
