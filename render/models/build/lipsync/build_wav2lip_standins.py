"""Build render/lipsync/fixtures/*.onnx: tiny, untrained stand-ins of the Wav2Lip ONNX exports
operators bring to LIPSYNC_MODEL, with exactly their interfaces (tensor names, shapes, fixed or
dynamic batch, face size, outputs, opset), so the neural slot is tested on each contract without
shipping anyone's weights. Also the misfits the slot must refuse at start-up.

    python3 -m venv /tmp/w2lvenv && /tmp/w2lvenv/bin/pip install -r render/models/build/lipsync/requirements.txt
    /tmp/w2lvenv/bin/python render/models/build/lipsync/build_wav2lip_standins.py

Reproducible: seeded weights, fixed tensor names; a rebuild writes the same bytes (the script
builds every model twice and compares, then runs each on onnxruntime and checks its outputs).

The interfaces (all PyTorch exports of Wav2Lip.forward(audio_sequences, face_sequences); NCHW float32,
BGR in [0,1], output a sigmoid):
  wav2lip_reference.onnx   audio_sequences [N,1,80,16], face_sequences [N,6,96,96] -> output [N,3,96,96]
                           (Rudrabha's model, dynamic batch; opset 11, as torch exported it then)
  facefusion_wav2lip_96    source [1,1,80,16], target [1,6,96,96] -> output [1,3,96,96] first, then a
                           second output (FaceFusion reads outputs[0]); fixed batch 1; opset 11
  wav2lip_hq_96.onnx       mel_spectrogram [1,1,80,16], video_frames [1,6,96,96] -> output [1,3,96,96]
                           (instant-high wav2lip-onnx-HQ wav2lip.onnx / wav2lip_gan.onnx); fixed 1; opset 11
  wav2lip_hq_256.onnx      mel_spectrogram [1,1,80,16], video_frames [1,6,256,256] -> predicted_frames
                           [1,3,256,256] (instant-high wav2lip_256.onnx); fixed 1, no dynamic axes; opset 15
  wav2lip_adhoc.onnx       mel [B,1,80,16], image [B,6,96,96] -> output [B,3,96,96]; dynamic batch; opset 12
The opsets not given by the exports' authors are guesses that change nothing the slot reads.

Each stand-in: a strided conv encoder of the 6-channel face, a strided conv + dense encoder of the
mel added at the bottleneck, a conv and a transposed conv back to the face size, and the output
sigmoid(logit(reference) + 0.5 * tanh(decoder)): the reference face with an audio-dependent change,
in (0, 1) like the real models. Weights are seeded random (untrained).

Also written (rules the slot must keep, not real exports):
  face_output_second.onnx  the face output second, after a [N,8] one: the slot picks outputs by shape
  misfit_rgb_face.onnx     a 3-channel image input `x` beside the mel: refused, naming `x`
  misfit_batch4.onnx       a fixed batch of 4: refused (a batch of 1 or a dynamic one is needed)
  misfit_nonsquare.onnx    a 96x128 face: refused (the face is square)
"""
from __future__ import annotations

import os
import sys

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'synth'))
from onnx_dsl import Graph  # noqa: E402

OUT = os.path.normpath(os.path.join(HERE, '..', '..', '..', 'lipsync', 'fixtures'))
DOC = 'Untrained stand-in of a Wav2Lip ONNX export (avatar-platform tests); no weights of anyone.'


def conv(g, rng, x, cin, cout, k, stride, pad=0, transpose=False):
    shape = (cin, cout, k, k) if transpose else (cout, cin, k, k)
    fan_in = cin * k * k
    w = (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
    b = np.zeros(cout, np.float32)
    op = 'ConvTranspose' if transpose else 'Conv'
    return g.op(op, x, g.const(w), g.const(b), kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)


def standin(name: str, opset: int, mel_name: str, face_name: str, size: int, batch, outputs, seed: int) -> onnx.ModelProto:
    """batch: None (dynamic) or an int; outputs: names, the face first unless ('aux', name) comes first."""
    rng = np.random.default_rng(seed)
    g = Graph(name, opset=opset)
    mel = g.input(mel_name, [batch, 1, 80, 16])
    face = g.input(face_name, [batch, 6, size, size])
    e = conv(g, rng, face, 6, 8, 4, 4).relu()                      # size/4
    a1 = conv(g, rng, mel, 1, 8, 4, 4).relu()                      # 20x4
    a2 = conv(g, rng, a1, 8, 8, 4, 4)                              # 5x1, linear: keeps spectral differences
    fc = (rng.standard_normal((40, 8)) * np.sqrt(1.0 / 40)).astype(np.float32)
    a = g.op('MatMul', a2.reshape([0, -1]), g.const(fc)).reshape([0, 8, 1, 1])
    h = conv(g, rng, e + a * 4.0, 8, 8, 3, 1, pad=1).relu()
    d = conv(g, rng, h, 8, 3, 4, 4, transpose=True)                # back to size
    ref = g.op('Slice', face, g.const(np.asarray([3], np.int64)), g.const(np.asarray([6], np.int64)),
               g.const(np.asarray([1], np.int64)))
    r = ref.clip(0.02, 0.98)
    logit = g.op('Log', r / (1.0 - r))
    out = (logit + g.op('Tanh', d) * 0.5).sigmoid()
    for o in outputs:
        if isinstance(o, tuple):  # an auxiliary output: a pooled code of the bottleneck, [N, 8]
            g.output(h.mean([2, 3], keepdims=0), o[1], [batch, 8])
        else:
            g.output(out, o, [batch, 3, size, size])
    return g.model(doc=DOC)


def misfit_rgb_face() -> onnx.ModelProto:
    g = Graph('misfit_rgb_face', opset=12)
    mel = g.input('mel', [None, 1, 80, 16])
    x = g.input('x', [None, 3, 96, 96])
    g.output(x * mel.mean([1, 2, 3]).reshape([-1, 1, 1, 1]), 'output', [None, 3, 96, 96])
    return g.model(doc='A misfit: a 3-channel image where the 6-channel face goes.')


def misfit_shape(name: str, batch: int, h: int, w: int, doc: str) -> onnx.ModelProto:
    """Wav2Lip's inputs but for the batch or the face size: the output is the reference face."""
    g = Graph(name, opset=12)
    mel = g.input('mel', [batch, 1, 80, 16])
    face = g.input('face', [batch, 6, h, w])
    ref = g.op('Slice', face, g.const(np.asarray([3], np.int64)), g.const(np.asarray([6], np.int64)),
               g.const(np.asarray([1], np.int64)))
    g.output(ref + mel.mean([1, 2, 3]).reshape([-1, 1, 1, 1]) * 0.0, 'output', [batch, 3, h, w])
    return g.model(doc=doc)


MODELS = {
    'wav2lip_reference.onnx': lambda: standin('wav2lip_reference', 11, 'audio_sequences', 'face_sequences', 96, None,
                                              ['output'], 1),
    'facefusion_wav2lip_96.onnx': lambda: standin('facefusion_wav2lip_96', 11, 'source', 'target', 96, 1,
                                                  ['output', ('aux', 'aux')], 2),
    'wav2lip_hq_96.onnx': lambda: standin('wav2lip_hq_96', 11, 'mel_spectrogram', 'video_frames', 96, 1, ['output'], 3),
    'wav2lip_hq_256.onnx': lambda: standin('wav2lip_hq_256', 15, 'mel_spectrogram', 'video_frames', 256, 1,
                                           ['predicted_frames'], 4),
    'wav2lip_adhoc.onnx': lambda: standin('wav2lip_adhoc', 12, 'mel', 'image', 96, None, ['output'], 5),
    'face_output_second.onnx': lambda: standin('face_output_second', 12, 'mel', 'face', 96, None,
                                               [('aux', 'code'), 'face_out'], 6),
    'misfit_rgb_face.onnx': misfit_rgb_face,
    'misfit_batch4.onnx': lambda: misfit_shape('misfit_batch4', 4, 96, 96, 'A misfit: a fixed batch of 4.'),
    'misfit_nonsquare.onnx': lambda: misfit_shape('misfit_nonsquare', 1, 96, 128, 'A misfit: a face of 96x128.'),
}


def check(path: str, model: onnx.ModelProto) -> None:
    """Runs the model on onnxruntime with its declared shapes (batch 1 where dynamic) and checks every output's shape and range."""
    import onnxruntime as ort

    sess = ort.InferenceSession(path, providers=['CPUExecutionProvider'])
    rng = np.random.default_rng(0)
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        feeds[i.name] = rng.uniform(-4, 4, shape).astype(np.float32) if shape[1] == 1 else rng.uniform(0, 1, shape).astype(np.float32)
    for meta, value in zip(sess.get_outputs(), sess.run(None, feeds)):
        want = [d if isinstance(d, int) else 1 for d in meta.shape]
        assert list(value.shape) == want, f'{path}: {meta.name} is {value.shape}, declared {meta.shape}'
        assert np.isfinite(value).all(), f'{path}: {meta.name} is not finite'


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    for file, build in MODELS.items():
        model = build()
        again = build()
        assert model.SerializeToString() == again.SerializeToString(), f'{file}: two builds differ'
        path = os.path.join(OUT, file)
        onnx.save(model, path)
        check(path, model)
        print(f'wrote {path} ({os.path.getsize(path)} bytes)')


if __name__ == '__main__':
    main()
