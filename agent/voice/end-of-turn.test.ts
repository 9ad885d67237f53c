import { VAD, VADEventType, type VADEvent, type VADStream } from '@livekit/agents';
import { describe, expect, it } from 'vitest';
import { finishedSentence, GatedVAD, TurnGate } from './end-of-turn.ts';

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
    ])
      expect(finishedSentence(text), text).toBe(true);
  });

  it('waits out a pause after words that leave the sentence open, whatever the punctuation', () => {
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
const silence = (ms: number) => speech(VADEventType.INFERENCE_DONE, ms);
const START = speech(VADEventType.START_OF_SPEECH);

/** The starts and ends of speech the gated VAD reports, with the silence of each end. */
async function reported(gate: TurnGate, events: Partial<VADEvent>[], onYield?: (i: number) => void): Promise<string[]> {
  const out: string[] = [];
  const stream = new GatedVAD(scriptedVad(events, onYield), gate, 700).stream();
  for (;;) {
    const r = await stream.next();
    if (r.done) return out;
    if (r.value.type === VADEventType.START_OF_SPEECH) out.push('start');
    if (r.value.type === VADEventType.END_OF_SPEECH) out.push(`end ${r.value.silenceDuration}`);
  }
}

/** A gate whose last transcription said `words`, asked for after the user started speaking. */
async function heard(words: string, language = 'en'): Promise<TurnGate> {
  const gate = new TurnGate(language);
  gate.speechStarted();
  await gate.transcribe(async () => ({ alternatives: [{ text: words }] }));
  return gate;
}

describe('the turn gate', () => {
  const END = speech(VADEventType.END_OF_SPEECH, 300);

  it('ends the turn after the short silence when the words finish a sentence', async () => {
    expect(await reported(await heard('What is a compiler?'), [END, silence(332)])).toEqual(['end 300']);
  });

  it('holds an unfinished sentence until the long silence has passed in the audio', async () => {
    const events = [END, silence(332), silence(500), silence(690), silence(722), silence(754)];
    expect(await reported(await heard('I would like to know'), events)).toEqual(['end 722']);
  });

  it('takes a pause the user ends as no end at all: the start and the held end both dropped', async () => {
    const gate = await heard('I would like to know');
    const events = [START, END, silence(332), silence(450), START, silence(0), END, silence(800)];
    // The second end, after "about the weather on Mars." (its stretch transcribed once the user went on).
    const out = await reported(gate, events, (i) => {
      if (i === 5) void gate.transcribe(async () => ({ alternatives: [{ text: 'about the weather on Mars.' }] }));
    });
    expect(out).toEqual(['start', 'end 300']);
  });

  it('waits for words still out, and for words of the last stretch, not an earlier one', async () => {
    const gate = await heard('What is a compiler?');
    gate.speechStarted(); // the user went on: nothing asked for since
    expect(gate.finished()).toBe(false);
    let answer!: (v: { alternatives: { text: string }[] }) => void;
    const out = gate.transcribe(() => new Promise<{ alternatives: { text: string }[] }>((r) => (answer = r)));
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
