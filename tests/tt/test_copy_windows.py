"""Copies that are not tile blocks, as TileLang's decode kernels write them (GQA decode with attention pooling):
a per-step statistic copied into a column (row) of a shared buffer, a window of a 1-D tensor at any element offset
(past the tensor's end: zeros), the first rows of a fragment stored at a row offset; and blocks smaller than a tile
that compute places (an index tile, a T.gemm) stored where they sit, or refused."""

import pytest
import tilelang
import tilelang.language as T
import torch
import tvm

from tilelang_tt.errors import TTUnsupportedError

ARCHS = ["wormhole_b0", "blackhole"]
H, G, BN = 40, 4, 64        # 40 parameters read 64 at a time from h * 4: the last windows run past the end


def _compile(func, arch):
    return tilelang.compile(func, target={"kind": "tt", "arch": arch})


def step_statistics(steps: int, by_row: bool):
    """Per head group: a 64-wide window of ``s`` from ``h * 4`` (a per-row vector), added to (multiplied into) each
    64x64 block of X, whose row max (column max) is kept per step in a column (row) of a shared buffer."""

    @T.prim_func
    def kernel(s: T.Tensor((H,), "float32"), X: T.Tensor((BN, steps * BN), "float32"),
               S: T.Tensor((H // G * BN, steps), "float32"), R: T.Tensor((H // G * steps, BN), "float32")):
        with T.Kernel(H // G, threads=128) as h:
            v = T.alloc_shared([BN], "float32")
            acc = T.alloc_fragment([BN, BN], "float32")
            m = T.alloc_fragment([BN], "float32")
            S_shared = T.alloc_shared([BN, steps], "float32")
            R_shared = T.alloc_shared([steps, BN], "float32")
            T.copy(s[h * G:h * G + BN], v)
            for k in T.serial(steps):
                T.copy(X[0, k * BN], acc)
                if by_row:
                    for i, j in T.Parallel(BN, BN):
                        acc[i, j] = acc[i, j] * v[i]
                    T.reduce_max(acc, m, dim=0)
                    T.copy(m, R_shared[k, :])
                else:
                    for i, j in T.Parallel(BN, BN):
                        acc[i, j] = acc[i, j] + v[i]
                    T.reduce_max(acc, m, dim=1)
                    T.copy(m, S_shared[:, k])
            if by_row:
                T.copy(R_shared, R[h * steps, 0])
            else:
                T.copy(S_shared, S[h * BN, 0])

    return kernel


def _step_reference(s, X, steps, by_row):
    out = torch.zeros(H // G, steps if by_row else BN, BN if by_row else steps, dtype=torch.float64)
    for h in range(H // G):
        v = torch.zeros(BN, dtype=torch.float64)
        n = min(BN, H - h * G)
        v[:n] = s.double()[h * G:h * G + n]
        for k in range(steps):
            blk = X.double()[:, k * BN:(k + 1) * BN]
            if by_row:
                out[h, k, :] = (blk * v[:, None]).max(dim=0).values
            else:
                out[h, :, k] = (blk + v[:, None]).max(dim=1).values
    return out.reshape(-1, out.shape[-1])


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("steps,by_row", [(32, False), (4, True)])
def test_step_statistics_in_a_column_or_row(arch, steps, by_row):
    torch.manual_seed(0)
    s, X = torch.randn(H), torch.randn(BN, steps * BN)
    S, R = torch.zeros(H // G * BN, steps), torch.zeros(H // G * steps, BN)
    _compile(step_statistics(steps, by_row), arch)(s, X, S, R)
    got = R if by_row else S
    # float32 adds (products) and exact maxima: within an ulp of the float64 result
    torch.testing.assert_close(got.double(), _step_reference(s, X, steps, by_row), rtol=2 ** -23, atol=0)


def test_column_copy_is_a_select_and_zeroes_an_untouched_buffer():
    from tilelang_tt.transform.copy_windows import copy_windows

    func = step_statistics(32, False)
    text = copy_windows(func).script()
    assert "T.region(m[0], 1" not in text     # no copy reads m any more
    assert "S_shared[i, j] = T.Select(j == k, m[i], S_shared[i, j])" in text
    assert text.count("T.fill(T.region(S_shared[0, 0], 2, 64, 32), T.float32(0.0))") == 1
    # the 1-D window past the end of s: a guarded element read
    assert "v[i] = T.Select(bx * 4 + i < 40, s[bx * 4 + i], T.float32(0.0))" in text


def fragment_rows(case: str):
    """The first rows of a 64-row fragment (GQA decode's valid heads ``acc_o[:valid_h, :]``) stored at row
    ``h * 4`` of the output, straight or through a shared buffer; or 16 columns."""
    HQ, D, VB, BH = 32, 128, 4, 64

    @T.prim_func
    def kernel(Q: T.Tensor((1, HQ, D), "float16"), O: T.Tensor((1, HQ, D), "float16"),
               C: T.Tensor((HQ // VB * BH, 16), "float32")):
        with T.Kernel(1, HQ // VB, threads=128) as (b, h):
            Q_shared = T.alloc_shared([BH, D], "float16")
            acc = T.alloc_fragment([BH, D], "float32")
            O_shared = T.alloc_shared([VB, D], "float16")
            C_shared = T.alloc_shared([BH, 16], "float32")
            T.copy(Q[b, h * VB:h * VB + BH, :], Q_shared)
            T.copy(Q_shared, acc)
            for i, j in T.Parallel(BH, D):
                acc[i, j] = acc[i, j] * 2.0 + i
            if case == "direct":
                T.copy(acc[:VB, :], O[b, h * VB:(h + 1) * VB, :])
            elif case == "shared":
                T.copy(acc[32:32 + VB, :], O_shared)
                T.copy(O_shared, O[b, h * VB:(h + 1) * VB, :])
            else:
                T.copy(acc[:, :16], C_shared)
                T.copy(C_shared, C[h * BH:(h + 1) * BH, :])

    return kernel


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("case", ["direct", "shared", "columns"])
def test_first_rows_of_a_fragment_at_a_row_offset(arch, case):
    HQ, D, VB, BH = 32, 128, 4, 64
    torch.manual_seed(1)
    Q = torch.randn(1, HQ, D).half()
    O, C = torch.zeros(1, HQ, D).half(), torch.zeros(HQ // VB * BH, 16)
    _compile(fragment_rows(case), arch)(Q, O, C)
    A = torch.zeros(HQ // VB, BH, D, dtype=torch.float64)      # each block's fragment; rows past Q read zero
    for h in range(HQ // VB):
        n = min(BH, HQ - h * VB)
        A[h, :n] = Q[0, h * VB:h * VB + n].double() * 2
        A[h] += torch.arange(BH, dtype=torch.float64)[:, None]
    if case == "columns":
        torch.testing.assert_close(C.double(), A[:, :, :16].reshape(-1, 16), rtol=0, atol=0)
        return
    rows = A[:, :VB] if case == "direct" else A[:, 32:32 + VB]
    # one float16 rounding of an exact float32 value
    torch.testing.assert_close(O.double(), rows.reshape(1, HQ, D).half().double(), rtol=0, atol=0)


def indexed_rows(placed: bool):
    """A 4-row block computed from the row index (``i == k``) stored at row ``h * 4``: it sits in the first rows
    of its tiles and is written row by row (it was stored from rows ``h * 4 % 32``: zeros)."""
    NK = 4

    @T.prim_func
    def kernel(X: T.Tensor((BN, NK * BN), "float32"), R: T.Tensor((H // G * NK, BN), "float32")):
        with T.Kernel(H // G, threads=128) as h:
            acc = T.alloc_fragment([BN, BN], "float32")
            m = T.alloc_fragment([BN], "float32")
            R_shared = T.alloc_shared([NK, BN], "float32")
            X_small = T.alloc_shared([NK, BN], "float32")
            T.fill(R_shared, 0)
            for k in T.serial(NK):
                T.copy(X[0, k * BN], acc)
                T.reduce_max(acc, m, dim=0)
                for i, j in T.Parallel(NK, BN):
                    R_shared[i, j] = T.if_then_else(i == k, m[j], R_shared[i, j])
            if placed:      # a block of X read at row 8 of its tiles cannot be added to it
                T.copy(X[8:12, 0:BN], X_small)
                for i, j in T.Parallel(NK, BN):
                    R_shared[i, j] += X_small[i, j]
            T.copy(R_shared, R[h * NK, 0])

    return kernel


@pytest.mark.parametrize("arch", ARCHS)
def test_block_computed_from_the_row_index_keeps_its_place(arch):
    NK = 4
    torch.manual_seed(2)
    X, R = torch.randn(BN, NK * BN), torch.zeros(H // G * NK, BN)
    _compile(indexed_rows(False), arch)(X, R)
    ref = torch.stack([X.double()[:, k * BN:(k + 1) * BN].max(dim=0).values for k in range(NK)]).repeat(H // G, 1)
    torch.testing.assert_close(R.double(), ref, rtol=0, atol=0)


def test_block_at_another_place_is_refused():
    with pytest.raises(TTUnsupportedError, match="loop variable i used as a value in a block smaller than a tile"
                                                 "|X_small sits at row 8 of its tiles but R_shared"):
        _compile(indexed_rows(True), "wormhole_b0")


def small_contraction(case: str):
    @T.prim_func
    def kernel(X: T.Tensor((64, 64), "bfloat16"), B: T.Tensor((64, 64), "bfloat16"), O: T.Tensor((32, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared([32, 16], "bfloat16")
            B_s = T.alloc_shared([16, 64], "bfloat16")
            C = T.alloc_fragment([32, 64], "float32")
            T.clear(C)
            if case == "fills":
                T.fill(A_s, 1)
                T.fill(B_s, 1)
            elif case == "fill_and_read":
                T.fill(A_s, 1)
                T.copy(B[16, 0], B_s)
            else:
                T.copy(X[0, 0], A_s)
                T.copy(B[16 if case == "offsets" else 0, 0], B_s)
            T.gemm(A_s, B_s, C)
            T.copy(C, O[0, 0])

    return kernel


@pytest.mark.parametrize("case,message", [
    ("fills", "neither is zero around its block"),
    ("offsets", "their blocks sit at different places in their tiles"),
])
def test_contraction_shorter_than_a_tile_is_refused_where_it_would_add_more(case, message):
    # T.gemm of K = 16: two fills added 32 products of ones (32.0 for 16.0); A's columns 0-15 against B's rows
    # 16-31 added zeros
    with pytest.raises(TTUnsupportedError, match=message):
        _compile(small_contraction(case), "wormhole_b0")


@pytest.mark.parametrize("case", ["same", "fill_and_read"])
def test_contraction_shorter_than_a_tile(case):
    torch.manual_seed(3)
    X, B, O = torch.randn(64, 64).bfloat16(), torch.randn(64, 64).bfloat16(), torch.zeros(32, 64)
    _compile(small_contraction(case), "wormhole_b0")(X, B, O)
    A = torch.ones(32, 16, dtype=torch.float64) if case == "fill_and_read" else X.double()[:32, :16]
    ref = A @ B.double()[16 if case == "fill_and_read" else 0:][:16]
    # bf16 operands at the default HiFi2 (in0: 7 of its 8 bits, 2^-6 per product; the warning says so), fp32
    # accumulation of 16 products
    bound = 2 ** -6 * (A.abs() @ B.double()[16 if case == "fill_and_read" else 0:][:16].abs()) + 1e-5
    assert ((O.double() - ref).abs() <= bound).all()


def test_gemm_result_keeps_the_rows_of_its_operand():
    """A 16-row A read at rows 16-31 of its tile: C's rows sit there too, and a store that needs them elsewhere is
    refused (it stored rows 0-15: zeros)."""
    @T.prim_func
    def kernel(X: T.Tensor((64, 64), "bfloat16"), B: T.Tensor((64, 64), "bfloat16"), O: T.Tensor((64, 64), "float32")):
        with T.Kernel(4, threads=128) as h:
            A_s = T.alloc_shared([16, 64], "bfloat16")
            B_s = T.alloc_shared([64, 64], "bfloat16")
            C = T.alloc_fragment([16, 64], "float32")
            T.copy(X[16:32, :], A_s)
            T.copy(B, B_s)
            T.clear(C)
            T.gemm(A_s, B_s, C)
            T.copy(C, O[h * 16:h * 16 + 16, :])

    with pytest.raises(TTUnsupportedError, match=r"C holds its block at tile offset \[16, None\]"):
        _compile(kernel, "wormhole_b0")


def test_pass_leaves_tile_blocks_alone():
    from tilelang_tt.transform.copy_windows import copy_windows

    @T.prim_func
    def kernel(s: T.Tensor((64,), "float32"), O: T.Tensor((64,), "float32")):
        with T.Kernel(2, threads=128) as b:
            v = T.alloc_shared([32], "float32")
            w = T.alloc_shared([16], "float32")
            T.copy(s[b * 32:b * 32 + 32], v)
            T.copy(s[b * 16:b * 16 + 16], w)
            T.copy(v, O[b * 32:b * 32 + 32])

    assert tvm.ir.structural_equal(copy_windows(kernel), kernel)
