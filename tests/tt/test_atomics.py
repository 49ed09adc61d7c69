"""Atomic adds (AtomicPartialsTT): each group of blocks that adds to the same elements stores its contribution in its
own slice of a partial tensor, and a launch that follows adds the slices to the tensor - TileLang's split-K GEMM and
its attention backward passes (dQ accumulated by every K/V block)."""

import json

import pytest
import tilelang
import tilelang.language as T
import torch

from tilelang_tt.errors import TTUnsupportedError

ARCHS = ["wormhole_b0", "blackhole"]


def _split_k(M, N, K, split, tile_form, bm=64, bn=64, bk=32):
    """TileLang's example_tilelang_gemm_splitk(_vectorize_atomicadd), in bfloat16."""
    chunk = K // split

    @T.prim_func
    def split_k(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((K, N), T.bfloat16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), split) as (bx, by, bz):
            a = T.alloc_shared((bm, bk), T.bfloat16)
            b = T.alloc_shared((bk, bn), T.bfloat16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(chunk, bk), num_stages=2):
                T.copy(A[by * bm, bz * chunk + ko * bk], a)
                T.copy(B[bz * chunk + ko * bk, bx * bn], b)
                T.gemm(a, b, acc)
            if tile_form:
                T.atomic_add(C[by * bm, bx * bn], acc)
            else:
                for i, j in T.Parallel(bm, bn):
                    T.atomic_add(C[by * bm + i, bx * bn + j], acc[i, j])

    return split_k


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("tile_form", [False, True], ids=["element", "tile"])
def test_split_k_gemm(arch, tile_form):
    M, N, K, split = 128, 128, 256, 4
    kernel = tilelang.compile(_split_k(M, N, K, split, tile_form), target=f"tt -arch={arch} -math_fidelity=HiFi4")
    a, b = torch.randn(M, K).bfloat16(), torch.randn(K, N).bfloat16()
    c0 = torch.randn(M, N)
    c = c0.clone()
    kernel(a, b, c)
    # HiFi4 multiplies bf16 operands exactly; float32 sums in another order than torch's: |err| <= K 2^-23 sum|ab|
    want = c0.double() + a.double() @ b.double()
    bound = (K + split + 1) * 2.0 ** -23 * (c0.double().abs() + a.double().abs() @ b.double().abs())
    assert ((c.double() - want).abs() <= bound).all()
    seq = json.loads((kernel.artifact_dir / "tt.sequence.json").read_text())
    # the split index bz is the only grid variable that does not move C's window: 4 partial slices
    assert seq["intermediates"] == [{"name": "C_partial", "shape": [split, M, N], "dtype": "float32",
                                     "param_index": 3}]
    assert [b["io"] for b in kernel.plan["buffers"]] == ["input", "input", "inout"]


def _dq_like(B, S, H, D, blk=64):
    """The dQ accumulation of an attention backward pass (bshd): the block of K/V rows ``by`` adds to every row
    block k of dQ of its head; each (bz, bx) owns one head's dQ."""
    @T.prim_func
    def dq_like(G: T.Tensor((B, S // blk, S, H, D), T.float32), dQ: T.Tensor((B, S, H, D), T.float32)):
        with T.Kernel(H, S // blk, B) as (bx, by, bz):
            g = T.alloc_fragment((blk, D), T.float32)
            for k in T.serial(S // blk):
                T.copy(G[bz, by, k * blk:(k + 1) * blk, bx, :], g)
                for i, j in T.Parallel(blk, D):
                    T.atomic_add(dQ[bz, k * blk + i, bx, j], g[i, j])

    return dq_like


@pytest.mark.parametrize("arch", ARCHS)
def test_contributions_of_every_block_to_a_bshd_tensor(arch):
    B, S, H, D = 1, 128, 2, 64
    kernel = tilelang.compile(_dq_like(B, S, H, D), target={"kind": "tt", "arch": arch})
    g = torch.randn(B, S // 64, S, H, D)
    dq = torch.zeros(B, S, H, D)
    kernel(g, dq)
    want = g.double().sum(1)     # two contributions per element, then added to zeros: float32 adds
    assert ((dq.double() - want).abs() <= 2 * 2.0 ** -24 * g.double().abs().sum(1)).all()
    seq = json.loads((kernel.artifact_dir / "tt.sequence.json").read_text())
    assert seq["intermediates"][0]["shape"] == [S // 64, B, S, H, D]    # by: 2 K/V blocks add to each element


def test_a_grid_variable_that_does_not_separate_windows_is_a_contributor():
    """C[(by // 2) * 32 + i, ...]: blocks by = 0 and 1 add to the same rows; counting by as a contributor keeps
    their contributions apart (grid variables are only left out when they provably move the window)."""
    @T.prim_func
    def k(A: T.Tensor((128, 64), T.float32), C: T.Tensor((64, 64), T.float32)):
        with T.Kernel(2, 4) as (bx, by):
            for i, j in T.Parallel(32, 32):
                T.atomic_add(C[(by // 2) * 32 + i, bx * 32 + j], A[by * 32 + i, bx * 32 + j])

    kernel = tilelang.compile(k, target="tt")
    a, c = torch.randn(128, 64), torch.zeros(64, 64)
    kernel(a, c)
    want = a.double().view(2, 2, 32, 64).sum(1).reshape(64, 64)
    assert ((c.double() - want).abs() <= 2 * 2.0 ** -24 * a.double().abs().view(2, 2, 32, 64).sum(1).reshape(64, 64)).all()


def test_adding_twice_to_one_element_is_refused():
    @T.prim_func
    def k(A: T.Tensor((64, 64), T.float32), C: T.Tensor((64, 64), T.float32)):
        with T.Kernel(2, 2) as (bx, by):
            for r in T.serial(2):
                for i, j in T.Parallel(32, 32):
                    T.atomic_add(C[by * 32 + i, bx * 32 + j], A[by * 32 + i, bx * 32 + j] * r)

    with pytest.raises(TTUnsupportedError, match="inside the loop over r, which does not move the window it adds to"):
        tilelang.compile(k, target="tt")


def test_reading_a_tensor_added_to_atomically_is_refused():
    @T.prim_func
    def k(A: T.Tensor((64, 64), T.float32), C: T.Tensor((64, 64), T.float32)):
        with T.Kernel(2, 2) as (bx, by):
            for i, j in T.Parallel(32, 32):
                T.atomic_add(C[by * 32 + i, bx * 32 + j], A[by * 32 + i, bx * 32 + j] + C[bx * 32 + i, by * 32 + j])

    with pytest.raises(TTUnsupportedError, match="C is added to atomically and also read or written another way"):
        tilelang.compile(k, target="tt")


def _norm_weight_grads(N, D, blk):
    """A LayerNorm backward's weight gradients as TileLang's norm/layernorm.py adds them: each row block's column
    sums added to 1-D tensors element by element (``T.atomic_add(DGamma[j], dgamma_acc[j])`` in a T.Parallel)."""
    @T.prim_func
    def k(DY: T.Tensor((N, D), "float32"), X: T.Tensor((N, D), "float32"), DGamma: T.Tensor((D,), "float32"),
          DBeta: T.Tensor((D,), "float32")):
        with T.Kernel(N // blk, threads=128) as bx:
            dy = T.alloc_shared((blk, D), "float32")
            x = T.alloc_shared((blk, D), "float32")
            prod = T.alloc_fragment((blk, D), "float32")
            dgamma = T.alloc_fragment((D,), "float32")
            dbeta = T.alloc_fragment((D,), "float32")
            T.copy(DY[bx * blk, 0], dy)
            T.copy(X[bx * blk, 0], x)
            for i, j in T.Parallel(blk, D):
                prod[i, j] = dy[i, j] * x[i, j]
            T.reduce_sum(prod, dgamma, dim=0)
            T.reduce_sum(dy, dbeta, dim=0)
            for j in T.Parallel(D):
                T.atomic_add(DGamma[j], dgamma[j])
                T.atomic_add(DBeta[j], dbeta[j])

    return k


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("blocks", [3, 40])
def test_atomic_adds_into_a_1d_tensor(arch, blocks):
    """A 1-D tensor's partial sums ([blocks, D]) are added up 32 rows at a time (rows past the last block read
    zeros) onto the tensor's own values: it was refused ("windows of 32 rows ... of a 2-D view"). 40 blocks take
    two 32-row steps."""
    N, D, blk = 32 * blocks, 256, 32
    kernel = tilelang.compile(_norm_weight_grads(N, D, blk), target={"kind": "tt", "arch": arch})
    g = torch.Generator().manual_seed(21)
    dy, x, dgamma, dbeta = (torch.randn(*s, generator=g) for s in ((N, D), (N, D), (D,), (D,)))
    want_gamma = dgamma.double() + (dy.double() * x.double()).sum(0)
    want_beta = dbeta.double() + dy.double().sum(0)
    scale_gamma = dgamma.double().abs() + (dy.double() * x.double()).abs().sum(0)
    scale_beta = dbeta.double().abs() + dy.double().abs().sum(0)
    kernel(dy, x, dgamma, dbeta)
    # float32 sums of N + 1 terms in some order: within (N + 1) * 2^-24 of the sum of magnitudes
    assert ((dgamma.double() - want_gamma).abs() <= (N + 1) * 2 ** -24 * scale_gamma).all()
    assert ((dbeta.double() - want_beta).abs() <= (N + 1) * 2 ** -24 * scale_beta).all()
