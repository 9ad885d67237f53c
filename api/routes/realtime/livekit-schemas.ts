import { z } from '@hono/zod-openapi';
import { POOL_NAME } from '../../../core/live/capacity.ts';

/** Body caps of the live-call routes. */
export const MINT_BODY_LIMIT = 64 * 1024;
export const RELEASE_BODY_LIMIT = 4 * 1024;

export const CapacityPoolName = z
  .string()
  .regex(POOL_NAME, 'must be 1 to 64 lowercase letters, digits, _ or -, starting with a letter or digit')
  .openapi({ example: 'primary', description: 'A capacity pool (default `primary`).' });

/** A queue ticket id as issued (qtk_...); anything else is no ticket of ours. */
export const QueueTicketId = z.string().min(1).max(128).openapi({ example: 'qtk_0123456789ABCDEFGHij' });
export const SessionId = z.string().min(1).max(128).openapi({ example: 'ses_0123456789ABCDEFGHij' });

/** The capacity-queue 429: exactly these fields (the request id is in the X-Request-ID header only). */
export const QueueTicketSchema = z
  .object({
    queue_ticket_id: z.string().openapi({ description: 'Send it back as queue_ticket_id on the next mint to keep your place.' }),
    queue_size: z.number().int().openapi({ description: 'Queued mints up to and including this one: your position, 1 being next in line.' }),
    recommended_retry_ms: z.number().int().openapi({ description: 'Mint again (with the ticket) after this long; a ticket not sent back in time leaves the queue.' }),
  })
  .strict()
  .openapi('LiveCapacityQueued', { description: 'Capacity is full: the request is queued. Not an error body: it has no `code`.' });
