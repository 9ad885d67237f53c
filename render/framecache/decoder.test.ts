/**
 * The frame decoder thread gives what decoding on the event loop gives, leaves the cache it reads
 * from intact, refuses what is not a JPEG, and goes on serving after a bad frame.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeJpeg, i420Size } from '../encode/index.ts';
import { createFrameDecoderThread, inProcessFrameDecoder, type FrameDecoder } from './index.ts';

const W = 64;
const H = 48;
let jpeg: Uint8Array;
let thread: FrameDecoder;

beforeAll(async () => {
  const rgba = new Uint8Array(W * H * 4);
  for (let i = 0; i < W * H; i++) rgba.set([(i * 7) % 256, (i * 3) % 256, (i * 11) % 256, 255], i * 4);
  jpeg = await encodeJpeg(rgba, W, H, { quality: 90 });
  thread = createFrameDecoderThread();
});

afterAll(() => thread?.release());

describe('frame decoder thread', () => {
  it('decodes a JPEG to the same I420 as the event loop does', async () => {
    const [a, b] = await Promise.all([thread.jpegToI420(jpeg, W, H), inProcessFrameDecoder.jpegToI420(jpeg, W, H)]);
    expect(a.length).toBe(i420Size(W, H));
    expect(Buffer.compare(Buffer.from(a), Buffer.from(b))).toBe(0);
  });

  it("leaves the cache's bytes where they are: a frame read as a view of its whole file", async () => {
    // A frame cache holds its frames in one Buffer and hands out views of it.
    const file = Buffer.concat([Buffer.alloc(100, 1), Buffer.from(jpeg), Buffer.alloc(100, 2)]);
    const view = file.subarray(100, 100 + jpeg.length);
    const frames = await Promise.all([0, 1, 2].map(() => thread.jpegToI420(view, W, H)));
    expect(frames.every((f) => f.length === i420Size(W, H))).toBe(true);
    expect(file.byteLength).toBe(jpeg.length + 200);
    expect(Buffer.compare(view, Buffer.from(jpeg))).toBe(0);
  });

  it('refuses what is not a JPEG, and decodes the next frame', async () => {
    await expect(thread.jpegToI420(new Uint8Array([1, 2, 3, 4]), W, H)).rejects.toThrow();
    expect((await thread.jpegToI420(jpeg, W, H)).length).toBe(i420Size(W, H));
  });
});
