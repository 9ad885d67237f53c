import { ApiError } from '../../../core/platform/errors.ts';
import type { App } from '../../context.ts';
import { capBody } from '../../middleware/guard.ts';

/** LiveKit's webhook path (outside /api/v1: no tenant key; LiveKit's signature is the authentication). */
export const LIVEKIT_WEBHOOK_PATH = '/webhooks/livekit';
const WEBHOOK_BODY_LIMIT = 64 * 1024;

/**
 * LiveKit webhooks: verified with the server's LiveKit API key and secret (a missing or wrong
 * signature is 401 and changes nothing), then recorded as connection history of the call whose
 * room it is, and ending it when its room finished or its user or avatar left.
 */
export function registerLiveKitWebhooks(app: App) {
  app.post(LIVEKIT_WEBHOOK_PATH, capBody(WEBHOOK_BODY_LIMIT), async (c) => {
    const { livekit, liveCalls } = c.get('services');
    if (!livekit) throw new ApiError('not_found', 'LiveKit is not configured on this server: no webhooks are received');
    const body = await c.req.text();
    let event;
    try {
      event = await livekit.receiveWebhook(body, c.req.header('authorization'));
    } catch {
      throw new ApiError(
        'unauthorized',
        'Missing or invalid LiveKit webhook signature: LiveKit must sign with the API key and secret this server is configured with',
      );
    }
    await liveCalls.onWebhook(event);
    return c.json({ received: true }, 200);
  });
}
