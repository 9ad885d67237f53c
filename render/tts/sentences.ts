/**
 * Speech from text that arrives in pieces (an LLM's streamed reply): whole sentences are cut off
 * as soon as their end is seen, and each is synthesized while the previous one is being consumed,
 * so the first audio is ready after the first sentence rather than after the whole reply.
 */
import { TtsError } from './errors.ts';
import type { FliteEngine } from './flite.ts';
import {
  checkRequest,
  sharedEngine,
  splitSentences,
  synthesize,
  type SynthesisChunk,
  type SynthesisResult,
  type SynthesizeRequest,
} from './synth.ts';

/** Where a sentence may end: . ! ? ; : followed by white space, or a line break (as splitSentences). */
const BOUNDARY = /[.!?;:]\s+|\n+/g;

/**
 * Cuts streamed text into sentences: `push` returns the sentences completed by the new text,
 * `flush` the rest at the end. Sentences are those of `splitSentences` (a run longer than
 * `maxChars` without an end is cut at a comma or a space), so streamed and whole text split alike.
 */
export class SentenceSplitter {
  private buffer = '';

  constructor(private readonly maxChars = 240) {}

  push(text: string): string[] {
    this.buffer += text;
    let end = -1;
    for (const m of this.buffer.matchAll(BOUNDARY)) end = m.index + m[0].length;
    if (end >= 0) {
      // Everything up to the last boundary is whole; what follows may still grow.
      const done = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end);
      return splitSentences(done, this.maxChars);
    }
    if (this.buffer.length > this.maxChars) {
      // A long run without an end: every piece but the last is final.
      const parts = splitSentences(this.buffer, this.maxChars);
      if (parts.length > 1) {
        const last = parts.pop()!;
        this.buffer = this.buffer.slice(this.buffer.lastIndexOf(last));
        return parts;
      }
    }
    return [];
  }

  /** The sentences left at the end of the text. */
  flush(): string[] {
    const rest = splitSentences(this.buffer, this.maxChars);
    this.buffer = '';
    return rest;
  }
}

/** The sentences of a stream of text pieces, each as soon as it is complete. */
export async function* sentencesOf(pieces: AsyncIterable<string>, maxChars = 240): AsyncGenerator<string> {
  const splitter = new SentenceSplitter(maxChars);
  for await (const piece of pieces) yield* splitter.push(piece);
  yield* splitter.flush();
}

/**
 * Speaks sentences as they come: each one synthesized while the caller consumes the previous one.
 * Chunks are back to back (`offsetSeconds` is the sum of the durations before). A sentence with
 * nothing speakable (TtsError empty_text after folding to ASCII) is skipped; any other error, and
 * an error of `sentences` itself, is thrown when the caller asks for the chunk it stopped.
 */
export async function* synthesizeSentences(
  sentences: AsyncIterable<string> | Iterable<string>,
  req: Omit<SynthesizeRequest, 'text'> = {},
  engine: FliteEngine = sharedEngine(),
): AsyncGenerator<SynthesisChunk> {
  const source: AsyncIterator<string> | Iterator<string> =
    Symbol.asyncIterator in sentences
      ? sentences[Symbol.asyncIterator]()
      : (sentences as Iterable<string>)[Symbol.iterator]();
  type Next = { text: string; result: SynthesisResult } | null;
  const following = async (): Promise<Next> => {
    for (;;) {
      const n = await source.next();
      if (n.done) return null;
      try {
        return { text: n.value, result: await synthesize({ ...req, text: n.value }, engine) };
      } catch (err) {
        if (err instanceof TtsError && err.code === 'empty_text') continue;
        throw err;
      }
    }
  };
  const ahead = (): Promise<Next> => {
    const p = following();
    p.catch(() => undefined); // handled when awaited
    return p;
  };
  let offset = 0;
  let next = ahead();
  try {
    for (;;) {
      const cur = await next;
      if (!cur) return;
      next = ahead();
      yield { ...cur.result, text: cur.text, offsetSeconds: offset };
      offset += cur.result.durationSeconds;
    }
  } finally {
    // Not awaited: a source waiting for its next piece (an LLM) is stopped by its own signal.
    const closing = source.return?.();
    if (closing instanceof Promise) closing.catch(() => undefined);
  }
}

/**
 * Streaming synthesis of a whole text: sentence by sentence, so the first audio is ready after the
 * first sentence (tens to a few hundred milliseconds) rather than after the whole text. The next
 * sentence is synthesized while the caller consumes the current one. Phone times are relative to
 * each chunk. The text is checked first (TtsError: empty_text, text_too_long, unknown_voice, invalid_speed).
 */
export async function* synthesizeStream(
  req: SynthesizeRequest,
  engine: FliteEngine = sharedEngine(),
): AsyncGenerator<SynthesisChunk> {
  const { text, voice, speed } = checkRequest(req);
  yield* synthesizeSentences(splitSentences(text), { voice, speed }, engine);
}
