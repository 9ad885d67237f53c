/**
 * The end of the user's turn (turns.ts): a finished sentence ends it after a short silence; a
 * trailing "and", "the", "I would like to know" waits out a pause. Whether the words finish a
 * sentence is decided by rules over the transcript's last words, not a learned model: offline,
 * instant, and one a reviewer can read. English only: in any other language every turn waits the
 * long, pause-safe silence.
 */
import { VAD, VADEventType, type VADEvent, type VADStream } from '@livekit/agents';
import { VOICE_TO_INTERRUPT_MS } from './turns.ts';

/**
 * Words that leave a sentence open when it ends on them: conjunctions, prepositions, articles
 * and other determiners, auxiliaries and modals, subject pronouns, fillers, and verbs that ask
 * for what follows ("I want", "I think", "I would like to know").
 */
const OPEN_ENDINGS = new Set(
  [
    // conjunctions and relatives
    'and or but so because if then than that which who whom whose when where while although though unless until since as whether nor yet',
    // prepositions
    'to of in on at for with about from by into onto over under between through like after before without around across against during toward towards upon',
    // determiners
    'a an the my your his her our their its this these those some any every each no another either neither such what whatever',
    // auxiliaries and modals
    'is are was were am be been being do does did have has had can could will would shall should may might must',
    "i we they he she i'm you're we're they're it's there's that's let's",
    // fillers
    'um uh er erm hmm mm well',
    // verbs that ask for a complement
    'know think wonder want wanted need guess mean hope wish believe feel try trying going gonna wanna tell ask say',
  ]
    .join(' ')
    .split(' '),
);

/**
 * A direct question (its last sentence opens with a question word or an inverted auxiliary, after
 * at most one word like "so" or "and") often ends on a word of those: "Where do bugs come from?",
 * "What does a linker do?", "Where am I?", "What is this?". An STT model writes the question mark
 * from the voice's rise, so such a question is finished after any word but these. Not a request
 * or a statement with a rise: "Tell me what a compiler is?" may go on ("... and why it is useful").
 */
const OPEN_EVEN_ASKED = new Set(
  'and or but nor because although though unless a an the my your our their um uh er erm hmm mm'.split(' '),
);
const QUESTION_OPENERS = new Set(
  'what where when why who whom whose which how is are was were am do does did can could will would shall should may might must have has had'.split(
    ' ',
  ),
);

/** "tell me", "show us": a request that names who, not yet what. */
const ASKING_VERBS = new Set(['tell', 'show', 'give', 'ask', 'let', 'help', 'teach', 'remind']);

/** Punctuation that leaves a sentence open: a comma, a colon, a dash, an ellipsis. */
const OPEN_PUNCTUATION = /(?:[,;:\-–—]|\.\.\.|…)$/;

/** Whether `text` ends in a question mark (closing quotes or brackets after it aside). */
function asksQuestion(text: string): boolean {
  return /\?["')\]]*$/.test(text.trim());
}

/** The lowercase words of `text`, punctuation stripped. */
function wordsOf(text: string): string[] {
  return text
    .toLowerCase()
    .replace(/[’]/g, "'")
    .split(/\s+/)
    .map((w) => w.replace(/^[^a-z0-9']+|[^a-z0-9']+$/g, ''))
    .filter((w) => w !== '');
}

/** Whether the last sentence of `text` is a direct question ("So where is it from?"), see QUESTION_OPENERS. */
function directQuestion(text: string): boolean {
  if (!asksQuestion(text)) return false;
  const [first, second] = wordsOf(
    text
      .trim()
      .split(/(?<=[.!?])\s+/)
      .at(-1) ?? '',
  );
  return QUESTION_OPENERS.has(first ?? '') || QUESTION_OPENERS.has(second ?? '');
}

/** Whether `text`, as a speech-to-text model wrote it, reads as a finished English sentence. */
export function finishedSentence(text: string): boolean {
  const t = text.trim();
  if (t === '' || OPEN_PUNCTUATION.test(t)) return false;
  const words = wordsOf(t);
  const last = words.at(-1);
  if (last === undefined) return false;
  if (directQuestion(t) && !OPEN_EVEN_ASKED.has(last)) return true;
  if (OPEN_ENDINGS.has(last)) return false;
  if ((last === 'me' || last === 'us') && ASKING_VERBS.has(words.at(-2) ?? '')) return false;
  // A closed last word: a question or an exclamation is done; so is a statement that the model
  // closed with a full stop, or one of a few words that came without punctuation.
  return /[.?!]["')\]]*$/.test(t) || words.length >= 3;
}

/**
 * What the turn's VAD needs to know of the transcription: whether the words of the stretch of
 * speech that just ended are back, and whether they finish a sentence. The STT's VAD cuts the
 * stretch sooner than the turn's (turns.ts), so by the time the turn is weighed its transcription
 * has been asked for; until it is back, and whenever its words leave the sentence open, the turn
 * waits the long silence.
 */
export class TurnGate {
  private started = 0;
  private pending = 0;
  private startedAtSpeech = 0;
  private lastWords = '';
  /** Whether the avatar speaks now (the voice agent's state), and did when the user's speech began. */
  avatarSpeaking = false;
  private startedOverAvatar = false;
  /** The voice heard of the user's speech so far (ms): its VAD windows scored as surely speech (VOICED_PROBABILITY). */
  private voiceMs = 0;

  constructor(private readonly language: string) {}

  /**
   * Runs one transcription of the STT, noting it out until its words are back; a backchannel's
   * (turns.ts) is not run: `none` answers it, with no words.
   */
  async transcribe<T extends { alternatives?: { text: string }[] }>(work: () => Promise<T>, none: () => T): Promise<T> {
    this.started++;
    this.pending++;
    try {
      const ev = this.backchannel() ? none() : await work();
      this.lastWords = ev.alternatives?.[0]?.text ?? '';
      return ev;
    } finally {
      this.pending--;
    }
  }

  /** The user speaks (again): the words that end the turn will be those of a transcription asked for after this. */
  speechStarted(): void {
    this.startedAtSpeech = this.started;
    this.startedOverAvatar = this.avatarSpeaking;
  }

  /**
   * One window of the VAD's: `ms` of voice heard in it (0: none), and whether the VAD counts the
   * user as speaking. Answers the voice heard of the speech so far; silence outside speech starts
   * the count anew.
   */
  window(ms: number, speaking: boolean): number {
    if (ms > 0) this.voiceMs += ms;
    else if (!speaking) this.voiceMs = 0;
    return this.voiceMs;
  }

  /** Whether the speech the user has made is a backchannel: short, and begun over the avatar. */
  backchannel(): boolean {
    return this.startedOverAvatar && this.voiceMs < VOICE_TO_INTERRUPT_MS;
  }

  /** Whether the turn may end after a short silence: its last words are back, and finish a sentence. */
  finished(): boolean {
    return (
      this.language === 'en' &&
      this.started > this.startedAtSpeech &&
      this.pending === 0 &&
      finishedSentence(this.lastWords)
    );
  }

  /** Whether the last words ask a question: finished, they end the turn after the shortest silence. */
  asked(): boolean {
    return asksQuestion(this.lastWords);
  }

  /** Whether a transcription is still out. */
  get waiting(): boolean {
    return this.pending > 0;
  }
}

/**
 * A window the VAD scores this likely speech is voice. Its threshold of speech (0.5) is crossed on
 * the way down as well, for about 60 ms after a sound ends: a 250 ms sound would count 350 ms.
 */
const VOICED_PROBABILITY = 0.7;

/** How long past the long silence a turn waits for a transcription still out before it ends anyway. */
const TRANSCRIPT_WAIT_MS = 3000;

/** The silences (ms, in the audio) after which a question, another finished sentence, and any other turn end. */
export interface TurnEndSilences {
  questionMs: number;
  finishedMs: number;
  openMs: number;
}

/**
 * The turn's VAD: Silero's, reporting the end of speech after the shortest silence, held back by
 * the gate until the words finish a sentence and its silence (a question's or another's) has
 * passed, or the long silence has. Both are counted in the
 * audio itself (the VAD's own silence count), so a busy machine that runs the VAD late ends no turn
 * sooner: a pause the user ends is heard before the long silence has passed, in audio time, and the
 * held end of speech is dropped with the start of speech that ended the pause.
 */
export class GatedVAD extends VAD {
  readonly label: string;

  constructor(
    private readonly inner: VAD,
    private readonly gate: TurnGate,
    private readonly silences: TurnEndSilences,
  ) {
    super(inner.capabilities);
    this.label = `gated(${inner.label})`;
    inner.on('metrics_collected', (m) => this.emit('metrics_collected', m));
  }

  stream(): VADStream {
    return new GatedVADStream(this.inner.stream(), this.gate, this.silences) as unknown as VADStream;
  }

  override async close(): Promise<void> {
    await this.inner.close();
  }
}

/** The inner stream's events, an end of speech held back while the gate says the turn goes on. */
class GatedVADStream implements AsyncIterableIterator<VADEvent> {
  private held: VADEvent | undefined;
  /** The audio time of the last window (ms). */
  private lastWindowAt: number | undefined;
  private readonly ready: VADEvent[] = [];

  constructor(
    private readonly inner: VADStream,
    private readonly gate: TurnGate,
    private readonly silences: TurnEndSilences,
  ) {}

  updateInputStream(...args: Parameters<VADStream['updateInputStream']>): void {
    this.inner.updateInputStream(...args);
  }
  detachInputStream(): void {
    this.inner.detachInputStream();
  }
  pushFrame(frame: Parameters<VADStream['pushFrame']>[0]): void {
    this.inner.pushFrame(frame);
  }
  flush(): void {
    this.inner.flush();
  }
  endInput(): void {
    this.inner.endInput();
  }
  close(): void {
    this.inner.close();
  }

  async next(): Promise<IteratorResult<VADEvent>> {
    for (;;) {
      const ev = this.ready.shift();
      if (ev) return { done: false, value: ev };
      const r = await this.inner.next();
      if (r.done) {
        // The input ended with the end of speech held: it is an end all the same.
        if (this.held) this.ready.push(this.release(this.held.silenceDuration, this.held.inferenceDuration));
        else return r;
      } else this.take(r.value);
    }
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  private take(ev: VADEvent): void {
    switch (ev.type) {
      case VADEventType.START_OF_SPEECH:
        this.gate.speechStarted();
        // The user went on before the turn ended: a pause, not an end, for whoever reads the events.
        if (this.held) this.held = undefined;
        else this.ready.push(ev);
        return;
      case VADEventType.END_OF_SPEECH:
        if (this.mayEnd(ev.silenceDuration)) this.ready.push(ev);
        else this.held = ev;
        return;
      case VADEventType.INFERENCE_DONE: {
        // agents-js interrupts the avatar on the speech duration: the voice heard, not the
        // silence after it (turns.ts, the backchannel).
        const windowMs = this.lastWindowAt === undefined ? 0 : ev.timestamp - this.lastWindowAt;
        this.lastWindowAt = ev.timestamp;
        const voiceMs = this.gate.window(ev.probability >= VOICED_PROBABILITY ? windowMs : 0, ev.speaking);
        this.ready.push(ev.speaking ? { ...ev, speechDuration: voiceMs } : ev);
        // After an end of speech, Silero's silence count goes on in the audio.
        if (this.held && this.mayEnd(ev.silenceDuration))
          this.ready.push(this.release(ev.silenceDuration, ev.inferenceDuration));
        return;
      }
      default:
        this.ready.push(ev);
    }
  }

  private mayEnd(silenceMs: number): boolean {
    const { questionMs, finishedMs, openMs } = this.silences;
    if (this.gate.finished()) return silenceMs >= (this.gate.asked() ? questionMs : finishedMs);
    return silenceMs >= openMs && (!this.gate.waiting || silenceMs >= openMs + TRANSCRIPT_WAIT_MS);
  }

  /** The held end of speech, with the silence it has now (agents-js dates the end of speech from it). */
  private release(silenceDuration: number, inferenceDuration: number): VADEvent {
    const ev = { ...this.held!, silenceDuration, inferenceDuration };
    this.held = undefined;
    return ev;
  }
}
