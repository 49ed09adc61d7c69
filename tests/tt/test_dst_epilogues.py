"""A GEMM accumulator held in DST (fill -> T.gemm -> one T.Parallel store, no L1 copy) and the epilogue the store
applies to it: every unary and scalar operation the element-wise lowering knows, computed in place on the DST
tiles, against torch in float64.

The bound: HiFi4 multiplies bf16 operands exactly and DST accumulates in fp32, so the GEMM is good to fp32
rounding of 64 products; the epilogue adds the SFPU's own error (a few fp32 ulps, pow/exp to ~2^-13 relative).
"""

import json

import pytest
import tilelang
import tilelang.language as T
import torch

EPILOGUES = {
    # name: (TileLang expression of the accumulator x, torch reference)
    "max_const": (lambda x: T.max(x, 0.5), lambda x: x.clamp(min=0.5)),
    "max_zero": (lambda x: T.max(x, 0.0), lambda x: x.relu()),
    "const_max": (lambda x: T.max(-1.25, x), lambda x: x.clamp(min=-1.25)),
    "min_const": (lambda x: T.min(x, 0.5), lambda x: x.clamp(max=0.5)),
    "pow2": (lambda x: T.pow(x, 2.0), lambda x: x ** 2),
    "pow_half_abs": (lambda x: T.pow(T.abs(x) + 1.0, 0.5), lambda x: (x.abs() + 1) ** 0.5),
    "affine": (lambda x: x * 2.0 + 1.0, lambda x: x * 2 + 1),
    "rsub_div": (lambda x: 3.0 - x / 4.0, lambda x: 3 - x / 4),
    "clamp": (lambda x: T.clamp(x, -2.0, 3.0), lambda x: x.clamp(-2, 3)),
    "exp_scaled": (lambda x: T.exp(x * 0.1), lambda x: torch.exp(x * 0.1)),
    "sigmoid_chain": (lambda x: 1.0 / (1.0 + T.exp(x * -1.0)), torch.sigmoid),
}


def gemm_epilogue(epilogue):
    @T.prim_func
    def gemm(A: T.Tensor((64, 64), "bfloat16"), B: T.Tensor((64, 64), "bfloat16"),
             C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            a = T.alloc_shared((32, 64), "bfloat16")
            b = T.alloc_shared((64, 32), "bfloat16")
            acc = T.alloc_fragment((32, 32), "float32")
            T.copy(A[by * 32, 0], a)
            T.copy(B[0, bx * 32], b)
            T.clear(acc)
            T.gemm(a, b, acc)
            for i, j in T.Parallel(32, 32):
                C[by * 32 + i, bx * 32 + j] = epilogue(acc[i, j])
    return gemm


@pytest.mark.parametrize("name", sorted(EPILOGUES))
def test_epilogue_on_dst_accumulator(name):
    expr, ref = EPILOGUES[name]
    kernel = tilelang.compile(gemm_epilogue(expr), target={"kind": "tt", "math_fidelity": "HiFi4"})
    plan = json.loads((kernel.artifact_dir / "tt.plan.json").read_text())
    assert "acc" not in [cb["name"] for cb in plan["cbs"]], "the accumulator must live in DST for this test"
    torch.manual_seed(0)
    a, b = torch.randn(64, 64).bfloat16(), torch.randn(64, 64).bfloat16()
    c = torch.empty(64, 64)
    kernel(a, b, c)
    want = ref(a.double() @ b.double())
    err = ((c.double() - want).abs() / (want.abs() + 1)).max().item()
    assert err < 2 ** -12, f"{name}: max error {err} (relative to |value| + 1)"
