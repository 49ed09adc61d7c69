"""The real TT-Metalium 0.81 headers and libtt_metal.so, taken from the ttnn 0.81.1 wheel on PyPI.

Nothing is installed or imported: the wheel is downloaded once with ``pip download --no-deps``, verified by
SHA-256, and only ``ttnn/tt_metal/**`` (headers, firmware wrappers) and ``ttnn/build/lib/libtt_metal.so`` are
extracted into ``~/.cache/tilelang_tt/ttnn-0.81.1`` (override: ``TILELANG_TT_CACHE_DIR``). Set
``TILELANG_TT_TTNN_WHEEL`` to a local copy of the wheel to skip the download.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from ..artifact import staged_directory
from ..errors import TTError

TTNN_VERSION = "0.81.1"
WHEEL_NAME = f"ttnn-{TTNN_VERSION}-cp312-cp312-manylinux_2_34_x86_64.whl"
WHEEL_SHA256 = "cc6df66162c8b5f5a5eb7347fe687b6095bf57bd64f9ba1be3d9b7f42e01d64f"
LIB_MEMBER = "ttnn/build/lib/libtt_metal.so"


class TTCheckError(TTError):
    """The real-SDK check could not run or found a problem."""


def cache_root() -> Path:
    return Path(os.environ.get("TILELANG_TT_CACHE_DIR", Path.home() / ".cache" / "tilelang_tt"))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def wheel_path() -> Path:
    """The pinned ttnn wheel (TILELANG_TT_TTNN_WHEEL, or downloaded once into the cache)."""
    return _download_wheel(cache_root() / "wheels")


def _download_wheel(dest: Path) -> Path:
    local = os.environ.get("TILELANG_TT_TTNN_WHEEL")
    if local:
        return Path(local)
    dest.mkdir(parents=True, exist_ok=True)
    wheel = dest / WHEEL_NAME
    if wheel.is_file():
        return wheel
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", f"ttnn=={TTNN_VERSION}", "--python-version", "3.12",
           "--only-binary=:all:", "--platform", "manylinux_2_34_x86_64", "-d", str(dest), "-q"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not wheel.is_file():
        raise TTCheckError(f"cannot download the ttnn {TTNN_VERSION} wheel: {proc.stderr.strip()[-800:]}",
                           construct="real-header check",
                           fix="check network access to PyPI or set TILELANG_TT_TTNN_WHEEL to a local copy")
    return wheel


def sdk_root() -> Path:
    """The extracted wheel: ``<root>/ttnn/tt_metal`` (headers) and ``<root>/ttnn/build/lib/libtt_metal.so``."""
    root = cache_root() / f"ttnn-{TTNN_VERSION}"
    stamp = root / ".complete"
    if stamp.is_file():
        return root
    wheel = wheel_path()
    digest = _sha256(wheel)
    if digest != WHEEL_SHA256:
        raise TTCheckError(f"{wheel} has SHA-256 {digest}, expected {WHEEL_SHA256}", construct="ttnn wheel",
                           fix="delete the file and download it again")
    with staged_directory(root) as tmp:
        with zipfile.ZipFile(wheel) as zf:
            members = [m for m in zf.namelist()
                       if (m.startswith("ttnn/tt_metal/") and not m.startswith("ttnn/tt_metal/pre-compiled/"))
                       or m == LIB_MEMBER]
            zf.extractall(tmp, members)
        (tmp / ".complete").write_text(WHEEL_SHA256 + "\n")
    return root


def headers_dir() -> Path:
    """The JIT's include root: the directory that contains ``tt_metal/``."""
    return sdk_root() / "ttnn"


def libtt_metal() -> Path:
    return sdk_root() / LIB_MEMBER
