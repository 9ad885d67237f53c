import { createRoute, z } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { AvatarIdParam, checkAvatarId, CLIP_LIBRARY_BODY_LIMIT, ClipPutAnswerSchema } from './schemas.ts';

/**
 * The body is documented loosely and validated by clips/declaration `validateDeclaration` on the raw
 * JSON (so `__proto__` keys are refused instead of silently dropped): 422 clip_declaration_rejected naming the field.
 */
const ClipDeclarationBody = z.record(z.string(), z.unknown()).openapi('ClipDeclarationRequest', {
  description: 'expectedRevision, clips (id → { source: { assetId } | { motionPrompt, durationSeconds? } }), idle?, on?, actions? (spec section 2).',
});

export const route = createRoute({
  operationId: 'putClipLibrary',
  method: 'put',
  path: `${V1}/avatars/{avatarId}/clips`,
  tags: ['Avatars'],
  summary: "Declare an avatar's clip library",
  description:
    'A full replacement against expectedRevision (409 revision_conflict with currentRevision when stale). Omitted clips retire; new or changed sources queue renders; ' +
    'prompts and action descriptions are screened (503 clip_screen_unavailable fails closed). Answers 202 with the envelope plus plan. Body cap 64 KiB. Honours Idempotency-Key.',
  security: [{ bearerAuth: [] }],
  request: {
    params: AvatarIdParam,
    headers: z.object({ 'idempotency-key': z.string().optional().openapi({ description: 'At most 180 characters.' }) }),
    body: { required: true, content: { 'application/json': { schema: ClipDeclarationBody } } },
  },
  responses: {
    202: { description: 'Accepted: the envelope plus plan { kept, queued, retired }', content: { 'application/json': { schema: ClipPutAnswerSchema } } },
    ...errorResponses(400, 401, 403, 404, 409, 413, 415, 422, 503),
  },
});

type Answer = z.infer<typeof ClipPutAnswerSchema>;

export function register(app: App) {
  app.openapi(guarded(route, { bodyLimit: CLIP_LIBRARY_BODY_LIMIT }), async (c) => {
    const avatarId = checkAvatarId(c.req.valid('param').avatarId);
    c.req.valid('json');
    // The raw parse (JSON.parse keeps a `__proto__` own key; the zod output above would not).
    const raw: unknown = await c.req.json();
    const principal = c.get('principal');
    const { clipLibrary, idempotency } = c.get('services');
    const key = c.req.header('idempotency-key');
    if (key === undefined) return c.json((await clipLibrary.declare(principal, avatarId, raw)) as Answer, 202);
    const claim = await idempotency.claim({
      tenantId: principal.tenantId,
      scope: 'PUT /avatars/{avatarId}/clips',
      key,
      request: JSON.stringify({ avatarId, body: raw }),
      mode: 'replay',
    });
    if (claim.kind === 'replay') return c.json(claim.body as Answer, 202);
    try {
      const answer = await clipLibrary.declare(principal, avatarId, raw);
      await claim.release({ status: 202, body: answer });
      return c.json(answer as Answer, 202);
    } catch (err) {
      // Errors are not stored: nothing was written, so the same key may be retried.
      await claim.release();
      throw err;
    }
  });
}
