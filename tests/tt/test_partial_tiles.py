"""Blocks smaller than a tile along a reduced axis: ``T.reduce_*`` over fewer than 32 rows or columns (the rest of
each tile is set to the reduction's identity first), and one row (column) of such a block picked out as a vector,
``T.copy(lse[k, :], v)`` / ``v[i] = lse[k, i]`` in a loop over k, as the combine step of TileLang's split-KV decode
(flash_decoding/example_mha_inference.py) reads its per-split log-sum-exps."""

import pytest
import tilelang
import tilelang.language as T
import torch

ARCHS = ["wormhole_b0", "blackhole"]


def _reduce(kind, dim, rows, cols, dtype, offset):
    """A [rows, cols] block (rows or cols < 32) read ``offset`` rows into its tile, reduced along ``dim``."""
    n_out = cols if dim == 0 else rows

    @T.prim_func
    def reduce(L: T.Tensor((rows * 4, cols), dtype), O: T.Tensor((n_out,), "float32")):
        with T.Kernel(1) as bx:
            l = T.alloc_fragment((rows, cols), dtype)
            r = T.alloc_fragment((n_out,), "float32")
            T.copy(L[offset:offset + rows, 0:cols], l)
            if kind == "max":
                T.reduce_max(l, r, dim=dim)
            elif kind == "min":
                T.reduce_min(l, r, dim=dim)
            else:
                T.reduce_sum(l, r, dim=dim)
            T.copy(r, O)

    return reduce


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind,dim,rows,cols,dtype,offset", [
    ("max", 0, 4, 64, "float32", 0), ("min", 0, 8, 64, "bfloat16", 8), ("sum", 0, 4, 64, "float32", 4),
    ("max", 1, 64, 16, "float16", 0), ("sum", 1, 32, 16, "float32", 0), ("min", 1, 32, 8, "float32", 0)],
    ids=["max_rows", "min_rows_at_offset", "sum_rows_at_offset", "max_cols_fp16", "sum_cols", "min_cols"])
def test_reduce_over_part_of_a_tile(arch, kind, dim, rows, cols, dtype, offset):
    kernel = tilelang.compile(_reduce(kind, dim, rows, cols, dtype, offset), target={"kind": "tt", "arch": arch})
    # max of values all below zero and min of values all above: the padding of the tiles (zeros) would win
    shift = {"max": -8.0, "min": 8.0, "sum": 0.0}[kind]
    L = (torch.randn(rows * 4, cols) + shift).to(getattr(torch, dtype))
    O = torch.zeros(cols if dim == 0 else rows)
    kernel(L, O)
    block = L[offset:offset + rows].double()
    if kind == "sum":     # float32 adds on the SFPU: at most (n - 1) roundings of 2^-24 of the magnitudes' sum
        want = block.sum(dim)
        bound = (block.shape[dim] - 1) * 2.0 ** -24 * block.abs().sum(dim)
        assert ((O.double() - want).abs() <= bound).all()
    else:                 # max and min are exact
        want = block.max(dim).values if kind == "max" else block.min(dim).values
        assert torch.equal(O.double(), want)


def _combine(splits, n, dtype, use_copy):
    """out[i] = sum_k (k + 1) * lse[k, i], each row of the [splits, n] fragment picked into a row vector."""
    @T.prim_func
    def combine(L: T.Tensor((splits, n), dtype), O: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            lse = T.alloc_fragment((splits, n), dtype)
            row = T.alloc_fragment((n,), "float32")
            acc = T.alloc_fragment((n,), "float32")
            T.copy(L, lse)
            T.clear(acc)
            for k in T.Pipelined(splits):
                if use_copy:
                    T.copy(lse[k, :], row)
                else:
                    for i in T.Parallel(n):
                        row[i] = lse[k, i]
                for i in T.Parallel(n):
                    acc[i] += row[i] * (k + 1)
            T.copy(acc, O)

    return combine


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("use_copy", [True, False], ids=["T.copy", "T.Parallel"])
def test_row_of_a_partial_block_picked_as_a_vector(arch, dtype, use_copy):
    splits, n = 4, 64
    kernel = tilelang.compile(_combine(splits, n, dtype, use_copy), target={"kind": "tt", "arch": arch})
    L = torch.randn(splits, n).to(getattr(torch, dtype))
    O = torch.zeros(n)
    kernel(L, O)
    # picking a row adds zeros to it (exact); the weighted sum is float32, in the loop's order, as torch's below
    want = torch.zeros(n)
    for k in range(splits):
        want = want + L[k].float() * (k + 1)
    assert torch.equal(O, want)
    names = [cb["name"] for cb in kernel.plan["cbs"]]
    assert any(name.startswith("lse_pick") for name in names) and any(name.startswith("lse_line") for name in names)


def test_sum_over_the_first_columns_of_a_block():
    """A [32, 16] block of a [64, 48] tensor summed per row (once refused: 16 columns of a 32-column tile)."""
    @T.prim_func
    def k(A: T.Tensor((64, 48), "float32"), S: T.Tensor((64,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            A_s = T.alloc_shared((32, 16), "float32")
            A_f = T.alloc_fragment((32, 16), "float32")
            s = T.alloc_fragment((32,), "float32")
            T.copy(A[bx * 32, 0], A_s)
            T.copy(A_s, A_f)
            T.reduce_sum(A_f, s, dim=1)
            T.copy(s, S[bx * 32])

    kernel = tilelang.compile(k, target="tt")
    A, S = torch.randn(64, 48), torch.zeros(64)
    kernel(A, S)
    want = A[:, :16].double().sum(1)
    assert ((S.double() - want).abs() <= 15 * 2.0 ** -24 * A[:, :16].double().abs().sum(1)).all()
