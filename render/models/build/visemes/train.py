"""Trains the audio-to-viseme classifier and exports it as one ONNX graph: raw 16 kHz audio in, viseme
probabilities per 10 ms out. The feature extraction (STFT as a strided Conv1d, power, mel filterbank, log,
normalisation) is inside the graph, so TypeScript feeds samples and cannot compute features differently.

    python3 -m venv /tmp/visvenv && /tmp/visvenv/bin/pip install -r render/models/build/visemes/requirements.txt
    npx tsx render/models/build/visemes/gen_data.ts /tmp/visemes-data
    /tmp/visvenv/bin/python render/models/build/visemes/train.py /tmp/visemes-data render/models/visemes/audio_visemes.onnx

Data (gen_data.ts): Flite voices kal16, awb, rms (three speaking rates) and kal (8 kHz) on TRAIN_SENTENCES.
Never loaded here: the slt voice and HELDOUT_SENTENCES (evaluate.ts measures on them). Model selection (best
epoch) uses a validation split of the training sentences (every 10th sentence), never the held-out ones.

Augmentation: random gain (-12..+6 dB), white noise at 20-45 dB SNR on half the utterances, and a copy of
half the utterances resampled by 1.12-1.25 (raises pitch and formants, towards voices unlike the training ones).

Model: 25 frames of 40 log-mel bands (20 past, the current one, 4 ahead: 200 ms of context, 40 ms of
lookahead), a 2-hidden-layer MLP (256, 128, ReLU, dropout 0.2) written as Conv1d layers over time, softmax over
15 visemes. Trained with numpy (Adam, cosine learning rate, square-root-inverse-frequency class weights); no deep
learning framework needed.

Options (development): --features cep (20 cepstra instead of 40 log-mels), --vtlp all (a resampled copy of 70%
of utterances at 1.05-1.3), --pitch-data yes (kal16 at raised pitch), --exclude-voice V (train without V and
validate on it). A leave-awb-out run of all three together scored lower than the defaults (README.md).
"""

import argparse
import json
import math
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from scipy.signal import resample_poly

SR = 16000
HOP = 160
WIN = 400
NFFT = 512
NMEL = 40
PAST = 20
AHEAD = 4
K = PAST + 1 + AHEAD
H1 = 256
H2 = 128
NCLASS = 15
EPS = 1e-6
SEED = 1234
NCEP = 20
OPTS = {"features": "mel", "vtlp": "half", "exclude": None}

rng = np.random.default_rng(SEED)


def hz_to_mel(f):
    return 2595.0 * np.log10(1.0 + f / 700.0)


def mel_to_hz(m):
    return 700.0 * (10.0 ** (m / 2595.0) - 1.0)


def mel_matrix():
    """Triangular HTK-style mel filters, 40 bands from 50 Hz to 8 kHz, over the 257 rfft bins."""
    freqs = np.arange(NFFT // 2 + 1) * SR / NFFT
    pts = mel_to_hz(np.linspace(hz_to_mel(50.0), hz_to_mel(8000.0), NMEL + 2))
    m = np.zeros((NMEL, len(freqs)), dtype=np.float64)
    for b in range(NMEL):
        lo, c, hi = pts[b], pts[b + 1], pts[b + 2]
        up = (freqs - lo) / (c - lo)
        down = (hi - freqs) / (hi - c)
        m[b] = np.maximum(0.0, np.minimum(up, down))
    return m.astype(np.float32)


WINDOW = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(WIN) / WIN)).astype(np.float32)  # periodic Hann
MEL = mel_matrix()


def dct_matrix():
    """Orthonormal DCT-II rows 0..NCEP-1 over the 40 log-mel bands (cepstra: the spectral envelope without pitch harmonics)."""
    n = np.arange(NMEL)
    d = np.cos(np.pi / NMEL * (n[None, :] + 0.5) * np.arange(NCEP)[:, None]) * math.sqrt(2.0 / NMEL)
    d[0] /= math.sqrt(2.0)
    return d.astype(np.float32)


DCT = dct_matrix()


def nfeat():
    return NCEP if OPTS["features"] == "cep" else NMEL


def stft_kernels():
    """cos and sin rows of a 512-point DFT of a 400-sample Hann-windowed frame (= rfft of the zero-padded frame)."""
    n = np.arange(WIN)
    k = np.arange(NFFT // 2 + 1)[:, None]
    ang = 2 * np.pi * k * n / NFFT
    return (np.cos(ang) * WINDOW).astype(np.float32), (-np.sin(ang) * WINDOW).astype(np.float32)


COS, SIN = stft_kernels()


def pad_audio(x):
    """Left: PAST frames + half a window, so that output frame j is centred on sample j * HOP. Right: AHEAD frames + a window."""
    return np.concatenate([np.zeros(PAST * HOP + WIN // 2, np.float32), x.astype(np.float32), np.zeros(AHEAD * HOP + WIN, np.float32)])


def log_mel(xp):
    """Log-mel frames [M, 40] of padded audio, computed exactly as the ONNX graph does (same kernels, float32)."""
    m = 1 + (len(xp) - WIN) // HOP
    idx = np.arange(WIN)[None, :] + HOP * np.arange(m)[:, None]
    frames = xp[idx]  # [M, 400]
    re = frames @ COS.T
    im = frames @ SIN.T
    power = re * re + im * im  # [M, 257]
    lm = np.log(power @ MEL.T + EPS).astype(np.float32)
    return (lm @ DCT.T).astype(np.float32) if OPTS["features"] == "cep" else lm


def load(data_dir):
    rows = [json.loads(line) for line in open(Path(data_dir) / "index.jsonl")]
    return rows


def audio_of(data_dir, row):
    x = np.fromfile(Path(data_dir) / row["file"], dtype="<i2").astype(np.float32) / 32768.0
    if row["sampleRate"] != SR:
        g = math.gcd(SR, row["sampleRate"])
        x = resample_poly(x, SR // g, row["sampleRate"] // g).astype(np.float32)
    return x


def utterance(x, labels, opens):
    """(log-mel [M, 40], labels [n], opens [n]) with M = n + PAST + AHEAD (frames beyond the audio are padding)."""
    n = len(labels)
    need = (n - 1) * HOP  # output frame n-1 is centred on sample (n-1) * HOP
    if len(x) < need:
        x = np.concatenate([x, np.zeros(need - len(x), np.float32)])
    mel = log_mel(pad_audio(x))
    mel = mel[: n + PAST + AHEAD]
    assert mel.shape[0] == n + PAST + AHEAD, (mel.shape, n)
    return mel, np.asarray(labels, np.int64), np.asarray(opens, np.float32)


def augment(x, labels, opens):
    out = []
    gain = 10 ** (rng.uniform(-12, 6) / 20)
    y = x * gain
    if rng.random() < 0.5:
        snr = rng.uniform(20, 45)
        p = np.mean(y * y) + 1e-12
        y = y + rng.normal(0, math.sqrt(p / 10 ** (snr / 10)), len(y)).astype(np.float32)
    out.append((np.clip(y, -1, 1), labels, opens))
    p_copy, lo, hi = (0.7, 1.05, 1.3) if OPTS["vtlp"] == "all" else (0.5, 1.12, 1.25)
    if rng.random() < p_copy:
        # Resample by f: plays back f times faster, pitch and formants up by f. Labels follow the new time axis.
        f = rng.uniform(lo, hi)
        up = 100
        down = int(round(up * f))
        z = resample_poly(y, up, down).astype(np.float32)
        f = down / up
        n2 = int(math.floor((len(labels) - 1) / f)) + 1
        src = np.minimum(np.round(np.arange(n2) * f).astype(int), len(labels) - 1)
        out.append((np.clip(z, -1, 1), np.asarray(labels)[src], np.asarray(opens)[src]))
    return out


def build_set(data_dir, rows, train):
    mels, labs, offs = [], [], []
    total = 0
    for r in rows:
        x = audio_of(data_dir, r)
        items = augment(x, r["viseme"], r["open"]) if train else [(x, r["viseme"], r["open"])]
        for (a, l, o) in items:
            mel, lab, _ = utterance(a, l, o)
            mels.append(mel)
            labs.append(lab)
            offs.append(total)
            total += mel.shape[0]
    G = np.concatenate(mels)
    # sample index -> start row of its window in G
    starts = np.concatenate([off + np.arange(len(lab)) for off, lab in zip(offs, labs)])
    y = np.concatenate(labs)
    return G, starts, y


def windows(Gn, starts):
    """[B, F * K] features, band-major ([F, K] flattened) to match the Conv1d weight layout [H, F, K]."""
    w = Gn[starts[:, None] + np.arange(K)[None, :]]  # [B, K, F]
    return np.ascontiguousarray(w.transpose(0, 2, 1)).reshape(len(starts), Gn.shape[1] * K)


def relu(x):
    return np.maximum(x, 0)


class MLP:
    def __init__(self, nin):
        def init(a, b):
            return (rng.normal(0, math.sqrt(2.0 / a), (a, b))).astype(np.float32)

        self.p = {
            "W1": init(nin, H1), "b1": np.zeros(H1, np.float32),
            "W2": init(H1, H2), "b2": np.zeros(H2, np.float32),
            "W3": init(H2, NCLASS) * 0.1, "b3": np.zeros(NCLASS, np.float32),
        }
        self.m = {k: np.zeros_like(v) for k, v in self.p.items()}
        self.v = {k: np.zeros_like(v) for k, v in self.p.items()}
        self.t = 0

    def forward(self, x, drop=0.0):
        p = self.p
        h1 = relu(x @ p["W1"] + p["b1"])
        if drop > 0:
            h1 = h1 * (rng.random(h1.shape, dtype=np.float32) > drop) / (1 - drop)
        h2 = relu(h1 @ p["W2"] + p["b2"])
        if drop > 0:
            h2 = h2 * (rng.random(h2.shape, dtype=np.float32) > drop) / (1 - drop)
        z = h2 @ p["W3"] + p["b3"]
        return h1, h2, z

    def probs(self, x):
        z = self.forward(x)[2]
        z = z - z.max(1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(1, keepdims=True)

    def step(self, x, y, w, lr, drop, l2=1e-5):
        p = self.p
        h1, h2, z = self.forward(x, drop)
        z = z - z.max(1, keepdims=True)
        e = np.exp(z)
        pr = e / e.sum(1, keepdims=True)
        sw = w[y]
        loss = float(-(sw * np.log(pr[np.arange(len(y)), y] + 1e-9)).sum() / sw.sum())
        dz = pr
        dz[np.arange(len(y)), y] -= 1
        dz *= (sw / sw.sum())[:, None]
        g = {"W3": h2.T @ dz, "b3": dz.sum(0)}
        dh2 = (dz @ p["W3"].T) * (h2 > 0)
        g["W2"] = h1.T @ dh2
        g["b2"] = dh2.sum(0)
        dh1 = (dh2 @ p["W2"].T) * (h1 > 0)
        g["W1"] = x.T @ dh1
        g["b1"] = dh1.sum(0)
        self.t += 1
        b1, b2 = 0.9, 0.999
        for k in p:
            gk = g[k] + (l2 * p[k] if k.startswith("W") else 0)
            self.m[k] = b1 * self.m[k] + (1 - b1) * gk
            self.v[k] = b2 * self.v[k] + (1 - b2) * gk * gk
            mh = self.m[k] / (1 - b1 ** self.t)
            vh = self.v[k] / (1 - b2 ** self.t)
            p[k] -= (lr * mh / (np.sqrt(vh) + 1e-8)).astype(np.float32)
        return loss


def accuracy(model, Gn, starts, y, bs=8192):
    hit = 0
    for i in range(0, len(starts), bs):
        pr = model.probs(windows(Gn, starts[i:i + bs]))
        hit += int((pr.argmax(1) == y[i:i + bs]).sum())
    return hit / len(y)


def export(model, mu, sd, path):
    p = model.p
    stft_w = np.concatenate([COS, SIN])[:, None, :]  # [514, 1, 400]
    mel_w = MEL[:, :, None]  # [40, 257, 1]
    F = nfeat()
    W1 = p["W1"].T.reshape(H1, F, K)  # features were [F, K] band-major
    inits = [
        numpy_helper.from_array(stft_w.astype(np.float32), "stft_w"),
        numpy_helper.from_array(mel_w.astype(np.float32), "mel_w"),
        numpy_helper.from_array(np.array([EPS], np.float32), "eps"),
        numpy_helper.from_array(mu.reshape(1, F, 1).astype(np.float32), "mu"),
        numpy_helper.from_array((1.0 / sd).reshape(1, F, 1).astype(np.float32), "inv_sd"),
        numpy_helper.from_array(W1.astype(np.float32), "w1"), numpy_helper.from_array(p["b1"], "b1"),
        numpy_helper.from_array(p["W2"].T[:, :, None].astype(np.float32), "w2"), numpy_helper.from_array(p["b2"], "b2"),
        numpy_helper.from_array(p["W3"].T[:, :, None].astype(np.float32), "w3"), numpy_helper.from_array(p["b3"], "b3"),
        numpy_helper.from_array(np.array([257, 257], np.int64), "split"),
    ]
    nodes = [
        helper.make_node("Unsqueeze", ["audio", "one"], ["a3"]),  # [B, 1, N]
        helper.make_node("Conv", ["a3", "stft_w"], ["spec"], strides=[HOP]),  # [B, 514, M]
        helper.make_node("Mul", ["spec", "spec"], ["spec2"]),
        helper.make_node("Split", ["spec2", "split"], ["re2", "im2"], axis=1),
        helper.make_node("Add", ["re2", "im2"], ["power"]),  # [B, 257, M]
        helper.make_node("Conv", ["power", "mel_w"], ["mel"]),  # [B, 40, M]
        helper.make_node("Add", ["mel", "eps"], ["mel_eps"]),
        helper.make_node("Log", ["mel_eps"], ["logmel"]),
    ]
    if OPTS["features"] == "cep":
        inits.append(numpy_helper.from_array(DCT[:, :, None], "dct_w"))
        nodes.append(helper.make_node("Conv", ["logmel", "dct_w"], ["ceps"]))  # [B, 20, M]
    nodes += [
        helper.make_node("Sub", ["ceps" if OPTS["features"] == "cep" else "logmel", "mu"], ["centred"]),
        helper.make_node("Mul", ["centred", "inv_sd"], ["features"]),  # [B, F, M], also an output (streaming cache)
        helper.make_node("Concat", ["context", "features"], ["feat"], axis=2),  # [B, F, C + M]
        helper.make_node("Conv", ["feat", "w1", "b1"], ["c1"]),  # [B, 256, C + M - K + 1]
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["logits"]),  # [B, 15, T]
        helper.make_node("Softmax", ["logits"], ["sm"], axis=1),
        helper.make_node("Transpose", ["sm"], ["probs"], perm=[0, 2, 1]),  # [B, T, 15]
    ]
    inits.append(numpy_helper.from_array(np.array([1], np.int64), "one"))
    graph = helper.make_graph(
        nodes, "audio_visemes",
        [
            helper.make_tensor_value_info("audio", TensorProto.FLOAT, ["batch", "samples"]),
            helper.make_tensor_value_info("context", TensorProto.FLOAT, ["batch", F, "context_frames"]),
        ],
        [
            helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", "frames", NCLASS]),
            helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", F, "feature_frames"]),
        ],
        inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="avatar-platform visemes train.py")
    m.ir_version = 8
    meta = {
        "sample_rate": SR, "hop": HOP, "window": WIN, "past_frames": PAST, "ahead_frames": AHEAD,
        "left_pad_samples": PAST * HOP + WIN // 2, "classes": NCLASS, "features": f"{F} ({OPTS['features']})",
        "contract": "audio [B, N] float32 in [-1, 1] at 16 kHz (the stream left-padded with left_pad_samples zeros), "
                    f"context [B, {F}, C] (the last C 'features' frames of the previous call, C = 0 at the start) -> "
                    f"features [B, {F}, M], M = 1 + (N - window) // hop; probs [B, C + M - 24, 15]; "
                    "output frame t of the stream is centred on unpadded sample t * hop",
    }
    for k, v in meta.items():
        e = m.metadata_props.add()
        e.key, e.value = k, str(v)
    onnx.checker.check_model(m)
    onnx.save(m, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data_dir", nargs="?", default="/tmp/visemes-data")
    ap.add_argument("out", nargs="?", default="render/models/visemes/audio_visemes.onnx")
    ap.add_argument("--epochs", type=int, default=10)
    # Defaults = the shipped model. The alternatives lost a leave-awb-out comparison (README.md).
    ap.add_argument("--features", choices=["mel", "cep"], default="mel")
    ap.add_argument("--vtlp", choices=["half", "all"], default="half")
    ap.add_argument("--pitch-data", choices=["yes", "no"], default="no")
    ap.add_argument("--exclude-voice", default=None, help="development only: leave a training voice out and validate on it")
    a = ap.parse_args()
    OPTS.update(features=a.features, vtlp=a.vtlp, exclude=a.exclude_voice)
    data_dir, out, epochs = a.data_dir, a.out, a.epochs
    rows = load(data_dir)
    train_voices = {"kal16", "awb", "rms", "kal"} - {a.exclude_voice}
    trainable = [r for r in rows if r["split"] == "train" and r["voice"] in train_voices and (a.pitch_data == "yes" or not r.get("f0"))]
    tr = [r for r in trainable if r["sentence"] % 10 != 0]
    if a.exclude_voice:
        va = [r for r in rows if r["split"] == "train" and r["voice"] == a.exclude_voice and r["sentence"] % 10 == 0 and r["speed"] == 1]
    else:
        va = [r for r in trainable if r["sentence"] % 10 == 0 and r["speed"] == 1 and not r.get("f0")]
    print(f"options {vars(a)}", flush=True)
    print(f"train utterances {len(tr)}, validation {len(va)} (held-out sentences and slt never loaded)", flush=True)
    Gt, st, yt = build_set(data_dir, tr, True)
    Gv, sv, yv = build_set(data_dir, va, False)
    mu = Gt.mean(0)
    sd = Gt.std(0) + 1e-3
    Gt = (Gt - mu) / sd
    Gv = (Gv - mu) / sd
    counts = np.bincount(yt, minlength=NCLASS).astype(np.float64)
    print("train frames", len(yt), "class counts", counts.astype(int).tolist(), flush=True)
    w = (counts.sum() / (NCLASS * np.maximum(counts, 1))) ** 0.5  # soften the imbalance (sil is common)
    w = (w / w.mean()).astype(np.float32)
    model = MLP(nfeat() * K)
    best = (-1.0, None)
    bs = 512
    per_epoch = min(len(yt), 400_000)
    for ep in range(epochs):
        lr = 1e-3 * (0.5 * (1 + math.cos(math.pi * ep / epochs)))
        order = rng.permutation(len(yt))[:per_epoch]
        losses = []
        for i in range(0, per_epoch, bs):
            idx = order[i:i + bs]
            losses.append(model.step(windows(Gt, st[idx]), yt[idx], w, lr, drop=0.2))
        acc = accuracy(model, Gv, sv, yv)
        print(f"epoch {ep + 1}/{epochs} lr {lr:.2e} loss {np.mean(losses):.3f} validation frame accuracy {acc:.3f}", flush=True)
        if acc > best[0]:
            best = (acc, {k: v.copy() for k, v in model.p.items()})
    model.p = best[1]
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    export(model, mu, sd, out)
    # Parity: the graph must give what numpy gives on a validation utterance.
    import onnxruntime as ort
    sess = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
    r = va[0]
    x = audio_of(data_dir, r)
    mel, lab, _ = utterance(x, r["viseme"], r["open"])
    ref = model.probs(windows((mel - mu) / sd, np.arange(len(lab))))
    xp = pad_audio(np.concatenate([x, np.zeros(max(0, (len(lab) - 1) * HOP - len(x)), np.float32)]))[None, :]
    got = sess.run(["probs"], {"audio": xp, "context": np.zeros((1, nfeat(), 0), np.float32)})[0][0][: len(lab)]
    print("onnx vs numpy max abs diff", float(np.abs(got - ref).max()), "best validation accuracy", round(best[0], 4), "->", out, flush=True)


if __name__ == "__main__":
    main()
