"""Norms and softmax written the way TileLang's examples write them (../shared/tilelang-examples/norm,
online_softmax): a bf16 tensor copied straight into a float32 fragment, statistics in float32, the result stored
as bf16 -- on both archs, against torch in float64.

Tolerances: one rounding of the bf16 output (2^-8 relative) on top of the float32 math; the row statistics
(sum of squares, max, sum of exponentials) carry at most 2^-10 relative error (the FPU reduce's TF32 operands,
when the kernel opts into it; float32 reductions are exact to fp32 rounding by default), which rsqrt halves and
exp2 turns into an absolute 2^-10 * |argument| error.
"""

import pytest
import tilelang
import tilelang.language as T
import torch

ARCHS = ["wormhole_b0", "blackhole"]
OUT = 2.0 ** -8


def llama_rms_norm(M, N, blk_m, eps=1e-6):
    @T.prim_func
    def rms_norm(X: T.Tensor((M, N), "bfloat16"), W: T.Tensor((N,), "bfloat16"), Y: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            x = T.alloc_fragment((blk_m, N), "float32")
            x_sq = T.alloc_fragment((blk_m, N), "float32")
            rstd = T.alloc_fragment((blk_m,), "float32")
            T.copy(X[bx * blk_m:(bx + 1) * blk_m, :], x)
            for i, j in T.Parallel(blk_m, N):
                x_sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(x_sq, rstd, dim=1)
            for i in T.Parallel(blk_m):
                rstd[i] = T.rsqrt(rstd[i] / N + eps)
            for i, j in T.Parallel(blk_m, N):
                x[i, j] = x[i, j] * rstd[i] * W[j]
            T.copy(x, Y[bx * blk_m:(bx + 1) * blk_m, :])
    return rms_norm


def online_softmax(M, N, block_m, block_n):
    scale = 1.44269504  # log2(e)

    @T.prim_func
    def softmax(X: T.Tensor((M, N), "bfloat16"), Y: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(M, block_m), threads=128) as i_m:
            x = T.alloc_fragment((block_m, block_n), "float32")
            y = T.alloc_fragment((block_m, block_n), "float32")
            lse = T.alloc_fragment((block_m,), "float32")
            max_x = T.alloc_fragment((block_m,), "float32")
            exp_x = T.alloc_fragment((block_m, block_n), "float32")
            sum_exp_x = T.alloc_fragment((block_m,), "float32")
            T.fill(lse, -T.infinity("float32"))
            for i_n in T.Pipelined(T.ceildiv(N, block_n)):
                T.copy(X[i_m * block_m, i_n * block_n], x)
                T.reduce_max(x, max_x, dim=1, clear=True)
                for i, j in T.Parallel(block_m, block_n):
                    exp_x[i, j] = T.exp2(x[i, j] * scale - max_x[i] * scale)
                T.reduce_sum(exp_x, sum_exp_x, dim=1, clear=True)
                for i in T.Parallel(block_m):
                    lse[i] = max_x[i] * scale + T.log2(T.exp2(lse[i] - max_x[i] * scale) + sum_exp_x[i])
            for i_n in T.Pipelined(T.ceildiv(N, block_n)):
                T.copy(X[i_m * block_m, i_n * block_n], x)
                for i, j in T.Parallel(block_m, block_n):
                    y[i, j] = T.exp2(x[i, j] * scale - lse[i])
                T.copy(y, Y[i_m * block_m, i_n * block_n])
    return softmax


@pytest.mark.parametrize("arch", ARCHS)
def test_minimal_widening_copy(arch):
    """The issue's minimal kernel: a 32x32 bf16 tensor through a float32 fragment and back, bit for bit."""
    @T.prim_func
    def k(X: T.Tensor((32, 32), "bfloat16"), Y: T.Tensor((32, 32), "bfloat16")):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((32, 32), "float32")
            T.copy(X[0, 0], x)
            T.copy(x, Y[0, 0])

    kernel = tilelang.compile(k, target={"kind": "tt", "arch": arch})
    x = torch.randn(32, 32, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    kernel(x, y)
    assert torch.equal(y, x)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("M,N,blk_m", [(96, 256, 32), (70, 128, 32)])
def test_llama_rms_norm(arch, M, N, blk_m):
    kernel = tilelang.compile(llama_rms_norm(M, N, blk_m), target={"kind": "tt", "arch": arch})
    g = torch.Generator().manual_seed(M + N)
    x = (torch.randn(M, N, generator=g) * 3).bfloat16()
    w = torch.randn(N, generator=g).bfloat16()
    y = torch.empty(M, N, dtype=torch.bfloat16)
    kernel(x, w, y)
    xd = x.double()
    ref = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
    # per element: the output rounding, and the row statistic's 2^-10 halved by rsqrt, twice for slack in the
    # order of the float32 products x * rstd * w
    bound = (OUT + 2.0 ** -10) * ref.abs() + 1e-6
    assert ((y.double() - ref).abs() <= bound).all(), ((y.double() - ref).abs() - bound).max()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("M,N,block_n", [(64, 256, 64), (40, 192, 96)])
def test_online_softmax(arch, M, N, block_n):
    kernel = tilelang.compile(online_softmax(M, N, 32, block_n), target={"kind": "tt", "arch": arch})
    g = torch.Generator().manual_seed(M * N)
    x = (torch.randn(M, N, generator=g) * 4).bfloat16()
    y = torch.empty(M, N, dtype=torch.bfloat16)
    kernel(x, y)
    ref = torch.softmax(x.double(), dim=1)
    # exp2's argument x * log2e - lse is off by at most 2^-10 (|x| + |lse|) * log2e in the statistics' path: a
    # relative error of ln2 times that in y; then the output rounding
    arg = (x.double().abs() + x.double().abs().max(dim=1, keepdim=True).values + 1) * 1.45
    bound = (OUT + 2.0 ** -10 * arg) * ref + 1e-7
    assert ((y.double() - ref).abs() <= bound).all(), ((y.double() - ref).abs() - bound).max()


def test_block_barriers_and_register_hints_are_implied():
    """``T.sync_threads()`` between a shared buffer's fill and its use (as TileLang's examples write it) and
    ``T.no_set_max_nreg()``: the TT program runs the block's tile operations in program order, so both are
    dropped and the result is exact."""
    @T.prim_func
    def synced(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as _:
            s = T.alloc_shared((64, 64), "float32")
            f = T.alloc_fragment((64, 64), "float32")
            T.no_set_max_nreg()
            T.copy(X[0, 0], s)
            T.sync_threads()
            for i, j in T.Parallel(64, 64):
                f[i, j] = s[i, j] + 1
            T.sync_threads()
            T.copy(f, Y[0, 0])

    kernel = tilelang.compile(synced, target="tt")
    x = torch.randn(64, 64)
    y = torch.empty_like(x)
    kernel(x, y)
    assert torch.equal(y, x + 1)


def _mean_pool(R, D, rows, dtype):
    """TileLang's block mean pooling (dsa_hisa), in ``dtype``: each block clears its fragment, copies rows of K into
    it (the last block's copy reaches past K, whose rows read zeros), scales the rows in place and sums them."""
    @T.prim_func
    def pool(K: T.Tensor((rows, D), dtype), S: T.Tensor((R * 32,), "float32"), Y: T.Tensor((R, D), "float32")):
        with T.Kernel(R, threads=128) as bx:
            index_k = T.alloc_fragment((32, D), "float32")
            scale = T.alloc_fragment((32,), "float32")
            acc = T.alloc_fragment((D,), "float32")
            T.fill(index_k, 0.0)
            T.copy(K[bx * 32:bx * 32 + 32, :], index_k)
            for i in T.Parallel(32):
                scale[i] = S[bx * 32 + i]
            for i, d in T.Parallel(32, D):
                index_k[i, d] = index_k[i, d] * scale[i]
            T.reduce_sum(index_k, acc, dim=0)
            for d in T.Parallel(D):
                Y[bx, d] = acc[d]

    return pool


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_clear_the_next_copy_overwrites(arch, dtype):
    """``T.fill(index_k, 0)`` before a ``T.copy`` of the whole block: the reader writes every element (zeros past K,
    as the guarded GPU copy leaves the fill's), so the clear goes and a float32 index_k has one producer (it was
    refused: "filled by the reader and also written by compute"; a bfloat16 K reaches it through compute's
    widening copy either way). Rows past K count as zeros."""
    R, D, rows = 3, 64, 80
    kernel = tilelang.compile(_mean_pool(R, D, rows, dtype), target={"kind": "tt", "arch": arch})
    g = torch.Generator().manual_seed(8)
    k, s, y = torch.randn(rows, D, generator=g).to(getattr(torch, dtype)), torch.randn(R * 32, generator=g), torch.zeros(R, D)
    kernel(k, s, y)
    padded = torch.cat([k.double(), torch.zeros(R * 32 - rows, D, dtype=torch.float64)])
    products = padded * s.double()[:, None]
    want = products.view(R, 32, D).sum(1)
    # exact bf16 -> fp32 widening, one fp32 product each, 32-term fp32 sums: a few fp32 ulps of the sum of |x|
    assert ((y.double() - want).abs() <= 2 ** -20 * products.abs().view(R, 32, D).sum(1)).all()
