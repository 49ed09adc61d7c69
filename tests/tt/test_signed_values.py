"""Negative integers from tensors and C's truncating division: what a GPU computes in int32, on both archs."""

import pytest
import tilelang
import tilelang.language as T
import torch

from tilelang_tt.errors import TTCallError, TTUnsupportedError

ARCHS = ["wormhole_b0", "blackhole"]
S_VALUES = [-7, 13, -1, 0, 5, -64, 100, -3]


def floor_div(a, b):
    return torch.div(a, b, rounding_mode="floor")


SCALAR_CASES = {
    "floordiv": (lambda s: s // 4, lambda s: floor_div(s, 4)),
    "floormod": (lambda s: s % 3, lambda s: s - floor_div(s, 3) * 3),
    "abs": (lambda s: T.abs(s), lambda s: s.abs()),
    "less": (lambda s: T.if_then_else(s < 1, 1.0, 0.0), lambda s: (s < 1).long()),
    "min": (lambda s: T.min(s, 4), lambda s: s.clamp_max(4)),
    "max": (lambda s: T.max(s - 5, 0), lambda s: (s - 5).clamp_min(0)),
}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("case", sorted(SCALAR_CASES))
def test_negative_tensor_element_as_a_scalar(arch, case):
    """``s = S[bx]`` read by the data-movement and compute RISC-Vs as a 32-bit word: division, modulo, comparisons,
    min / max and abs read its sign (the kernels print such values as int32_t there)."""
    f, ref_f = SCALAR_CASES[case]

    @T.prim_func
    def k(X: T.Tensor((8 * 32, 32), "float32"), S: T.Tensor((8,), "int32"), O: T.Tensor((8 * 32, 32), "float32")):
        with T.Kernel(8) as bx:
            s = S[bx]
            for i, j in T.Parallel(32, 32):
                O[bx * 32 + i, j] = X[bx * 32 + i, j] + f(s)

    kernel = tilelang.compile(k, target={"kind": "tt", "arch": arch})
    s = torch.tensor(S_VALUES, dtype=torch.int32)
    x, o = torch.zeros(256, 32), torch.full((256, 32), 7.0)
    kernel(x, s, o)
    assert torch.equal(o, ref_f(s.long()).float().repeat_interleave(32)[:, None].expand(256, 32))


@pytest.mark.parametrize("arch", ARCHS)
def test_negative_tensor_element_in_control_flow(arch):
    """A block-level ``if`` on a negative element, a trip count ``T.min(S[bx], 4)`` that is negative (no trips, not
    four billion), and an ``if`` around a T.Parallel store to a tensor (the writer branches too)."""
    @T.prim_func
    def k(X: T.Tensor((8 * 32, 32), "float32"), S: T.Tensor((8,), "int32"), O: T.Tensor((8 * 32, 32), "float32"),
          P: T.Tensor((8 * 32, 32), "float32"), Q: T.Tensor((8 * 32, 32), "float32")):
        with T.Kernel(8) as bx:
            xs = T.alloc_fragment((32, 32), "float32")
            acc = T.alloc_fragment((32, 32), "float32")
            if S[bx] < 0:
                T.copy(X[bx * 32, 0], xs)
                for i, j in T.Parallel(32, 32):
                    xs[i, j] = xs[i, j] * 2.0
                T.copy(xs, O[bx * 32, 0])
            T.clear(acc)
            for t in T.serial(T.min(S[bx], 4)):
                T.copy(X[bx * 32, 0], xs)
                for i, j in T.Parallel(32, 32):
                    acc[i, j] = acc[i, j] + xs[i, j]
            T.copy(acc, P[bx * 32, 0])
            if S[bx] > 0:
                for i, j in T.Parallel(32, 32):
                    Q[bx * 32 + i, j] = X[bx * 32 + i, j] * 3.0

    kernel = tilelang.compile(k, target={"kind": "tt", "arch": arch})
    torch.manual_seed(0)
    s = torch.tensor(S_VALUES, dtype=torch.int32)
    x = torch.randn(256, 32)
    o, p, q = torch.full((256, 32), 7.0), torch.zeros(256, 32), torch.full((256, 32), 7.0)
    kernel(x, s, o, p, q)
    rows = s.repeat_interleave(32)[:, None]
    assert torch.equal(o, torch.where(rows < 0, x * 2, torch.tensor(7.0)))
    assert torch.equal(p, x * rows.clamp(0, 4).float())
    assert torch.equal(q, torch.where(rows > 0, x * 3, torch.tensor(7.0)))


@pytest.mark.parametrize("arch", ARCHS)
def test_truncating_division_of_indices(arch):
    """``T.truncdiv`` / ``T.truncmod`` (C's ``/`` and ``%``) of loop indices, negative ones too, exact: computed as
    floor divisions of the magnitude."""
    @T.prim_func
    def k(D: T.Tensor((32, 64), "float32"), M: T.Tensor((32, 64), "float32")):
        with T.Kernel(1) as bx:
            for i, j in T.Parallel(32, 64):
                D[i, j] = T.Cast("float32", T.truncdiv(j - 40, 7) + T.truncdiv(i, 5))
            for i, j in T.Parallel(32, 64):
                M[i, j] = T.Cast("float32", T.truncmod(j - 40, 7))

    kernel = tilelang.compile(k, target={"kind": "tt", "arch": arch})
    d, m = torch.zeros(32, 64), torch.zeros(32, 64)
    kernel(d, m)
    jj, ii = torch.arange(64)[None, :] - 40, torch.arange(32)[:, None]
    trunc = torch.div(jj, 7, rounding_mode="trunc")
    assert torch.equal(d, (trunc + torch.div(ii, 5, rounding_mode="trunc")).float().expand(32, 64))
    assert torch.equal(m, (jj - trunc * 7).float().expand(32, 64))


def test_index_arithmetic_beyond_float32_is_refused():
    """Tiles compute a T.Parallel's integers in float32 (exact below 2^24; a floor division's dividend below 2^22):
    a value whose bound is larger is refused, naming it."""
    @T.prim_func
    def big(O: T.Tensor((32, 32), "float32")):
        with T.Kernel(1) as bx:
            for i, j in T.Parallel(32, 32):
                O[i, j] = T.Cast("float32", i * 1000003 + j * 7)

    @T.prim_func
    def dividend(O: T.Tensor((32, 32), "float32")):
        with T.Kernel(1) as bx:
            for i, j in T.Parallel(32, 32):
                O[i, j] = T.Cast("float32", (i * 200000 - j * 70001) // 3)

    with pytest.raises(TTUnsupportedError, match=r"the integer `i \* 1000003` is computed on tiles in float32, and "
                                                  r"may reach 31000093 in magnitude: exact only below 2\^24"):
        tilelang.compile(big, target="tt")
    with pytest.raises(TTUnsupportedError, match=r"the integer `i \* 200000 - j \* 70001` is divided on tiles in "
                                                  r"float32, and may reach 6200000 in magnitude: exact only below 2\^22"):
        tilelang.compile(dividend, target="tt")


def test_scalar_and_dimension_computed_on_tiles_are_bounded_at_the_call():
    """``n + i`` with ``n`` an int32 parameter, ``j < m`` with ``m`` a T.dynamic dimension: both are assumed below
    2^22 (so the tiles' sums stay exact) and the call checks it."""
    m = T.dynamic("m")

    @T.prim_func
    def k(X: T.Tensor((m, 32), "float32"), O: T.Tensor((m, 32), "float32"), n: T.int32):
        with T.Kernel(T.ceildiv(m, 32)) as bx:
            for i, j in T.Parallel(32, 32):
                if bx * 32 + i < m:
                    O[bx * 32 + i, j] = X[bx * 32 + i, j] + T.Cast("float32", n + i)

    kernel = tilelang.compile(k, target="tt")
    assert kernel.plan["tile_int_limits"] == {"m": 2 ** 22, kernel.plan["scalar_args"][0]["name"]: 2 ** 22}
    x, o = torch.zeros(40, 32), torch.zeros(40, 32)
    kernel(x, o, 2 ** 22 - 64)
    assert torch.equal(o, (torch.arange(40) % 32 + 2 ** 22 - 64).float()[:, None].expand(40, 32))
    with pytest.raises(TTCallError, match=r"parameter n takes an int32 scalar; got -4194304: the kernel computes "
                                          r"with it on tiles in float32, exact for integers only below 4194304"):
        kernel(x, o, -2 ** 22)
    rows = 2 ** 22
    with pytest.raises(TTCallError, match=r"m = 4194304: the kernel computes with it on tiles in float32, exact for "
                                          r"these integers only below 4194304 \(2\^22\) in magnitude"):
        kernel(torch.zeros(rows, 32), torch.zeros(rows, 32), 0)


@pytest.mark.parametrize("arch", ARCHS)
def test_branch_on_equality_with_a_negative_literal(arch):
    """``if S[bx] == -1`` (a sentinel): the element compared signed with the literal (the kernels compile under
    -Wall -Werror: no signed / unsigned comparison)."""
    @T.prim_func
    def k(X: T.Tensor((8 * 32, 32), "float32"), S: T.Tensor((8,), "int32"), O: T.Tensor((8 * 32, 32), "float32")):
        with T.Kernel(8) as bx:
            xs = T.alloc_fragment((32, 32), "float32")
            if S[bx] == -1:
                T.copy(X[bx * 32, 0], xs)
                T.copy(xs, O[bx * 32, 0])

    kernel = tilelang.compile(k, target={"kind": "tt", "arch": arch})
    s = torch.tensor(S_VALUES, dtype=torch.int32)
    x, o = torch.randn(256, 32), torch.full((256, 32), 7.0)
    kernel(x, s, o)
    assert torch.equal(o, torch.where(s.repeat_interleave(32)[:, None] == -1, x, torch.tensor(7.0)))


@pytest.mark.parametrize("arch", ARCHS)
def test_float_elements_compared_in_a_forwarded_scalar(arch):
    """An alloc_local counter of negative weights (``loc[0] += T.if_then_else(W[t] < 0, 1.0, 0.0)`` over an
    unrolled loop) forwarded into a T.Parallel: each ``W[t] < 0`` compares a float element with a constant on a
    filled tile (it ended in a raw C++ printing error), and the running extrema are exact."""
    @T.prim_func
    def k(X: T.Tensor((32, 32), "float32"), W: T.Tensor((16,), "float32"), O: T.Tensor((32, 64), "float32")):
        with T.Kernel(1) as bx:
            loc = T.alloc_local((2,), "float32")
            loc[0] = 0.0
            loc[1] = -T.infinity("float32")
            for t in T.serial(16):
                loc[0] = loc[0] + T.if_then_else(W[t] < 0, 1.0, 0.0)
                loc[1] = T.max(loc[1], W[t])
            for i, j in T.Parallel(32, 32):
                O[i, j] = X[i, j] + loc[0]
                O[i, 32 + j] = X[i, j] * loc[1]

    kernel = tilelang.compile(k, target={"kind": "tt", "arch": arch})
    torch.manual_seed(5)
    x, w, o = torch.randn(32, 32), torch.randn(16), torch.zeros(32, 64)
    kernel(x, w, o)
    assert torch.equal(o, torch.cat([x + (w < 0).sum().float(), x * w.max()], 1))
