import { Room } from '@livekit/rtc-node';
import { AccessToken, RoomServiceClient } from 'livekit-server-sdk';
import { describe, expect, inject, it } from 'vitest';
import { LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET } from '../deps.ts';

/** Proves the LiveKit server of the test run is real: a room is created and a WebRTC participant joins it. */
describe('LiveKit server', () => {
  it('creates a room and admits a participant connected with @livekit/rtc-node', async () => {
    const wsUrl = inject('livekitUrl');
    const httpUrl = wsUrl.replace(/^ws/, 'http');
    const rooms = new RoomServiceClient(httpUrl, LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET);
    const roomName = `smoke-${Date.now()}`;
    await rooms.createRoom({ name: roomName, emptyTimeout: 30 });
    expect((await rooms.listRooms([roomName])).map((r) => r.name)).toEqual([roomName]);

    const token = new AccessToken(LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET, { identity: 'smoke-user' });
    token.addGrant({ room: roomName, roomJoin: true, canPublish: true, canSubscribe: true });
    const room = new Room();
    await room.connect(wsUrl, await token.toJwt(), { autoSubscribe: false, dynacast: false });
    try {
      expect(room.isConnected).toBe(true);
      const participants = await rooms.listParticipants(roomName);
      expect(participants.map((p) => p.identity)).toContain('smoke-user');
    } finally {
      await room.disconnect();
      await rooms.deleteRoom(roomName);
    }
  });
});
