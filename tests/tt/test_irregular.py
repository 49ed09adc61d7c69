"""Kernels in the shape LLM inference code takes (issue 24), on both archs against torch."""

import pytest
import tilelang
import tilelang.language as T
import torch

ARCHS = ["wormhole_b0", "blackhole"]


@pytest.mark.parametrize("arch", ARCHS)
def test_let_bound_row_index(arch):
    """``t = by * bt + i`` inside T.Parallel: the analysis sees the expression (the variable once hid the loop
    index and TilePadTT rewrote X[t, j] into X[t * 32, j])."""
    bt = 32

    @T.prim_func
    def k(X: T.Tensor((96, 64), "float32"), Y: T.Tensor((96, 64), "float32")):
        with T.Kernel(3, threads=128) as by:
            for i, j in T.Parallel(bt, 64):
                t = by * bt + i
                Y[t, j] = X[t, j] * 2.0

    kernel = tilelang.compile(k, target={"kind": "tt", "arch": arch})
    x = torch.randn(96, 64)
    y = torch.empty_like(x)
    kernel(x, y)
    assert torch.equal(y, x * 2)


@pytest.mark.parametrize("arch", ARCHS)
def test_let_bound_copy_origin(arch):
    """A named block origin (``row = by * 32``) before T.copy, and a column offset bound in a serial loop."""
    @T.prim_func
    def k(X: T.Tensor((64, 96), "bfloat16"), Y: T.Tensor((64, 96), "bfloat16")):
        with T.Kernel(2, threads=128) as by:
            s = T.alloc_shared((32, 32), "bfloat16")
            row = by * 32
            for c in T.serial(3):
                col = c * 32
                T.copy(X[row, col], s)
                T.copy(s, Y[row, col])

    kernel = tilelang.compile(k, target={"kind": "tt", "arch": arch})
    x = torch.randn(64, 96).bfloat16()
    y = torch.empty_like(x)
    kernel(x, y)
    assert torch.equal(y, x)


M_TAIL, N_TAIL = 70, 64


@pytest.mark.parametrize("arch", ARCHS)
def test_tail_guard_inside_parallel(arch):
    """``if by * 32 + i < M`` keeps the store inside the tensor: the writer already never stores padding, so the
    guard is dropped (PredicateParallelTT) and the kernel runs on a row count that is not a multiple of 32."""
    @T.prim_func
    def k(X: T.Tensor((M_TAIL, N_TAIL), "float32"), Y: T.Tensor((M_TAIL, N_TAIL), "float32")):
        with T.Kernel(T.ceildiv(M_TAIL, 32), threads=128) as by:
            for i, j in T.Parallel(32, N_TAIL):
                if by * 32 + i < M_TAIL:
                    Y[by * 32 + i, j] = X[by * 32 + i, j] * 2.0

    kernel = tilelang.compile(k, target={"kind": "tt", "arch": arch})
    x = torch.randn(M_TAIL, N_TAIL)
    y = torch.empty_like(x)
    kernel(x, y)
    assert torch.equal(y, x * 2)


@pytest.mark.parametrize("arch", ARCHS)
def test_value_predicates_inside_parallel(arch):
    """``if``/``else`` on values becomes a select per element (the SFPU's where_tile); an ``if`` without ``else``
    keeps the old value."""
    @T.prim_func
    def k(X: T.Tensor((M_TAIL, N_TAIL), "float32"), Y: T.Tensor((M_TAIL, N_TAIL), "float32")):
        with T.Kernel(T.ceildiv(M_TAIL, 32), threads=128) as by:
            y = T.alloc_fragment((32, N_TAIL), "float32")
            for i, j in T.Parallel(32, N_TAIL):
                if X[by * 32 + i, j] > 0:
                    y[i, j] = X[by * 32 + i, j]
                else:
                    y[i, j] = X[by * 32 + i, j] * 0.5
            for i, j in T.Parallel(32, N_TAIL):
                if y[i, j] < -1.0:
                    y[i, j] = -1.0
            T.copy(y, Y[by * 32, 0])

    kernel = tilelang.compile(k, target={"kind": "tt", "arch": arch})
    x = torch.randn(M_TAIL, N_TAIL) * 4
    y = torch.empty_like(x)
    kernel(x, y)
    assert torch.equal(y, torch.where(x > 0, x, x * 0.5).clamp(min=-1.0))
