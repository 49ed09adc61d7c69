"""Stores into tile-aligned windows of a fragment (``acc[32 + i, j] = ...``, ``y[i, j + D // 2] = ...``): the
T.Parallel computes a window-shaped part, ``insert_window`` puts it in place and passes the fragment's other tiles
through (zeros before anything was written). Checked exactly (values every format holds) on both archs."""

import pytest
import tilelang
import tilelang.language as T
import torch

from tilelang_tt.errors import TTUnsupportedError

ARCHS = ["wormhole_b0", "blackhole"]


@pytest.mark.parametrize("arch", ARCHS)
def test_row_halves_written_separately(arch):
    @T.prim_func
    def halves(X: T.Tensor((128, 64), "float32"), Y: T.Tensor((128, 64), "float32")):
        with T.Kernel(2, threads=128) as bx:
            xs = T.alloc_fragment((64, 64), "float32")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(X[bx * 64, 0], xs)
            for i, j in T.Parallel(32, 64):
                acc[i, j] = xs[i, j] * 2
            for i, j in T.Parallel(32, 64):
                acc[32 + i, j] = xs[32 + i, j] + 1
            T.copy(acc, Y[bx * 64, 0])

    kernel = tilelang.compile(halves, target={"kind": "tt", "arch": arch})
    x = torch.randn(128, 64)
    y = torch.empty_like(x)
    kernel(x, y)
    ref = x.clone().view(2, 64, 64)
    ref[:, :32] *= 2
    ref[:, 32:] += 1
    assert torch.equal(y, ref.view(128, 64))


@pytest.mark.parametrize("arch", ARCHS)
def test_half_split_rope_into_a_fragment(arch):
    """NeoX-style RoPE: y = [x1 cos - x2 sin, x2 cos + x1 sin] over the two column halves, stored into the halves
    of a bf16 fragment that is then written whole."""
    M, D = 64, 128
    H = D // 2

    @T.prim_func
    def rope(X: T.Tensor((M, D), "bfloat16"), Cos: T.Tensor((M, H), "bfloat16"), Sin: T.Tensor((M, H), "bfloat16"),
             Y: T.Tensor((M, D), "bfloat16")):
        with T.Kernel(M // 32, threads=128) as bx:
            x = T.alloc_shared((32, D), "bfloat16")
            c = T.alloc_shared((32, H), "bfloat16")
            s = T.alloc_shared((32, H), "bfloat16")
            y = T.alloc_fragment((32, D), "float32")
            T.copy(X[bx * 32, 0], x)
            T.copy(Cos[bx * 32, 0], c)
            T.copy(Sin[bx * 32, 0], s)
            for i, j in T.Parallel(32, H):
                y[i, j] = x[i, j] * c[i, j] - x[i, j + H] * s[i, j]
            for i, j in T.Parallel(32, H):
                y[i, j + H] = x[i, j + H] * c[i, j] + x[i, j] * s[i, j]
            T.copy(y, Y[bx * 32, 0])

    kernel = tilelang.compile(rope, target={"kind": "tt", "arch": arch})
    # values on a grid of 1/4 in [-2, 2]: x1 c - x2 s is a multiple of 1/16 below 8 in magnitude, exact in bf16
    x, cos, sin = ((torch.randint(-8, 9, shape) / 4).bfloat16() for shape in ((M, D), (M, H), (M, H)))
    y = torch.empty(M, D, dtype=torch.bfloat16)
    kernel(x, cos, sin, y)
    x1, x2 = x.float()[:, :H], x.float()[:, H:]
    ref = torch.cat([x1 * cos.float() - x2 * sin.float(), x2 * cos.float() + x1 * sin.float()], dim=1)
    assert torch.equal(y, ref.bfloat16())


def test_window_update_keeps_the_rest():
    """A 2x2-tile window in the middle of a 4x4-tile fragment updated after the whole fragment was written: the
    other 12 tiles pass through unchanged, exactly."""
    @T.prim_func
    def middle(X: T.Tensor((128, 128), "float32"), Y: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128) as bx:
            acc = T.alloc_fragment((128, 128), "float32")
            T.copy(X[0, 0], acc)
            for i, j in T.Parallel(64, 64):
                acc[32 + i, 32 + j] = acc[32 + i, 32 + j] * 3
            T.copy(acc, Y[0, 0])

    kernel = tilelang.compile(middle, target="tt")
    x = torch.randn(128, 128)
    y = torch.empty_like(x)
    kernel(x, y)
    ref = x.clone()
    ref[32:96, 32:96] *= 3
    assert torch.equal(y, ref)


def test_window_of_a_block_the_reader_filled():
    """The reader's block is rewritten into a fresh CB: the window's tiles computed, the others copied."""
    @T.prim_func
    def filled(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            xs = T.alloc_shared((64, 64), "float32")
            T.copy(X[0, 0], xs)
            for i, j in T.Parallel(32, 64):
                xs[32 + i, j] = xs[32 + i, j] + 1
            T.copy(xs, Y[0, 0])

    kernel = tilelang.compile(filled, target="tt")
    x = torch.randn(64, 64)
    y = torch.empty_like(x)
    kernel(x, y)
    ref = x.clone()
    ref[32:] += 1
    assert torch.equal(y, ref)


def test_window_at_a_block_dependent_place_is_refused():
    @T.prim_func
    def moving(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((128, 64), "float32")):
        with T.Kernel(2, threads=128) as bx:
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for i, j in T.Parallel(32, 64):
                acc[bx * 32 + i, j] = X[i, j]
            T.copy(acc, Y[bx * 64, 0])

    with pytest.raises(TTUnsupportedError, match=r"a store into a window of acc at \[bx \* 32, 0\], not a constant "
                                                 r"place"):
        tilelang.compile(moving, target="tt")


@pytest.mark.parametrize("arch", ARCHS)
def test_copies_into_and_out_of_row_windows(arch):
    """Two heads' rows stacked in one block (as a GQA group's query heads would be): T.copy of each head into its
    row window of a shared buffer, a computation over the whole block, T.copy of each window back out."""
    G, bM, D = 2, 32, 64

    @T.prim_func
    def stacked(Q: T.Tensor((4, 64, D), "bfloat16"), O: T.Tensor((4, 64, D), "bfloat16")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            Qs = T.alloc_shared((G * bM, D), "bfloat16")
            Os = T.alloc_shared((G * bM, D), "bfloat16")
            acc = T.alloc_fragment((G * bM, D), "float32")
            T.copy(Q[by * G + 0, bx * bM:(bx + 1) * bM, :], Qs[0:bM, :])
            T.copy(Q[by * G + 1, bx * bM:(bx + 1) * bM, :], Qs[bM:2 * bM, :])
            T.copy(Qs, acc)
            for i, j in T.Parallel(G * bM, D):
                acc[i, j] = acc[i, j] * 2
            T.copy(acc, Os)
            T.copy(Os[0:bM, :], O[by * G + 0, bx * bM:(bx + 1) * bM, :])
            T.copy(Os[bM:2 * bM, :], O[by * G + 1, bx * bM:(bx + 1) * bM, :])

    kernel = tilelang.compile(stacked, target={"kind": "tt", "arch": arch})
    q = torch.randn(4, 64, D, dtype=torch.bfloat16)
    o = torch.empty_like(q)
    kernel(q, o)
    assert torch.equal(o, (q.float() * 2).bfloat16())


def test_block_through_a_corner_window():
    """A 32x32 block read into the corner window of a 64x64 shared buffer and written back from it (refused before
    window copies existed): C is A, block by block."""
    @T.prim_func
    def corner(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 64), "float32")
            T.copy(A[by * 32, bx * 32], A_s[0:32, 0:32])
            T.copy(A_s[0:32, 0:32], C[by * 32, bx * 32])

    kernel = tilelang.compile(corner, target="tt")
    a = torch.randn(64, 64)
    c = torch.empty_like(a)
    kernel(a, c)
    assert torch.equal(c, a)
