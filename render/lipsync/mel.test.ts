/**
 * The TypeScript mel front-end against Wav2Lip's own (librosa + scipy),
 * precomputed in fixtures/mel_reference.json by
 * render/models/build/lipsync/make_mel_reference.py.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  createFftPlan,
  fft,
  frameAudioSpan,
  MEL_BANDS,
  MEL_WINDOW_FRAMES,
  melSpectrogram,
  melWindow,
  melWindowOfAudio,
} from './mel.ts';

const ref = JSON.parse(readFileSync(new URL('./fixtures/mel_reference.json', import.meta.url), 'utf8')) as {
  samples: number;
  bands: number;
  frames: number;
  mel: number[];
};

/** The same closed-form signal as make_mel_reference.py. */
function testSignal(n: number): Float32Array {
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const t = i / 16000;
    let v = 0.5 * Math.sin(2 * Math.PI * 220 * t) + 0.25 * Math.sin(2 * Math.PI * (300 + 3000 * t) * t);
    if (i >= Math.floor((n * 3) / 4)) v *= 0.001;
    x[i] = v;
  }
  return x;
}

describe('mel front-end (Wav2Lip)', () => {
  it('computes the FFT of a non-power-of-two size like a plain DFT', () => {
    for (const n of [800, 60, 7, 1]) {
      const plan = createFftPlan(n);
      const re = Float64Array.from({ length: n }, (_, i) => Math.sin(i * 0.37) + (i % 5) * 0.1);
      const im = Float64Array.from({ length: n }, (_, i) => Math.cos(i * 0.11));
      const oRe = new Float64Array(n);
      const oIm = new Float64Array(n);
      fft(plan, re, im, oRe, oIm);
      for (const k of [0, 1, Math.floor(n / 3), n - 1].filter((v) => v < n)) {
        let sr = 0;
        let si = 0;
        for (let j = 0; j < n; j++) {
          const a = (-2 * Math.PI * j * k) / n;
          sr += re[j]! * Math.cos(a) - im[j]! * Math.sin(a);
          si += re[j]! * Math.sin(a) + im[j]! * Math.cos(a);
        }
        expect(oRe[k]).toBeCloseTo(sr, 6);
        expect(oIm[k]).toBeCloseTo(si, 6);
      }
    }
  });

  it('matches librosa/scipy (Wav2Lip audio.melspectrogram) on a test signal', () => {
    const mel = melSpectrogram(testSignal(ref.samples));
    expect(mel.frames).toBe(ref.frames);
    expect(mel.data.length).toBe(ref.bands * ref.frames);
    let max = 0;
    for (let i = 0; i < mel.data.length; i++) max = Math.max(max, Math.abs(mel.data[i]! - ref.mel[i]!));
    expect(max).toBeLessThan(2e-3); // values span [-4, 4]
    expect(Math.min(...mel.data)).toBe(-4); // the quiet tail reaches the floor
  });

  it('cuts the 80x16 window of a video frame as Wav2Lip does', () => {
    const mel = melSpectrogram(testSignal(ref.samples)); // 41 frames = 0.5 s
    const w = melWindow(mel, 5, 25); // start = floor(80 * 5 / 25) = 16
    expect(w.length).toBe(MEL_BANDS * MEL_WINDOW_FRAMES);
    expect(w[0]).toBe(mel.data[16]);
    expect(w[3 * 16 + 2]).toBe(mel.data[3 * mel.frames + 18]);
    const last = melWindow(mel, 12, 25); // start 38 runs past 41: the last 16 frames
    expect(last[0]).toBe(mel.data[41 - 16]);
    const short = melWindow(melSpectrogram(new Float32Array(800)), 0, 25); // 5 frames, padded with silence
    expect(short[15]).toBe(-4);
    expect(() => melWindow(mel, -1, 25)).toThrow(RangeError);
  });

  it("computes a frame's window from the audio around it as from the whole recording's spectrogram (a live call's frames)", () => {
    // Two seconds of a voice-like signal below 4 kHz, as 16-bit samples at the timeline's rate.
    const signal = (rate: number) =>
      Int16Array.from({ length: 2 * rate }, (_, i) => {
        const t = i / rate;
        return Math.round(
          9000 *
            (Math.sin(2 * Math.PI * 190 * t) +
              0.5 * Math.sin(2 * Math.PI * 1300 * t) * Math.sin(2 * Math.PI * 3 * t) +
              0.3 * Math.sin(2 * Math.PI * 2700 * t * (1 + t / 4))),
        );
      });
    const at16k = signal(16000);
    const whole = melSpectrogram(Float32Array.from(at16k, (v) => v / 32768));
    const around = (pcm: Int16Array, rate: number, frame: number) => {
      const { start, length } = frameAudioSpan(frame, 25, rate);
      return Int16Array.from({ length }, (_, k) => pcm[start + k] ?? 0);
    };
    for (const frame of [3, 10, 31]) {
      // At 16 kHz: the same samples, the same window.
      const mine = melWindowOfAudio({ pcm: around(at16k, 16000, frame), sampleRate: 16000, frame, fps: 25 });
      const ref = melWindow(whole, frame, 25);
      for (let i = 0; i < mine.length; i++) expect(mine[i]).toBeCloseTo(ref[i]!, 4);
      // At 24 kHz (a live call's rate), resampled on the way: the same within the resampler's error.
      const at24k = melWindowOfAudio({ pcm: around(signal(24000), 24000, frame), sampleRate: 24000, frame, fps: 25 });
      let max = 0;
      for (let i = 0; i < at24k.length; i++) max = Math.max(max, Math.abs(at24k[i]! - ref[i]!));
      expect(max).toBeLessThan(0.05); // values span [-4, 4]
    }
    // Every frame reads as much audio at a rate; too little is refused.
    expect(new Set([0, 1, 2, 7, 250].map((f) => frameAudioSpan(f, 25, 24000).length)).size).toBe(1);
    expect(() => melWindowOfAudio({ pcm: new Int16Array(100), sampleRate: 24000, frame: 3, fps: 25 })).toThrow(/reads/);
  });
});
