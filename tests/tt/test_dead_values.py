"""Values a kernel computes and never uses are dropped (EliminateDeadValuesTT), never a verifier error.

Each kernel here once stopped the compile with ``TTVerifyError [cb-pages] compute pushes 1 page(s) of <buffer> per
block, pops 0`` (a verifier rule firing on a user's kernel is a compiler bug); each now compiles, runs and matches
torch, and its dead buffers are gone from the plan.
"""

import pytest
import tilelang
import tilelang.language as T
import torch

ARCHS = ["wormhole_b0", "blackhole"]


def dead_parallel():
    @T.prim_func
    def k(X: T.Tensor((64, 32), "float32"), Y: T.Tensor((64, 32), "float32")):
        with T.Kernel(2, threads=128) as by:
            x = T.alloc_fragment((32, 32), "float32")
            unused = T.alloc_fragment((32, 32), "float32")
            T.copy(X[by * 32, 0], x)
            for i, j in T.Parallel(32, 32):
                unused[i, j] = x[i, j] * 2.0
            T.copy(x, Y[by * 32, 0])
    return k, lambda x: x, {"unused"}


def dead_chain_and_read():
    """A dead value computed from another dead value and from a tensor read only for them."""
    @T.prim_func
    def k(X: T.Tensor((64, 32), "bfloat16"), Z: T.Tensor((64, 32), "bfloat16"), Y: T.Tensor((64, 32), "bfloat16")):
        with T.Kernel(2, threads=128) as by:
            x = T.alloc_shared((32, 32), "bfloat16")
            z = T.alloc_shared((32, 32), "bfloat16")
            t = T.alloc_fragment((32, 32), "float32")
            u = T.alloc_fragment((32, 32), "float32")
            T.copy(X[by * 32, 0], x)
            T.copy(Z[by * 32, 0], z)
            for i, j in T.Parallel(32, 32):
                t[i, j] = z[i, j] + 1.0
            for i, j in T.Parallel(32, 32):
                u[i, j] = t[i, j] * t[i, j]
            T.copy(x, Y[by * 32, 0])
    return k, lambda x, z: x, {"z", "t", "u"}


def dead_reduce_and_gemm():
    """A row sum and a GEMM nobody stores, beside the live copy."""
    @T.prim_func
    def k(A: T.Tensor((64, 32), "bfloat16"), B: T.Tensor((32, 32), "bfloat16"), Y: T.Tensor((64, 32), "bfloat16")):
        with T.Kernel(2, threads=128) as by:
            a = T.alloc_shared((32, 32), "bfloat16")
            b = T.alloc_shared((32, 32), "bfloat16")
            acc = T.alloc_fragment((32, 32), "float32")
            s = T.alloc_fragment((32,), "float32")
            T.copy(A[by * 32, 0], a)
            T.copy(B[0, 0], b)
            T.clear(acc)
            T.gemm(a, b, acc)
            T.reduce_sum(acc, s, dim=1)
            T.copy(a, Y[by * 32, 0])
    return k, lambda a, b: a, {"b", "acc", "s"}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("make", [dead_parallel, dead_chain_and_read, dead_reduce_and_gemm],
                         ids=["parallel", "chain_and_read", "reduce_and_gemm"])
def test_dead_values_are_dropped(make, arch):
    func, ref, dead = make()
    kernel = tilelang.compile(func, target={"kind": "tt", "arch": arch})
    names = {c["name"] for c in kernel.plan["cbs"]}
    assert not names & dead, names & dead
    params = [p for p in kernel.plan["buffers"]]
    dtype = {"Float32": torch.float32, "Float16_b": torch.bfloat16}
    args = [torch.randn(*p["shape"]).to(dtype[p["format"]]) for p in sorted(params, key=lambda p: p["param_index"])]
    kernel(*args)
    assert torch.equal(args[-1], ref(*args[:-1]))
