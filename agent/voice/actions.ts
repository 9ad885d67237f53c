/**
 * The avatar's declared actions as LLM tools: one tool per action, described by the action's own
 * description, so the model chooses when to play one. Calling a tool asks the avatar (over RPC, in
 * the room) to play a take of it at its next clip boundary; the tool's answer tells the model
 * whether it will.
 */
import { llm } from '@livekit/agents';
import type { Room } from '@livekit/rtc-node';
import { RPC_PLAY_ACTION } from '../protocol.ts';

export interface ActionMenuEntry {
  id: string;
  description: string;
}

/** A tool name the LLM APIs accept (letters, digits, _ and -, at most 64) for an action id. */
function toolName(actionId: string): string {
  return `play_${actionId}`.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64);
}

export function actionTools(room: Room, avatarIdentity: string, menu: readonly ActionMenuEntry[]): llm.ToolContextLike {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- agents-js types a tool map with `any` arguments
  const tools: Record<string, llm.AnonFunctionTool<any, unknown, any>> = {};
  for (const action of menu) {
    tools[toolName(action.id)] = llm.tool({
      description: `${action.description} (plays this body motion on the avatar)`,
      execute: async () => {
        try {
          const answer = JSON.parse(
            await room.localParticipant!.performRpc({
              destinationIdentity: avatarIdentity,
              method: RPC_PLAY_ACTION,
              payload: JSON.stringify({ action_id: action.id }),
            }),
          ) as { accepted: boolean; reason?: string };
          return answer.accepted
            ? `The avatar will ${action.description.toLowerCase()} now.`
            : `The avatar cannot do that now (${answer.reason ?? 'unavailable'}).`;
        } catch {
          return 'The avatar cannot do that now.';
        }
      },
    });
  }
  return tools;
}
