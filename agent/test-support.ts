/**
 * What the agent's tests share: an avatar's idle loop in storage, a LiveKit participant that
 * watches the avatar like a user (frames, audio, the sync marker), and tokens.
 */
import { readFile, readdir } from 'node:fs/promises';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AudioStream, Room, RoomEvent, TrackKind, VideoBufferType, VideoStream, type RemoteTrack } from '@livekit/rtc-node';
import { AccessToken } from 'livekit-server-sdk';
import type { ObjectStorage } from '../core/storage/index.ts';
import { generateIdleLoop, preparePortrait, writeMotion } from '../render/generate/index.ts';

export const DEV_KEY = 'devkey';
export const DEV_SECRET = 'secret';
export const PORTRAIT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../render/rig/fixtures/grace_hopper.jpg');

/** Renders an idle loop of the test portrait into storage; returns its frame-cache key. */
export async function storeIdleLoop(storage: ObjectStorage, key: string, seconds = 4): Promise<string> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'agent-loop-'));
  const idle = await generateIdleLoop(await preparePortrait(await readFile(PORTRAIT)), { seed: 'agent-test', seconds });
  await writeMotion(idle, { cacheDir: path.join(dir, 'cache') });
  for (const f of await readdir(path.join(dir, 'cache'))) {
    await storage.put(`${key}/${f}`, await readFile(path.join(dir, 'cache', f)), { contentType: 'application/octet-stream' });
  }
  return key;
}

export async function token(room: string, identity: string, opts: { agent?: boolean; attributes?: Record<string, string> } = {}): Promise<string> {
  const at = new AccessToken(DEV_KEY, DEV_SECRET, { identity, ...(opts.attributes ? { attributes: opts.attributes } : {}) });
  if (opts.agent) at.kind = 'agent';
  at.addGrant({ room, roomJoin: true, canPublish: true, canSubscribe: true, canPublishData: true });
  return at.toJwt();
}

export interface SeenFrame {
  /** Arrival time at the viewer, ms (performance.now()). */
  at: number;
  width: number;
  height: number;
  /** The sync marker (top-left square) is white. */
  marker: boolean;
  /** Mean luma of the mouth region (a box around the frame's lower middle). */
  mouthLuma: number;
}

export interface HeardChunk {
  at: number;
  /** Mean absolute amplitude. */
  level: number;
  samples: number;
}

/** A participant watching the avatar as a user would: every frame and audio chunk it receives, with arrival times. */
export class Viewer {
  readonly room = new Room();
  readonly frames: SeenFrame[] = [];
  readonly audio: HeardChunk[] = [];
  private readonly loops: Promise<void>[] = [];

  constructor(private readonly watch: string) {}

  async join(url: string, roomName: string, identity: string): Promise<void> {
    this.room.on(RoomEvent.TrackSubscribed, (track, _pub, p) => {
      if (p.identity !== this.watch) return;
      this.loops.push(track.kind === TrackKind.KIND_VIDEO ? this.readVideo(track) : this.readAudio(track));
    });
    await this.room.connect(url, await token(roomName, identity), { autoSubscribe: true, dynacast: false });
  }

  private async readVideo(track: RemoteTrack): Promise<void> {
    for await (const ev of new VideoStream(track)) {
      const rgba = ev.frame.convert(VideoBufferType.RGBA);
      const { width, height, data } = rgba;
      const px = (x: number, y: number) => {
        const i = (y * width + x) * 4;
        return 0.299 * data[i]! + 0.587 * data[i + 1]! + 0.114 * data[i + 2]!;
      };
      let mouth = 0;
      let n = 0;
      for (let y = Math.round(height * 0.62); y < Math.round(height * 0.78); y += 2) {
        for (let x = Math.round(width * 0.38); x < Math.round(width * 0.62); x += 2) {
          mouth += px(x, y);
          n++;
        }
      }
      this.frames.push({ at: performance.now(), width, height, marker: px(12, 12) > 128, mouthLuma: mouth / n });
    }
  }

  private async readAudio(track: RemoteTrack): Promise<void> {
    for await (const frame of new AudioStream(track, { sampleRate: 24_000, numChannels: 1, frameSizeMs: 10 })) {
      let sum = 0;
      for (const v of frame.data) sum += Math.abs(v);
      this.audio.push({ at: performance.now(), level: sum / frame.data.length, samples: frame.data.length });
    }
  }

  /** Frames per second received over the last `ms`. */
  fps(sinceMs: number, untilMs = performance.now()): number {
    const n = this.frames.filter((f) => f.at >= sinceMs && f.at < untilMs).length;
    return (n * 1000) / (untilMs - sinceMs);
  }

  async leave(): Promise<void> {
    await this.room.disconnect();
  }
}

/** Onsets (rising edges) in a timed boolean signal: times where it turns true after `minOff` ms of false. */
export function onsets(points: { at: number; on: boolean }[], minOffMs = 150): number[] {
  const out: number[] = [];
  let lastOn = -Infinity;
  for (const p of points) {
    if (p.on) {
      if (p.at - lastOn > minOffMs) out.push(p.at);
      lastOn = p.at;
    }
  }
  return out;
}
