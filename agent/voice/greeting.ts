/**
 * The avatar's greeting (`settings.greeting`): synthesised while the call is set up, said as written
 * as soon as the user is there, with no STT or LLM call.
 */
import type { JobContext, voice } from '@livekit/agents';
import type { AudioFrame } from '@livekit/rtc-node';
import type { Logger } from '../../core/platform/log.ts';
import { splitClauses, type ttsFor } from './tts.ts';

/** How far ahead of real time the greeting's audio goes to the avatar (its start buffer and mouth analysis need far less). */
const GREETING_LEAD_MS = 1000;

/**
 * The greeting's audio, synthesised ahead clause by clause (the first clause is ready in tens of
 * ms, the rest while it plays). `stream()` hands it over at most GREETING_LEAD_MS ahead of real
 * time: handed all at once (a greeting of 9 s is 430 KB), its writes to the avatar's data stream and
 * their receipt there held both event loops for most of a second just as it was to start playing.
 * `ready` says once the first audio is there, or that none came (the greeting is then synthesised
 * as it is said).
 */
export function synthesizeAhead(tts: ReturnType<typeof ttsFor>, text: string, after: Promise<void>, log: Logger) {
  const frames: AudioFrame[] = [];
  let done = false;
  let waiting: (() => void)[] = [];
  const more = () => new Promise<void>((resolve) => waiting.push(resolve));
  const wake = () => {
    for (const resolve of waiting) resolve();
    waiting = [];
  };
  void (async () => {
    await after;
    for (const [clause] of splitClauses(text)) {
      for await (const audio of tts.synthesize(clause)) {
        frames.push(audio.frame);
        wake();
      }
    }
  })()
    .catch((err: unknown) =>
      log.warn({ err }, 'could not synthesise the greeting ahead; it is synthesised as it is said'),
    )
    .finally(() => {
      done = true;
      wake();
    });
  /** Resolves once the first audio is there (true), or the synthesis ended with none (false). */
  const ready = (async () => {
    while (frames.length === 0 && !done) await more();
    return frames.length > 0;
  })();
  const stream = () => {
    let next = 0;
    let startedAt = 0;
    let handedMs = 0;
    return new ReadableStream<AudioFrame>({
      async pull(controller) {
        while (next >= frames.length && !done) await more();
        if (next >= frames.length) return controller.close();
        startedAt ||= performance.now();
        // Timers may fire a fraction of a millisecond before their time: wait until it has come.
        for (let early; (early = handedMs - GREETING_LEAD_MS - (performance.now() - startedAt)) > 0;)
          await new Promise((resolve) => setTimeout(resolve, early));
        const frame = frames[next++]!;
        handedMs += (frame.samplesPerChannel / frame.sampleRate) * 1000;
        controller.enqueue(frame);
      },
    });
  };
  return { ready, stream };
}

/** Said as written as soon as the user is there: no STT, no LLM. The user may interrupt it, and is heard. */
export async function sayGreeting(
  ctx: JobContext,
  agentSession: voice.AgentSession,
  userIdentity: string | null,
  greeting: string,
  audio: ReturnType<typeof synthesizeAhead> | undefined,
  log: Logger,
): Promise<void> {
  const user = await ctx.waitForParticipant(userIdentity ?? undefined).catch(() => undefined);
  if (!user) return;
  const ahead = audio && (await audio.ready) ? audio : undefined;
  agentSession.say(greeting, { allowInterruptions: true, ...(ahead ? { audio: ahead.stream() } : {}) });
  log.info({ preSynthesized: Boolean(ahead) }, 'greeting said');
}
