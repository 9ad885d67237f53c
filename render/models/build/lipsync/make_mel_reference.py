"""Write render/lipsync/fixtures/mel_reference.json: Wav2Lip's mel spectrogram
(audio.py + hparams.py, computed with librosa and scipy as Wav2Lip does) of a
test signal that mel.test.ts regenerates in closed form, so the TypeScript
front-end is checked against the reference implementation.

    /tmp/synthvenv/bin/pip install librosa==0.10.2.post1 scipy
    /tmp/synthvenv/bin/python render/models/build/lipsync/make_mel_reference.py

librosa 0.10 is called with pad_mode='reflect', the default of the librosa 0.7
that Wav2Lip pins.
"""
import json
import os

import librosa
import numpy as np
from scipy import signal

SR = 16000


def test_signal(n: int = 8000) -> np.ndarray:
    t = np.arange(n, dtype=np.float64) / SR
    x = 0.5 * np.sin(2 * np.pi * 220 * t) + 0.25 * np.sin(2 * np.pi * (300 + 3000 * t) * t)
    x[n * 3 // 4:] *= 0.001  # a quiet tail, to reach the clipping floor
    return x.astype(np.float32)


def wav2lip_mel(wav: np.ndarray) -> np.ndarray:
    y = signal.lfilter([1, -0.97], [1], wav)
    D = librosa.stft(y=y, n_fft=800, hop_length=200, win_length=800, pad_mode='reflect')
    mel_basis = librosa.filters.mel(sr=SR, n_fft=800, n_mels=80, fmin=55, fmax=7600)
    S = np.dot(mel_basis, np.abs(D))
    S = 20 * np.log10(np.maximum(1e-5, S)) - 20
    return np.clip((2 * 4) * ((S + 100) / 100) - 4, -4, 4)


def main() -> None:
    mel = wav2lip_mel(test_signal())
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'lipsync', 'fixtures', 'mel_reference.json')
    with open(os.path.normpath(out), 'w') as f:
        json.dump({'samples': 8000, 'bands': mel.shape[0], 'frames': mel.shape[1],
                   'librosa': librosa.__version__, 'mel': [round(float(v), 4) for v in mel.reshape(-1)]}, f)
    print('wrote', os.path.normpath(out), mel.shape)


if __name__ == '__main__':
    main()
