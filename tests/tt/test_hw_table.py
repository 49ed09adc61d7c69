"""The one hardware table (tilelang_tt/device.py): the emulator's generated header equals it, and the compiler's
L1 budget is what a kernel can really use (nothing that compiles fails later for lack of L1)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tilelang

import tilelang_tt  # noqa: F401  (registers the target)
from examples import random_cases
from tilelang_tt import device, emulator
from tilelang_tt.errors import TTError

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "scripts" / "gen_hw_constants.py"


def _generated() -> str:
    return subprocess.run([sys.executable, str(GENERATOR), "-"], check=True, capture_output=True, text=True).stdout


def test_generated_header_equals_table():
    installed = emulator.sim_install().include / "tt_sim" / "hw_constants.hpp"
    assert installed.read_text() == _generated(), "rebuild the emulator: the installed header is not the table's"


def test_header_carries_every_table_value():
    text = _generated()
    for d in device.DEVICES.values():
        row = (f'{{"{d.arch}", {d.grid_x}, {d.grid_y}, {d.l1_bytes}, {d.l1_unreserved_base}, {d.mem_zeros_base}, '
               f'{d.mem_zeros_size}, {d.dram_banks}, {d.num_cbs}, {d.dst_tiles}, {d.dst_tiles_fp32}, '
               f'{d.dram_alignment}, {d.l1_alignment}, {len(d.noc_ids)}, {d.max_runtime_args}}}')
        assert row in text
    for f in device.TILE_FORMATS.values():
        row = f'{{"{f.name}", {f.value}, {f.datum_bits}, {f.exponent_bytes}, {f.tile_bytes}}}'
        # the emulator's CBs hold float and bfp formats and the compute path's integer formats
        assert (row in text) == (f.kind != "int" or f.name in device.CB_INT_FORMATS), f.name
    assert f"kTile = {device.TILE};" in text and f"kFace = {device.FACE};" in text


def test_generator_runs_without_the_package(tmp_path):
    # A fresh clone under `pip install -e .`: tilelang_tt (and tilelang) are not importable yet.
    out = tmp_path / "hw.hpp"
    subprocess.run([sys.executable, "-S", "-I", str(GENERATOR), str(out)], check=True, cwd=tmp_path)
    assert out.read_text() == _generated()


def test_usable_l1_is_below_the_firmware_reserve():
    for d in device.DEVICES.values():
        assert d.l1_unreserved_base % max(d.dram_alignment, d.l1_alignment) == 0
        assert d.mem_zeros_base + d.mem_zeros_size <= d.l1_unreserved_base
        assert d.l1_usable_bytes == d.l1_bytes - d.l1_unreserved_base


@pytest.mark.parametrize("block_k", [64, 96])
def test_l1_budget_gemm_compiles_only_if_it_runs(block_k, tmp_path, monkeypatch):
    """bf16 384x384xK GEMM (fp32 accumulator) in one 384x384 block: must be refused at compile time with our
    error, or run. k-block 64 (issue 9's case) needs 1,376,256 B of CBs: it fits the 1,393,312 B above
    wormhole's firmware reserve (it failed on the emulator's old 128 KiB reserve) and must run. k-block 96 needs
    1,474,560 B: within the 1,499,136 B of L1 but not above the reserve, so it used to compile and then fail."""
    monkeypatch.setenv("TILELANG_TT_CACHE_DIR", str(tmp_path))
    size = 384
    func = random_cases.gemm(size, size, block_k, size, size, block_k, "bfloat16", None)
    try:
        kernel = tilelang.compile(func, target="tt")
    except TTError as e:
        assert "L1" in str(e) and str(device.DEVICES["wormhole_b0"].l1_usable_bytes) in str(e), str(e)
        return
    a = np.random.default_rng(0).standard_normal((size, block_k)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((block_k, size)).astype(np.float32)
    import torch

    at, bt = torch.tensor(a, dtype=torch.bfloat16), torch.tensor(b, dtype=torch.bfloat16)
    c = torch.empty(size, size, dtype=torch.bfloat16)
    kernel(at, bt, c)   # raises with the emulator's message if L1 runs out
    assert torch.allclose(c.float(), (at.float() @ bt.float()), rtol=0.05, atol=0.5)


def test_templates_take_tile_geometry_from_the_table():
    """The kernel templates spell no tile/face geometry of their own: sizes come from the table's TILE and FACE."""
    import re

    templates = ROOT / "python" / "tilelang_tt" / "templates"
    for path in templates.glob("*.cpp.j2"):
        code = re.sub(r"//[^\n]*", "", path.read_text())
        literals = re.findall(r"(?<![\w.])(16|32|256|512|1024)(?![\w.])", code)
        assert not literals, f"{path.name}: geometry literals {literals}; render them from tilelang_tt.device"
    from tests.tt.helpers import artifact
    from examples import kernels as K

    reader = artifact(K.softmax(M=64, N=64)).files["kernels/reader.cpp"]
    assert f"constexpr uint32_t kTileDim = {device.TILE};" in reader
    assert f"constexpr uint32_t kFaceDim = {device.FACE};" in reader
