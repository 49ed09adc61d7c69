"""The SDK/hardware path, verified up to the device call (nobody here has a Tenstorrent card).

A stand-in SDK (tt-sim packaged as a CMake ``TT-Metalium`` config) proves that the artifact's CMake and the
project's ``-DTL_TT_BACKEND=ON`` build the generated host program unchanged through ``find_package`` and
``TT::Metalium``; the backend selection gives the exact error when an SDK or a device is missing.
"""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import tilelang
import torch

from examples import kernels as K
from tilelang_tt import emulator, hardware
from tilelang_tt.hardware import TTHardwareError, resolve_backend

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def standin_sdk(tmp_path):
    """A directory laid out like a built tt-metal (``build/TT-MetaliumConfig.cmake``) whose TT::Metalium is tt-sim."""
    inst = emulator.sim_install()
    cfg = tmp_path / "tt-metal" / "build"
    cfg.mkdir(parents=True)
    (cfg / "TT-MetaliumConfig.cmake").write_text(
        "add_library(TT::Metalium SHARED IMPORTED)\n"
        f'set_target_properties(TT::Metalium PROPERTIES IMPORTED_LOCATION "{inst.lib}/libtt_sim.so"\n'
        f'  INTERFACE_INCLUDE_DIRECTORIES "{inst.include}")\n'
        "set(TT-Metalium_FOUND TRUE)\n")
    return tmp_path / "tt-metal"


def test_backend_selection(monkeypatch, tmp_path):
    monkeypatch.delenv("TT_METAL_HOME", raising=False)
    monkeypatch.delenv("TILELANG_TT_BACKEND", raising=False)
    assert resolve_backend() == "sim" and resolve_backend("sim") == "sim"
    with pytest.raises(TTHardwareError, match=r"backend 'hw' needs a TT-Metalium SDK, and TT_METAL_HOME is not set"):
        resolve_backend("hw")
    monkeypatch.setenv("TILELANG_TT_BACKEND", "hw")
    with pytest.raises(TTHardwareError, match="TT_METAL_HOME is not set"):
        resolve_backend()
    monkeypatch.setenv("TT_METAL_HOME", str(tmp_path))
    monkeypatch.setattr(hardware, "devices", lambda: [])
    with pytest.raises(TTHardwareError, match=r"needs a Tenstorrent device, and no /dev/tenstorrent\* exists"):
        resolve_backend("hw")
    monkeypatch.setenv("TILELANG_TT_BACKEND", "auto")
    assert resolve_backend() == "sim"                 # SDK but no device: the emulator runs
    monkeypatch.setattr(hardware, "devices", lambda: ["/dev/tenstorrent/0"])
    assert resolve_backend() == "hw"                  # SDK and device: the hardware path is chosen
    with pytest.raises(TTHardwareError, match=r"backend 'gpu' is not one of \['auto', 'sim', 'hw'\]"):
        resolve_backend("gpu")


def test_kernel_call_reports_which_backend_ran(monkeypatch):
    monkeypatch.delenv("TILELANG_TT_BACKEND", raising=False)
    kernel = tilelang.compile(K.elementwise_add(64, 64, "float32"), target="tt")
    kernel(torch.ones(64, 64), torch.ones(64, 64), torch.empty(64, 64))
    assert kernel.report["backend"] == "tt-sim (CPU emulator)"
    with pytest.raises(TTHardwareError, match="TT_METAL_HOME is not set"):
        monkeypatch.delenv("TT_METAL_HOME", raising=False)
        kernel.run_on("hw", torch.ones(64, 64), torch.ones(64, 64), torch.empty(64, 64))


def test_artifact_cmake_builds_host_against_an_sdk(standin_sdk, monkeypatch, tmp_path):
    """The artifact's own CMakeLists.txt (what a hardware user runs) builds host.cpp unchanged, and the
    Python hardware path drives it: with the stand-in SDK the result is the emulator's."""
    if shutil.which("cmake") is None:
        pytest.fail("cmake is required (it builds the project)")
    kernel = tilelang.compile(K.elementwise_add(64, 96, "float32"), target="tt")
    artifact = tmp_path / "artifact"
    shutil.copytree(kernel.artifact_dir, artifact)
    monkeypatch.setenv("TT_METAL_HOME", str(standin_sdk))
    monkeypatch.setattr(hardware, "devices", lambda: ["/dev/tenstorrent/0"])
    exe = hardware.build_host(artifact)
    assert exe.name == "add_host" and exe.is_file()
    a, b = np.random.default_rng(0).standard_normal((2, 64, 96)).astype(np.float32)
    c = np.zeros((64, 96), np.float32)
    monkeypatch.setenv("TT_SIM_INCLUDE_DIR", str(emulator.sim_install().include))
    result = emulator.run(artifact, kernel.plan, {0: a, 1: b, 2: c}, backend="hw")
    np.testing.assert_array_equal(c, a + b)
    assert result.report["backend"] == f"device via {standin_sdk}"


def test_project_cmake_tl_tt_backend(standin_sdk, tmp_path):
    kernel = tilelang.compile(K.design_gemm(64, 64, 64), target="tt")
    build = tmp_path / "build"
    env = {"PATH": "/usr/bin:/bin", "TT_METAL_HOME": str(standin_sdk), "HOME": str(tmp_path)}
    subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), "-DTL_TT_BACKEND=ON",
                    f"-DTL_TT_ARTIFACT={kernel.artifact_dir}"], check=True, capture_output=True, env=env)
    proc = subprocess.run(["cmake", "--build", str(build), "--target", "tt_runner", "-j2"], capture_output=True,
                          text=True, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (build / "tt_runner").is_file()


def test_project_cmake_without_sdk_fails_clearly(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(["cmake", "-S", str(ROOT), "-B", str(tmp_path / "b"), "-DTL_TT_BACKEND=ON"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode != 0
    assert "TL_TT_BACKEND=ON needs a TT-Metalium SDK, and none was found" in " ".join(proc.stderr.split())
