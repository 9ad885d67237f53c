import { Readable } from 'node:stream';
import { fileTypeFromBuffer } from 'file-type';
import { acceptedType, SNIFF_BYTES, type AssetKind } from './types.ts';

export interface Sniffed {
  /** The accepted kind and content type, or undefined when the bytes are of no accepted type. */
  type?: { kind: AssetKind; contentType: string };
  /** What file-type saw, for error messages ("application/pdf"). */
  detectedMime?: string;
  /** The whole stream again, the sniffed head included. */
  stream: Readable;
  /** True when the source ended within the sniffed head. */
  empty: boolean;
}

/**
 * Reads the first SNIFF_BYTES of `source`, identifies the type from the bytes (never from a
 * filename or a declared Content-Type), and gives back a stream of all the bytes. Only the head is
 * held in memory.
 */
export async function sniff(source: Readable): Promise<Sniffed> {
  const it = source[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const chunks: Buffer[] = [];
  let length = 0;
  let ended = false;
  while (length < SNIFF_BYTES) {
    const r = await it.next();
    if (r.done) {
      ended = true;
      break;
    }
    chunks.push(r.value);
    length += r.value.length;
  }
  const head = Buffer.concat(chunks);
  const detected = head.length > 0 ? await fileTypeFromBuffer(head) : undefined;
  async function* all() {
    let finished = ended;
    try {
      if (head.length) yield head;
      while (!finished) {
        const r = await it.next();
        if (r.done) finished = true;
        else yield r.value;
      }
    } finally {
      // Abandoned early (a cap, a failed upload): stop the source too.
      if (!finished) await it.return?.();
    }
  }
  return {
    type: acceptedType(detected),
    detectedMime: detected?.mime,
    stream: Readable.from(all(), { objectMode: false }),
    empty: head.length === 0,
  };
}
