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


@pytest.mark.parametrize("arch", ARCHS)
def test_transposed_b_read_in_transposed_tile_order_runs_matmul_block(arch):
    """TileLang's example GEMM (T.gemm(..., transpose_B=True), B stored [N, K]): the reader stores B's block in
    transposed tile order (read_tiles_transposed: tile (n, k) at k * N_tiles + n) and matmul_block's transpose flag
    transposes within each tile. At HiFi4 bf16 products are exact, so C is within the fp32 sums' rounding of the
    float64 product: a wrong tile position would be far off. The model unpacks the LLK's count."""
    M, N, Kd = 128, 256, 128     # block_K = 64: two K tiles per block, so B^T's positions differ from B's
    kernel = tilelang.compile(K.tilelang_example_gemm(M, N, Kd, 128, 128, 64, dtype="bfloat16"),
                              target={"kind": "tt", "arch": arch, "max_cores": 2, "math_fidelity": "HiFi4"})
    reader = (kernel.artifact_dir / "kernels/reader.cpp").read_text()
    compute = (kernel.artifact_dir / "kernels/compute.cpp").read_text()
    assert "read_tiles_transposed(cb_B_shared" in reader and "read_tiles(cb_A_shared" in reader
    assert "matmul_tiles" not in compute and "matmul_block_init(cb_A_shared, cb_B_shared, 1," in compute
    torch.manual_seed(4)
    a, b = torch.randn(M, Kd, dtype=torch.bfloat16), torch.randn(N, Kd, dtype=torch.bfloat16)
    c = torch.zeros(M, N, dtype=torch.bfloat16)
    kernel(a, b, c)
    ref = a.double() @ b.double().T
    mag = a.double().abs() @ b.double().abs().T
    assert ((c.double() - ref).abs() <= Kd * 2.0**-24 * mag + 2.0**-8 * ref.abs()).all()
    acc = next(cb for cb in kernel.plan["cbs"] if cb["name"] == "C_local")
    sh, sw = acc.get("subblock", (4, 4))
    for w in perf_model.static_work(kernel.artifact_dir):
        assert w.matmul_unpack_bytes * sh * sw == w.matmul_tiles * min(sh, sw) * (1 + max(sh, sw)) * 2048


def test_transposed_b_read_otherwise_keeps_matmul_tiles():
    """A transposed B that compute also reads as a block (here scaled in a T.Parallel into a fragment the gemm
    multiplies) is not in transposed tile order: matmul_tiles, and the same result."""
    import tilelang.language as T

    @T.prim_func
    def k(A: T.Tensor((64, 64), "bfloat16"), B: T.Tensor((64, 64), "bfloat16"), C: T.Tensor((64, 64), "float32"),
          D: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            a = T.alloc_shared((64, 64), "bfloat16")
            b = T.alloc_shared((64, 64), "bfloat16")
            d = T.alloc_fragment((64, 64), "float32")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(A[0, 0], a)
            T.copy(B[0, 0], b)
            for i, j in T.Parallel(64, 64):
                d[i, j] = T.Cast("float32", b[i, j]) * 2.0
            T.copy(d, D[0, 0])
            T.clear(acc)
            T.gemm(a, b, acc, transpose_B=True)
            T.copy(acc, C[0, 0])

    kernel = tilelang.compile(k, target={"kind": "tt", "math_fidelity": "HiFi4"})
    assert "read_tiles_transposed" not in (kernel.artifact_dir / "kernels/reader.cpp").read_text()
    compute = (kernel.artifact_dir / "kernels/compute.cpp").read_text()
    assert "matmul_block_init" not in compute and "matmul_tiles(" in compute
    torch.manual_seed(5)
    a, b = torch.randn(64, 64, dtype=torch.bfloat16), torch.randn(64, 64, dtype=torch.bfloat16)
    c, d = torch.empty(64, 64), torch.empty(64, 64)
    kernel(a, b, c, d)
    ref = a.double() @ b.double().T
    assert ((c.double() - ref).abs() <= 64 * 2.0**-24 * (a.double().abs() @ b.double().abs().T)).all()
    assert torch.equal(d, b.float() * 2)


def test_split_float16_in1_parts_stay_in_transposed_tile_order():
    """TileLang's float16 example GEMM: Float16OperandsTT splits B_shared into bfloat16 parts with element-wise ops,
    which do not care where a tile sits; B_shared arrives in transposed tile order, so do its parts, and both
    matmuls run matmul_block with the transpose flag. Every product exact (split in1, HiFi4): C within the fp32
    sums and float16's rounding of the float64 product."""
    kernel = tilelang.compile(K.tilelang_example_gemm(256, 256, 128, 128, 128, 64), target="tt -max_cores=2")
    reader = (kernel.artifact_dir / "kernels/reader.cpp").read_text()
    compute = (kernel.artifact_dir / "kernels/compute.cpp").read_text()
    assert "read_tiles_transposed(cb_B_shared" in reader and "matmul_tiles(" not in compute
    for part in ("hi", "lo"):
        assert f"matmul_block_init(cb_A_shared, cb_B_shared_{part}, 1," in compute
    torch.manual_seed(1)
    a, b = torch.randn(256, 128).half(), torch.randn(256, 128).half()
    c = torch.empty(256, 256).half()
    kernel(a, b, c)
    ref = a.double() @ b.double().T
    mag = a.double().abs() @ b.double().abs().T
    assert ((c.double() - ref).abs() <= 128 * 2.0**-24 * mag + 2.0**-11 * ref.abs() + 2.0**-24).all()


def test_fragment_operand_runs_matmul_block():
    """A fragment computed earlier (the MLP's hidden activation, attention's P) is a row-major block like one the
    reader fills: its GEMM runs matmul_block too. At HiFi4, with the hidden activation rounded to bf16 as the
    kernel stores it, Y is within the fp32 sums of the float64 product of that activation and W2."""
    kernel = tilelang.compile(K.mlp(64, 64, 128), target="tt -math_fidelity=HiFi4")
    compute = (kernel.artifact_dir / "kernels/compute.cpp").read_text()
    assert "matmul_tiles(" not in compute and "matmul_block_init(cb_H_act, cb_W2_s, 0," in compute
    torch.manual_seed(6)
    x, w1, w2 = (torch.randn(*s, dtype=torch.bfloat16) for s in ((64, 64), (64, 128), (128, 64)))
    y = torch.empty(64, 64, dtype=torch.bfloat16)
    kernel(x, w1, w2, y)
    hidden = (x.double() @ w1.double()).clamp(min=0).float().bfloat16().double()
    ref = hidden @ w2.double()
    mag = hidden.abs() @ w2.double().abs()
    # the hidden activation: fp32 sums then the bf16 pack (ties away; torch's cast ties to even: one ulp apart at most)
    assert ((y.double() - ref).abs() <= 2.0**-8 * mag + 2.0**-8 * ref.abs()).all()
