import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { initializeLogger, type voice } from '@livekit/agents';
import { describe, expect, it, vi } from 'vitest';
import type { Logger } from '../../core/platform/log.ts';
import { takeUserAudioInFrames } from './user-audio.ts';

initializeLogger({ pretty: false, level: 'fatal' });

const log = () =>
  ({ warn: vi.fn(), info: vi.fn(), debug: vi.fn() }) as unknown as Logger & { warn: ReturnType<typeof vi.fn> };
const sessionWith = (audio: unknown) => ({ input: { audio } }) as unknown as voice.AgentSession;

/** agents-js's own room audio input class, from the installed package (not exported: read from its file). */
async function roomAudioInputClass(): Promise<new (o: object) => object> {
  const entry = createRequire(import.meta.url).resolve('@livekit/agents');
  const file = path.join(path.dirname(entry), 'voice', 'room_io', '_input.js');
  return ((await import(pathToFileURL(file).href)) as { ParticipantAudioInputStream: new (o: object) => object })
    .ParticipantAudioInputStream;
}

describe("the user's audio frames", () => {
  it("replaces the stream factory of the installed agents-js's room input, which still has the shape it relies on", async () => {
    const Input = await roomAudioInputClass();
    const original = (Input.prototype as { createStream: unknown }).createStream;
    const input = new Input({ room: { on: () => undefined }, sampleRate: 16_000, numChannels: 1 });
    const l = log();
    expect(takeUserAudioInFrames(sessionWith(input), 30, l)).toBe(true);
    expect((Input.prototype as { createStream: unknown }).createStream).not.toBe(original);
    expect(l.warn).not.toHaveBeenCalled();
  });

  it("reopens a stream that was already open, so the user's track too comes in the larger frames", () => {
    class Open {
      sampleRate = 16_000;
      numChannels = 1;
      track = { sid: 'TR_1' };
      publication = { sid: 'TR_1' };
      createStream() {
        return new ReadableStream();
      }
      updateStream = vi.fn();
    }
    const input = new Open();
    expect(takeUserAudioInFrames(sessionWith(input), 30, log())).toBe(true);
    expect(input.updateStream).toHaveBeenCalledWith(input.track, input.publication);
  });

  it('leaves an input it does not know as it is, and says so', () => {
    const unknown = { stream: new ReadableStream() };
    const l = log();
    expect(takeUserAudioInFrames(sessionWith(unknown), 30, l)).toBe(false);
    expect(l.warn).toHaveBeenCalledOnce();
    expect(unknown).toEqual({ stream: expect.any(ReadableStream) });
  });

  it('changes nothing at 10 ms, the frames agents-js opens by itself', () => {
    const updateStream = vi.fn();
    const input = {
      sampleRate: 16_000,
      numChannels: 1,
      track: {},
      publication: {},
      createStream: vi.fn(),
      updateStream,
    };
    expect(takeUserAudioInFrames(sessionWith(input), 10, log())).toBe(false);
    expect(updateStream).not.toHaveBeenCalled();
  });
});
