/** Every RigError code, from inputs a user could really upload. */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { DEFAULT_RIG_LIMITS, RigError, detectFaceRig } from './index.ts';
import type { RigErrorCode } from './index.ts';

const fixture = (name: string): string => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
const ASTRONAUT = fixture('astronaut.jpg');
const HOPPER = fixture('grace_hopper.jpg');
const SLOW = { timeout: 60_000 };

async function refusal(input: Buffer | string, options?: Parameters<typeof detectFaceRig>[1]): Promise<RigError> {
  try {
    await detectFaceRig(input, options);
  } catch (err) {
    expect(err).toBeInstanceOf(RigError);
    const e = err as RigError;
    expect(e.message.length).toBeGreaterThan(20); // something a person can read
    return e;
  }
  throw new Error('expected a RigError, got a rig');
}

async function expectRefused(input: Buffer | string, code: RigErrorCode): Promise<RigError> {
  const e = await refusal(input);
  expect(e.code).toBe(code);
  return e;
}

/** A minimal PNG whose header claims the given size (the pixel data is never reached). */
function pngHeader(width: number, height: number): Buffer {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf: Buffer): number => {
    let c = 0xffffffff;
    for (const b of buf) c = crcTable[(c ^ b) & 0xff]! ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer): Buffer => {
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const out = Buffer.alloc(body.length + 8);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(crc(body), body.length + 4);
    return out;
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 2, 0, 0, 0], 8); // 8-bit RGB
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', Buffer.from([0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01])),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

describe('no_face', () => {
  it('refuses a plain gradient', SLOW, async () => {
    const w = 320;
    const h = 240;
    const px = Buffer.alloc(w * h * 3);
    for (let y = 0; y < h; y++) {
      for (let x = 0; x < w; x++) px.set([(x * 255) / w, (y * 255) / h, 128], (y * w + x) * 3);
    }
    const png = await sharp(px, { raw: { width: w, height: h, channels: 3 } })
      .png()
      .toBuffer();
    await expectRefused(png, 'no_face');
  });

  it('refuses a landscape photo and a texture photo', SLOW, async () => {
    await expectRefused(fixture('rocket.jpg'), 'no_face');
    await expectRefused(fixture('brick.jpg'), 'no_face');
  });
});

describe('multiple_faces', () => {
  it('refuses two portraits side by side', SLOW, async () => {
    const a = await sharp(ASTRONAUT).resize({ height: 400 }).toBuffer();
    const b = await sharp(HOPPER).resize({ height: 400 }).toBuffer();
    const bWidth = (await sharp(b).metadata()).width!;
    const both = await sharp({ create: { width: 400 + bWidth, height: 400, channels: 3, background: '#000' } })
      .composite([
        { input: a, left: 0, top: 0 },
        { input: b, left: 400, top: 0 },
      ])
      .jpeg()
      .toBuffer();
    const e = await expectRefused(both, 'multiple_faces');
    expect(e.details.faces).toBe(2);
  });

  it('does not refuse a portrait with a much smaller face beside it', SLOW, async () => {
    // The inset's face is about 40% as wide as the astronaut's (RIVAL_FACE_RATIO is 50%).
    const small = await sharp(HOPPER).resize({ height: 96 }).toBuffer();
    const img = await sharp(ASTRONAUT)
      .composite([{ input: small, left: 400, top: 400 }])
      .jpeg()
      .toBuffer();
    const rig = await detectFaceRig(img);
    expect(rig.box.x).toBeLessThan(300); // the astronaut's face, not the inset
  });
});

describe('face_too_small', () => {
  it('refuses a portrait shrunk to a thumbnail', SLOW, async () => {
    const thumb = await sharp(ASTRONAUT).resize(160).jpeg().toBuffer(); // face ~33 px
    const e = await expectRefused(thumb, 'face_too_small');
    expect(e.details.faceSizePx).toBeLessThan(DEFAULT_RIG_LIMITS.minFaceSizePx);
    expect(e.details.faceSizePx).toBeGreaterThan(20);
  });

  it('refuses a small face in a large frame', SLOW, async () => {
    const face = await sharp(HOPPER).resize({ height: 180 }).toBuffer(); // face ~60 px tall
    const frame = await sharp({ create: { width: 360, height: 300, channels: 3, background: '#c8c8c8' } })
      .composite([{ input: face, left: 100, top: 60 }])
      .png()
      .toBuffer();
    await expectRefused(frame, 'face_too_small');
  });
});

describe('extreme_pose', () => {
  it('refuses a face in near profile (the cameraman)', SLOW, async () => {
    // Upscaled so the size check passes and the pose check is what refuses.
    const big = await sharp(fixture('cameraman.jpg')).resize(1024).jpeg().toBuffer();
    const e = await expectRefused(big, 'extreme_pose');
    expect(e.details.axis).toBe('yaw');
    expect(Number(e.details.degrees)).toBeGreaterThan(35); // he faces the image's right
  });

  it('refuses a head tilted 45 degrees, and the limit is configurable', SLOW, async () => {
    const tilted = await sharp(HOPPER).rotate(45, { background: '#808080' }).png().toBuffer();
    const e = await expectRefused(tilted, 'extreme_pose');
    expect(e.details.axis).toBe('roll');
    const rig = await detectFaceRig(tilted, { limits: { maxRollDeg: 60 } });
    expect(rig.pose.roll).toBeGreaterThan(35);
  });
});

describe('invalid_image', () => {
  it('refuses bytes that are not an image', async () => {
    await expectRefused(Buffer.from('definitely not a picture, just some text'), 'invalid_image');
    const noise = Buffer.alloc(4096);
    for (let i = 0; i < noise.length; i++) noise[i] = (i * 2654435761) >>> 24;
    await expectRefused(noise, 'invalid_image');
    await expectRefused(Buffer.alloc(0), 'invalid_image');
  });

  it('refuses a truncated JPEG', async () => {
    const jpeg = readFileSync(ASTRONAUT);
    await expectRefused(jpeg.subarray(0, jpeg.length >> 1), 'invalid_image');
  });

  it('refuses a missing file', async () => {
    await expectRefused(fixture('does-not-exist.jpg'), 'invalid_image');
  });

  it('refuses absurd sizes before decoding them', async () => {
    const bomb = await expectRefused(pngHeader(100_000, 100_000), 'invalid_image');
    expect(bomb.details.width).toBe(100_000);
    await expectRefused(pngHeader(20_000, 10), 'invalid_image'); // a strip, side over the cap
    const tiny = await sharp({ create: { width: 16, height: 16, channels: 3, background: '#888' } })
      .png()
      .toBuffer();
    await expectRefused(tiny, 'invalid_image');
  });
});
