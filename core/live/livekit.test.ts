import { createHash } from 'node:crypto';
import { AccessToken, AgentDispatchClient, RoomServiceClient, TokenVerifier } from 'livekit-server-sdk';
import { describe, expect, inject, it } from 'vitest';
import { LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET } from '../../test/deps.ts';
import { loadConfig } from '../platform/config.ts';
import { randomBase62 } from '../platform/ids.ts';
import { LiveKit } from './livekit.ts';

// The gateway to the run's real LiveKit server (test/deps.ts starts it).
const url = inject('livekitUrl');
const http = url.replace(/^ws/, 'http');
const agentName = `test-${randomBase62(8)}`;
const livekit = new LiveKit({ url, apiKey: LIVEKIT_DEV_KEY, apiSecret: LIVEKIT_DEV_SECRET, agentName });
const rooms = new RoomServiceClient(http, LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET);
const roomName = () => `livekit-test-${randomBase62(10)}`;

describe('LiveKit', () => {
  it('happy: is built only where LiveKit is configured; clients connect to the public URL when there is one', () => {
    const env = { DATABASE_URL: 'postgres://localhost/none', NODE_ENV: 'test' };
    expect(LiveKit.fromConfig(loadConfig(env))).toBeUndefined();
    const full = { ...env, LIVEKIT_URL: url, LIVEKIT_API_KEY: 'k', LIVEKIT_API_SECRET: 's' };
    expect(LiveKit.fromConfig(loadConfig(full))?.serverUrl).toBe(url);
    expect(LiveKit.fromConfig(loadConfig({ ...full, LIVEKIT_PUBLIC_URL: 'wss://live.example.com' }))?.serverUrl).toBe(
      'wss://live.example.com',
    );
  });

  it('happy: creates a room with its timeouts and size, and deletes it; a room already gone is no error', async () => {
    const name = roomName();
    await livekit.createRoom(name, { emptyTimeoutSeconds: 30, departureTimeoutSeconds: 5, maxParticipants: 4 });
    const [room] = await rooms.listRooms([name]);
    expect(room).toMatchObject({ name, emptyTimeout: 30, departureTimeout: 5, maxParticipants: 4 });
    await livekit.deleteRoom(name);
    expect(await rooms.listRooms([name])).toEqual([]);
    await livekit.deleteRoom(name);
    await livekit.deleteRoom(roomName());
  });

  it('happy: dispatches the agent worker into a room with exactly {"session_id"} as metadata', async () => {
    const name = roomName();
    await livekit.createRoom(name, { emptyTimeoutSeconds: 30, departureTimeoutSeconds: 5, maxParticipants: 4 });
    await livekit.dispatchAgent(name, 'ses_abc');
    const dispatches = await new AgentDispatchClient(http, LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET).listDispatch(name);
    // The server's own dispatch of unnamed agents to every new room is listed too (agentName "").
    const named = dispatches.filter((d) => d.agentName !== '');
    expect(named.map((d) => ({ agentName: d.agentName, metadata: d.metadata }))).toEqual([
      { agentName, metadata: '{"session_id":"ses_abc"}' },
    ]);
    await livekit.deleteRoom(name);
  });

  it('security: the user token joins its room only, publishes the microphone only, and lives its ttl', async () => {
    const token = await livekit.userToken('room-a', 'user-1', 120);
    const claims = await new TokenVerifier(LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET).verify(token);
    expect(claims.sub).toBe('user-1');
    expect(claims.exp! - claims.nbf!).toBe(120);
    expect(claims.video).toMatchObject({
      room: 'room-a',
      roomJoin: true,
      canPublish: true,
      canPublishSources: ['microphone'],
      canSubscribe: true,
      canPublishData: true,
    });
    expect(claims.video?.roomAdmin).toBeFalsy();
    expect(claims.video?.roomCreate).toBeFalsy();
    await expect(new TokenVerifier(LIVEKIT_DEV_KEY, 'another-secret').verify(token)).rejects.toThrow();
  });

  it("security: takes a webhook only with the signature of its own body under the server's secret", async () => {
    const body = JSON.stringify({ event: 'room_finished', room: { name: 'r1' }, id: 'EV_1', createdAt: '1' });
    const signed = async (secret: string, of: string) => {
      const at = new AccessToken(LIVEKIT_DEV_KEY, secret);
      at.sha256 = createHash('sha256').update(of).digest('base64');
      return at.toJwt();
    };
    expect(await livekit.receiveWebhook(body, await signed(LIVEKIT_DEV_SECRET, body))).toMatchObject({
      event: 'room_finished',
      room: { name: 'r1' },
    });
    await expect(livekit.receiveWebhook(body, undefined)).rejects.toThrow();
    await expect(livekit.receiveWebhook(body, await signed('another-secret', body))).rejects.toThrow();
    await expect(livekit.receiveWebhook(body, await signed(LIVEKIT_DEV_SECRET, `${body} `))).rejects.toThrow();
  });
});
