"""Packer L1 accumulation of CB-resident GEMM accumulators (TensorizeTT ``accumulate``, LowerToTTProgram, tt-sim).

An accumulator too large for DST lives in its intermediate CB. With ``accumulate = "packer_l1"`` every K step's
subblock products are packed onto the partial sums with ``pack_reconfig_l1_acc(1)`` (the packer adds them in L1)
instead of being reloaded into DST with copy_tile ("reload", forced by ``packer_l1_acc=False``).

Error bounds, per element, from the emulator's numeric model (docs/emulator.md), with mag = |A| @ |B|^T:
* HiFi2 drops in0's last bf16 mantissa bit in SrcB: <= 2^-7 mag; the bf16 output rounds: <= 2^-8 |ref|;
* fp32 accumulator: sums in fp32 (DST and the L1 adder): <= K 2^-24 mag;
* bf16 accumulator (16-bit DST): every matmul_tiles rounds DST to bf16, and every L1 accumulation rounds the packed
  value and the sum: at most 3 roundings (2^-8 relative) of values bounded by mag per K tile.
"""

import pytest
import tilelang
import tilelang.language as T
import torch

from examples import kernels as K
from tilelang_tt import perf_model

ARCHS = ("wormhole_b0", "blackhole")


def _gemm(M, N, Kd, accum, annotate=None):
    if annotate is None:
        return K.tilelang_example_gemm(M, N, Kd, 128, 128, 32, dtype="bfloat16", accum_dtype=accum, num_stages=2)

    @T.prim_func
    def gemm(A: T.Tensor((M, Kd), "bfloat16"), B: T.Tensor((N, Kd), "bfloat16"), C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(N // 128, M // 128, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 32), "bfloat16")
            B_s = T.alloc_shared((128, 32), "bfloat16")
            C_l = T.alloc_fragment((128, 128), accum)
            T.annotate_tt_compute(packer_l1_acc=annotate)
            T.clear(C_l)
            for ko in T.serial(Kd // 32):
                T.copy(A[by * 128, ko * 32], A_s)
                T.copy(B[bx * 128, ko * 32], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * 128, bx * 128])

    return gemm


def _accumulator(plan):
    return next(cb for cb in plan["cbs"] if cb["role"] == "intermediate" and "accumulate" in cb)


def _run_and_check(kernel, M, N, Kd, accum):
    torch.manual_seed(7)
    a, b = torch.randn(M, Kd, dtype=torch.bfloat16), torch.randn(N, Kd, dtype=torch.bfloat16)
    c = torch.zeros(M, N, dtype=torch.bfloat16)
    kernel(a, b, c)
    ref = a.double() @ b.double().T
    mag = a.double().abs() @ b.double().abs().T
    if accum == "float32":
        bound = (2.0**-7 + Kd * 2.0**-24) * mag + 2.0**-8 * ref.abs()
    else:
        bound = (2.0**-7 + 3 * (Kd // 32) * 2.0**-8) * mag + 2.0**-8 * ref.abs()
    err = (c.double() - ref).abs()
    assert (err <= bound).all(), (err - bound).max().item()
    return c


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("accum", ["float32", "bfloat16"])
def test_l1_accumulation_matches_torch(arch, accum):
    # 2x2 blocks of 128x128 (16 tiles: CB resident at either DST size) on 2 cores without multicast: each core's
    # persistent loop runs 2 blocks, so T.clear's packs must re-initialise the accumulator in every iteration
    M, N, Kd = 256, 256, 256
    kernel = tilelang.compile(_gemm(M, N, Kd, accum), target={"kind": "tt", "arch": arch, "max_cores": 2,
                                                               "multicast": False})
    acc = _accumulator(kernel.plan)
    assert acc["accumulate"] == "packer_l1" and acc["num_pages"] == acc["block_tiles"] == 16
    assert acc["format"] == {"float32": "Float32", "bfloat16": "Float16_b"}[accum]
    compute = (kernel.artifact_dir / "kernels/compute.cpp").read_text()
    k_loop = compute[compute.index("pack_reconfig_l1_acc(1);"):compute.index("pack_reconfig_l1_acc(0);")]
    assert "pack_tile(i, cb_C_local)" in k_loop and "copy_tile" not in k_loop
    assert compute.count("copy_tile(cb_C_local") == 1        # only the copy-out reads the accumulator
    _run_and_check(kernel, M, N, Kd, accum)


@pytest.mark.parametrize("how", ["target", "annotation"])
def test_reload_can_be_forced(how):
    M, N, Kd = 256, 128, 128
    if how == "target":
        func, target = _gemm(M, N, Kd, "float32"), "tt -max_cores=2 -multicast=false -packer_l1_acc=false"
    else:
        func, target = _gemm(M, N, Kd, "float32", annotate=False), "tt -max_cores=2 -multicast=false"
    kernel = tilelang.compile(func, target=target)
    acc = _accumulator(kernel.plan)
    assert acc["accumulate"] == "reload"
    compute = (kernel.artifact_dir / "kernels/compute.cpp").read_text()
    assert "pack_reconfig_l1_acc" not in compute
    assert "reload the partial sums of this 1x4 subblock" in compute and f"copy_tile(cb_{acc['name']}, i, i)" in compute
    _run_and_check(kernel, M, N, Kd, "float32")


def test_k_loop_of_one_step_and_the_annotation_turning_it_on():
    # one K step: the single L1 accumulation adds onto T.clear's zeros
    M = N = 128
    kernel = tilelang.compile(_gemm(M, N, 32, "float32", annotate=True), target="tt -max_cores=1")
    assert _accumulator(kernel.plan)["accumulate"] == "packer_l1"
    _run_and_check(kernel, M, N, 32, "float32")


def test_model_counts_the_reload_only_when_it_happens():
    """The static model: the L1-accumulation path unpacks no partial sums; its packs onto them cost
    pack_l1_acc_cost times a plain pack's bytes; the reload path unpacks every partial once per K step."""
    M, N, Kd = 256, 256, 512
    l1 = tilelang.compile(_gemm(M, N, Kd, "float32"), target="tt -max_cores=4 -multicast=false")
    reload = tilelang.compile(_gemm(M, N, Kd, "float32"), target="tt -max_cores=4 -multicast=false "
                                                                   "-packer_l1_acc=false")
    w_l1, w_re = perf_model.static_work(l1.artifact_dir)[0], perf_model.static_work(reload.artifact_dir)[0]
    tiles, page, steps = 16, 4096, Kd // 32          # one 128x128 block per core, fp32 pages, one K tile a step
    assert w_l1.matmul_tiles == w_re.matmul_tiles == tiles * steps
    copy_out = tiles * page                           # the copy-out of the accumulator, on both paths
    assert w_l1.unpack_bytes - w_l1.matmul_unpack_bytes == copy_out
    assert w_re.unpack_bytes - w_re.matmul_unpack_bytes == copy_out + steps * tiles * page
    assert w_l1.pack_l1_acc_bytes == steps * tiles * page and w_re.pack_l1_acc_bytes == 0
    assert w_l1.pack_bytes == w_re.pack_bytes
    perf = perf_model.get_perf("wormhole_b0")
    cycles = perf_model.core_cycles(w_l1, "wormhole_b0", "HiFi2")
    assert cycles["pack"] == pytest.approx((w_l1.pack_bytes + (perf.pack_l1_acc_cost - 1) * w_l1.pack_l1_acc_bytes)
                                           / perf.pack_bytes_per_cycle)
