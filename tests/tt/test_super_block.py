"""SuperBlockTT: a core's blocks fused into one per-core block, and the automatic choice of multicast.

A fused kernel must give bit-for-bit the result of the same kernel run block by block without multicast (each
output element sums the same products in the same K order) and match torch; its DRAM counters must equal the
traffic the fusion factor implies: with multicast A is read W / w times and B H / h times, where H x W is the
core's rectangle of user blocks and h x w the fused part of it (the minimum, A + B + C once, when the whole
rectangle fits L1). The factor and the lattice come from the plan; the tensor sizes from the test.
"""

import os
from pathlib import Path

import pytest
import tilelang
import tilelang.language as T
import torch

import tilelang_tt  # noqa: F401
from examples import kernels as K
from tilelang_tt.device import get_device

ARCHS = ("wormhole_b0", "blackhole")
BF16_TILE = 32 * 32 * 2


def _protocol_counts(kernel):
    kernel.emulate(*[torch.zeros(*b["shape"], dtype=torch.bfloat16) for b in kernel.plan["buffers"]],
                   protocol_only=True)
    return kernel.report["total"]


def _user_rect(plan):
    """H x W: the user blocks of one core's rectangle (user grid / core lattice)."""
    gy, gx = plan["super_block"]["grid"]
    rows, cols = plan["multicast"]["lattice"]
    return gy // rows, gx // cols


# (M, N): a block grid whose core lattice has as many 32x32 blocks per core (2x2) as the contiguous split's busiest
# core: wormhole 16x16 blocks on 8x8 cores, blackhole 20x22 blocks on 10x11 cores
FUSED_SHAPES = {"wormhole_b0": (512, 512), "blackhole": (640, 704)}


@pytest.mark.parametrize("arch", ARCHS)
def test_fused_design_gemm_reads_each_tile_once_and_matches_torch(arch):
    (M, N), K_ = FUSED_SHAPES[arch], 64
    torch.manual_seed(4)
    a, b = torch.randn(M, K_, dtype=torch.bfloat16), torch.randn(K_, N, dtype=torch.bfloat16)
    fused = tilelang.compile(K.design_gemm(M, N, K_), target=f"tt -arch={arch}")
    plain = tilelang.compile(K.design_gemm(M, N, K_), target=f"tt -arch={arch} -multicast=false")
    sb = fused.plan["super_block"]
    # no schedule choice: multicast is automatic
    assert sb["multicast"] == "automatic" and sb["block"] == [32, 32] and sb["grid"] == [M // 32, N // 32]
    assert sb["factor"] == list(_user_rect(fused.plan)) == [2, 2]
    assert sb["k_steps"] == K_ // 32      # both K steps in one: A_s 64x64, B_s 64x64
    assert "super_block" not in plain.plan and "multicast" not in plain.plan
    c, c_plain = torch.zeros(M, N, dtype=torch.bfloat16), torch.zeros(M, N, dtype=torch.bfloat16)
    fused(a, b, c)
    plain(a, b, c_plain)
    assert torch.equal(c, c_plain)
    ref = a.float() @ b.float()
    assert (c.float() - ref).abs().max() <= (K_ // 32) * 2**-8 * ref.abs().max()
    total = fused.report["total"]
    mt, nt, kt = M // 32, N // 32, K_ // 32
    assert total["dram_read_bytes"] == (mt * kt + kt * nt) * BF16_TILE
    assert total["dram_write_bytes"] == mt * nt * BF16_TILE
    assert plain.report["total"]["dram_read_bytes"] > total["dram_read_bytes"]


def _scaled_store_gemm(M, N, K_):
    """An epilogue that stores straight from a T.Parallel (no T.copy), reading the accumulator twice."""
    @T.prim_func
    def gemm(A: T.Tensor((M, K_), "bfloat16"), B: T.Tensor((K_, N), "bfloat16"),
             C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(N // 32, M // 32, threads=128) as (bx, by):
            A_s = T.alloc_shared((32, 32), "bfloat16")
            B_s = T.alloc_shared((32, 32), "bfloat16")
            C_f = T.alloc_fragment((32, 32), "float")
            T.clear(C_f)
            for k in T.serial(K_ // 32):
                T.copy(A[by * 32, k * 32], A_s)
                T.copy(B[k * 32, bx * 32], B_s)
                T.gemm(A_s, B_s, C_f)
            for i, j in T.Parallel(32, 32):
                C[by * 32 + i, bx * 32 + j] = C_f[i, j] * 0.5 + C_f[i, j]

    return gemm


@pytest.mark.parametrize("arch,which", [("wormhole_b0", "bias_relu"), ("blackhole", "bias_relu"),
                                        ("wormhole_b0", "scaled_store")])
def test_fused_gemm_runs_a_parallel_epilogue_per_user_block(arch, which):
    """A T.Parallel epilogue (bias + relu in place, then T.copy; or a direct store) does not stop the fusion: each
    user block's epilogue runs unchanged on a copy of its window of the fused accumulator. Bit-identical to the
    block-by-block kernel, A and B cross DRAM once, the epilogue's own reads (bias) are the same in both."""
    (M, N), K_ = FUSED_SHAPES[arch], 64
    torch.manual_seed(6)
    a, b = torch.randn(M, K_, dtype=torch.bfloat16), torch.randn(K_, N, dtype=torch.bfloat16)
    bias = torch.randn(N, dtype=torch.bfloat16)
    if which == "bias_relu":
        make, args = (lambda: K.gemm_bias_relu(M, N, K_, 32, 32, 32)), (a, b, bias)
        ref = torch.relu(a.float() @ b.float() + bias.float())
    else:
        make, args = (lambda: _scaled_store_gemm(M, N, K_)), (a, b)
        ref = 1.5 * (a.float() @ b.float())
    fused = tilelang.compile(make(), target=f"tt -arch={arch}")
    plain = tilelang.compile(make(), target=f"tt -arch={arch} -multicast=false")
    sb = fused.plan["super_block"]
    assert sb["factor"] == list(_user_rect(fused.plan)) == [2, 2] and sb["multicast"] == "automatic"
    c, c_plain = torch.zeros(M, N, dtype=torch.bfloat16), torch.zeros(M, N, dtype=torch.bfloat16)
    fused(*args, c)
    plain(*args, c_plain)
    assert torch.equal(c, c_plain)
    # bf16 products summed in fp32 at HiFi2 (SrcB's operand keeps 7 bits: 2^-7 of sum |a||b|), packed to bf16
    mag = a.float().abs() @ b.float().abs() * (1.5 if which == "scaled_store" else 1.0)
    assert ((c.float() - ref).abs() <= 2**-8 * ref.abs() + 2**-7 * mag + 2**-8 * bias.float().abs()).all()
    mt, nt, kt = M // 32, N // 32, K_ // 32
    fused_total, plain_total = fused.report["total"], plain.report["total"]
    epilogue_reads = plain_total["dram_read_bytes"] - mt * nt * 2 * kt * BF16_TILE   # the bias, per user block
    assert fused_total["dram_read_bytes"] == (mt * kt + kt * nt) * BF16_TILE + epilogue_reads
    assert fused_total["dram_write_bytes"] == plain_total["dram_write_bytes"] == M * N * 2


def test_l1_bounds_the_fusion_and_traffic_follows_the_factor():
    """Two cores hold a 1024x1024 output of 128x128 fp32-accumulated blocks: a 4x8-block rectangle each, whose
    fused accumulator (2 MB) exceeds L1; the pass fuses the largest part that fits and A / B are re-read
    accordingly."""
    arch, M, N, K_ = "wormhole_b0", 1024, 1024, 64
    make = lambda: K.tilelang_example_gemm(M, N, K_, 128, 128, 32, dtype="bfloat16", accum_dtype="float32")  # noqa
    # HiFi4: bf16 products are exact (HiFi2 keeps 7 bits of SrcB's operand)
    fused = tilelang.compile(make(), target=f"tt -arch={arch} -multicast=true -max_cores=2 -math_fidelity=HiFi4")
    plain = tilelang.compile(make(), target=f"tt -arch={arch} -multicast=false -max_cores=2 -math_fidelity=HiFi4")
    plan = fused.plan
    H, W = _user_rect(plan)
    h, w = plan["super_block"]["factor"]
    usable = get_device(arch).l1_usable_bytes
    assert H * 128 * W * 128 * 4 > usable            # the whole rectangle's fp32 accumulator alone overflows L1
    assert h * w > 1 and (h, w) != (H, W) and H % h == 0 and W % w == 0
    assert sum(cb["bytes"] for cb in plan["cbs"]) <= usable
    torch.manual_seed(5)
    a, b = torch.randn(M, K_, dtype=torch.bfloat16), torch.randn(N, K_, dtype=torch.bfloat16)
    c, c_plain = torch.empty(M, N, dtype=torch.bfloat16), torch.empty(M, N, dtype=torch.bfloat16)
    fused(a, b, c)
    plain(a, b, c_plain)
    assert torch.equal(c, c_plain)
    ref = a.float() @ b.float().T
    # fp32 sums (K 2^-24 each, for tt-sim and torch), the accumulator copied to DST through SrcA as TF32 (truncation,
    # < 2^-10 relative, docs/emulator.md) and packed to bf16 (unit roundoff 2^-8)
    mag = a.float().abs() @ b.float().abs().T
    assert ((c.float() - ref).abs() <= (2**-8 + 2**-10) * ref.abs() + 2 * K_ * 2**-24 * mag).all()
    total = fused.report["total"]
    a_bytes, b_bytes = M * K_ * 2, N * K_ * 2
    assert total["dram_read_bytes"] == a_bytes * (W // w) + b_bytes * (H // h)
    assert total["dram_write_bytes"] == M * N * 2


def test_automatic_multicast_follows_the_roofline():
    """Automatic multicast is taken when the roofline (PERF_ANCHORS sec. 8, device.PERF) models the lattice faster.
    A 10x9 grid of 32x32 blocks: wormhole's 8x8 cores hold it as a 5x5 lattice of 2x2-block rectangles, the last
    lattice column reaching one block past the grid (padded to 10x10: 4 blocks per core where the exact 5x3
    lattice has 6 and the contiguous split 2), blackhole's 11x10 one block per core; both DRAM-bound without
    reuse, so both multicast. A 1x65 grid of 128x128 blocks with K = 8192 on wormhole: the lattice is 1x8 with 9
    blocks per core (72 padded) where the contiguous split gives 2 per core: 1.5 ms of HiFi2 tile-MACs against
    1.4 ms of DRAM for the contiguous split, so it stays contiguous."""
    wh = tilelang.compile(K.design_gemm(320, 288, 64), target="tt -arch=wormhole_b0")
    bh = tilelang.compile(K.design_gemm(320, 288, 64), target="tt -arch=blackhole")
    assert wh.plan["super_block"] == {"factor": [2, 2], "k_steps": 2, "block": [32, 32], "grid": [10, 9],
                                      "padded_grid": [10, 10], "multicast": "automatic"}
    assert wh.plan["multicast"]["lattice"] == [5, 5]
    assert bh.plan["super_block"]["factor"] == [1, 1] and bh.plan["multicast"]["lattice"] == [10, 9]
    assert "padded_grid" not in bh.plan["super_block"]
    wide = tilelang.compile(K.tilelang_example_gemm(128, 8320, 8192, dtype="bfloat16", accum_dtype="float32"),
                            target="tt -arch=wormhole_b0")
    assert "multicast" not in wide.plan and "super_block" not in wide.plan and wide.plan["policy"] == "contiguous"
    forced = tilelang.compile(K.tilelang_example_gemm(128, 8320, 8192, dtype="bfloat16", accum_dtype="float32"),
                              target="tt -arch=wormhole_b0 -multicast=true")
    assert forced.plan["multicast"]["lattice"] == [1, 8] and forced.plan["super_block"]["multicast"] == "target"
    assert forced.plan["super_block"]["padded_grid"] == [1, 72]


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_ragged_lattice_runs_every_block_once(arch):
    """A 5x7 grid of 32x32 blocks on 4 cores: 5x2-block rectangles on a 1x4 lattice, the grid padded to 5x8 (the
    last core's rectangle reaches one block column past C). The padded blocks read zeros and store nothing: C's
    elements equal torch's exactly (small integers: every product and sum is exact in bf16 and fp32), and the DRAM
    counters are the lattice's: A read once per fused block column of a core, B once, C written once."""
    M, N, K_ = 160, 224, 64
    kernel = tilelang.compile(K.design_gemm(M, N, K_), target={"kind": "tt", "arch": arch, "max_cores": 4,
                                                                 "multicast": True})
    sb = kernel.plan["super_block"]
    assert sb["grid"] == [5, 7] and sb["padded_grid"] == [5, 8] and kernel.plan["multicast"]["lattice"] == [1, 4]
    torch.manual_seed(3)
    a = torch.randint(-3, 4, (M, K_)).to(torch.bfloat16)
    b = torch.randint(-3, 4, (K_, N)).to(torch.bfloat16)
    c = torch.full((M, N), 1000.0, dtype=torch.bfloat16)
    kernel(a, b, c)
    assert torch.equal(c.float(), a.float() @ b.float())
    h, w = sb["factor"]
    total = kernel.report["total"]
    # A's row panel is multicast along the lattice row once per fused block column of a core (2 // w); B's column
    # panels once per fused block row (5 // h); the padded column past N reads nothing
    assert total["dram_read_bytes"] == M * K_ * 2 * (2 // w) + K_ * N * 2 * (5 // h)
    assert total["dram_write_bytes"] == M * N * 2


def test_ragged_lattice_is_not_taken_when_padded_blocks_would_store():
    """A grid that covers only part of C (6x7 blocks of a 192x256 C) on 4 cores: the ragged 2x2 lattice of 3x4-block
    rectangles would pad the grid to 6x8, and the padded blocks would land inside C, so the exact 3x1 lattice of
    2x7-block rectangles runs instead and C's last block column keeps its values."""
    part = _annotated_gemm(192, 256, grid=(7, 6))
    kernel = tilelang.compile(part, target={"kind": "tt", "max_cores": 4, "multicast": True})
    assert "padded_grid" not in kernel.plan["super_block"] and kernel.plan["multicast"]["lattice"] == [3, 1]
    a = torch.randint(-3, 4, (192, 64)).to(torch.bfloat16)
    b = torch.randint(-3, 4, (64, 256)).to(torch.bfloat16)
    c = torch.full((192, 256), 1000.0, dtype=torch.bfloat16)
    kernel(a, b, c)
    assert torch.equal(c[:, :224].float(), a.float() @ b[:, :224].float())
    assert (c[:, 224:] == 1000).all()


def _annotated_gemm(m: int = 512, n: int = 512, grid: tuple = (16, 16), **schedule):
    """An m x n x 64 GEMM of 32x32 blocks over a (grid_x, grid_y) grid (it may cover part of C), annotated."""
    @T.prim_func
    def gemm(A: T.Tensor((m, 64), "bfloat16"), B: T.Tensor((64, n), "bfloat16"),
             C: T.Tensor((m, n), "bfloat16")):
        with T.Kernel(grid[0], grid[1], threads=128) as (bx, by):
            A_blk = T.alloc_shared((32, 32), "bfloat16")
            B_blk = T.alloc_shared((32, 32), "bfloat16")
            C_acc = T.alloc_fragment((32, 32), "bfloat16")
            if schedule:
                T.annotate_tt_schedule(**schedule)
            T.clear(C_acc)
            for kk in T.serial(2):
                T.copy(A[by * 32, kk * 32], A_blk)
                T.copy(B[kk * 32, bx * 32], B_blk)
                T.gemm(A_blk, B_blk, C_acc)
            T.copy(C_acc, C[by * 32, bx * 32])

    return gemm


def test_multicast_false_and_explicit_schedules_are_kept():
    kernel = tilelang.compile(_annotated_gemm(multicast=False), target="tt -arch=wormhole_b0 -multicast=true")
    assert "multicast" not in kernel.plan and "super_block" not in kernel.plan   # the annotation wins
    for schedule in (dict(policy="strided"), dict(policy="rect"), dict(order="block_linear(2)")):
        kernel = tilelang.compile(_annotated_gemm(**schedule), target="tt -arch=wormhole_b0")
        assert "multicast" not in kernel.plan and "super_block" not in kernel.plan, schedule
    kernel = tilelang.compile(_annotated_gemm(multicast=True), target="tt -arch=wormhole_b0")
    assert kernel.plan["super_block"]["multicast"] == "annotation" and kernel.plan["super_block"]["factor"] == [2, 2]


@pytest.mark.parametrize("which", ["design", "example"])
def test_4096_gemm_on_wormhole_moves_the_minimum(which):
    """The issue's benchmark shape: 4096^3 bf16 on wormhole_b0's 8x8 cores, the user's 32x32 or 128x128 blocks
    (fp32 accumulator), with the automatic choice (protocol-only counters). Both fuse their whole rectangle: A, B
    and C cross DRAM once. The example's 512x512 fp32 accumulator (1 MB) leaves no room for a whole 512x128 A
    block beside B's two: StreamBandsTT streams A in 1x4-tile bands (one per subblock row), which keeps 4 K tiles
    per step, so packing the partial sums with L1 accumulation stays below the unpacker's time."""
    n = 4096
    func = K.design_gemm(n, n, n) if which == "design" else K.tilelang_example_gemm(
        n, n, n, dtype="bfloat16", accum_dtype="float32")
    kernel = tilelang.compile(func, target="tt -arch=wormhole_b0")
    sb = kernel.plan["super_block"]
    assert sb["multicast"] == "automatic"
    H, W = _user_rect(kernel.plan)
    h, w = sb["factor"]
    assert (h, w) == (H, W)   # one block per core
    cbs = {cb["name"]: cb for cb in kernel.plan["cbs"]}
    assert sum(cb["bytes"] for cb in cbs.values()) <= get_device("wormhole_b0").l1_usable_bytes
    if which == "example":
        assert sb["k_steps"] == 4 and cbs["A_shared"]["band"] == {"rows": 1, "pages": 4, "depth": 2}
        assert cbs["B_shared"]["num_pages"] == 2 * 16 * 4          # B stays double-buffered
        model = kernel.report["model"]
        assert model["bound"] == "unpack" and model["terms_seconds"]["pack"] < model["terms_seconds"]["unpack"]
    total = _protocol_counts(kernel)
    assert total["dram_read_bytes"] == n * n * 2 * (W // w + H // h)
    assert total["dram_write_bytes"] == n * n * 2


@pytest.mark.skipif(os.environ.get("TILELANG_TT_REAL_CHECK") == "0", reason="real-header check disabled")
@pytest.mark.parametrize("arch", ARCHS)
def test_fused_artifacts_pass_the_real_header_check(arch):
    from tilelang_tt.realcheck import check_artifact

    kernel = tilelang.compile(K.tilelang_example_gemm(512, 512, 64, 128, 128, 32, dtype="bfloat16",
                                                      accum_dtype="float32"),
                              target=f"tt -arch={arch} -multicast=true -max_cores=4")
    assert kernel.plan["super_block"]["factor"] == [2, 2]
    result = check_artifact(Path(kernel.artifact_dir))
    assert result.ok, result


@pytest.mark.parametrize("arch", ARCHS)
def test_multicast_flag_flush_follows_the_hardware_table(arch):
    """The sender flushes its data writes before the VALID flag only where the hardware table says the NoC may
    reorder them (Blackhole); both forms run on tt-sim and match the unicast kernel bit for bit. The kernel is
    TileLang's example GEMM (B transposed, T.Pipelined, C staged in shared) with multicast asked for, so every core
    of its 2x2 lattice both sends one operand and receives the other."""
    func = lambda: K.tilelang_example_gemm(512, 512, 64, 128, 128, 32, dtype="bfloat16",  # noqa: E731
                                           accum_dtype="float32")
    mc = tilelang.compile(func(), target=f"tt -arch={arch} -multicast=true -max_cores=4")
    uc = tilelang.compile(func(), target=f"tt -arch={arch} -multicast=false -max_cores=4")
    assert mc.plan["multicast"]["lattice"] == [2, 2] and "multicast" not in uc.plan
    reader = (Path(mc.artifact_dir) / "kernels" / "reader.cpp").read_text()
    flushes = reader.count("noc_async_writes_flushed();")
    assert flushes == (2 if get_device(arch).mcast_flush_before_flag else 0)   # one per operand's multicast
    assert get_device(arch).mcast_flush_before_flag == (arch == "blackhole")
    torch.manual_seed(9)
    a, b = torch.randn(512, 64, dtype=torch.bfloat16), torch.randn(512, 64, dtype=torch.bfloat16)
    c_mc, c_uc = torch.zeros(512, 512, dtype=torch.bfloat16), torch.zeros(512, 512, dtype=torch.bfloat16)
    mc(a, b, c_mc)
    uc(a, b, c_uc)
    assert torch.equal(c_mc, c_uc)
    # fp32 accumulation of bf16 products at HiFi2 (in0 keeps 7 mantissa bits: 2^-7 of sum |a||b|), packed to bf16
    ref, mag = a.float() @ b.float().T, a.float().abs() @ b.float().abs().T
    assert ((c_mc.float() - ref).abs() <= 2**-8 * ref.abs() + 2**-7 * mag).all()
    assert mc.report["total"]["noc_multicast_bytes"] > 0
