import { createRoute, z } from '@hono/zod-openapi';
import { DECLARATION_BODY_CAP_BYTES, DeclarationBodySchema } from '../../../clips/declaration/index.ts';
import { V1, type App } from '../../context.ts';
import { withIdempotency } from '../../idempotency.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses, IdempotencyKeyHeader } from '../../schemas/common.ts';
import { StorableJsonBody } from '../../schemas/json.ts';
import { AvatarIdParam, checkAvatarId, ClipPutAnswerSchema } from './schemas.ts';

/**
 * The documented body: the strict declaration schema itself (named here, at the API layer). The
 * route does not validate with it: the clip library validates the raw JSON (so that a `__proto__`
 * key is refused rather than silently dropped, as a zod parse would) and answers 422
 * clip_declaration_rejected naming the field. Before that the route checks only that the body is
 * a storable JSON object (`StorableJsonBody`).
 */
// Wrapped by the API's own (OpenAPI-extended) zod: clips/ uses plain zod, whose schemas made before
// @hono/zod-openapi loads never get `.openapi()`.
const ClipDeclarationBody = z
  .lazy(() => DeclarationBodySchema)
  .openapi('ClipDeclarationRequest', {
    description:
      'A full replacement of the clip library. Beyond the schema: clip and action ids are 1 to 64 letters, digits, underscores or hyphens ' +
      '(reserved ids refused); texts are trimmed and must not be empty; a source is exactly { assetId } or { motionPrompt, durationSeconds? }; ' +
      'every listed clip id must be declared in clips, no list repeats an id; idle.weights keys are "source" or idle clip ids, not combined ' +
      'with idle.weight, and leave at least one member positive. A refusal is 422 clip_declaration_rejected naming the field.',
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
    headers: IdempotencyKeyHeader,
    body: { required: true, content: { 'application/json': { schema: ClipDeclarationBody } } },
  },
  responses: {
    202: {
      description: 'Accepted: the envelope plus plan { kept, queued, retired }',
      content: { 'application/json': { schema: ClipPutAnswerSchema } },
    },
    ...errorResponses(400, 401, 403, 404, 409, 413, 415, 422, 503),
  },
});

type Answer = z.infer<typeof ClipPutAnswerSchema>;

export function register(app: App) {
  // Documented as `route`; registered with the raw-body check in place of the declaration schema (see above).
  app.openAPIRegistry.registerPath(route);
  const served = {
    ...route,
    hide: true,
    request: {
      ...route.request,
      body: { required: true, content: { 'application/json': { schema: StorableJsonBody } } },
    },
  };
  app.openapi(guarded(served, { bodyLimit: DECLARATION_BODY_CAP_BYTES }), async (c) => {
    const avatarId = checkAvatarId(c.req.valid('param').avatarId);
    // The raw parse (JSON.parse keeps a `__proto__` own key; the zod output above would not).
    const raw: unknown = await c.req.json();
    const principal = c.get('principal');
    const answer = await withIdempotency(
      c,
      {
        scope: 'PUT /avatars/{avatarId}/clips',
        request: { avatarId, body: raw },
        replay: (stored) => stored.body as Answer,
      },
      async (settle) => {
        const declared: Answer = await c.get('services').clipLibrary.declare(principal, avatarId, raw);
        await settle({ status: 202, body: declared });
        return declared;
      },
    );
    return c.json(answer, 202);
  });
}
