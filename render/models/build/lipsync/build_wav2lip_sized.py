"""Build an untrained model with the size and the layers of Wav2Lip's generator (about 36 M weights,
96-pixel faces), with the interface of its reference export (dynamic batch), to measure what the
neural slot costs per frame on a device (render/lipsync/device-bench.ts) without anyone's weights.

    python3 render/models/build/lipsync/build_wav2lip_sized.py /tmp/wav2lip_sized.onnx

Not a fixture (about 140 MB, seeded random weights, written where asked). The layers, as the
Wav2Lip paper's generator has them: every block a 3x3 convolution (batch norm folded in, as an
inference export has it) and a ReLU, residual within a stage; a face encoder from 6x96x96 down to
512x1x1 (16, 32, 64, 128, 256, 512 channels), an audio encoder from the 1x80x16 mel to 512x1x1, and a
decoder of transposed convolutions back to 96x96, each stage concatenated with the face encoder's
stage of the same size, then a sigmoid over 3 channels. The output means nothing; its cost is the
point.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'synth'))
from onnx_dsl import Graph, concat  # noqa: E402


class Builder:
    def __init__(self, g: Graph, seed: int):
        self.g = g
        self.rng = np.random.default_rng(seed)
        self.weights = 0

    def conv(self, x, cin, cout, k, stride=(1, 1), pad=1, residual=False, transpose=False, out_pad=0, act=True):
        shape = (cin, cout, k, k) if transpose else (cout, cin, k, k)
        w = (self.rng.standard_normal(shape) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
        self.weights += w.size + cout
        attrs = dict(kernel_shape=[k, k], strides=list(stride), pads=[pad] * 4)
        if transpose:
            attrs['output_padding'] = [out_pad, out_pad]
        y = self.g.op('ConvTranspose' if transpose else 'Conv', x, self.g.const(w),
                      self.g.const(np.zeros(cout, np.float32)), **attrs)
        if residual:
            y = y + x
        return y.relu() if act else y


def build(seed: int = 7) -> tuple[onnx.ModelProto, int]:
    g = Graph('wav2lip_sized', opset=11)
    b = Builder(g, seed)
    mel = g.input('audio_sequences', [None, 1, 80, 16])
    face = g.input('face_sequences', [None, 6, 96, 96])

    # Face encoder: 96 -> 1, a feature map kept at each size for the decoder.
    stages = [(6, 16, 7, 1, 3, 0), (16, 32, 3, 2, 1, 2), (32, 64, 3, 2, 1, 3), (64, 128, 3, 2, 1, 2),
              (128, 256, 3, 2, 1, 2), (256, 512, 3, 2, 1, 1)]
    feats = []
    x = face
    for cin, cout, k, s, p, res in stages:
        x = b.conv(x, cin, cout, k, (s, s), p)
        for _ in range(res):
            x = b.conv(x, cout, cout, 3, residual=True)
        feats.append(x)                                   # 96, 48, 24, 12, 6, 3
    x = b.conv(x, 512, 512, 3, pad=0)                     # 1
    x = b.conv(x, 512, 512, 1, pad=0)
    feats.append(x)

    # Audio encoder: 80x16 -> 1x1.
    a = mel
    for cin, cout, s, res in [(1, 32, (1, 1), 2), (32, 64, (3, 1), 2), (64, 128, (3, 3), 2), (128, 256, (3, 2), 1)]:
        a = b.conv(a, cin, cout, 3, s, 1)
        for _ in range(res):
            a = b.conv(a, cout, cout, 3, residual=True)
    a = b.conv(a, 256, 512, 3, pad=0)
    a = b.conv(a, 512, 512, 1, pad=0)

    # Decoder: 1 -> 96, each stage joined with the face encoder's of its size.
    y = b.conv(a, 512, 512, 1, pad=0)
    y = concat([y, feats[-1]], 1)                         # 1024 x 1
    plan = [(1024, 512, 1, 0, 0, 1), (1024, 512, 2, 1, 1, 2), (768, 384, 2, 1, 1, 2), (512, 256, 2, 1, 1, 2),
            (320, 128, 2, 1, 1, 2), (160, 64, 2, 1, 1, 2)]
    for i, (cin, cout, s, p, op, res) in enumerate(plan):
        y = b.conv(y, cin, cout, 3, (s, s), p, transpose=True, out_pad=op)
        for _ in range(res):
            y = b.conv(y, cout, cout, 3, residual=True)
        y = concat([y, feats[-2 - i]], 1)                 # with the face's 3, 6, 12, 24, 48, 96
    y = b.conv(y, 80, 32, 3)
    out = b.conv(y, 32, 3, 1, pad=0, act=False).sigmoid()
    g.output(out, 'output', [None, 3, 96, 96])
    return g.model(doc='Untrained, Wav2Lip-sized stand-in (avatar-platform device bench); no weights of anyone.'), b.weights


if __name__ == '__main__':
    model, weights = build()
    onnx.checker.check_model(model, full_check=True)
    path = sys.argv[1] if len(sys.argv) > 1 else 'wav2lip_sized.onnx'
    onnx.save(model, path)
    print(f'{path}: {weights / 1e6:.1f} M weights, {os.path.getsize(path) / 1e6:.0f} MB')
