import { createRoute, z } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { FREE_JSON_DESCRIPTION, refineStorableJson } from '../../schemas/json.ts';
import { assetError, AssetKindSchema, AssetSchema, CAPS_TEXT, toWire } from './common.ts';

const CreateRemoteAssetBody = z
  .object({
    kind: AssetKindSchema,
    remoteUrl: z
      .string()
      .min(1)
      .max(2048)
      .openapi({ format: 'uri', description: 'http or https; must reach a public address (redirects included).' }),
    originalFilename: z.string().trim().min(1).max(255).optional(),
    metadata: z
      .record(z.string().max(128), z.unknown())
      .refine((m) => Object.keys(m).length <= 64, 'at most 64 keys')
      .superRefine(refineStorableJson('field'))
      .optional()
      .openapi({
        maxProperties: 64,
        description: `Kept with the asset. ${FREE_JSON_DESCRIPTION} At most 64 keys of at most 128 characters.`,
      }),
  })
  .strict()
  .openapi('CreateRemoteAssetRequest');

export const route = createRoute({
  operationId: 'createRemoteAsset',
  method: 'post',
  path: `${V1}/assets/remote`,
  tags: ['Assets'],
  summary: 'Register an asset from a URL',
  description:
    `Streams the remote file into workspace storage through the safe fetcher (public addresses only, at most 5 redirects, each checked). ` +
    `The type is sniffed from the bytes and must agree with kind. ${CAPS_TEXT} The asset row is pending_upload while the bytes stream, then ready; ` +
    'on a refusal or failure it becomes failed (with error) and the error answer carries its assetId. ' +
    'An asset deleted (DELETE /assets/{assetId}) while its bytes stream in stays deleted: the import answers 404 with its assetId.',
  security: [{ bearerAuth: [] }],
  request: { body: { required: true, content: { 'application/json': { schema: CreateRemoteAssetBody } } } },
  responses: {
    201: { description: 'The ready asset', content: { 'application/json': { schema: AssetSchema } } },
    ...errorResponses(400, 401, 403, 404, 413, 415, 422, 502, 504),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const body = c.req.valid('json');
    const { assets, safeFetch } = c.get('services');
    try {
      const asset = await assets.importRemote(
        {
          tenantId: c.get('principal').tenantId,
          kind: body.kind,
          remoteUrl: body.remoteUrl,
          originalFilename: body.originalFilename ?? null,
          metadata: body.metadata,
        },
        safeFetch,
      );
      return c.json(await toWire(assets, asset), 201);
    } catch (err) {
      throw assetError(err, 'remoteUrl');
    }
  });
}
