"""Index tensors in compute (issue 24): int32 / bool tensor tiles compared and cast in a T.Parallel, gathers whose
row is an affine function of an index element with a base read from other tensors (sparse MLA's
``KV[bos + Indices[...], g, d]``), and the per-token vectors such kernels store, on both archs against torch."""

import pytest
import tilelang
import tilelang.language as T
import torch

from tilelang_tt.errors import TTCallError, TTUnsupportedError

ARCHS = ["wormhole_b0", "blackhole"]


def compile_tt(func, arch, **options):
    return tilelang.compile(func, target={"kind": "tt", "arch": arch, **options})


def masked_select_kernel(n=64):
    @T.prim_func
    def k(Idx: T.Tensor((n, n), "int32"), X: T.Tensor((n, n), "float32"), O: T.Tensor((n, n), "float32")):
        with T.Kernel(n // 32, n // 32) as (bx, by):
            for i, j in T.Parallel(32, 32):
                O[by * 32 + i, bx * 32 + j] = T.if_then_else(Idx[by * 32 + i, bx * 32 + j] > 100,
                                                             X[by * 32 + i, bx * 32 + j], -1.0)
    return k


@pytest.mark.parametrize("arch", ARCHS)
def test_int32_tensor_compared_in_compute(arch):
    """``Idx[i, j] > 100`` reads an Int32 tile into DST and makes it float (typecast_tile<Int32, Float32>); the
    comparison of exact integers is exact."""
    kernel = compile_tt(masked_select_kernel(), arch)
    torch.manual_seed(0)
    idx = torch.randint(-1000, 1000, (64, 64), dtype=torch.int32)
    idx[0, :4] = torch.tensor([100, 101, 99, -100], dtype=torch.int32)    # both sides of the bound
    x, o = torch.randn(64, 64), torch.zeros(64, 64)
    kernel(idx, x, o)
    assert torch.equal(o, torch.where(idx > 100, x, torch.tensor(-1.0)))


def test_int32_values_beyond_float32_are_refused_at_the_call():
    """Float32 holds integers exactly below 2^24 only: the call checks the tensor compute reads (the plan's
    ``value_limit``) rather than comparing a rounded value."""
    kernel = compile_tt(masked_select_kernel(), "wormhole_b0")
    assert [b.get("value_limit") for b in kernel.plan["buffers"]] == [2 ** 24, None, None]
    idx = torch.zeros(64, 64, dtype=torch.int32)
    idx[3, 5] = -2 ** 24
    with pytest.raises(TTCallError, match=r"parameter Idx holds 16777216: the kernel computes with its values as "
                                          r"float32, exact only below 16777216 \(2\^24\) in magnitude"):
        kernel(idx, torch.zeros(64, 64), torch.zeros(64, 64))
    idx[3, 5] = 2 ** 24 - 1
    kernel(idx, torch.zeros(64, 64), torch.zeros(64, 64))


@pytest.mark.parametrize("arch", ARCHS)
def test_int32_tensor_cast_and_copied(arch):
    """``T.Cast("float32", Idx[i, j])`` and an int32 fragment filled from a tensor (its bound is the call's 2^24),
    then an extremum stored to an int32 tensor."""
    @T.prim_func
    def k(Idx: T.Tensor((64, 64), "int32"), F: T.Tensor((64, 64), "float32"), O: T.Tensor((64, 64), "int32")):
        with T.Kernel(2, 2) as (bx, by):
            f = T.alloc_fragment((32, 32), "int32")
            for i, j in T.Parallel(32, 32):
                F[by * 32 + i, bx * 32 + j] = T.Cast("float32", Idx[by * 32 + i, bx * 32 + j]) * 0.5
            for i, j in T.Parallel(32, 32):
                f[i, j] = Idx[by * 32 + i, bx * 32 + j]
            for i, j in T.Parallel(32, 32):
                O[by * 32 + i, bx * 32 + j] = T.max(f[i, j], 7)

    kernel = compile_tt(k, arch)
    idx = torch.randint(-2 ** 23, 2 ** 23, (64, 64), dtype=torch.int32)
    f, o = torch.zeros(64, 64), torch.zeros(64, 64, dtype=torch.int32)
    kernel(idx, f, o)
    assert torch.equal(f, idx.double().mul(0.5).float())
    assert torch.equal(o, torch.clamp(idx, min=7))


def test_int32_tensor_arithmetic_is_refused():
    """``Idx + 1`` in compute could leave the exact range (the call bounds Idx's values below 2^24 only)."""
    @T.prim_func
    def k(Idx: T.Tensor((32, 32), "int32"), O: T.Tensor((32, 32), "float32")):
        with T.Kernel(1) as bx:
            for i, j in T.Parallel(32, 32):
                O[i, j] = T.if_then_else(Idx[i, j] + 1 > 5, 1.0, 0.0)

    with pytest.raises(TTUnsupportedError, match=r"the integer `Idx\[i, j\] \+ 1` is computed on tiles in float32, "
                                                  r"and may reach 16777216 in magnitude: exact only below 2\^24"):
        compile_tt(k, "wormhole_b0")


@pytest.mark.parametrize("arch", ARCHS)
def test_bool_mask_tensor_and_truth_value_operators(arch):
    """A bool tensor as a select's condition (the host widens it to Int32 words), and ``&`` of two comparisons of
    an index (sparse attention's ``(Indices <= q) & (Indices != -1)``) with the bound read from a tensor."""
    n = 64

    @T.prim_func
    def k(M: T.Tensor((n, 32), "bool"), Idx: T.Tensor((n, 32), "int32"), Tok: T.Tensor((n, 2), "int32"),
          X: T.Tensor((n, 32), "float32"), O: T.Tensor((n, 32), "float32"), P: T.Tensor((n, 32), "float32")):
        with T.Kernel(n) as bx:
            s_i = Tok[bx, 1]
            for j in T.Parallel(32):
                O[bx, j] = T.if_then_else(M[bx, j], X[bx, j], 0.0)
            for j in T.Parallel(32):
                P[bx, j] = T.if_then_else((Idx[bx, j] <= s_i) & (Idx[bx, j] != -1), X[bx, j], 0.0)

    kernel = compile_tt(k, arch)
    torch.manual_seed(1)
    m = torch.rand(n, 32) > 0.5
    idx = torch.randint(-2, n, (n, 32), dtype=torch.int32)
    tok = torch.randint(0, n, (n, 2), dtype=torch.int32)
    x, o, p = torch.randn(n, 32), torch.zeros(n, 32), torch.zeros(n, 32)
    kernel(m, idx, tok, x, o, p)
    zero = torch.tensor(0.0)
    assert torch.equal(o, torch.where(m, x, zero))
    assert torch.equal(p, torch.where((idx <= tok[:, 1:2]) & (idx != -1), x, zero))


@pytest.mark.parametrize("arch", ARCHS)
def test_affine_gather_of_a_4d_tensor(arch):
    """``KV[b, Idx[b, s, k], g, d]`` of a ``[B, S, G, D]`` tensor is row ``(b * S + Idx) * G + g`` of its 2-D view:
    the reader scales the index element and adds the block's base. The sentinel ``SKV`` of a padded top-k reads
    the element a GPU reads at that address (the next batch's first row); past the whole tensor, zeros."""
    B, S, SKV, G, D, topk = 2, 4, 64, 2, 64, 32

    @T.prim_func
    def k(KV: T.Tensor((B, SKV, G, D), "bfloat16"), Idx: T.Tensor((B, S, topk), "int32"),
          P: T.Tensor((2 * B * SKV, D), "bfloat16"), O: T.Tensor((B, S, G, topk, D), "bfloat16"),
          Q: T.Tensor((B, S, G, topk, D), "bfloat16")):
        with T.Kernel(S, B, G) as (s, b, g):
            rows = T.alloc_shared((topk, D), "bfloat16")
            pairs = T.alloc_shared((topk, D), "bfloat16")
            for i, d in T.Parallel(topk, D):
                rows[i, d] = KV[b, Idx[b, s, i], g, d]
            for i, d in T.Parallel(topk, D):      # the odd row of each pair: row Idx * 2 + 1 of this batch's
                pairs[i, d] = P[(b * SKV + Idx[b, s, i]) * 2 + g, d]
            T.copy(rows, O[b, s, g, :, :])
            T.copy(pairs, Q[b, s, g, :, :])

    kernel = compile_tt(k, arch)
    torch.manual_seed(2)
    kv, p = torch.randn(B, SKV, G, D).bfloat16(), torch.randn(2 * B * SKV, D).bfloat16()
    idx = torch.randint(0, SKV, (B, S, topk), dtype=torch.int32)
    idx[:, :, -3:] = SKV                      # padding slots
    o, q = torch.full((B, S, G, topk, D), 7.0).bfloat16(), torch.full((B, S, G, topk, D), 7.0).bfloat16()
    kernel(kv, idx, p, o, q)
    row = (torch.arange(B)[:, None, None, None] * SKV + idx.long()[:, :, None, :]) * G + \
        torch.arange(G)[None, None, :, None]
    zeros = torch.zeros(G, D).bfloat16()      # rows past the tensor
    assert torch.equal(o, torch.cat([kv.reshape(B * SKV * G, D), zeros])[row])
    assert torch.equal(q, torch.cat([p, zeros])[row])


def token_vector_kernel(S, H, D, shift):
    @T.prim_func
    def k(X: T.Tensor((S, H, D), "float32"), Tok: T.Tensor((S,), "int32"), Lse: T.Tensor((S, H), "float32")):
        with T.Kernel(S, H // 16) as (bx, g):
            t = Tok[bx]
            xs = T.alloc_fragment((16, D), "float32")
            v = T.alloc_fragment((16,), "float32")
            T.copy(X[t, g * 16:g * 16 + 16, :], xs)
            T.reduce_sum(xs, v, dim=1)
            T.copy(v, Lse[t, (g + shift) % 2 * 16:(g + shift) % 2 * 16 + 16])
    return k


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("H", [16, 32])
def test_short_vector_stored_as_a_row_at_a_token_row(arch, H):
    """A 16-value row reduction (one token's heads) stored into row ``Tok[bx]`` of ``Lse``: transposed on chip,
    its values stay at the columns its rows were computed at."""
    S, D = 64, 64
    kernel = compile_tt(token_vector_kernel(S, H, D, 0), arch)
    torch.manual_seed(3)
    x, tok = torch.randn(S, H, D), torch.randperm(S).to(torch.int32)
    lse = torch.zeros(S, H)
    kernel(x, tok, lse)
    ref = torch.zeros(S, H, dtype=torch.float64)
    ref[tok.long()] = x.double()[tok.long()].sum(-1)
    torch.testing.assert_close(lse.double(), ref, rtol=1e-6, atol=1e-5)


def test_short_vector_at_other_columns_is_refused():
    with pytest.raises(TTUnsupportedError, match=r"v holds its 16 values at rows by % 2 \* 16 of its tile, but this "
                                                  r"store needs them at columns \(by \+ 1\) % 2 \* 16"):
        compile_tt(token_vector_kernel(64, 32, 64, 1), "wormhole_b0")


def sparse_attention_scores(S, SKV, D, topk, BI):
    """Sparse MLA's inner step at a small size: the token's rows come through ``bos + s`` (both read from tensors),
    its top-k indices are gathered, masked (``Indices <= s`` and not -1) and scored."""
    @T.prim_func
    def k(Q: T.Tensor((S, 16, D), "bfloat16"), KV: T.Tensor((SKV, D), "bfloat16"),
          Indices: T.Tensor((S, topk), "int32"), Offsets: T.Tensor((2,), "int32"),
          TokenIndices: T.Tensor((S, 2), "int32"), Out: T.Tensor((S, 16, topk), "float32")):
        with T.Kernel(S) as bx:
            b_i, s_i = TokenIndices[bx, 0], TokenIndices[bx, 1]
            bos = Offsets[b_i]
            Q_s = T.alloc_shared((16, D), "bfloat16")
            KV_s = T.alloc_shared((BI, D), "bfloat16")
            mask = T.alloc_fragment((BI,), "bool")
            acc_s = T.alloc_fragment((16, BI), "float32")
            T.copy(Q[bos + s_i, :, :], Q_s)
            for i_i in T.serial(topk // BI):
                for bi in T.Parallel(BI):
                    mask[bi] = (Indices[bos + s_i, i_i * BI + bi] <= s_i) & (Indices[bos + s_i, i_i * BI + bi] != -1)
                for bi, d in T.Parallel(BI, D):
                    KV_s[bi, d] = KV[bos + Indices[bos + s_i, i_i * BI + bi], d]
                for h, bi in T.Parallel(16, BI):
                    acc_s[h, bi] = T.if_then_else(mask[bi], 0, -1e4)
                T.gemm(Q_s, KV_s, acc_s, transpose_B=True)
                T.copy(acc_s, Out[bos + s_i, :, i_i * BI:(i_i + 1) * BI])
    return k


@pytest.mark.parametrize("arch", ARCHS)
def test_sparse_attention_scores_with_varlen_offsets(arch):
    S, SKV, D, topk, BI = 64, 64, 64, 64, 32
    kernel = compile_tt(sparse_attention_scores(S, SKV, D, topk, BI), arch, math_fidelity="HiFi4")
    torch.manual_seed(4)
    offsets = torch.tensor([0, 40], dtype=torch.int32)       # two sequences: rows 0..39 and 40..63
    tok = torch.tensor([[0, t] for t in range(40)] + [[1, t] for t in range(24)], dtype=torch.int32)
    q, kv = torch.randn(S, 16, D).bfloat16(), torch.randn(SKV, D).bfloat16()
    idx = torch.randint(-1, 40, (S, topk), dtype=torch.int32)
    out = torch.zeros(S, 16, topk)
    kernel(q, kv, idx, offsets, tok, out)
    ref = torch.empty(S, 16, topk, dtype=torch.float64)
    for t in range(S):
        bos, s = int(offsets[tok[t, 0]]), int(tok[t, 1])
        row = idx[bos + s].long()
        keys = kv.double()[(bos + row).clamp(0, SKV - 1)] * ((bos + row >= 0) & (bos + row < SKV))[:, None]
        valid = (row <= s) & (row != -1)
        ref[bos + s] = q.double()[bos + s] @ keys.T + torch.where(valid, 0.0, -1e4)
    torch.testing.assert_close(out.double(), ref, rtol=0, atol=1e-3)
