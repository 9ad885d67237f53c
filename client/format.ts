/**
 * Constants of the avatar turn-stream mux ("AVMX"), shared by the reader in this package and the
 * writer on the server (render/encode/mux.ts). The byte layout is documented in docs/mux-format.md.
 *
 * Browser-safe: only Uint8Array, DataView and TextEncoder/TextDecoder.
 */

/** "AVMX" in ASCII: the first four bytes of every stream. */
export const MUX_MAGIC = new Uint8Array([0x41, 0x56, 0x4d, 0x58]);
/** Readers accept exactly this major version; a different one is a breaking change. */
export const MUX_VERSION_MAJOR = 1;
/** Minor versions only add things old readers may ignore (record types, trailing fields, codecs). */
export const MUX_VERSION_MINOR = 0;

/** Magic (4) + u16 major + u16 minor. */
export const PREAMBLE_SIZE = 8;
/** u8 type, u8 flags, u16 track, u32 payload length, u32 CRC-32. */
export const RECORD_HEADER_SIZE = 12;
/** Size of one track descriptor in the v1.0 header record. */
export const TRACK_DESCRIPTOR_SIZE = 24;

export const RecordType = {
  HEADER: 0x01,
  AUDIO: 0x02,
  VIDEO: 0x03,
  EVENT: 0x04,
  END: 0x05,
  ERROR: 0x06,
} as const;

/** Record flag bits. */
export const RecordFlag = {
  /** Video: the frame decodes on its own (always set for jpeg and i420). */
  KEYFRAME: 0x01,
} as const;

export const TrackKind = { AUDIO: 1, VIDEO: 2 } as const;

export const AudioCodecId = { pcm_s16le: 1, opus: 2 } as const;
export const VideoCodecId = { jpeg: 1, i420: 2 } as const;
export type KnownAudioCodec = keyof typeof AudioCodecId;
export type KnownVideoCodec = keyof typeof VideoCodecId;

export function audioCodecName(id: number): string {
  for (const [name, v] of Object.entries(AudioCodecId)) if (v === id) return name;
  return `unknown_${id}`;
}

export function videoCodecName(id: number): string {
  for (const [name, v] of Object.entries(VideoCodecId)) if (v === id) return name;
  return `unknown_${id}`;
}

/** Bytes of one I420 frame: a full-size Y plane and two chroma planes of ceil(w/2) x ceil(h/2). */
export function i420Size(width: number, height: number): number {
  return width * height + 2 * ((width + 1) >> 1) * ((height + 1) >> 1);
}

/** Fixed prefix of each record payload, by type (bytes before the codec data / JSON). */
export const AUDIO_PREFIX_SIZE = 12; // u64 pts, u32 sample count
export const VIDEO_PREFIX_SIZE = 8; // u64 pts
export const EVENT_PREFIX_SIZE = 13; // u64 pts, u32 duration, u8 name length

const CRC_TABLE = makeCrcTables();

function makeCrcTables(): Uint32Array {
  // Slicing-by-4 tables for the IEEE 802.3 polynomial (the CRC-32 of zlib, PNG, gzip).
  const t = new Uint32Array(4 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  for (let n = 0; n < 256; n++) {
    let c = t[n]!;
    for (let k = 1; k < 4; k++) {
      c = t[c & 0xff]! ^ (c >>> 8);
      t[k * 256 + n] = c >>> 0;
    }
  }
  return t;
}

/**
 * Continues a CRC-32 (IEEE, as zlib's crc32) over `bytes`. Start with `crc = 0`; feed pieces in
 * order: crc32(b, crc32(a)) === crc32(a ++ b).
 */
export function crc32(bytes: Uint8Array, crc = 0): number {
  const t = CRC_TABLE;
  let c = ~crc >>> 0;
  let i = 0;
  const n = bytes.length;
  const end4 = n - (n & 3);
  for (; i < end4; i += 4) {
    c ^= bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24);
    c = t[768 + (c & 0xff)]! ^ t[512 + ((c >>> 8) & 0xff)]! ^ t[256 + ((c >>> 16) & 0xff)]! ^ t[c >>> 24]!;
  }
  for (; i < n; i++) c = t[(c ^ bytes[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}

export function writeU64(view: DataView, offset: number, value: number): void {
  view.setUint32(offset, value % 0x1_0000_0000, true);
  view.setUint32(offset + 4, Math.floor(value / 0x1_0000_0000), true);
}

/** Reads a little-endian u64; returns -1 when it does not fit a safe integer. */
export function readU64(view: DataView, offset: number): number {
  const lo = view.getUint32(offset, true);
  const hi = view.getUint32(offset + 4, true);
  if (hi >= 0x20_0000) return -1;
  return hi * 0x1_0000_0000 + lo;
}
