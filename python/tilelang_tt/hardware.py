"""Running an artifact on a real Tenstorrent device through a TT-Metalium SDK.

The artifact's ``CMakeLists.txt`` builds the generated ``host.cpp`` against the SDK (found through
``TT_METAL_HOME``, i.e. ``$TT_METAL_HOME/build`` holding ``TT-MetaliumConfig.cmake``, or an installed
tt-metalium package on ``CMAKE_PREFIX_PATH``). The resulting program is the same one tt-sim runs: it reads the
tilized inputs from a data directory, runs the kernels, and writes the outputs back. Nobody working on this
project has a device, so this path is verified up to the device call only (see docs/real_sdk.md).
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from .errors import TTError

BACKEND_ENV = "TILELANG_TT_BACKEND"     # auto (default) | sim | hw
BACKENDS = ("auto", "sim", "hw")


class TTHardwareError(TTError):
    """The hardware path was requested but cannot run here."""


def sdk_home() -> Path | None:
    home = os.environ.get("TT_METAL_HOME")
    return Path(home) if home else None


def devices() -> list[str]:
    return sorted(glob.glob("/dev/tenstorrent/*") + glob.glob("/dev/tenstorrent[0-9]*"))


def hardware_available() -> bool:
    return sdk_home() is not None and bool(devices())


def resolve_backend(requested: str | None = None) -> str:
    """``sim`` or ``hw``: the explicit request (argument, then $TILELANG_TT_BACKEND), else hw when an SDK and a
    device are both present, else the emulator."""
    choice = (requested or os.environ.get(BACKEND_ENV) or "auto").lower()
    if choice not in BACKENDS:
        raise TTHardwareError(f"backend {choice!r} is not one of {list(BACKENDS)}", construct=f"{BACKEND_ENV}",
                              fix="use auto, sim or hw")
    if choice == "auto":
        return "hw" if hardware_available() else "sim"
    if choice == "hw":
        if sdk_home() is None:
            raise TTHardwareError("backend 'hw' needs a TT-Metalium SDK, and TT_METAL_HOME is not set",
                                  construct="hardware backend",
                                  fix="export TT_METAL_HOME=<built tt-metal checkout> (or use backend='sim')")
        if not devices():
            raise TTHardwareError("backend 'hw' needs a Tenstorrent device, and no /dev/tenstorrent* exists",
                                  construct="hardware backend", fix="run on a machine with a card (or backend='sim')")
    return choice


def build_host(artifact_dir: Path) -> Path:
    """Configure and build the artifact's host program against the SDK (cached per artifact and SDK)."""
    home = sdk_home()
    if home is None:
        raise TTHardwareError("TT_METAL_HOME is not set", construct="hardware backend")
    key = hashlib.sha256(f"{Path(artifact_dir).resolve()}\0{home}".encode()).hexdigest()[:16]
    build = Path(artifact_dir) / f"build-hw-{key}"
    exe_name = next(line.split("(")[1].split()[0] for line in (Path(artifact_dir) / "CMakeLists.txt").read_text()
                    .splitlines() if line.startswith("add_executable("))
    exe = build / exe_name
    if exe.is_file():
        return exe
    cmake = shutil.which("cmake")
    if cmake is None:
        raise TTHardwareError("cmake is not installed", construct="hardware backend")
    for cmd in ([cmake, "-S", str(artifact_dir), "-B", str(build), f"-DCMAKE_PREFIX_PATH={home}/build;{home}"],
                [cmake, "--build", str(build), "-j"]):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise TTHardwareError(f"building the host program against {home} failed:\n{proc.stdout[-2000:]}"
                                  f"{proc.stderr[-2000:]}", construct="hardware backend")
    return exe
