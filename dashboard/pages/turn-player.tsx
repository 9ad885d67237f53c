import { useRef, useState, type FormEvent } from 'react';
import { pcmToFloat32, type AudioTrack, type TurnStream } from '../../client/index.ts';
import { apiClient, type Session } from '../api.ts';
import { Field, FormBanner, useAction } from '../ui.tsx';

/** Seconds of the stream buffered before its first sample plays: frames render faster than real time, with jitter. */
const LEAD_SECONDS = 0.4;

interface Played {
  frames: number;
  audioSeconds: number;
}

/**
 * Plays a turn's stream as it arrives: each audio chunk scheduled on a Web Audio clock at its pts,
 * each JPEG frame drawn on the canvas when that clock reaches its pts, so picture and voice stay on
 * the stream's one clock (docs/mux-format.md).
 */
async function play(stream: TurnStream, canvas: HTMLCanvasElement, progress: (p: Played) => void): Promise<Played> {
  const ctx = new AudioContext();
  await ctx.resume();
  const g = canvas.getContext('2d')!;
  const played: Played = { frames: 0, audioSeconds: 0 };
  let clock = 16_000;
  let audio: AudioTrack | undefined;
  let start: number | undefined;
  const timers: ReturnType<typeof setTimeout>[] = [];
  let last = 0;
  for await (const r of stream) {
    if (r.type === 'header') {
      clock = r.clockRate;
      audio = r.tracks.find((t): t is AudioTrack => t.kind === 'audio');
    } else if (r.type === 'audio' && r.pcm && audio) {
      start ??= ctx.currentTime + LEAD_SECONDS;
      const frames = r.pcm.length / audio.channels;
      const buf = ctx.createBuffer(audio.channels, frames, audio.sampleRate);
      const all = pcmToFloat32(r.pcm);
      for (let ch = 0; ch < audio.channels; ch++)
        buf.copyToChannel(all.filter((_v, i) => i % audio!.channels === ch) as Float32Array<ArrayBuffer>, ch);
      const src = ctx.createBufferSource();
      src.buffer = buf;
      src.connect(ctx.destination);
      src.start(start + r.pts / clock);
      played.audioSeconds += r.duration;
      last = Math.max(last, start + r.pts / clock + r.duration);
    } else if (r.type === 'video' && r.codec === 'jpeg') {
      start ??= ctx.currentTime + LEAD_SECONDS;
      const bitmap = await createImageBitmap(new Blob([r.data as Uint8Array<ArrayBuffer>], { type: 'image/jpeg' }));
      const at = start + r.pts / clock;
      timers.push(
        setTimeout(
          () => {
            g.drawImage(bitmap, 0, 0, canvas.width, canvas.height);
            bitmap.close();
            played.frames++;
            progress({ ...played });
          },
          Math.max(0, (at - ctx.currentTime) * 1000),
        ),
      );
      last = Math.max(last, at);
    } else if (r.type === 'error') {
      throw new Error(`${r.message} (${r.code})`);
    }
  }
  // Until the last sample and frame have played.
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, (last - ctx.currentTime) * 1000) + 100));
  await ctx.close();
  return played;
}

/** A turn over HTTP: the avatar says a text (`repeat`) or answers it (`talk`, the LLM), played in the page. */
export function TurnPlayer({ session, avatarId }: { session: Session; avatarId: string }) {
  const [mode, setMode] = useState<'repeat' | 'talk'>('repeat');
  const [text, setText] = useState('');
  const [played, setPlayed] = useState<Played & { done: boolean }>({ frames: 0, audioSeconds: 0, done: false });
  const canvas = useRef<HTMLCanvasElement>(null);
  const { busy, error, run } = useAction();
  function submit(e: FormEvent) {
    e.preventDefault();
    setPlayed({ frames: 0, audioSeconds: 0, done: false });
    void run(async () => {
      const stream = await apiClient(session).realtime.turn({ avatar_id: avatarId, mode, text });
      const p = await play(stream, canvas.current!, (x) => setPlayed({ ...x, done: false }));
      setPlayed({ ...p, done: true });
    });
  }
  return (
    <form className="card" onSubmit={submit} aria-label="Turn">
      <h2>A turn over HTTP</h2>
      <p className="muted">No call: one request whose answer streams the avatar speaking, played here as it arrives.</p>
      <canvas
        ref={canvas}
        className="turn"
        width={384}
        height={384}
        data-frames={played.frames}
        data-audio-seconds={played.audioSeconds.toFixed(2)}
        data-done={played.done}
      />
      <Field label="Mode" name="mode" error={error}>
        <select name="mode" value={mode} onChange={(e) => setMode(e.target.value as 'repeat' | 'talk')}>
          <option value="repeat">repeat: it says the text</option>
          <option value="talk">talk: it answers the text</option>
        </select>
      </Field>
      <Field label="Text" name="text" error={error}>
        <input
          name="text"
          value={text}
          onChange={(e) => setText(e.target.value)}
          placeholder="Hello! Nice to meet you."
        />
      </Field>
      <FormBanner error={error} fields={['mode', 'text']} />
      <button type="submit" disabled={busy}>
        {busy ? 'Playing…' : 'Play'}
      </button>
    </form>
  );
}
