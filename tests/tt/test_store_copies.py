"""StoreCopiesTT: a tile buffer stored to a tensor and also read by compute (GDN's chunk_delta_h stores V_new_shared
and multiplies it) is stored from a compute copy."""

import tilelang
import tilelang.language as T
import torch

import tilelang_tt  # noqa: F401


def store_and_multiply():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "bfloat16"), B: T.Tensor((64, 64), "bfloat16"), S: T.Tensor((64, 64), "bfloat16"),
          C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            T.annotate_tt_compute(math_fidelity="HiFi4")     # bf16 products exact: C is checked to fp32 sums
            a_s = T.alloc_shared((32, 64), "bfloat16")
            b_s = T.alloc_shared((64, 32), "bfloat16")
            s = T.alloc_shared((32, 64), "bfloat16")
            acc = T.alloc_fragment((32, 32), "float32")
            T.copy(A[by * 32, 0], a_s)
            for i, j in T.Parallel(32, 64):
                s[i, j] = a_s[i, j] * 2.0
            if bx == 0:
                T.copy(s, S[by * 32, 0])          # stored ...
            T.copy(B[0, bx * 32], b_s)
            T.gemm(s, b_s, acc, clear_accum=True)  # ... and multiplied
            T.copy(acc, C[by * 32, bx * 32])

    return k


def test_a_stored_buffer_compute_reads_is_stored_from_a_copy():
    """``s`` is stored (by half the blocks) and multiplied: its stores read ``s_store``, a copy compute packs; S is
    exactly 2A and C the product of 2A (bf16, exact) and small integers."""
    torch.manual_seed(3)
    a = torch.randn(64, 64).bfloat16()
    b = torch.randint(-3, 4, (64, 64)).bfloat16()
    s, c = torch.empty(64, 64).bfloat16(), torch.empty(64, 64)
    kernel = tilelang.compile(store_and_multiply(), target="tt")
    kernel(a, b, s, c)
    assert torch.equal(s, (a.float() * 2).bfloat16())
    torch.testing.assert_close(c, (a.double() * 2) @ b.double(), rtol=0, atol=1e-3, check_dtype=False)
    names = {cb["name"] for cb in kernel.plan["cbs"]}
    assert {"s", "s_store"} <= names
