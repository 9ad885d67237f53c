/**
 * The server-side history of talk turns, per workspace, avatar and client-chosen conversation id
 * (table `realtime_conversations`, migration 0012). Bounded: the last CONVERSATION_MAX_MESSAGES
 * messages, at most CONVERSATION_MAX_CHARS characters in all (oldest dropped first), and a
 * conversation untouched for CONVERSATION_TTL_SECONDS is gone.
 */
import type { Sql } from '../platform/db/index.ts';
import type { ChatMessage } from './llm.ts';

export const CONVERSATION_MAX_MESSAGES = 20;
const CONVERSATION_MAX_CHARS = 16_000;
const CONVERSATION_TTL_SECONDS = 24 * 3600;
export const CONVERSATION_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

export type HistoryMessage = ChatMessage & { role: 'user' | 'assistant' };

/** The newest messages that fit the bounds (the newest one always kept, cut to the character bound). */
function boundHistory(messages: readonly HistoryMessage[]): HistoryMessage[] {
  const out: HistoryMessage[] = [];
  let chars = 0;
  for (let i = messages.length - 1; i >= 0 && out.length < CONVERSATION_MAX_MESSAGES; i--) {
    const m = messages[i]!;
    if (out.length > 0 && chars + m.content.length > CONVERSATION_MAX_CHARS) break;
    const content = m.content.slice(-CONVERSATION_MAX_CHARS);
    out.unshift({ role: m.role, content });
    chars += content.length;
  }
  return out;
}

export class ConversationStore {
  constructor(private readonly sql: Sql) {}

  /** The conversation's messages, oldest first, within the bounds; empty when unknown or expired. */
  async history(tenantId: string, avatarId: string, conversationId: string): Promise<HistoryMessage[]> {
    const [row] = await this.sql<{ messages: HistoryMessage[] }[]>`
      select messages from realtime_conversations
      where tenant_id = ${tenantId} and avatar_id = ${avatarId} and conversation_id = ${conversationId} and expires_at > now()`;
    return boundHistory(row?.messages ?? []);
  }

  /** Adds messages at the end (an expired conversation starts afresh) and moves its expiry. */
  async append(
    tenantId: string,
    avatarId: string,
    conversationId: string,
    messages: readonly HistoryMessage[],
  ): Promise<void> {
    if (messages.length === 0) return;
    await this.sql.begin(async (tx) => {
      // Expired conversations of the workspace go first (they are never read again).
      await tx`delete from realtime_conversations where tenant_id = ${tenantId} and expires_at <= now()`;
      // The row exists before it is locked, so concurrent turns of one conversation append in turn.
      await tx`
        insert into realtime_conversations (tenant_id, avatar_id, conversation_id, expires_at)
        values (${tenantId}, ${avatarId}, ${conversationId}, now() + make_interval(secs => ${CONVERSATION_TTL_SECONDS}))
        on conflict do nothing`;
      const [row] = await tx<{ messages: HistoryMessage[] }[]>`
        select messages from realtime_conversations
        where tenant_id = ${tenantId} and avatar_id = ${avatarId} and conversation_id = ${conversationId} for update`;
      const next = boundHistory([...(row?.messages ?? []), ...messages]);
      await tx`
        update realtime_conversations set messages = ${tx.json(next as never)}, updated_at = now(),
          expires_at = now() + make_interval(secs => ${CONVERSATION_TTL_SECONDS})
        where tenant_id = ${tenantId} and avatar_id = ${avatarId} and conversation_id = ${conversationId}`;
    });
  }
}
