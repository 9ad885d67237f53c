/**
 * Turn-taking of a call's voice: when the user's turn ends, and what of the user's voice stops the
 * avatar. Five rules, each tested on the real LiveKit server (agent/turn-taking.realtime.test.ts):
 *
 * - a pause of up to PAUSE_KEPT_MS inside an unfinished sentence is never the end of the turn.
 *   agents-js ends a turn (VAD mode) once the silence since the VAD last heard speech reaches the
 *   endpointing delay; for a turn whose words leave the sentence open (end-of-turn.ts) that delay is
 *   the long one, which must outlast the pause, the fading end of the word before it (which the
 *   VAD already counts as silence) and the time the VAD takes to hear the user resume. At a VAD
 *   silence of 550 ms alone a 450 ms pause between two recorded phrases ended the turn;
 * - a finished sentence ends the turn after a short silence: a question ("What is a compiler?")
 *   after AGENT_QUESTION_TURN_MS, any other ("Tell me a story.") after AGENT_FINISHED_TURN_MS;
 *   most replies wait that, not the long one;
 * - the user's speech over the avatar stops it once the VAD has heard VOICE_TO_INTERRUPT_MS of
 *   voice in it (barge-in). agents-js interrupts once the VAD's speech duration reaches
 *   `minDuration`, but Silero's runs on through the silence after the speech (a 100 ms cough would
 *   reach any threshold below the VAD's silence); the turn's VAD (end-of-turn.ts) reports the
 *   voice heard instead: its windows scored as surely speech. Pauses inside the speech do not
 *   reset it, so "Stop, please." stops the avatar that much voice after "Stop" began;
 * - a backchannel over the avatar ("mm-hmm", a cough: a sound under BACKCHANNEL_MS) neither stops
 *   it nor becomes a turn: its words are not transcribed (the turn gate answers with none);
 * - an interruption with no words in it (a noise) holds the reply at the avatar rather than drop
 *   it: the reply plays on from where it stopped once the user has been silent a while.
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
/**
 * The `minSilenceDuration` that makes Silero report the end of speech once `ms` of silence have
 * been counted. It counts silence in its windows (32 ms: 512 samples at 16 kHz), so a setting is
 * reached in the first window at or past it (the defaults are whole windows: 96 ms is three, 192
 * six); Silero itself waits for more than its setting, which at 96 took a fourth window.
 */
export const sileroMinSilence = (ms: number): number => ms - 1;

/** How much sooner the STT's VAD reports an end of speech than the turn's, at least. */
const STT_FIRST_MS = 50;

/** The least silence that may end a turn whose sentence is not finished. */
export const TURN_END_SILENCE_MS = PAUSE_KEPT_MS + VAD_TAIL_MS + RESUME_HEARD_MS;

/** A sound over the avatar shorter than this is a backchannel: it does not stop the avatar. */
const BACKCHANNEL_MS = 300;

/**
 * The voice the turn's VAD must hear over the avatar to stop it (end-of-turn.ts counts it in
 * 32 ms windows): a sound counts up to two windows more than it lasts (where the windows fall,
 * and the model's lag), so a 250 ms "yeah" counted 224 to 288 ms in calls; this lets every
 * sound shorter than BACKCHANNEL_MS pass.
 */
export const VOICE_TO_INTERRUPT_MS = BACKCHANNEL_MS + 64;

/**
 * Interruption settings of the voice agent (agents-js turnHandling.interruption): `minDuration`
 * (milliseconds) against the voice heard, as the turn's VAD reports it. An interruption holds the
 * reply at the avatar (pauses it); one that brings no words within `falseInterruptionTimeout` of
 * the user's falling silent was a noise, and the reply plays on from where it stopped.
 */
export const INTERRUPTION = {
  mode: 'vad',
  minDuration: VOICE_TO_INTERRUPT_MS,
  resumeFalseInterruption: true,
  falseInterruptionTimeout: 1000,
} as const;

/**
 * The silences that end the user's turn, counted by the turn's VAD in the audio itself:
 * - `vadSilenceMs`: the turn's VAD reports the end of speech, and the turn is weighed; always
 *   longer than the STT's silence, so the transcription of the words that just ended is already
 *   asked for (and the detector waits for it) when the turn is weighed;
 * - `questionMs`: the silence that ends a question ("What is a compiler?"): a question hands the
 *   turn over, where a statement is often followed by another;
 * - `finishedMs`: the silence that ends any other finished sentence ("Tell me a story.");
 * - `openMs`: the silence that ends any other, raised to TURN_END_SILENCE_MS so no setting can end
 *   a turn inside a pause.
 */
export function turnSilences(o: { sttSilenceMs: number; questionMs: number; finishedMs: number; openMs: number }): {
  vadSilenceMs: number;
  questionMs: number;
  finishedMs: number;
  openMs: number;
} {
  const vadSilenceMs = Math.max(Math.min(o.questionMs, o.finishedMs), o.sttSilenceMs + STT_FIRST_MS);
  const openMs = Math.max(o.openMs, TURN_END_SILENCE_MS);
  const within = (ms: number) => Math.min(Math.max(ms, vadSilenceMs), openMs);
  return { vadSilenceMs, questionMs: within(o.questionMs), finishedMs: within(o.finishedMs), openMs };
}
