"""StreamBandsTT: a matmul's A block streamed in subblock-row bands when the whole block does not fit L1.

The kernel: TileLang's example GEMM (128x128x32 blocks, fp32 accumulator) at 512x1024x256 on a 1x2 core lattice
(``max_cores=2``, multicast). Each core fuses its 4x4 user blocks into one 512x512 block (SuperBlockTT): the fp32
partial sums take 1 MB, B's two 512x128 blocks 256 KB, so A's two 512x128 blocks (256 KB) do not fit beside them;
A arrives in 1x4-tile bands (two in the CB) and is multicast along the core row band by band. The result must
match torch, every A and B tile must cross DRAM once, and the emulator must stop each seeded protocol bug below.
"""

import pytest
import tilelang
import tilelang.language as T
import torch

import tilelang_tt  # noqa: F401
from examples import kernels as K
from tilelang_tt import emulator
from tilelang_tt.device import get_device
from tilelang_tt.emulator import TTSimError
from tilelang_tt.transform import stream_bands

from .helpers import broken_copy

ARCHS = ("wormhole_b0", "blackhole")
M, N, K_ = 512, 1024, 256
TILE_BF16 = 32 * 32 * 2


def _gemm():
    return K.tilelang_example_gemm(M, N, K_, 128, 128, 32, dtype="bfloat16", accum_dtype="float32")


def _compile(arch):
    # HiFi4: bf16 products are exact, so only the fp32 sums and the final bf16 pack round
    return tilelang.compile(_gemm(), target=f"tt -arch={arch} -multicast=true -max_cores=2 -math_fidelity=HiFi4")


@pytest.mark.parametrize("arch", ARCHS)
def test_banded_a_matches_torch_and_crosses_dram_once(arch):
    kernel = _compile(arch)
    plan = kernel.plan
    assert plan["super_block"]["factor"] == [4, 4] and plan["super_block"]["k_steps"] == 4
    cbs = {cb["name"]: cb for cb in plan["cbs"]}
    a = cbs["A_shared"]
    assert a["band"] == {"rows": 1, "pages": 4, "depth": 2} and a["num_pages"] == 8 and a["bytes"] == 8 * TILE_BF16
    usable = get_device(arch).l1_usable_bytes
    total = sum(cb["bytes"] for cb in cbs.values())
    assert total <= usable < total - a["bytes"] + 2 * 16 * 4 * TILE_BF16   # the whole double-buffered A would not fit
    assert "band" not in cbs["B_shared"] and cbs["B_shared"]["num_pages"] == 2 * 16 * 4
    assert [g["cb"] for g in plan["multicast"]["groups"]] == ["A_shared"]   # A is multicast along the core row
    torch.manual_seed(7)
    a_in, b_in = torch.randn(M, K_, dtype=torch.bfloat16), torch.randn(N, K_, dtype=torch.bfloat16)
    c = torch.empty(M, N, dtype=torch.bfloat16)
    kernel(a_in, b_in, c)
    ref = a_in.float() @ b_in.float().T
    # fp32 sums (K 2^-24 each), the accumulator copied to DST through SrcA as TF32 (< 2^-10 relative) and packed to
    # bf16 (unit roundoff 2^-8): as test_super_block's fused GEMM
    mag = a_in.float().abs() @ b_in.float().abs().T
    assert ((c.float() - ref).abs() <= (2**-8 + 2**-10) * ref.abs() + 2 * K_ * 2**-24 * mag).all()
    counts = kernel.report["total"]
    assert counts["dram_read_bytes"] == (M * K_ + N * K_) * 2
    assert counts["dram_write_bytes"] == M * N * 2


def _row_major_gemm(M, N, K_, block=128, block_K=32):
    """The same GEMM with B stored K x N (not transposed): LowerToTTProgram runs ``matmul_block`` over each DST
    subblock, reading its A rows from the band."""

    @T.prim_func
    def gemm(A: T.Tensor((M, K_), "bfloat16"), B: T.Tensor((K_, N), "bfloat16"), C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(N // block, M // block, threads=128) as (bx, by):
            A_s = T.alloc_shared((block, block_K), "bfloat16")
            B_s = T.alloc_shared((block_K, block), "bfloat16")
            C_l = T.alloc_fragment((block, block), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(K_ // block_K, num_stages=2):
                T.copy(A[by * block, ko * block_K], A_s)
                T.copy(B[ko * block_K, bx * block], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block, bx * block])

    return gemm


def test_banded_a_feeds_matmul_block():
    kernel = tilelang.compile(_row_major_gemm(M, N, K_),
                              target="tt -arch=wormhole_b0 -multicast=true -max_cores=2 -math_fidelity=HiFi4")
    cbs = {cb["name"]: cb for cb in kernel.plan["cbs"]}
    sh = cbs["C_l"]["subblock"][0]
    assert cbs["A_s"]["band"] == {"rows": sh, "pages": sh * 4, "depth": 2}
    compute = (kernel.artifact_dir / "kernels" / "compute.cpp").read_text()
    assert "matmul_block(cb_A_s, cb_B_s, kt," in compute      # A's tile index is relative to the band
    torch.manual_seed(8)
    a_in, b_in = torch.randn(M, K_, dtype=torch.bfloat16), torch.randn(K_, N, dtype=torch.bfloat16)
    c = torch.empty(M, N, dtype=torch.bfloat16)
    kernel(a_in, b_in, c)
    ref = a_in.float() @ b_in.float()
    mag = a_in.float().abs() @ b_in.float().abs()
    assert ((c.float() - ref).abs() <= (2**-8 + 2**-10) * ref.abs() + 2 * K_ * 2**-24 * mag).all()


def test_a_kernel_that_fits_is_not_banded():
    kernel = tilelang.compile(_gemm(), target="tt -arch=wormhole_b0 -multicast=false")
    assert not any("band" in cb for cb in kernel.plan["cbs"])


@pytest.fixture(scope="module")
def banded():
    return _compile("wormhole_b0")


def _inputs(kernel):
    torch.manual_seed(0)
    return {b["param_index"]: torch.randn(*b["shape"]).to(torch.bfloat16) for b in kernel.plan["buffers"]}


# (name, the generated line, its broken form, the emulator's report)
CORPUS = [
    ("band_index_absolute", "matmul_block(cb_A_shared, cb_B_shared, kt,",
     "matmul_block(cb_A_shared, cb_B_shared, sm * 4u + kt,",
     r"matmul_tiles reads tile 4 of CB 0 but only 4 pages were obtained with cb_wait_front"),
    ("waits_for_whole_block", "cb_wait_front(cb_A_shared, 4);", "cb_wait_front(cb_A_shared, 64);",
     r"cb_wait_front\(0, 64\): the CB holds only 8 pages"),
]


@pytest.mark.parametrize("case", CORPUS, ids=[c[0] for c in CORPUS])
def test_emulator_stops_a_broken_band_protocol(case, tmp_path, banded):
    name, old, new, message = case
    broken = broken_copy(banded.artifact_dir, tmp_path / "artifact", "kernels/compute.cpp", old, new)
    with pytest.raises(TTSimError, match=message):
        emulator.run(broken, banded.plan, _inputs(banded), timeout_s=120)


def test_reader_order_matters(monkeypatch):
    """Without moving A's read after B's, the reader fills A's two bands and waits for compute to pop one, while
    compute waits for B first: the emulator reports the deadlock."""
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    monkeypatch.setattr(stream_bands, "_reorder", lambda body, seq, read, matmul: body)
    kernel = _compile("wormhole_b0")
    with pytest.raises(TTSimError, match=r"deadlock: every unfinished kernel is blocked(.|\n)*"
                                         r"blocked in cb_reserve_back\(cb=0, n=4\) \[8 of 8 pages in use\]"):
        emulator.run(kernel.artifact_dir, kernel.plan, _inputs(kernel), timeout_s=120)
