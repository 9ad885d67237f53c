import { createHash } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { json, testApi } from '../../../test/helpers.ts';
import { jpeg, mp4, multipart, pdf, png, wav, type Part } from './test-media.ts';

const t = await testApi();
afterAll(() => t.close());
const URL = '/api/v1/assets';

interface Asset {
  id: string;
  tenantId: string;
  kind: string;
  status: string;
  contentType: string | null;
  sizeBytes: number | null;
  sha256: string | null;
  publicUrl: string | null;
  originalFilename: string | null;
  error: string | null;
  code?: string;
  field?: string;
  maxBytes?: number;
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function upload(key: string, parts: Part[]) {
  const { body, contentType } = multipart(parts);
  const res = await t.request('POST', URL, { key, rawBody: body, headers: { 'content-type': contentType } });
  return { res, body: await json<Asset>(res) };
}

/** Files stored for a tenant (the local store: DATA_DIR/media/tenants/<id>). */
function storedFiles(tenantId: string): string[] {
  const dir = path.join(t.services.config.dataDir, 'media', 'tenants', tenantId);
  return existsSync(dir)
    ? readdirSync(dir, { recursive: true })
        .map(String)
        .filter((f) => !f.endsWith('assets'))
    : [];
}

async function rowCount(tenantId: string): Promise<number> {
  const [r] = await t.services.sql<
    { n: number }[]
  >`select count(*)::int as n from assets where tenant_id = ${tenantId}`;
  return r!.n;
}

/** A body of `total` bytes made of `head` then zeros, streamed in 256 KiB chunks with no Content-Length. */
function streamOf(head: Buffer, total: number): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream({
    pull(c) {
      if (sent >= total) return c.close();
      const n = Math.min(256 * 1024, total - sent);
      const chunk = sent === 0 ? Buffer.concat([head, Buffer.alloc(Math.max(0, n - head.length))]) : Buffer.alloc(n);
      sent += chunk.length;
      c.enqueue(chunk);
    },
  });
}

describe('POST /assets (multipart upload)', () => {
  it('happy: keeps a file name as the browser sent it, in UTF-8 (accents and emoji included)', async () => {
    const { apiKey } = await t.newTenant();
    const { res, body } = await upload(apiKey, [
      { name: 'file', value: await png(8, 8), filename: 'Portrait de Zoë 😀.png' },
    ]);
    expect(res.status).toBe(201);
    expect(body.originalFilename).toBe('Portrait de Zoë 😀.png');
  });

  it('happy: stores a PNG, sniffed and hashed, as a ready asset whose signed publicUrl serves the bytes', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const file = await png(16, 16);
    const { res, body } = await upload(apiKey, [
      { name: 'kind', value: 'image' },
      { name: 'file', value: file, filename: 'portrait.png', contentType: 'application/octet-stream' },
    ]);
    expect(res.status).toBe(201);
    expect(Object.keys(body).sort()).toEqual(
      [
        'contentType',
        'createdAt',
        'error',
        'id',
        'kind',
        'metadata',
        'originalFilename',
        'publicUrl',
        'sha256',
        'sizeBytes',
        'status',
        'tenantId',
        'updatedAt',
      ].sort(),
    );
    expect(body).toMatchObject({
      tenantId,
      kind: 'image',
      status: 'ready',
      contentType: 'image/png',
      sizeBytes: file.length,
      sha256: sha(file),
      originalFilename: 'portrait.png',
      error: null,
    });
    expect(body.id).toMatch(/^ast_/);
    const u = new globalThis.URL(body.publicUrl!);
    expect(u.pathname).toBe(`/media/tenants/${tenantId}/assets/${body.id}`);
    const media = await t.request('GET', u.pathname + u.search);
    expect(media.status).toBe(200);
    expect(media.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await media.arrayBuffer()).equals(file)).toBe(true);
  });

  it('happy: without kind the kind is sniffed (jpeg, wav, mp4); a kind after the file part is checked too', async () => {
    const { apiKey } = await t.newTenant();
    const cases: [Buffer, string, string][] = [
      [await jpeg(), 'image', 'image/jpeg'],
      [wav(), 'audio', 'audio/wav'],
      [mp4(), 'video', 'video/mp4'],
    ];
    for (const [file, kind, contentType] of cases) {
      const { res, body } = await upload(apiKey, [{ name: 'file', value: file, filename: 'x.bin' }]);
      expect(res.status, contentType).toBe(201);
      expect(body).toMatchObject({ kind, contentType, sizeBytes: file.length });
      const after = await upload(apiKey, [
        { name: 'file', value: file, filename: 'x' },
        { name: 'kind', value: kind },
      ]);
      expect(after.res.status).toBe(201);
    }
  });

  it('error: a declared kind that disagrees with the bytes is 422 naming kind, before or after the file; nothing stored', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const file = await png();
    for (const parts of [
      [
        { name: 'kind', value: 'video' },
        { name: 'file', value: file, filename: 'a.mp4' },
      ],
      [
        { name: 'file', value: file, filename: 'a.mp4' },
        { name: 'kind', value: 'audio' },
      ],
    ]) {
      const { res, body } = await upload(apiKey, parts);
      expect(res.status).toBe(422);
      expect(body).toMatchObject({ code: 'validation_error', field: 'kind' });
    }
    expect(await rowCount(tenantId)).toBe(0);
    expect(storedFiles(tenantId)).toEqual([]);
  });

  it('error: bytes of no accepted type (PDF, text, an SVG, empty) are 422; nothing stored', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    for (const [value, code] of [
      [pdf(), 'unsupported_asset_type'],
      [Buffer.from('just some text, named .png'), 'unsupported_asset_type'],
      [Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"></svg>'), 'unsupported_asset_type'],
      [Buffer.alloc(0), 'validation_error'],
    ] as const) {
      const { res, body } = await upload(apiKey, [
        { name: 'file', value, filename: 'photo.png', contentType: 'image/png' },
      ]);
      expect(res.status, code).toBe(422);
      expect(body).toMatchObject({ code, field: 'file' });
    }
    expect(await rowCount(tenantId)).toBe(0);
    expect(storedFiles(tenantId)).toEqual([]);
  });

  it('error: a file over its kind cap is refused with 413 while streaming, and nothing is stored', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    // A video is capped at 18 MB (the clip quality-check ceiling); send 19 MB with no Content-Length.
    const boundary = '----capboundary';
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.mp4"\r\n\r\n`,
    );
    const total = 19_000_000;
    const res = await t.request('POST', URL, {
      key: apiKey,
      rawBody: streamOf(Buffer.concat([head, mp4(64)]), total),
      headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
    });
    expect(res.status).toBe(413);
    expect(await json(res)).toMatchObject({
      code: 'payload_too_large',
      maxBytes: 18_000_000,
      kind: 'video',
      field: 'file',
    });
    expect(await rowCount(tenantId)).toBe(0);
    expect(storedFiles(tenantId)).toEqual([]);
  });

  it('error: a Content-Length over the route cap is 413 before anything is read', async () => {
    const { apiKey } = await t.newTenant();
    const { body, contentType } = multipart([{ name: 'file', value: await png(), filename: 'a.png' }]);
    const res = await t.request('POST', URL, {
      key: apiKey,
      rawBody: body,
      headers: { 'content-type': contentType, 'content-length': String(200 * 1024 * 1024) },
    });
    expect(res.status).toBe(413);
    expect((await json(res)).code).toBe('payload_too_large');
  });

  it('error: wrong content type 415, no boundary 400, missing file, unknown fields, two files, a bad kind 422', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    expect((await t.request('POST', URL, { key: apiKey, body: { file: 'x' } })).status).toBe(415);
    const noBoundary = await t.request('POST', URL, {
      key: apiKey,
      rawBody: 'x',
      headers: { 'content-type': 'multipart/form-data' },
    });
    expect(noBoundary.status).toBe(400);
    expect((await json(noBoundary)).code).toBe('bad_request');
    const garbage = await t.request('POST', URL, {
      key: apiKey,
      rawBody: 'not multipart at all',
      headers: { 'content-type': 'multipart/form-data; boundary=zz' },
    });
    expect([400, 422]).toContain(garbage.status);
    const file = await png();
    const cases: [Part[], string][] = [
      [[{ name: 'kind', value: 'image' }], 'file'],
      [
        [
          { name: 'file', value: file, filename: 'a.png' },
          { name: 'Kind', value: 'image' },
        ],
        'Kind',
      ],
      [[{ name: 'upload', value: file, filename: 'a.png' }], 'upload'],
      [
        [
          { name: 'file', value: file, filename: 'a.png' },
          { name: 'kind', value: 'IMAGE' },
        ],
        'kind',
      ],
      [
        [
          { name: 'kind', value: 'document' },
          { name: 'file', value: file, filename: 'a.png' },
        ],
        'kind',
      ],
    ];
    for (const [parts, field] of cases) {
      const { res, body } = await upload(apiKey, parts);
      expect(res.status, field).toBe(422);
      expect(body.field, field).toBe(field);
    }
    const two = await upload(apiKey, [
      { name: 'file', value: file, filename: 'a.png' },
      { name: 'file', value: file, filename: 'b.png' },
    ]);
    expect(two.res.status).toBe(422);
    expect(await rowCount(tenantId)).toBe(0);
    expect(storedFiles(tenantId)).toEqual([]);
  });

  it('security: the stored key is the asset id under the tenant, never the client filename; 401 without a key', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const { res, body } = await upload(apiKey, [{ name: 'file', value: await png(), filename: '../../../etc/passwd' }]);
    expect(res.status).toBe(201);
    expect(body.originalFilename).toBe('passwd');
    expect(storedFiles(tenantId).filter((f) => !f.endsWith('.meta.json'))).toEqual([`assets/${body.id}`]);
    const { body: b, contentType } = multipart([{ name: 'file', value: await png(), filename: 'a.png' }]);
    expect((await t.request('POST', URL, { rawBody: b, headers: { 'content-type': contentType } })).status).toBe(401);
  });
});

describe('POST /assets: hostile multipart bodies (fuzz)', () => {
  it('never answers 5xx, always the JSON error body, and stores nothing on a refusal', async () => {
    const fc = (await import('fast-check')).default;
    const { apiKey, tenantId } = await t.newTenant();
    const good = await png();
    const partArb = fc.record({
      name: fc.oneof(fc.constantFrom('file', 'kind', 'Kind', 'file[]', '', 'metadata'), fc.string({ maxLength: 8 })),
      value: fc.oneof(
        fc.constant(good),
        fc.constant(good.subarray(0, 20)),
        fc.constantFrom('image', 'video', 'audio', 'IMAGE', '', '\u0000', 'é'),
        fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)),
      ),
      filename: fc.option(
        fc.oneof(fc.constantFrom('a.png', '', '../x', 'é.png', 'a"b.png'), fc.string({ maxLength: 12 })),
        { nil: undefined },
      ),
      contentType: fc.option(fc.constantFrom('image/png', 'application/pdf', 'text/plain', ''), { nil: undefined }),
    });
    const mangle = fc.constantFrom('none', 'truncate', 'no-final-boundary', 'crlf-noise', 'wrong-boundary');
    let stored = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(partArb, { maxLength: 6 }),
        mangle,
        fc.integer({ min: 0, max: 400 }),
        async (parts, how, cut) => {
          const safeParts = parts.map((p) => ({
            ...p,
            name: p.name.replace(/["\r\n]/g, ''),
            filename: p.filename?.replace(/["\r\n]/g, ''),
          }));
          const { body, contentType } = multipart(safeParts as Part[]);
          let raw = body;
          let ct = contentType;
          if (how === 'truncate') raw = body.subarray(0, Math.min(cut, body.length));
          if (how === 'no-final-boundary') raw = body.subarray(0, Math.max(0, body.length - 8));
          if (how === 'crlf-noise') raw = Buffer.concat([Buffer.from('\r\n\r\n--\r\n'), body]);
          if (how === 'wrong-boundary') ct = 'multipart/form-data; boundary=nomatch';
          const res = await t.request('POST', URL, { key: apiKey, rawBody: raw, headers: { 'content-type': ct } });
          const text = await res.text();
          expect(res.status, text).toBeLessThan(500);
          expect(res.headers.get('x-request-id')).toMatch(/^req_/);
          if (res.status === 201) stored++;
          else {
            const err = JSON.parse(text) as { status: number; error: string; retryable: boolean };
            expect(err.status).toBe(res.status);
            expect(typeof err.error).toBe('string');
          }
        },
      ),
      { seed: 20_260_101, numRuns: 150 },
    );
    expect(await rowCount(tenantId)).toBe(stored);
    expect(storedFiles(tenantId).filter((f) => f.startsWith('assets/ast_') && !f.endsWith('.meta.json')).length).toBe(
      stored,
    );
  });
});
