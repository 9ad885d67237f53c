import { Readable } from 'node:stream';
import type { Hono } from 'hono';
import { ApiError } from '../../../core/platform/errors.ts';
import { LocalStorage, MEDIA_PATH } from '../../../core/platform/storage/index.ts';
import { parseRange } from '../../../core/platform/storage/range.ts';
import type { AppEnv } from '../../context.ts';

const badSignature = () =>
  new ApiError('forbidden', 'The media URL signature is invalid or has expired: get a fresh URL from the API');

/**
 * GET and HEAD /media/<key>?exp=&sig=: local object storage, served by the app. Outside /api/v1 and
 * without bearer auth: the HMAC signature over (key, exp) is the authorisation, and it expires
 * (at most an hour). Single byte ranges are honoured (206, 416); errors are the JSON error body.
 */
export function registerMedia(app: Hono<AppEnv>) {
  app.get(`${MEDIA_PATH}/*`, async (c) => {
    const storage = c.get('services').storage;
    if (!(storage instanceof LocalStorage))
      throw new ApiError('not_found', 'Media is served from object storage, not from this path');
    let key: string;
    try {
      key = decodeURIComponent(c.req.path.slice(MEDIA_PATH.length + 1));
    } catch {
      throw badSignature();
    }
    const exp = c.req.query('exp');
    if (!storage.verify(key, exp, c.req.query('sig'))) throw badSignature();
    const stat = await storage.stat(key);
    if (!stat) throw new ApiError('not_found', 'No such media object');

    const maxAge = Math.max(0, Number(exp) - Math.floor(Date.now() / 1000));
    c.header('Cache-Control', `private, max-age=${maxAge}`);
    c.header('Accept-Ranges', 'bytes');
    c.header('Content-Type', stat.contentType);
    c.header('X-Content-Type-Options', 'nosniff');
    if (stat.sha256) c.header('ETag', `"${stat.sha256}"`);

    const wanted = parseRange(c.req.header('range'), stat.size);
    if (wanted.kind === 'unsatisfiable') {
      throw new ApiError(
        'range_not_satisfiable',
        `The requested range is not satisfiable: the object has ${stat.size} bytes`,
        { size: stat.size },
        {
          'Content-Range': `bytes */${stat.size}`,
          'Accept-Ranges': 'bytes',
        },
      );
    }
    const range = wanted.kind === 'partial' ? wanted.range : undefined;
    const status = range ? 206 : 200;
    const length = range ? range.end - range.start + 1 : stat.size;
    c.header('Content-Length', String(length));
    if (range) c.header('Content-Range', `bytes ${range.start}-${range.end}/${stat.size}`);
    if (c.req.method === 'HEAD' || length === 0) return c.body(null, status);
    const stream = await storage.get(key, range);
    return c.body(Readable.toWeb(stream) as ReadableStream, status);
  });
}
