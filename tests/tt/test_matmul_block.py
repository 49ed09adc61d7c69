"""matmul_block for GEMMs whose B is not transposed (LowerToTTProgram): an rt x ct DST block per K tile.

The in1 tiles of one K tile's ct output columns are adjacent in a row-major B block and the in0 tiles of its rt
rows kt apart, which is matmul_block's layout (DST[idst + r * ct + c] += A[i0 + r * kt] @ B[i1 + c]); the
unpacker moves min(rt, ct) * (1 + max(rt, ct)) tiles per rt * ct tile matmuls instead of 2 per tile matmul (the
LLK's count, which the performance model uses). Error bound per element, from the emulator's model (docs/emulator.md), mag = |A| @ |B|: HiFi2 drops in0's
last bf16 mantissa bit (2^-7 mag); the bf16 accumulator rounds DST after every matmul tile and the packer's L1
accumulation rounds the packed value and the sum (3 roundings of 2^-8 of values bounded by mag per K tile).
"""

import pytest
import tilelang
import torch

from examples import kernels as K
from tilelang_tt import perf_model

ARCHS = ("wormhole_b0", "blackhole")


@pytest.mark.parametrize("arch", ARCHS)
def test_block_gemm_matches_torch_and_unpacks_the_llks_tiles(arch):
    M, N, Kd = 128, 256, 128
    kernel = tilelang.compile(K.design_gemm(M, N, Kd), target={"kind": "tt", "arch": arch, "max_cores": 2})
    acc = next(cb for cb in kernel.plan["cbs"] if cb.get("accumulate"))
    sh, sw = acc["subblock"]
    assert sh * sw > 1
    compute = (kernel.artifact_dir / "kernels/compute.cpp").read_text()
    assert "matmul_tiles" not in compute and "matmul_block(" in compute
    torch.manual_seed(3)
    a, b = torch.randn(M, Kd, dtype=torch.bfloat16), torch.randn(Kd, N, dtype=torch.bfloat16)
    c = torch.zeros(M, N, dtype=torch.bfloat16)
    kernel(a, b, c)
    ref = a.double() @ b.double()
    mag = a.double().abs() @ b.double().abs()
    bound = (2.0**-7 + 3 * (Kd // 32) * 2.0**-8) * mag + 2.0**-8 * ref.abs()
    assert ((c.double() - ref).abs() <= bound).all()
    # the model: every core's matmul unpack is min(sh, sw) * (1 + max(sh, sw)) tiles per sh * sw tile matmuls (tt-llk
    # _llk_unpack_AB_matmul_: one tile of the smaller dimension's operand and all of the other's, per tile of it)
    for w in perf_model.static_work(kernel.artifact_dir):
        assert w.matmul_unpack_bytes * sh * sw == w.matmul_tiles * min(sh, sw) * (1 + max(sh, sw)) * 2048
    cores = {tuple(c["core"]): c for c in kernel.report["cores"]}
    assert all(cores[w.core]["matmul_tiles"] == w.matmul_tiles for w in perf_model.static_work(kernel.artifact_dir))


def test_transposed_b_keeps_matmul_tiles():
    kernel = tilelang.compile(K.tilelang_example_gemm(256, 256, 64, 128, 128, 32, dtype="bfloat16"),
                              target="tt -max_cores=2")
    compute = (kernel.artifact_dir / "kernels/compute.cpp").read_text()
    assert "matmul_block" not in compute and "matmul_tiles(" in compute
