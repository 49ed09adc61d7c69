"""The one hardware table (tilelang_tt/device.py): the emulator's generated header equals it, the usable L1 is the
number worked out from the SDK's sources, and the compiler's L1 budget is what a kernel can really use (what compiles
runs, what does not fit is refused at compile time)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import tilelang

import tilelang_tt  # noqa: F401  (registers the target)
from tilelang_tt import device, emulator
from tilelang_tt.errors import TTError

from .helpers import one_block_gemm

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "scripts" / "gen_hw_constants.py"


def _generated() -> str:
    return subprocess.run([sys.executable, str(GENERATOR), "-"], check=True, capture_output=True, text=True).stdout


def test_generated_header_equals_table():
    installed = emulator.sim_install().include / "tt_sim" / "hw_constants.hpp"
    assert installed.read_text() == _generated(), "rebuild the emulator: the installed header is not the table's"


# Reads the generated header through its field names (compiled C++), so the check does not depend on the order in
# which the generator writes a row: a generator that swapped two fields of a row fails it.
_HEADER_READER = r"""
#include <cstdio>
#include "tt_sim/hw_constants.hpp"
using namespace tt_sim::hw;
int main() {
    std::printf("geometry %u %u %u %u %u\n", kTile, kFace, kFacesPerTile, kTileElems, kFaceElems);
    for (const FormatInfo& f : kFormats)
        std::printf("format %s %u %u %u %u\n", f.name, f.value, f.datum_bits, f.exponent_bytes, f.tile_bytes);
    for (const ArchInfo& a : kArchs)
        std::printf("arch %s %u %u %u %u %u %u %u %u %u %u %u %u %u %u\n", a.name, a.grid_x, a.grid_y, a.l1_bytes,
                    a.l1_unreserved_base, a.mem_zeros_base, a.mem_zeros_size, a.dram_banks, a.num_cbs, a.dst_tiles,
                    a.dst_tiles_fp32, a.dram_alignment, a.l1_alignment, a.num_nocs, a.max_runtime_args);
}
"""


def test_header_carries_every_table_value(tmp_path):
    (tmp_path / "tt_sim").mkdir()
    (tmp_path / "tt_sim" / "hw_constants.hpp").write_text(_generated())
    (tmp_path / "read.cpp").write_text(_HEADER_READER)
    subprocess.run([os.environ.get("TT_SIM_CXX", "c++"), "-std=c++20", f"-I{tmp_path}", str(tmp_path / "read.cpp"),
                    "-o", str(tmp_path / "read")], check=True)
    rows = [line.split() for line in subprocess.run([str(tmp_path / "read")], check=True, capture_output=True,
                                                    text=True).stdout.splitlines()]
    assert rows[0][1:] == [str(v) for v in (device.TILE, device.FACE, device.FACES_PER_TILE, device.TILE_ELEMS,
                                            device.FACE_ELEMS)]
    formats = {r[1]: [int(x) for x in r[2:]] for r in rows if r[0] == "format"}
    # the emulator's CBs hold every float and bfp format and the compute path's integer formats
    assert {f.name for f in device.TILE_FORMATS.values() if f.kind != "int"} | set(device.CB_INT_FORMATS) <= \
        set(formats) <= set(device.TILE_FORMATS)
    for name, (value, datum_bits, exponent_bytes, tile_bytes) in formats.items():
        f = device.TILE_FORMATS[name]
        assert (value, datum_bits, exponent_bytes, tile_bytes) == (f.value, f.datum_bits, f.exponent_bytes,
                                                                  f.tile_bytes), name
    archs = {r[1]: [int(x) for x in r[2:]] for r in rows if r[0] == "arch"}
    assert set(archs) == set(device.DEVICES)
    for name, values in archs.items():
        d = device.DEVICES[name]
        assert values == [d.grid_x, d.grid_y, d.l1_bytes, d.l1_unreserved_base, d.mem_zeros_base, d.mem_zeros_size,
                          d.dram_banks, d.num_cbs, d.dst_tiles, d.dst_tiles_fp32, d.dram_alignment, d.l1_alignment,
                          len(d.noc_ids), d.max_runtime_args], name


def test_generator_runs_without_the_package(tmp_path):
    # A fresh clone under `pip install -e .`: tilelang_tt (and tilelang) are not importable yet.
    out = tmp_path / "hw.hpp"
    subprocess.run([sys.executable, "-S", "-I", str(GENERATOR), str(out)], check=True, cwd=tmp_path)
    assert out.read_text() == _generated()


# L1 per core above the firmware reserve, worked out by hand from the tt-metal 0.81.1 sources device.py cites:
# MEM_L1_SIZE (dev_mem_map.h) minus DEFAULT_UNRESERVED = align_up(MEM_MAP_END + 69 KiB kernel-config buffer,
# max(DRAM, L1 alignment)).
#   wormhole_b0: 1464 KiB = 1,499,136; 0x8960 = 35,168 + 70,656 = 105,824 (a multiple of 32) -> 1,393,312
#   blackhole:   1536 KiB = 1,572,864; 0xA080 = 41,088 + 70,656 = 111,744 (a multiple of 64) -> 1,461,120
USABLE_L1 = {"wormhole_b0": 1_393_312, "blackhole": 1_461_120}


def test_usable_l1_is_the_sdk_number():
    for arch, usable in USABLE_L1.items():
        d = device.DEVICES[arch]
        assert d.l1_usable_bytes == usable, arch
        assert d.mem_zeros_base + d.mem_zeros_size <= d.l1_unreserved_base


# bf16 384x384xK GEMM, fp32 accumulator, one 384x384 block per core (1 block: one core). Its CBs, by hand: the
# accumulator C_l (fp32, 589,824 B) and C's output CB (bf16, double-buffered, 589,824 B), B_s (bk x 384 bf16,
# double-buffered, 1,536 bk B) and A_s (384 x bk, 1,536 bk B) unless it streams in bands of one tile row (two bands of
# bk / 32 tiles, 128 bk B). Issue 9: bk = 64 failed on the emulator's old 128 KiB reserve; bk = 96 compiled and then
# failed for lack of L1 before StreamBandsTT.
ACC_AND_OUT = 589_824 * 2
L1_CASES = [  # (arch, bk, CB bytes, outcome)
    ("wormhole_b0", 64, ACC_AND_OUT + 1_536 * 64 * 2, "fits"),                  # 1,376,256
    ("wormhole_b0", 96, ACC_AND_OUT + 1_536 * 96 + 128 * 96, "banded"),         # 1,474,560 unbanded
    ("wormhole_b0", 160, ACC_AND_OUT + 1_536 * 160 + 128 * 160, "refused"),     # 1,445,888 even banded
    ("blackhole", 160, ACC_AND_OUT + 1_536 * 160 + 128 * 160, "banded"),        # ... fits blackhole's 1,461,120
]


@pytest.mark.parametrize("arch,block_k,cb_bytes,outcome", L1_CASES,
                         ids=[f"{a}-k{k}-{o}" for a, k, _, o in L1_CASES])
def test_l1_budget_gemm_compiles_only_if_it_runs(arch, block_k, cb_bytes, outcome, tmp_path, monkeypatch):
    """What fits the usable L1 (USABLE_L1) compiles and runs on tt-sim, whose L1 is the SDK's; what does not is
    refused at compile time with our error naming the usable bytes."""
    monkeypatch.setenv("TILELANG_TT_CACHE_DIR", str(tmp_path))
    size = 384
    func = one_block_gemm(size, block_k)
    if outcome == "refused":
        with pytest.raises(TTError, match=rf"circular buffers need {cb_bytes} bytes of L1 per core, more than the "
                                          rf"{USABLE_L1[arch]} bytes a kernel can use on {arch}"):
            tilelang.compile(func, target=f"tt -arch={arch}")
        return
    kernel = tilelang.compile(func, target=f"tt -arch={arch}")
    cbs = {c["name"]: c for c in kernel.plan["cbs"]}
    assert sum(c["bytes"] for c in cbs.values()) == cb_bytes <= USABLE_L1[arch]
    assert ("band" in cbs["A_s"]) == (outcome == "banded")
    import torch

    gen = torch.Generator().manual_seed(0)
    at = torch.randn(size, block_k, generator=gen).to(torch.bfloat16)
    bt = torch.randn(block_k, size, generator=gen).to(torch.bfloat16)
    c = torch.empty(size, size, dtype=torch.bfloat16)
    kernel(at, bt, c)   # raises with the emulator's message if L1 runs out
    assert torch.allclose(c.float(), (at.float() @ bt.float()), rtol=0.05, atol=0.5)


def test_templates_take_tile_geometry_from_the_table():
    """The kernel templates spell no tile/face geometry of their own: sizes come from the table's TILE and FACE."""
    import re

    templates = ROOT / "python" / "tilelang_tt" / "templates"
    for path in [*templates.glob("*.cpp.j2"), *templates.glob("*.h.j2")]:
        code = re.sub(r"//[^\n]*", "", path.read_text())
        literals = re.findall(r"(?<![\w.])(16|32|256|512|1024)(?![\w.])", code)
        assert not literals, f"{path.name}: geometry literals {literals}; render them from tilelang_tt.device"
    from tests.tt.helpers import artifact
    from examples import kernels as K

    helpers = artifact(K.softmax(M=64, N=64)).files["kernels/dataflow_helpers.h"]
    assert f"constexpr uint32_t kTileDim = {device.TILE};" in helpers
    assert f"constexpr uint32_t kFaceDim = {device.FACE};" in helpers
