import { VAD, VADEventType, type VADEvent, type VADStream } from '@livekit/agents';
import { describe, expect, it } from 'vitest';
import { finishedSentence, GatedVAD, TurnGate } from './end-of-turn.ts';
import { INTERRUPTION } from './turns.ts';

describe('a finished sentence', () => {
  it('ends the turn sooner on questions, statements and short answers', () => {
    for (const text of [
      'What is a compiler?',
      'Can you explain recursion to me?',
      'Tell me a story.',
      'Thank you.',
      'That is great!',
      'Yes.',
      'No, not really.',
      'I see.',
      'I would like to know about the weather on Mars.',
      'what time is it',
      '"Really?"',
      'Where do bugs come from?',
      'What does a linker do?',
      'Where am I?',
      'What is this?',
      'What is it like?',
      'Can you tell me?',
      'So where is it from?',
      'I like it. What is it for?',
    ])
      expect(finishedSentence(text), text).toBe(true);
  });

  it('waits out a pause after words that leave the sentence open, but for a question that may end on them', () => {
    for (const text of [
      'I would like to know',
      'I would like to know.',
      'Tell me what a compiler is',
      'and',
      'I went to the store and',
      'Can you tell me',
      'Can you tell me.',
      'What about the',
      'I think',
      'So, um',
      'It is a bit like,',
      'Well...',
      'I was wondering if…',
      'My favourite colour is —',
      'Could you',
      'Where do bugs come from',
      'Where do bugs come from.',
      'Is it the?',
      'Tell me what a compiler is?',
      'I wonder what it is?',
      'Tea and?',
      'So, um?',
      '',
      '   ',
    ])
      expect(finishedSentence(text), JSON.stringify(text)).toBe(false);
  });
});

/** A VAD whose stream yields the events given (calling `onYield` with each one's index), then ends. */
function scriptedVad(events: Partial<VADEvent>[], onYield?: (i: number) => void): VAD {
  const full = events.map((e): VADEvent => ({
    type: VADEventType.INFERENCE_DONE,
    samplesIndex: 0,
    timestamp: 0,
    speechDuration: 0,
    silenceDuration: 0,
    frames: [],
    probability: 0,
    inferenceDuration: 1,
    speaking: false,
    rawAccumulatedSilence: 0,
    rawAccumulatedSpeech: 0,
    ...e,
  }));
  return new (class extends VAD {
    label = 'scripted';
    stream(): VADStream {
      let i = 0;
      return {
        next: async () => {
          // A VAD's events come apart in time: what the test does between two of them is done.
          await new Promise((r) => setImmediate(r));
          if (i >= full.length) return { done: true, value: undefined };
          onYield?.(i);
          return { done: false, value: full[i++]! };
        },
        close() {},
      } as unknown as VADStream;
    }
  })({ updateInterval: 32 });
}

const speech = (type: VADEventType, silenceDuration = 0) => ({ type, silenceDuration });
/** The silences of the defaults: a question 200 ms, another finished sentence 300, any other turn 700. */
const SILENCES = { questionMs: 200, finishedMs: 300, openMs: 700 };
const silence = (ms: number) => speech(VADEventType.INFERENCE_DONE, ms);
const START = speech(VADEventType.START_OF_SPEECH);

/** The starts and ends of speech the gated VAD reports, with the silence of each end. */
async function reported(gate: TurnGate, events: Partial<VADEvent>[], onYield?: (i: number) => void): Promise<string[]> {
  const out: string[] = [];
  const stream = new GatedVAD(scriptedVad(events, onYield), gate, SILENCES).stream();
  for (;;) {
    const r = await stream.next();
    if (r.done) return out;
    if (r.value.type === VADEventType.START_OF_SPEECH) out.push('start');
    if (r.value.type === VADEventType.END_OF_SPEECH) out.push(`end ${r.value.silenceDuration}`);
  }
}

/** A backchannel's transcription: no words. */
const NONE = () => ({ alternatives: [] });

/** A gate whose last transcription said `words`, asked for after the user started speaking. */
async function heard(words: string, language = 'en'): Promise<TurnGate> {
  const gate = new TurnGate(language);
  gate.speechStarted();
  await gate.transcribe(async () => ({ alternatives: [{ text: words }] }), NONE);
  return gate;
}

describe('the turn gate', () => {
  const END = speech(VADEventType.END_OF_SPEECH, 200);

  it('ends the turn after the shortest silence when the words ask a question', async () => {
    expect(await reported(await heard('What is a compiler?'), [END, silence(232)])).toEqual(['end 200']);
  });

  it('ends the turn after the short silence when the words finish another sentence', async () => {
    const events = [END, silence(232), silence(264), silence(296), silence(328), silence(360)];
    expect(await reported(await heard('Tell me a story.'), events)).toEqual(['end 328']);
  });

  it('holds an unfinished sentence until the long silence has passed in the audio', async () => {
    const events = [END, silence(332), silence(500), silence(690), silence(722), silence(754)];
    expect(await reported(await heard('I would like to know'), events)).toEqual(['end 722']);
  });

  it('takes a pause the user ends as no end at all: the start and the held end both dropped', async () => {
    const gate = await heard('I would like to know');
    const events = [START, END, silence(332), silence(450), START, silence(0), END, silence(264), silence(328)];
    // The second end, after "about the weather on Mars." (its stretch transcribed once the user went on).
    const out = await reported(gate, events, (i) => {
      if (i === 5) void gate.transcribe(async () => ({ alternatives: [{ text: 'about the weather on Mars.' }] }), NONE);
    });
    expect(out).toEqual(['start', 'end 328']);
  });

  it('waits for words still out, and for words of the last stretch, not an earlier one', async () => {
    const gate = await heard('What is a compiler?');
    gate.speechStarted(); // the user went on: nothing asked for since
    expect(gate.finished()).toBe(false);
    let answer!: (v: { alternatives: { text: string }[] }) => void;
    const out = gate.transcribe(() => new Promise<{ alternatives: { text: string }[] }>((r) => (answer = r)), NONE);
    expect(gate.finished()).toBe(false);
    answer({ alternatives: [{ text: 'And a linker?' }] });
    await out;
    expect(gate.finished()).toBe(true);
  });

  it('waits the long silence in any language its rules do not know', async () => {
    const gate = await heard("Qu'est-ce qu'un compilateur ?", 'fr');
    expect(gate.finished()).toBe(false);
  });
});

describe('a backchannel over the avatar', () => {
  /**
   * Silero's reports of 32 ms windows scored `scores`, as it makes them: speaking from the window
   * after the first two voiced ones (its minimum speech), a START_OF_SPEECH then.
   */
  function windows(scores: number[]): Partial<VADEvent>[] {
    const out: Partial<VADEvent>[] = [];
    let voiced = 0;
    let speaking = false;
    scores.forEach((probability, i) => {
      out.push({ type: VADEventType.INFERENCE_DONE, timestamp: i * 32, probability, speaking });
      voiced = probability > 0.5 ? voiced + 1 : 0;
      if (!speaking && voiced >= 2) {
        speaking = true;
        out.push(START);
      }
    });
    return out;
  }
  /** What the gated VAD reports as the speech duration while the user speaks (agents-js interrupts on it). */
  async function voiceReported(gate: TurnGate, events: Partial<VADEvent>[]): Promise<number[]> {
    const out: number[] = [];
    const stream = new GatedVAD(scriptedVad(events), gate, SILENCES).stream();
    for (let r = await stream.next(); !r.done; r = await stream.next())
      if (r.value.type === VADEventType.INFERENCE_DONE && r.value.speaking) out.push(r.value.speechDuration);
    return out;
  }
  const transcribed = async (gate: TurnGate) => {
    let asked = false;
    const ev = await gate.transcribe(async () => {
      asked = true;
      return { alternatives: [{ text: 'Mm-hmm.' }] };
    }, NONE);
    return { asked, words: ev.alternatives[0]?.text ?? '' };
  };

  it('happy: counts the voice heard, not the scores fading after it nor the silence, so a 250 ms "mm-hmm" stays under the interruption threshold', async () => {
    const gate = new TurnGate('en');
    gate.avatarSpeaking = true;
    // As Silero scored 250 ms of "Yeah" in a call: 8 voiced windows, then 0.63, 0.52 on the way down.
    const out = await voiceReported(
      gate,
      windows([0.01, 0.96, 0.98, 0.99, 1, 1, 1, 1, 1, 0.63, 0.52, 0.4, 0.18, 0.07]),
    );
    expect(Math.max(...out)).toBe(256);
    expect(Math.max(...out)).toBeLessThan(INTERRUPTION.minDuration);
    expect(gate.backchannel()).toBe(true);
    expect(await transcribed(gate)).toEqual({ asked: false, words: '' });
  });

  it('happy: speech with short pauses counts whole, and stops the avatar once its voice reaches the threshold', async () => {
    const gate = new TurnGate('en');
    gate.avatarSpeaking = true;
    // "Stop, please.": a short word, a 128 ms pause (still speech to the VAD), then more words.
    const scores = [0.9, 0.95, 1, 1, 1, 0.3, 0.1, 0.1, 0.2, 0.9, 1, 1, 1, 1, 1, 1, 1, 1];
    const out = await voiceReported(gate, windows(scores));
    expect(out).toEqual([64, 96, 128, 128, 128, 128, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416]);
    // The 14th window of it (448 ms in) stops the avatar.
    expect(out.findIndex((ms) => ms >= INTERRUPTION.minDuration)).toBe(14);
    expect(gate.backchannel()).toBe(false);
    expect(await transcribed(gate)).toEqual({ asked: true, words: 'Mm-hmm.' });
  });

  it('error: short speech while the avatar is silent is a turn, transcribed as any other', async () => {
    const gate = new TurnGate('en');
    await voiceReported(gate, windows([0.9, 0.95, 1, 1, 0.1]));
    gate.avatarSpeaking = true; // it began answering after the user began
    expect(gate.backchannel()).toBe(false);
    expect(await transcribed(gate)).toEqual({ asked: true, words: 'Mm-hmm.' });
  });
});
