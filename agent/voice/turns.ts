/**
 * Turn-taking of a call's voice: when the user's turn ends, and what of the user's voice stops the
 * avatar. Two rules, each tested on the real LiveKit server (agent/turn-taking.realtime.test.ts):
 *
 * - a pause of up to PAUSE_KEPT_MS inside an utterance is never the end of the turn. agents-js ends
 *   a turn (VAD mode) once the silence since the VAD last heard speech reaches the longer of the
 *   turn VAD's own silence (AGENT_TURN_END_MS) and the endpointing delay; that silence must
 *   outlast the pause, the fading end of the word before it (which the VAD already counts as
 *   silence) and the time the VAD takes to hear the user resume (pauseSafeEndpointing). At a
 *   VAD silence of 550 ms alone a 450 ms pause between two recorded phrases ended the turn;
 * - the user's speech over the avatar stops it as soon as the VAD hears it (barge-in).
 *
 * A backchannel ("mm-hmm", a cough) over the avatar stops it too, for now. agents-js's
 * `minDuration` cannot tell it from speech: Silero's speech duration runs on through the 550 ms of
 * silence after it. Requiring 300 ms of voice without a break (the VAD's `minSpeechDuration`) while
 * the avatar speaks let a 250 ms "mm-hmm" pass in agent/turn-taking.realtime.test.ts, but "Stop,
 * please. Stop talking now." then stopped the avatar only after 1.5 s (one run, on a machine at load 32): its first words are shorter
 * than that, with breaks between them.
 */

/** A pause inside an utterance this long or shorter never ends the user's turn. */
export const PAUSE_KEPT_MS = 450;

/**
 * What the VAD counts as silence beyond a pause: the fading end of the word before it (below its
 * speech threshold while still audible), and the time it takes to report that speech resumed (its
 * minimum speech, 50 ms, in 32 ms windows, and the inference), with slack for a busy machine.
 */
const VAD_TAIL_MS = 100;
const RESUME_HEARD_MS = 150;

/** The least silence that may end a turn. */
export const TURN_END_SILENCE_MS = PAUSE_KEPT_MS + VAD_TAIL_MS + RESUME_HEARD_MS;

/**
 * Interruption settings of the voice agent (agents-js turnHandling.interruption): `minDuration` is
 * in milliseconds (it was given as 0.4, meaning 0.4 s, and so meant any speech at all: kept so; not 0,
 * which the VAD's reports outside speech, with a duration of 0, would meet). `resumeFalseInterruption`
 * off: resuming needs an audio output that can pause, which the avatar's is not (agents-js ignored it,
 * with a warning on every call).
 */
export const INTERRUPTION = { mode: 'vad', minDuration: 1, resumeFalseInterruption: false } as const;

/**
 * The endpointing delay to use for a wanted one: a turn ends after the longer of the VAD's silence
 * and this delay, so it is raised to TURN_END_SILENCE_MS where both are shorter. Every setting of
 * either goes through here, so none can break the pause rule.
 */
export function pauseSafeEndpointing(o: { vadSilenceMs: number; minDelayMs: number }): number {
  return o.vadSilenceMs >= TURN_END_SILENCE_MS ? o.minDelayMs : Math.max(o.minDelayMs, TURN_END_SILENCE_MS);
}
