import sharp from 'sharp';
import { encodeWav } from '../../../render/encode/index.ts';

/** Small real media files for asset tests, made on the spot. */

export async function png(width = 8, height = 8): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background: { r: 200, g: 40, b: 90 } } })
    .png()
    .toBuffer();
}

export async function jpeg(width = 8, height = 8): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background: { r: 10, g: 120, b: 200 } } })
    .jpeg()
    .toBuffer();
}

/** A PCM WAV of `dataBytes` bytes of silence (mono, 16 kHz, 16-bit). */
export function wav(dataBytes = 3200): Buffer {
  return encodeWav(new Int16Array(dataBytes / 2), 16_000);
}

/** The head of an MP4 (an ftyp box, isom brand) followed by `padding` bytes: enough to sniff as video/mp4. */
export function mp4(padding = 1024): Buffer {
  const ftyp = Buffer.alloc(24);
  ftyp.writeUInt32BE(24, 0);
  ftyp.write('ftyp', 4);
  ftyp.write('isom', 8);
  ftyp.writeUInt32BE(512, 12);
  ftyp.write('isomiso2', 16);
  const free = Buffer.alloc(8 + padding);
  free.writeUInt32BE(8 + padding, 0);
  free.write('free', 4);
  return Buffer.concat([ftyp, free]);
}

export const pdf = () =>
  Buffer.from('%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n');

export interface Part {
  name: string;
  value: string | Buffer;
  filename?: string;
  contentType?: string;
}

/** A multipart/form-data body and its Content-Type. */
export function multipart(parts: Part[]): { body: Buffer; contentType: string } {
  const boundary = `----test${Math.random().toString(36).slice(2)}`;
  const chunks: Buffer[] = [];
  for (const p of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"`;
    if (p.filename !== undefined) head += `; filename="${p.filename}"`;
    head += '\r\n';
    if (p.contentType) head += `Content-Type: ${p.contentType}\r\n`;
    chunks.push(
      Buffer.from(`${head}\r\n`),
      Buffer.isBuffer(p.value) ? p.value : Buffer.from(p.value),
      Buffer.from('\r\n'),
    );
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}
