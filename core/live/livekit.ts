/**
 * What the API asks of the LiveKit server: create and delete a call's room (and see and remove who
 * is in it), dispatch the agent worker into it, mint the user's token, verify webhooks. One instance
 * per process, built only when LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET are set.
 */
import {
  AccessToken,
  AgentDispatchClient,
  RoomServiceClient,
  ServerError,
  TrackSource,
  WebhookReceiver,
  type WebhookEvent,
} from 'livekit-server-sdk';
import type { Config } from '../platform/config.ts';

/** Each LiveKit API call gives up after this long (seconds): a mint must not hang on a dead server. */
const REQUEST_TIMEOUT_SECONDS = 5;

export interface RoomOptions {
  /** Seconds the room waits for its first participant, and lingers once empty after that. */
  emptyTimeoutSeconds: number;
  departureTimeoutSeconds: number;
  maxParticipants: number;
}

export class LiveKit {
  /** Where clients connect (the grant's server_url). */
  readonly serverUrl: string;
  private readonly rooms: RoomServiceClient;
  private readonly dispatches: AgentDispatchClient;
  private readonly receiver: WebhookReceiver;

  constructor(
    /** `agentName`: whom `dispatchAgent` dispatches (the API's gateway; the worker's dispatches no one). */
    private readonly o: { url: string; publicUrl?: string; apiKey: string; apiSecret: string; agentName?: string },
  ) {
    const http = o.url.replace(/^ws/, 'http');
    const options = { requestTimeout: REQUEST_TIMEOUT_SECONDS, failover: false };
    this.rooms = new RoomServiceClient(http, o.apiKey, o.apiSecret, options);
    this.dispatches = new AgentDispatchClient(http, o.apiKey, o.apiSecret, options);
    this.receiver = new WebhookReceiver(o.apiKey, o.apiSecret);
    this.serverUrl = o.publicUrl ?? o.url;
  }

  /** The server's gateway, or undefined when LiveKit is not configured. */
  static fromConfig(config: Config): LiveKit | undefined {
    if (!config.LIVEKIT_URL || !config.LIVEKIT_API_KEY || !config.LIVEKIT_API_SECRET) return undefined;
    return new LiveKit({
      url: config.LIVEKIT_URL,
      publicUrl: config.LIVEKIT_PUBLIC_URL,
      apiKey: config.LIVEKIT_API_KEY,
      apiSecret: config.LIVEKIT_API_SECRET,
      agentName: config.AGENT_NAME,
    });
  }

  /**
   * Whether the server answers an authenticated call (a list of one room name that no call uses, so
   * the answer stays small whatever runs): what the API's readiness check asks of LiveKit.
   */
  async ping(): Promise<void> {
    await this.rooms.listRooms(['readiness-probe']);
  }

  async createRoom(name: string, o: RoomOptions): Promise<void> {
    await this.rooms.createRoom({
      name,
      emptyTimeout: o.emptyTimeoutSeconds,
      departureTimeout: o.departureTimeoutSeconds,
      maxParticipants: o.maxParticipants,
    });
  }

  /** Deletes a room; a room already gone is not an error. */
  async deleteRoom(name: string): Promise<void> {
    await orNothingIfGone(this.rooms.deleteRoom(name), undefined);
  }

  /** The identities in a room now; none when the room is gone. */
  async participants(room: string): Promise<string[]> {
    return (await orNothingIfGone(this.rooms.listParticipants(room), [])).map((p) => p.identity);
  }

  /** Disconnects one participant from a room; one already gone is not an error. */
  async removeParticipant(room: string, identity: string): Promise<void> {
    await orNothingIfGone(this.rooms.removeParticipant(room, identity), undefined);
  }

  /** Dispatches the agent worker (AGENT_NAME) into a room with the call's session id: exactly `{"session_id":"ses_..."}`. */
  async dispatchAgent(room: string, sessionId: string): Promise<void> {
    if (!this.o.agentName) throw new Error('this LiveKit gateway was built without an agent name to dispatch');
    await this.dispatches.createDispatch(room, this.o.agentName, {
      metadata: JSON.stringify({ session_id: sessionId }),
    });
  }

  /**
   * The user's token: join this room only, publish the microphone only (no camera, no screen
   * share), subscribe, send data. Valid `ttlSeconds` to connect; LiveKit refreshes a connected
   * participant's token itself, so a call may outlive it.
   */
  async userToken(room: string, identity: string, ttlSeconds: number): Promise<string> {
    const at = new AccessToken(this.o.apiKey, this.o.apiSecret, { identity, ttl: ttlSeconds });
    at.addGrant({
      room,
      roomJoin: true,
      canPublish: true,
      canPublishSources: [TrackSource.MICROPHONE],
      canSubscribe: true,
      canPublishData: true,
    });
    return at.toJwt();
  }

  /** A webhook as LiveKit signed it; throws when the signature is missing or wrong. */
  receiveWebhook(body: string, authorization: string | undefined): Promise<WebhookEvent> {
    return this.receiver.receive(body, authorization);
  }
}

/** What a LiveKit call answers, or `gone` when the server answers that its room or participant does not exist. */
async function orNothingIfGone<T, G>(call: Promise<T>, gone: G): Promise<T | G> {
  try {
    return await call;
  } catch (err) {
    if (err instanceof ServerError && (err.status === 404 || err.code === 'not_found')) return gone;
    throw err;
  }
}
