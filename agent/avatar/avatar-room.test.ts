import type { LocalParticipant, RpcInvocationData } from '@livekit/rtc-node';
import { describe, expect, it } from 'vitest';
import { RPC_PLAY_ACTION, RPC_USER_SPEECH_STARTED } from '../protocol.ts';
import { answerAgentRpcs } from './avatar-room.ts';
import type { ActionAnswer, Body } from './body.ts';

const AGENT = 'agent-1';

/** The RPC handlers registered on a fake participant, and what reached the body. */
function answering() {
  const methods = new Map<string, (data: RpcInvocationData) => Promise<string>>();
  const lp = { registerRpcMethod: (m: string, h: (data: RpcInvocationData) => Promise<string>) => methods.set(m, h) };
  const asked: string[] = [];
  let speechStarts = 0;
  const body = {
    frameAt: () => {
      throw new Error('not drawn here');
    },
    userSpeechStarted: () => speechStarts++,
    requestAction: (id: string): ActionAnswer => (
      asked.push(id),
      id === 'wave' ? { accepted: true } : { accepted: false, reason: 'unknown_action' }
    ),
  } satisfies Body;
  answerAgentRpcs(lp as Pick<LocalParticipant, 'registerRpcMethod'>, AGENT, body);
  const call = (method: string, callerIdentity: string, payload = '') =>
    methods.get(method)!({ callerIdentity, payload } as RpcInvocationData);
  return { call, asked, speechStarts: () => speechStarts };
}

describe('answerAgentRpcs', () => {
  it('passes the agent’s action request to the body and answers its verdict', async () => {
    const t = answering();
    expect(JSON.parse(await t.call(RPC_PLAY_ACTION, AGENT, JSON.stringify({ action_id: 'wave' })))).toEqual({
      accepted: true,
    });
    expect(JSON.parse(await t.call(RPC_PLAY_ACTION, AGENT, JSON.stringify({ action_id: 'moonwalk' })))).toEqual({
      accepted: false,
      reason: 'unknown_action',
    });
    expect(t.asked).toEqual(['wave', 'moonwalk']);
  });

  it('answers unknown_action to a payload without an action id, without asking the body', async () => {
    const t = answering();
    for (const payload of ['not json', '{}', JSON.stringify({ action_id: 7 })]) {
      expect(JSON.parse(await t.call(RPC_PLAY_ACTION, AGENT, payload))).toEqual({
        accepted: false,
        reason: 'unknown_action',
      });
    }
    expect(t.asked).toEqual([]);
  });

  it('tells the body the user started speaking', async () => {
    const t = answering();
    expect(await t.call(RPC_USER_SPEECH_STARTED, AGENT)).toBe('ok');
    expect(t.speechStarts()).toBe(1);
  });

  it('rejects both RPCs from anyone but its agent', async () => {
    const t = answering();
    expect(await t.call(RPC_PLAY_ACTION, 'someone-else', JSON.stringify({ action_id: 'wave' }))).toBe('reject');
    expect(await t.call(RPC_USER_SPEECH_STARTED, 'someone-else')).toBe('reject');
    expect(t.asked).toEqual([]);
    expect(t.speechStarts()).toBe(0);
  });
});
