"""Kernels run on tt-sim (the exact generated host program and kernels) and are checked against torch.

Tolerances, and why (the emulator's numeric model is in docs/emulator.md):
* fp32 elementwise: exact. The generator copies fp32 operands into DST with unpack-to-DEST (no TF32 narrowing)
  and adds them on the SFPU in fp32; pack to fp32 is exact.
* bf16 elementwise add: exact against torch's bf16 add: both compute in fp32 and round once to bf16 (RNE).
* fp16 in / fp32 accumulate GEMM (HiFi4): B (matmul in1) goes through SrcA, whose multiplier uses 9 of fp16's 10
  mantissa bits (truncation: < 2^-9 relative per product); A through SrcB is exact; products and sums are fp32
  (K * 2^-24, and as much again for torch's fp32 reference); fp32 partials reload exactly (unpack-to-DEST); the
  output is rounded to fp16 (2^-11 relative): per element |err| <= (2^-9 + 2 K 2^-24) sum_k |a||b| + 2^-11 |ref|
  (fp16_gemm_bound).
* bf16 GEMM with a bf16 accumulator (the design's GEMM): DST holds 16-bit values, so each of the Kt partial
  sums is rounded to bf16 (2^-8 relative): |err| <= Kt * 2^-8 * max|ref|.
* fused exp(a) * b + 1 in bf16: three roundings to bf16 in DST and one on pack: |err| <= 4 * 2^-8 * max|ref|.
"""

import numpy as np
import pytest
import tilelang
import torch

from examples import kernels as K
from tilelang_tt.blockfloat import tilize, untilize

POLICIES = [None, dict(policy="strided"), dict(policy="rect"), dict(policy="contiguous", order="block_linear(2)")]
ARCHS = ["wormhole_b0", "blackhole"]


def with_schedule(func, schedule):
    """The same kernel with T.annotate_tt_schedule(**schedule) injected as a block attribute."""
    if schedule is None:
        return func
    from tvm import tirx

    from tilelang_tt import attrs
    from tilelang_tt.schedule import make_schedule_spec

    spec = make_schedule_spec(**schedule).as_dict()

    def add(node):
        if isinstance(node, tirx.SBlock) and node.name_hint == "tilelang_root":
            return tirx.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint, node.body, node.init,
                               node.alloc_buffers, node.match_buffers,
                               {**dict(node.annotations), attrs.SCHEDULE_ANNOTATION: spec})
        return None

    return func.with_body(tirx.stmt_functor.ir_transform(func.body, None, add, ["tirx.SBlock"]))


def fp16_gemm_bound(a, b_t, ref, k):
    """The per-element error bound of an fp16 GEMM (C = A @ B_t^T) under the emulator's model (module docstring)."""
    mag = a.float().abs() @ b_t.float().abs().T
    return (2**-9 + 2 * k * 2**-24) * mag + 2**-11 * ref.abs() + 2**-24


def compile_for(func, arch, schedule=None, max_cores=None):
    target = {"kind": "tt", "arch": arch}
    if max_cores:
        target["max_cores"] = max_cores
    return tilelang.compile(with_schedule(func, schedule), target=target)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("schedule", POLICIES, ids=["default", "strided", "rect", "block_linear"])
def test_design_gemm(arch, schedule):
    torch.manual_seed(1)
    M, N, K_ = 128, 192, 256
    kernel = compile_for(K.design_gemm(M, N, K_), arch, schedule, max_cores=10)
    # without a schedule choice SuperBlockTT turns multicast on: a 4x2 core lattice of 1x3-block rectangles holds the
    # 4x6 block grid with 3 blocks per core, as many as the contiguous split's busiest core; each rectangle is fused
    assert kernel.plan["policy"] == (schedule or {}).get("policy", "rect")
    if schedule is None:
        assert kernel.plan["super_block"] == {"factor": [1, 3], "k_steps": 4, "block": [32, 32], "grid": [4, 6],
                                              "multicast": "automatic"}
        assert kernel.plan["multicast"]["lattice"] == [4, 2]
    a, b = torch.randn(M, K_, dtype=torch.bfloat16), torch.randn(K_, N, dtype=torch.bfloat16)
    c = torch.zeros(M, N, dtype=torch.bfloat16)
    kernel(a, b, c)
    ref = a.float() @ b.float()
    assert (c.float() - ref).abs().max() <= (K_ // 32) * 2**-8 * ref.abs().max()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("schedule", POLICIES[:3], ids=["default", "strided", "rect"])
def test_tilelang_example_gemm(arch, schedule):
    torch.manual_seed(2)
    M, N, K_ = 256, 256, 128
    kernel = compile_for(K.tilelang_example_gemm(M, N, K_, 128, 128, 32), arch, schedule)
    a, b = torch.randn(M, K_, dtype=torch.float16), torch.randn(N, K_, dtype=torch.float16)
    c = torch.empty(M, N, dtype=torch.float16)
    kernel(a, b, c)
    ref = a.float() @ b.float().T
    assert ((c.float() - ref).abs() <= fp16_gemm_bound(a, b, ref, K_)).all()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("schedule", POLICIES[:3], ids=["default", "strided", "rect"])
def test_rectangular_blocks_64x128x64(arch, schedule):
    torch.manual_seed(3)
    M, N, K_ = 128, 256, 192
    kernel = compile_for(K.tilelang_example_gemm(M, N, K_, 64, 128, 64, num_stages=2), arch, schedule)
    a, b = torch.randn(M, K_, dtype=torch.float16), torch.randn(N, K_, dtype=torch.float16)
    c = kernel.emulate(a, b, torch.empty(M, N, dtype=torch.float16)) or None
    assert c is None   # no out_idx: outputs are written in place
    out = torch.empty(M, N, dtype=torch.float16)
    kernel(a, b, out)
    ref = a.float() @ b.float().T
    assert ((out.float() - ref).abs() <= fp16_gemm_bound(a, b, ref, K_)).all()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("schedule", POLICIES, ids=["default", "strided", "rect", "block_linear"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_elementwise_add(arch, schedule, dtype):
    torch.manual_seed(4)
    tdt = getattr(torch, dtype)
    kernel = compile_for(K.elementwise_add(160, 96, dtype), arch, schedule, max_cores=7)
    a, b = torch.randn(160, 96, dtype=tdt), torch.randn(160, 96, dtype=tdt)
    c = torch.empty(160, 96, dtype=tdt)
    kernel(a, b, c)
    assert torch.equal(c, a + b)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("schedule", POLICIES[:3], ids=["default", "strided", "rect"])
def test_fused_chain(arch, schedule):
    torch.manual_seed(5)
    kernel = compile_for(K.fused_chain(128, 128), arch, schedule)
    a, b = torch.randn(128, 128, dtype=torch.bfloat16), torch.randn(128, 128, dtype=torch.bfloat16)
    c = torch.empty(128, 128, dtype=torch.bfloat16)
    kernel(a, b, c)
    ref = torch.exp(a.float()) * b.float() + 1
    assert (c.float() - ref).abs().max() <= 4 * 2**-8 * ref.abs().max()


def test_out_idx_and_numpy_inputs():
    kernel = tilelang.compile(K.elementwise_add(64, 64, "float32"), out_idx=[2], target="tt")
    a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32)
    c = kernel(a, b)
    assert isinstance(c, torch.Tensor) and c.shape == (64, 64)
    np.testing.assert_array_equal(c.numpy(), a + b)
    out = np.zeros((64, 64), np.float32)
    kernel(a, b, out)
    np.testing.assert_array_equal(out, a + b)


def test_deterministic_runs_are_bit_identical():
    torch.manual_seed(6)
    kernel = compile_for(K.tilelang_example_gemm(256, 128, 96, 64, 64, 32), "wormhole_b0", dict(policy="strided"))
    a, b = torch.randn(256, 96, dtype=torch.float16), torch.randn(128, 96, dtype=torch.float16)
    outs, reports = [], []
    for _ in range(2):
        c = torch.empty(256, 128, dtype=torch.float16)
        kernel(a, b, c)
        outs.append(c)
        reports.append({k: v for k, v in kernel.report.items() if "seconds" not in k})
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))
    assert reports[0] == reports[1]


def test_counters_match_hand_computed_traffic():
    """Design GEMM, 32x32 blocks run one by one (multicast=False; the fused multicast traffic is tested in
    test_super_block.py): each output tile re-reads its row of A and column of B once."""
    M, N, K_ = 128, 96, 160
    Mt, Nt, Kt = M // 32, N // 32, K_ // 32
    kernel = compile_for(K.design_gemm(M, N, K_), "wormhole_b0", dict(multicast=False), max_cores=5)
    kernel(torch.randn(M, K_, dtype=torch.bfloat16), torch.randn(K_, N, dtype=torch.bfloat16),
           torch.empty(M, N, dtype=torch.bfloat16))
    total = kernel.report["total"]
    assert total["tiles_read"] == Mt * Nt * Kt * 2
    assert total["dram_read_bytes"] == Mt * Nt * Kt * 2 * 2048
    assert total["tiles_written"] == Mt * Nt and total["dram_write_bytes"] == Mt * Nt * 2048
    assert total["matmul_tiles"] == Mt * Nt * Kt and total["packs"] == Mt * Nt
    per_core = sorted(c["matmul_tiles"] for c in kernel.report["cores"])
    assert per_core == sorted(m["count"] * Kt for m in kernel.plan["mapping"])
    for core in kernel.report["cores"]:
        assert core["cb_high_water"]["0"] <= 2   # A_blk is double-buffered: never more than 2 pages queued


def test_protocol_only_counts_without_math():
    kernel = compile_for(K.design_gemm(128, 128, 128), "wormhole_b0")
    c = torch.full((128, 128), 7.0, dtype=torch.bfloat16)
    kernel.emulate(torch.randn(128, 128, dtype=torch.bfloat16), torch.randn(128, 128, dtype=torch.bfloat16), c,
                   protocol_only=True)
    assert kernel.report["protocol_only"] is True
    assert kernel.report["total"]["matmul_tiles"] == 4 * 4 * 4
    assert torch.all(c == 7.0)   # outputs untouched


def test_tilize_roundtrip_and_face_order():
    x = np.arange(64 * 96, dtype=np.float32).reshape(64, 96)
    flat = tilize(x).reshape(-1)
    # tile 1 is tile-row 0, tile-col 1; its face 1 starts at element (0, 48)
    assert flat[1024 + 256] == x[0, 48]
    assert flat[1024 + 512 + 16] == x[17, 32]     # face 2 row 1
    np.testing.assert_array_equal(untilize(flat, (64, 96)), x)


def test_concurrent_runs_share_the_kernel_cache(tmp_path):
    """Two processes run the same kernel against an empty cache at once: both compile (host program and
    kernels), both succeed, and the cache holds one complete object per kernel."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    script = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import torch, tilelang, tilelang_tt\n"
        "from examples import kernels as K\n"
        "k = tilelang.compile(K.elementwise_add(96, 64, 'float32'), target='tt')\n"
        "a, b = torch.randn(96, 64), torch.randn(96, 64)\n"
        "c = torch.empty(96, 64)\n"
        "k(a, b, c)\n"
        "assert torch.equal(c, a + b)\n"
        "print('ok')\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "TILELANG_TT_CACHE_DIR": str(tmp_path / "cache"),
           "TILELANG_TT_ARTIFACT_DIR": str(tmp_path / "artifacts")}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(root)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    assert all(o[0].strip().endswith("ok") for o in outs)
    kernels = sorted((tmp_path / "cache" / "sim-kernels").iterdir())
    assert len([k for k in kernels if k.suffix == ".so"]) == 3          # reader, compute, writer
    assert not [k for k in kernels if ".tmp" in k.name]                 # no half-written objects left
