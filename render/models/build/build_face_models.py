#!/usr/bin/env python3
"""Build the face rig's ONNX models from the TFLite files inside Google's
`mediapipe` wheel (Apache-2.0).

Build-time only. Writes into render/models/face/:
  face_detection_short_range.onnx  BlazeFace short-range detector (128x128 NHWC in)
  face_landmark.onnx               Face Mesh v1, 468 landmarks (192x192 NHWC in)
  LICENSE                          the wheel's licence text (Apache-2.0)
  manifest.json                    provenance + sha256 + tensor names (read by tests)
  MODEL_CARD.md                    the same, for people

Each converted graph is checked against the original TFLite interpreter on
random inputs before anything is written, so a converter regression fails the
build instead of shipping a subtly wrong model.

Usage (see README.md):  python build_face_models.py [--wheel PATH] [--out DIR]
Without --wheel the pinned mediapipe wheel is fetched from PyPI with pip.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# Quiet TensorFlow's start-up chatter; errors still show.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf2onnx  # noqa: E402

MEDIAPIPE_VERSION = "0.10.21"
# Newer mediapipe wheels (1.x) no longer carry the legacy `modules/*.tflite`
# files, so the version is pinned to the last line that does. The wheel is
# platform-specific but the .tflite files inside are plain data.
WHEEL_NAME = f"mediapipe-{MEDIAPIPE_VERSION}-cp311-cp311-manylinux_2_28_x86_64.whl"
WHEEL_SHA256 = "05dc4a9e593655a79558d05d6227d31018c2537a4bd3362b51e230cf22aecfe3"
LICENSE_IN_WHEEL = f"mediapipe-{MEDIAPIPE_VERSION}.dist-info/LICENSE"
OPSET = 17

# name -> where it lives in the wheel, and friendlier tensor names for the
# TypeScript side (the TFLite names are auto-generated layer names).
MODELS = [
    {
        "name": "face_detection_short_range",
        "wheel_path": "mediapipe/modules/face_detection/face_detection_short_range.tflite",
        "rename": {"input": "image", "regressors": "regressors", "classificators": "scores"},
        "input_range": [-1.0, 1.0],
        "description": "BlazeFace short-range face detector: 896 SSD anchors, "
        "per anchor a box (cx, cy, w, h) and 6 keypoints (right eye, left eye, "
        "nose tip, mouth centre, right ear tragion, left ear tragion) in 128-px "
        "input units, plus one logit.",
    },
    {
        "name": "face_landmark",
        "wheel_path": "mediapipe/modules/face_landmark/face_landmark.tflite",
        "rename": {"input_1": "image", "conv2d_21": "landmarks", "conv2d_31": "face_flag"},
        "input_range": [0.0, 1.0],
        "description": "MediaPipe Face Mesh v1: 468 landmarks (x, y, z) in 192-px "
        "crop units (z relative depth, same scale as x), plus a face-presence logit.",
    },
]

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE.parent / "face"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_wheel(dest: Path) -> Path:
    """pip-download the exact wheel (no deps), whatever platform we build on."""
    subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--platform", "manylinux_2_28_x86_64", "--python-version", "3.11",
            "--implementation", "cp", "--abi", "cp311",
            "-d", str(dest), f"mediapipe=={MEDIAPIPE_VERSION}",
        ],
        check=True,
    )
    return dest / WHEEL_NAME


def rename_tensors(model: onnx.ModelProto, mapping: dict[str, str]) -> None:
    """Rename graph inputs/outputs (and every node edge that uses them)."""
    g = model.graph
    for node in g.node:
        for i, n in enumerate(node.input):
            if n in mapping:
                node.input[i] = mapping[n]
        for i, n in enumerate(node.output):
            if n in mapping:
                node.output[i] = mapping[n]
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.name in mapping:
            vi.name = mapping[vi.name]


def canonical_names(model: onnx.ModelProto, keep: set[str]) -> None:
    """tf2onnx's optimizer numbers its intermediate tensors in an order that
    changes from run to run; renumber them by position in the graph so that a
    rebuild is byte-identical and the sha256 in the manifest reproducible."""
    g = model.graph
    mapping: dict[str, str] = {}
    inits = {t.name for t in g.initializer}
    for k, node in enumerate(g.node):
        node.name = f"n{k}"
        for n in node.input:
            if n and n in inits and n not in mapping and n not in keep:
                mapping[n] = f"w{len(mapping)}"
        for n in node.output:
            if n and n not in keep and n not in mapping:
                mapping[n] = f"t{len(mapping)}"
    for t in g.initializer:
        t.name = mapping.get(t.name, t.name)
    rename_tensors(model, mapping)
    order = {name: i for i, name in enumerate(mapping.values())}
    sorted_inits = sorted(g.initializer, key=lambda t: order.get(t.name, -1))
    del g.initializer[:]
    g.initializer.extend(sorted_inits)


def convert(tflite_path: Path, onnx_path: Path, rename: dict[str, str]) -> onnx.ModelProto:
    model, _ = tf2onnx.convert.from_tflite(str(tflite_path), opset=OPSET)
    rename_tensors(model, rename)
    canonical_names(model, set(rename.values()))
    # Keep the file free of build-machine details so rebuilds are byte-stable.
    model.graph.doc_string = ""
    model.doc_string = ""
    onnx.checker.check_model(model)
    onnx.save(model, str(onnx_path))
    return model


def verify(tflite_path: Path, onnx_path: Path, rename: dict[str, str], lo: float, hi: float) -> float:
    """Max abs difference between TFLite and ONNX outputs over a few random inputs."""
    interp = tf.lite.Interpreter(model_path=str(tflite_path))
    interp.allocate_tensors()
    (inp,) = interp.get_input_details()
    outs = interp.get_output_details()
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    worst = 0.0
    for seed in range(3):
        x = np.random.default_rng(seed).uniform(lo, hi, size=tuple(inp["shape"])).astype(np.float32)
        interp.set_tensor(inp["index"], x)
        interp.invoke()
        got = sess.run(None, {rename[inp["name"]]: x})
        names = [o.name for o in sess.get_outputs()]
        for od in outs:
            ref = interp.get_tensor(od["index"])
            mine = got[names.index(rename[od["name"]])]
            scale = max(1.0, float(np.abs(ref).max()))
            worst = max(worst, float(np.abs(ref - mine).max()) / scale)
    if worst > 1e-3:
        raise SystemExit(f"{onnx_path.name}: ONNX differs from TFLite by {worst:.2e} (relative)")
    return worst


def io_spec(model: onnx.ModelProto) -> dict:
    def dims(vi: onnx.ValueInfoProto) -> list[int]:
        return [d.dim_value for d in vi.type.tensor_type.shape.dim]

    return {
        "inputs": {vi.name: dims(vi) for vi in model.graph.input},
        "outputs": {vi.name: dims(vi) for vi in model.graph.output},
    }


MODEL_CARD = """# Face rig models (generated by build/build_face_models.py; do not edit by hand)

Two small models used by `render/rig/` to find a face and its landmarks in a portrait.
They are Google MediaPipe models, converted unchanged from TFLite to ONNX (opset {opset})
with tf2onnx {tf2onnx_version}; the fp16 weights of the TFLite files are stored as fp32.

## Source

- PyPI package: `mediapipe` version {mp_version}, wheel `{wheel}`
  (sha256 `{wheel_sha}`).
- Licence: Apache License 2.0, the wheel's own `LICENSE` (copied here as `LICENSE`).
  The model files carry no separate licence inside the wheel.
- Upstream project: MediaPipe by Google (github.com/google/mediapipe), Face Detection
  (BlazeFace, short range) and Face Mesh v1 solutions.

## Files

| file | from (path in the wheel) | sha256 of .onnx | bytes | sha256 of source .tflite |
| --- | --- | --- | --- | --- |
{rows}

## Inputs and outputs

{io}

## Intended use and limits

- For building a 2D face rig from one portrait (one main face, roughly frontal, within
  a couple of metres of the camera). The short-range detector is trained for faces that
  fill a fair part of the frame; small faces in wide shots are often missed.
- Face Mesh v1 has no iris points and is less precise on strongly turned heads; the rig
  refuses extreme poses rather than rig them badly.
- Google's published evaluation of these models (accuracy across skin tones, genders and
  ages) is in MediaPipe's model cards; nothing here re-measures it.
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheel", type=Path, help=f"a local copy of {WHEEL_NAME} (default: pip download it)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: %(default)s)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="face-models-") as tmp_s:
        tmp = Path(tmp_s)
        wheel = args.wheel or fetch_wheel(tmp)
        got = sha256_file(wheel)
        if got != WHEEL_SHA256:
            raise SystemExit(f"{wheel}: sha256 {got} is not the pinned {WHEEL_SHA256}")

        args.out.mkdir(parents=True, exist_ok=True)
        manifest = {
            "source": {
                "package": "mediapipe",
                "version": MEDIAPIPE_VERSION,
                "wheel": WHEEL_NAME,
                "wheel_sha256": WHEEL_SHA256,
                "license": "Apache-2.0",
            },
            "converter": {"tf2onnx": tf2onnx.__version__, "opset": OPSET},
            "models": {},
        }
        with zipfile.ZipFile(wheel) as z:
            (args.out / "LICENSE").write_bytes(z.read(LICENSE_IN_WHEEL))
            for m in MODELS:
                tflite = tmp / Path(m["wheel_path"]).name
                tflite.write_bytes(z.read(m["wheel_path"]))
                onnx_path = args.out / f"{m['name']}.onnx"
                model = convert(tflite, onnx_path, m["rename"])
                err = verify(tflite, onnx_path, m["rename"], *m["input_range"])
                print(f"{onnx_path.name}: max relative difference vs TFLite {err:.2e}")
                manifest["models"][m["name"]] = {
                    "file": onnx_path.name,
                    "sha256": sha256_file(onnx_path),
                    "bytes": onnx_path.stat().st_size,
                    "wheel_path": m["wheel_path"],
                    "tflite_sha256": sha256_file(tflite),
                    "input_range": m["input_range"],
                    "description": m["description"],
                    **io_spec(model),
                }

    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    rows = "\n".join(
        f"| `{e['file']}` | `{e['wheel_path']}` | `{e['sha256']}` | {e['bytes']} | `{e['tflite_sha256']}` |"
        for e in manifest["models"].values()
    )
    io = "\n".join(
        f"- `{e['file']}`: {e['description']} Input range {e['input_range']}. "
        f"Inputs {e['inputs']}; outputs {e['outputs']}."
        for e in manifest["models"].values()
    )
    (args.out / "MODEL_CARD.md").write_text(
        MODEL_CARD.format(
            opset=OPSET,
            tf2onnx_version=tf2onnx.__version__,
            mp_version=MEDIAPIPE_VERSION,
            wheel=WHEEL_NAME,
            wheel_sha=WHEEL_SHA256,
            rows=rows,
            io=io,
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
