"""int32 fragments and int32 outputs (issue 24): argmax and top-k positions as TileLang writes them.

An int32 tile buffer computes in Float32 (exact below 2^24, which MemorySpaceLowerTT proves for every value stored
into it: int_range.py); the store to an int32 tensor converts with typecast_tile<Float32, Int32> into an Int32 CB.
"""

import pytest
import tilelang
import tilelang.language as T
import torch

from examples import kernels as K
from tilelang_tt.errors import TTUnsupportedError

ARCHS = ["wormhole_b0", "blackhole"]


@pytest.mark.parametrize("arch", ARCHS)
def test_argmax_with_int32_output(arch):
    M, N = 64, 256
    kernel = tilelang.compile(K.argmax_rows(M, N), target={"kind": "tt", "arch": arch})
    x = torch.randn(M, N, generator=torch.Generator().manual_seed(9))
    x[3, 7] = x[3, 200] = 100.0          # a tie: torch returns the first
    idx = torch.full((M,), -5, dtype=torch.int32)
    kernel(x, idx)
    assert torch.equal(idx, x.argmax(1).int())
    fmt = {cb["name"]: cb["format"] for cb in kernel.plan["cbs"]}
    assert fmt["cand"] == "Float32" and fmt["Idx_out"] == "Int32"


def tilelang_topk(M, N, topk, blk_m):
    """TileLang's examples/topk/example_topk.py kernel, as written there."""
    @T.prim_func
    def tl_topk(logits: T.Tensor((M, N), "float32"), topk_gates: T.Tensor((M, topk), "float32"),
                topk_indices: T.Tensor((M, topk), "int32")):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            logits_frag = T.alloc_fragment([blk_m, N], dtype="float32")
            max_val = T.alloc_fragment([blk_m], dtype="float32")
            expand_max_idx = T.alloc_fragment([blk_m, N], "int32")
            max_idx = T.alloc_fragment([blk_m], "int32")
            T.copy(logits[bx * blk_m, 0], logits_frag)
            for k in T.serial(topk):
                T.fill(expand_max_idx, -1)
                T.reduce_max(logits_frag, max_val, dim=1, clear=True)
                for i, j in T.Parallel(blk_m, N):
                    expand_max_idx[i, j] = T.if_then_else(max_val[i] == logits_frag[i, j], j, expand_max_idx[i, j])
                T.reduce_max(expand_max_idx, max_idx, dim=1, clear=True)
                for i, j in T.Parallel(blk_m, N):
                    logits_frag[i, j] = T.if_then_else(max_val[i] == logits_frag[i, j], -10000.0, logits_frag[i, j])
                for i in T.Parallel(blk_m):
                    topk_gates[bx * blk_m + i, k] = max_val[i]
                    topk_indices[bx * blk_m + i, k] = max_idx[i]

    return tl_topk


@pytest.mark.parametrize("arch", ARCHS)
def test_tilelang_topk_example(arch):
    M, N, topk, blk_m = 160, 128, 6, 64        # M not a multiple of the block: the last block is cut
    kernel = tilelang.compile(tilelang_topk(M, N, topk, blk_m), target={"kind": "tt", "arch": arch})
    logits = torch.rand(M, N, generator=torch.Generator().manual_seed(10))
    gates, indices = torch.zeros(M, topk), torch.zeros(M, topk, dtype=torch.int32)
    kernel(logits, gates, indices)
    ref = logits.topk(topk, dim=1)
    assert torch.equal(gates, ref.values)
    assert torch.equal(indices, ref.indices.int())


def test_int_tiles_without_a_bound_are_refused():
    @T.prim_func
    def grows(X: T.Tensor((32, 64), "float32"), Out: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            c = T.alloc_fragment((32, 64), "int32")
            r = T.alloc_fragment((32,), "int32")
            T.fill(c, 0)
            for _ in T.serial(4):
                for i, j in T.Parallel(32, 64):
                    c[i, j] = c[i, j] * 4096 + j
            T.reduce_max(c, r, dim=1)
            for i in T.Parallel(32):
                Out[bx * 32 + i] = r[i]

    @T.prim_func
    def from_float(X: T.Tensor((32, 64), "float32"), Out: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((32, 64), "float32")
            c = T.alloc_fragment((32, 64), "int32")
            r = T.alloc_fragment((32,), "int32")
            T.copy(X[bx * 32, 0], x)
            for i, j in T.Parallel(32, 64):
                c[i, j] = T.Cast("int32", x[i, j])
            T.reduce_max(c, r, dim=1)
            for i in T.Parallel(32):
                Out[bx * 32 + i] = r[i]

    @T.prim_func
    def summed(X: T.Tensor((32, 64), "float32"), Out: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            c = T.alloc_fragment((32, 64), "int32")
            r = T.alloc_fragment((32,), "int32")
            for i, j in T.Parallel(32, 64):
                c[i, j] = j
            T.reduce_sum(c, r, dim=1)
            for i in T.Parallel(32):
                Out[bx * 32 + i] = r[i]

    @T.prim_func
    def large(X: T.Tensor((32, 64), "float32"), Out: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            c = T.alloc_fragment((32, 64), "int32")
            r = T.alloc_fragment((32,), "int32")
            for i, j in T.Parallel(32, 64):
                c[i, j] = j * 1000000       # bounded, but 63000000 is not exact in Float32
            T.reduce_max(c, r, dim=1)
            for i in T.Parallel(32):
                Out[bx * 32 + i] = r[i]

    with pytest.raises(TTUnsupportedError, match=r"int32 tile buffer c may hold values up to \d+ in magnitude: "
                                                 r"int32 tiles compute in Float32, exact only below 2\^24"):
        tilelang.compile(grows, target="tt")
    with pytest.raises(TTUnsupportedError, match=r"the integer `j \* 1000000` is computed on tiles in float32, and "
                                                 r"may reach 63000000 in magnitude: exact only below 2\^24"):
        tilelang.compile(large, target="tt")     # TileIntRangeTT, before the int32 tile buffer's own bound
    with pytest.raises(TTUnsupportedError, match=r"the int32 value `T.Cast\(\"int32\", x\[i, j\]\)` has no known "
                                                 r"bound"):
        tilelang.compile(from_float, target="tt")
    with pytest.raises(TTUnsupportedError, match=r"T.reduce_sum into int32 tile buffer r: .* a sum has no bound"):
        tilelang.compile(summed, target="tt")
