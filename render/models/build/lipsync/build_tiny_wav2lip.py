"""Build render/models/lipsync/tiny_wav2lip.onnx: a small, untrained model of
the neural lip-sync contract (render/lipsync/contract.ts), so the slot is
exercised end to end without downloadable weights.

    /tmp/synthvenv/bin/python render/models/build/lipsync/build_tiny_wav2lip.py
    (same requirements as render/models/build/synth/requirements.txt)

Contract (Wav2Lip's own tensors):
  mel   float32 [N,1,80,16]   normalised log-mel window (Wav2Lip's audio.melspectrogram), values in [-4,4]
  face  float32 [N,6,96,96]   channels 0..2: the target face crop with its lower half zeroed,
                              3..5: a reference crop of the same face; BGR in [0,1] like Wav2Lip
  out   float32 [N,3,96,96]   the face crop with the mouth for this audio, BGR in [0,1]

The network: a 2-level conv encoder of the face (96 -> 48 -> 24), an audio
encoder (conv + global average) added as a bias at the bottleneck, a 2-level
decoder back to 96, and a residual on the reference frame:
out = clip(reference + 0.1 * tanh(decoder / 4), 0, 1). Weights are seeded random
(no training): the output is the reference face plus a small audio-dependent
change, which is what the tests need (shape, range, dependence on both inputs).
Also writes render/lipsync/fixtures/bad_output.onnx, a model with the right
inputs but a 48x48 output, which the slot must refuse.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'synth'))
from onnx_dsl import Graph  # noqa: E402

rng = np.random.default_rng(20240607)


def conv(g, x, cin, cout, k=3, stride=1):
    w = (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
    b = np.zeros(cout, np.float32)
    return g.op('Conv', x, g.const(w), g.const(b), kernel_shape=[k, k], strides=[stride, stride],
                pads=[k // 2] * 4)


def up2(g, x):
    return g.op('Resize', x, None, g.const(np.asarray([1, 1, 2, 2], np.float32)), mode='nearest')


def build(out_size: int = 96) -> onnx.ModelProto:
    g = Graph('tiny_wav2lip', opset=17)
    mel = g.input('mel', [None, 1, 80, 16])
    face = g.input('face', [None, 6, 96, 96])
    e1 = conv(g, face, 6, 16, stride=2).relu()    # 48
    e2 = conv(g, e1, 16, 32, stride=2).relu()     # 24
    a1 = conv(g, mel, 1, 16, stride=2).relu()     # 40x8
    a2 = conv(g, a1, 16, 8, stride=2)             # 20x4, linear: keeps spectral differences
    fc = (rng.standard_normal((8 * 20 * 4, 32)) * np.sqrt(1.0 / (8 * 20 * 4))).astype(np.float32)
    a = g.op('MatMul', a2.reshape([0, -1]), g.const(fc)).reshape([0, 32, 1, 1])  # dense: keeps where in the spectrum
    h = e2 + a * 4.0  # let the audio matter visibly
    d1 = conv(g, up2(g, h), 32, 16).relu()        # 48
    d2 = conv(g, up2(g, d1), 16, 3)               # 96
    ref = g.op('Slice', face, g.const(np.asarray([3], np.int64)), g.const(np.asarray([6], np.int64)),
               g.const(np.asarray([1], np.int64)))
    out = (ref + g.op('Tanh', d2 * 0.25) * 0.1).clip(0.0, 1.0)
    if out_size != 96:
        out = g.op('Resize', out, None, g.const(np.asarray([1, 1, out_size / 96, out_size / 96], np.float32)),
                   mode='linear')
    g.output(out, 'out', [None, 3, out_size, out_size])
    return g.model(doc='Untrained model of the avatar-platform neural lip-sync contract (Wav2Lip tensors).')


def main() -> None:
    root = os.path.normpath(os.path.join(HERE, '..', '..', '..'))
    path = os.path.join(root, 'models', 'lipsync', 'tiny_wav2lip.onnx')
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(build(), path)
    print(f'wrote {path} ({os.path.getsize(path)} bytes)')
    bad = os.path.join(root, 'lipsync', 'fixtures', 'bad_output.onnx')
    os.makedirs(os.path.dirname(bad), exist_ok=True)
    onnx.save(build(out_size=48), bad)
    print(f'wrote {bad} ({os.path.getsize(bad)} bytes)')


if __name__ == '__main__':
    main()
