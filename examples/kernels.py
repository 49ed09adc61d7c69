"""Kernels written in plain TileLang, shared by the main job, tests and benchmarks.

Nothing here is Tenstorrent specific: these are ordinary grid kernels, exactly what a TileLang user
writes for a GPU. ``tilelang.compile(func, target="tt")`` turns them into persistent TT kernels.
"""


import math

import tilelang.language as T


def design_gemm(M: int = 256, N: int = 256, K: int = 256, dtype: str = "bfloat16", block: int = 32):
    """The design document's GEMM: 32x32 blocks, bf16 in and out, no annotations."""

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            A_blk = T.alloc_shared((block, block), dtype)
            B_blk = T.alloc_shared((block, block), dtype)
            C_acc = T.alloc_fragment((block, block), dtype)
            T.clear(C_acc)
            for kk in T.serial(T.ceildiv(K, block)):
                T.copy(A[by * block, kk * block], A_blk)
                T.copy(B[kk * block, bx * block], B_blk)
                T.gemm(A_blk, B_blk, C_acc)
            T.copy(C_acc, C[by * block, bx * block])

    return gemm


def tilelang_example_gemm(M: int = 1024, N: int = 1024, K: int = 1024, block_M: int = 128, block_N: int = 128,
                          block_K: int = 32, dtype: str = "float16", accum_dtype: str = "float32",
                          num_stages: int = 3):
    """GEMM as TileLang's own example writes it: B transposed, fp16 in, fp32 accumulate, C staged in shared."""

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            C_shared = T.alloc_shared((block_M, block_N), dtype)
            T.use_swizzle(panel_size=10)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C_shared)
            T.copy(C_shared, C[by * block_M, bx * block_N])

    return gemm


def elementwise_add(M: int = 256, N: int = 256, dtype: str = "float32", block_M: int = 32, block_N: int = 32):
    """Elementwise add in TileLang's usual style: a T.Parallel body indexing global tensors."""

    @T.prim_func
    def add(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                C[by * block_M + i, bx * block_N + j] = A[by * block_M + i, bx * block_N + j] + B[by * block_M + i, bx * block_N + j]

    return add


def fused_chain(M: int = 128, N: int = 128, dtype: str = "bfloat16", block_M: int = 32, block_N: int = 64):
    """``exp(a) * b + 1`` staged through shared memory; the chain is fused in DST."""

    @T.prim_func
    def chain(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_N), dtype)
            B_s = T.alloc_shared((block_M, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), dtype)
            T.copy(A[by * block_M, bx * block_N], A_s)
            T.copy(B[by * block_M, bx * block_N], B_s)
            for i, j in T.Parallel(block_M, block_N):
                C_l[i, j] = T.exp(A_s[i, j]) * B_s[i, j] + 1.0
            T.copy(C_l, C[by * block_M, bx * block_N])

    return chain


def dynamic_scale_add(N: int = 64, dtype: str = "float32", block_M: int = 32, block_N: int = 32):
    """``C = 2 * A + B`` over a symbolic number of rows M (``T.dynamic``): one compiled kernel, any M."""
    M = T.dynamic("M")

    @T.prim_func
    def scale_add(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                C[by * block_M + i, bx * block_N + j] = A[by * block_M + i, bx * block_N + j] * 2.0 + \
                    B[by * block_M + i, bx * block_N + j]

    return scale_add


def dynamic_gemm(N: int = 64, K: int = 96, dtype: str = "bfloat16", block: int = 32):
    """A GEMM whose M is symbolic (``T.dynamic``): the per-core split happens at launch."""
    M = T.dynamic("M")

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            A_s = T.alloc_shared((block, block), dtype)
            B_s = T.alloc_shared((block, block), dtype)
            C_l = T.alloc_fragment((block, block), "float32")
            T.clear(C_l)
            for k in T.serial(T.ceildiv(K, block)):
                T.copy(A[by * block, k * block], A_s)
                T.copy(B[k * block, bx * block], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block, bx * block])

    return gemm


# --- TileLang's everyday kernels: reductions, broadcasts, vectors, N-D tensors, epilogues, fused GEMMs ----------


def online_softmax(M: int = 64, N: int = 8192, BLOCK_M: int = 1, BLOCK_N: int = 8192, dtype: str = "float16"):
    """TileLang's examples/online_softmax as written: a log-sum-exp sweep over column blocks, then a normalising
    sweep; with BLOCK_N = N each sweep is a loop of one iteration over rows wider than L1 (RowStreamTT)."""
    accum_dtype = "float32"
    scale = 1.44269504  # log2(e)

    @T.prim_func
    def softmax_kernel(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, BLOCK_M), threads=128) as (i_m):
            x = T.alloc_fragment([BLOCK_M, BLOCK_N], dtype)
            y = T.alloc_fragment([BLOCK_M, BLOCK_N], dtype)
            lse = T.alloc_fragment([BLOCK_M], accum_dtype)
            max_x = T.alloc_fragment([BLOCK_M], dtype)
            exp_x = T.alloc_fragment([BLOCK_M, BLOCK_N], accum_dtype)
            sum_exp_x = T.alloc_fragment([BLOCK_M], accum_dtype)
            T.fill(lse, -T.infinity(accum_dtype))
            for i_n in T.Pipelined(T.ceildiv(N, BLOCK_N)):
                T.copy(X[i_m * BLOCK_M, i_n * BLOCK_N], x)
                T.reduce_max(x, max_x, dim=1, clear=True)
                for i, j in T.Parallel(BLOCK_M, BLOCK_N):
                    exp_x[i, j] = T.exp2(x[i, j] * scale - max_x[i] * scale)
                T.reduce_sum(exp_x, sum_exp_x, dim=1, clear=True)
                for i in T.Parallel(BLOCK_M):
                    lse[i] = max_x[i] * scale + T.log2(T.exp2(lse[i] - max_x[i] * scale) + sum_exp_x[i])
            for i_n in T.Pipelined(T.ceildiv(N, BLOCK_N)):
                T.copy(X[i_m * BLOCK_M, i_n * BLOCK_N], x)
                for i, j in T.Parallel(BLOCK_M, BLOCK_N):
                    y[i, j] = T.exp2(x[i, j] * scale - lse[i])
                T.copy(y, Y[i_m * BLOCK_M, i_n * BLOCK_N])

    return softmax_kernel


def softmax(M: int = 256, N: int = 512, block_M: int = 32, dtype: str = "bfloat16"):
    """Row softmax in the form of TileLang's examples: fp32 statistics, exp2 with log2(e) folded in."""
    scale = 1.44269504  # log2(e)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            X_s = T.alloc_shared((block_M, N), dtype)
            X_f = T.alloc_fragment((block_M, N), "float")
            row_max = T.alloc_fragment((block_M,), "float")
            row_sum = T.alloc_fragment((block_M,), "float")
            T.copy(X[bx * block_M, 0], X_s)
            T.copy(X_s, X_f)
            T.reduce_max(X_f, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):
                X_f[i, j] = T.exp2((X_f[i, j] - row_max[i]) * scale)
            T.reduce_sum(X_f, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                X_f[i, j] = X_f[i, j] / row_sum[i]
            T.copy(X_f, Y[bx * block_M, 0])

    return main


def layernorm(N: int = 256, D: int = 512, eps: float = 1e-5, blk_m: int = 1, in_dtype: str = "bfloat16",
              out_dtype: str = "bfloat16"):
    """TileLang's layernorm forward example (examples/norm/layernorm.py), unchanged: one row per block, gamma and
    beta as 1-D tensors, the mean and 1/std written as 1-D fp32 outputs."""
    accum_dtype = "float"

    @T.prim_func
    def main(X: T.Tensor((N, D), in_dtype), gamma: T.Tensor((D,), in_dtype), beta: T.Tensor((D,), in_dtype),
             Y: T.Tensor((N, D), out_dtype), Mean: T.Tensor((N,), accum_dtype), Rstd: T.Tensor((N,), accum_dtype)):
        with T.Kernel(T.ceildiv(N, blk_m), threads=256) as bx:
            X_smem = T.alloc_shared((blk_m, D), in_dtype)
            G_smem = T.alloc_shared((D,), in_dtype)
            B_smem = T.alloc_shared((D,), in_dtype)
            X_local = T.alloc_fragment((blk_m, D), accum_dtype)
            X_sq_local = T.alloc_fragment((blk_m, D), accum_dtype)
            sum_row = T.alloc_fragment((blk_m,), accum_dtype)
            sumsq_row = T.alloc_fragment((blk_m,), accum_dtype)
            mean_row = T.alloc_fragment((blk_m,), accum_dtype)
            rstd_row = T.alloc_fragment((blk_m,), accum_dtype)
            T.copy(X[bx * blk_m, 0], X_smem)
            T.copy(gamma, G_smem)
            T.copy(beta, B_smem)
            for i, j in T.Parallel(blk_m, D):
                X_local[i, j] = T.Cast(accum_dtype, X_smem[i, j])
            for i, j in T.Parallel(blk_m, D):
                X_sq_local[i, j] = X_local[i, j] * X_local[i, j]
            T.reduce_sum(X_local, sum_row, dim=1)
            T.reduce_sum(X_sq_local, sumsq_row, dim=1)
            inv_D = T.float32(1.0) / T.Cast(accum_dtype, D)
            for i in T.Parallel(blk_m):
                mean_row[i] = sum_row[i] * inv_D
                rstd_row[i] = T.rsqrt(sumsq_row[i] * inv_D - mean_row[i] * mean_row[i] + T.Cast(accum_dtype, eps))
                Mean[bx * blk_m + i] = mean_row[i]
                Rstd[bx * blk_m + i] = rstd_row[i]
            for i, j in T.Parallel(blk_m, D):
                norm = (X_local[i, j] - mean_row[i]) * rstd_row[i]
                X_smem[i, j] = T.Cast(out_dtype, norm * T.Cast(accum_dtype, G_smem[j]) + T.Cast(accum_dtype, B_smem[j]))
            T.copy(X_smem, Y[bx * blk_m, 0])

    return main


def rms_norm(M: int = 256, N: int = 512, blk_m: int = 1):
    """TileLang's rms_norm example (examples/norm/rms_norm.py), unchanged: fp32, `blk_m` rows per block."""
    dtype = "float"

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            A_shared = T.alloc_shared((blk_m, N), dtype)
            A_pow_local = T.alloc_fragment((blk_m, N), dtype)
            A_local = T.alloc_fragment((blk_m, N), dtype)
            A_powsum = T.alloc_fragment((blk_m,), dtype)
            T.copy(A[bx * blk_m:(bx + 1) * blk_m, :], A_shared)
            T.copy(A_shared, A_local)
            for i, j in T.Parallel(blk_m, N):
                A_pow_local[i, j] = A_local[i, j] * A_local[i, j]
            T.reduce_sum(A_pow_local, A_powsum, dim=1)
            for i in T.Parallel(blk_m):
                A_powsum[i] = T.rsqrt(A_powsum[i] / N) + 1e-12
            for i, j in T.Parallel(blk_m, N):
                A_local[i, j] *= A_powsum[i]
            T.copy(A_local, B[bx * blk_m:(bx + 1) * blk_m, :])

    return main


def argmax_rows(M: int = 64, N: int = 256):
    """The index of each row's first maximum as an int32 tensor: the int32 candidates (N - j where the row reaches
    its maximum) compute in Float32 tiles and are converted once, before the store (typecast into an Int32 CB)."""

    @T.prim_func
    def argmax(X: T.Tensor((M, N), "float32"), Idx: T.Tensor((M,), "int32")):
        with T.Kernel(M // 32, threads=128) as bx:
            x = T.alloc_fragment((32, N), "float32")
            m = T.alloc_fragment((32,), "float32")
            cand = T.alloc_fragment((32, N), "int32")
            idx = T.alloc_fragment((32,), "int32")
            T.copy(X[bx * 32, 0], x)
            T.reduce_max(x, m, dim=1, clear=True)
            for i, j in T.Parallel(32, N):        # the first maximum: the largest N - j among the maxima
                cand[i, j] = T.if_then_else(x[i, j] == m[i], N - j, 0)
            T.reduce_max(cand, idx, dim=1, clear=True)
            for i in T.Parallel(32):
                Idx[bx * 32 + i] = N - idx[i]

    return argmax


def gemv(N: int = 256, K: int = 512, block_N: int = 32, block_K: int = 128, dtype: str = "bfloat16"):
    """y = W x: each block multiplies a block of rows of W by x broadcast along the rows and reduces."""

    @T.prim_func
    def main(x: T.Tensor((K,), dtype), W: T.Tensor((N, K), dtype), y: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), threads=128) as bx:
            x_s = T.alloc_shared((block_K,), dtype)
            W_s = T.alloc_shared((block_N, block_K), dtype)
            acc = T.alloc_fragment((block_N, block_K), "float")
            y_f = T.alloc_fragment((block_N,), "float")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(x[k * block_K], x_s)
                T.copy(W[bx * block_N, k * block_K], W_s)
                for i, j in T.Parallel(block_N, block_K):
                    acc[i, j] += W_s[i, j] * x_s[j]
            T.reduce_sum(acc, y_f, dim=1)
            T.copy(y_f, y[bx * block_N])

    return main


def batched_gemm(batch: int = 4, M: int = 128, N: int = 128, K: int = 128, block_M: int = 64, block_N: int = 64,
                 block_K: int = 32, dtype: str = "bfloat16"):
    """C[b] = A[b] @ B[b] over rank-3 tensors and a 3-D grid (blockIdx.z = batch)."""

    @T.prim_func
    def main(A: T.Tensor((batch, M, K), dtype), B: T.Tensor((batch, K, N), dtype), C: T.Tensor((batch, M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), batch, threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_f = T.alloc_fragment((block_M, block_N), "float")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[bz, by * block_M, k * block_K], A_s)
                T.copy(B[bz, k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[bz, by * block_M, bx * block_N])

    return main


def gemm_bias_relu(M: int = 256, N: int = 256, K: int = 256, block_M: int = 64, block_N: int = 64,
                   block_K: int = 32, dtype: str = "bfloat16"):
    """C = relu(A @ B + bias): the epilogue updates the accumulator in place, on chip."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), bias: T.Tensor((N,), dtype),
             C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_f = T.alloc_fragment((block_M, block_N), "float")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f)
            for i, j in T.Parallel(block_M, block_N):
                C_f[i, j] = T.max(C_f[i, j] + bias[bx * block_N + j], 0)
            T.copy(C_f, C[by * block_M, bx * block_N])

    return main


def mlp(M: int = 256, D: int = 128, H: int = 256, block_M: int = 32, dtype: str = "bfloat16"):
    """Two-layer MLP, Y = relu(X W1) W2: the hidden activation stays on chip as the second GEMM's operand."""

    @T.prim_func
    def main(X: T.Tensor((M, D), dtype), W1: T.Tensor((D, H), dtype), W2: T.Tensor((H, D), dtype),
             Y: T.Tensor((M, D), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            X_s = T.alloc_shared((block_M, D), dtype)
            W1_s = T.alloc_shared((D, H), dtype)
            W2_s = T.alloc_shared((H, D), dtype)
            H_f = T.alloc_fragment((block_M, H), "float")
            H_act = T.alloc_fragment((block_M, H), dtype)
            Y_f = T.alloc_fragment((block_M, D), "float")
            T.copy(X[bx * block_M, 0], X_s)
            T.copy(W1, W1_s)
            T.copy(W2, W2_s)
            T.clear(H_f)
            T.gemm(X_s, W1_s, H_f)
            for i, j in T.Parallel(block_M, H):
                H_act[i, j] = T.max(H_f[i, j], 0)
            T.clear(Y_f)
            T.gemm(H_act, W2_s, Y_f)
            T.copy(Y_f, Y[bx * block_M, 0])

    return main


def flash_attention(batch: int = 1, heads: int = 2, seq_q: int = 256, seq_kv: int = 256, dim: int = 64,
                    kv_heads: int | None = None, is_causal: bool = False, block_M: int = 64, block_N: int = 64,
                    num_stages: int = 1, dtype: str = "bfloat16", layout: str = "bhsd",
                    qk_chunk_tiles: int | None = None, math_fidelity: str | None = None):
    """FlashAttention forward in the form of TileLang's example_mha_fwd_bhsd.py (``layout="bhsd"``: Q, K, V as
    [batch, heads, seq, dim]) and example_mha_fwd_bshd.py (``layout="bshd"``: [batch, seq, heads, dim]);
    the online softmax with exp2 and log2(e) folded into the scale, the output
    accumulator rescaled in place and P.V as a GEMM on the on-chip probabilities. kv_heads < heads is
    grouped-query attention (query head h reads K/V head h // (heads // kv_heads)). Causal: K/V blocks above the
    diagonal are not visited (the loop's trip count depends on bx) and the score block is initialised with the
    mask (0 or -inf from the query and key positions) before QK^T accumulates into it. The row maximum is a
    running one (``T.max`` with the previous), as in TileLang's current examples. ``qk_chunk_tiles`` asks
    SDPAFusionTT to stream K/V in smaller chunks than block_N; ``math_fidelity`` overrides ttnn's default (HiFi2)."""
    kv_heads = kv_heads or heads
    past_len = seq_kv - seq_q
    groups = heads // kv_heads
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e)
    bshd = layout == "bshd"
    q_shape = [batch, seq_q, heads, dim] if bshd else [batch, heads, seq_q, dim]
    kv_shape = [batch, seq_kv, kv_heads, dim] if bshd else [batch, kv_heads, seq_kv, dim]
    accum_dtype = "float"

    def rows(t, b, h, lo, n):     # the [n, dim] block of head h, rows lo..lo+n, in either layout
        return t[b, lo:lo + n, h, :] if bshd else t[b, h, lo:lo + n, :]

    @T.prim_func
    def main(Q: T.Tensor(q_shape, dtype), K: T.Tensor(kv_shape, dtype), V: T.Tensor(kv_shape, dtype),
             Output: T.Tensor(q_shape, dtype)):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=128) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            O_shared = T.alloc_shared([block_M, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum_dtype)
            scores_max = T.alloc_fragment([block_M], accum_dtype)
            scores_max_prev = T.alloc_fragment([block_M], accum_dtype)
            scores_scale = T.alloc_fragment([block_M], accum_dtype)
            scores_sum = T.alloc_fragment([block_M], accum_dtype)
            logsum = T.alloc_fragment([block_M], accum_dtype)

            if qk_chunk_tiles is not None:
                T.annotate_tt_schedule(qk_chunk_tiles=qk_chunk_tiles)
            if math_fidelity is not None:
                T.annotate_tt_compute(math_fidelity=math_fidelity)
            T.copy(rows(Q, bz, by, bx * block_M, block_M), Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))
            loop_range = (T.min(T.ceildiv(seq_kv, block_N), T.ceildiv((bx + 1) * block_M + past_len, block_N))
                          if is_causal else T.ceildiv(seq_kv, block_N))
            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(rows(K, bz, by // groups, k * block_N, block_N), K_shared)
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        q_idx = bx * block_M + i + past_len
                        k_idx = k * block_N + j
                        acc_s[i, j] = T.if_then_else(q_idx >= k_idx, 0, -T.infinity(acc_s.dtype))
                else:
                    T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(accum_dtype))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(rows(V, bz, by // groups, k * block_N, block_N), V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, rows(Output, bz, by, bx * block_M, block_M))

    return main


def paged_decode(B, H, D, BS, MAXB, NB):
    """Decode attention over a paged KV cache: K/V blocks of BS rows found through a block table (MQA)."""
    scale = 1.0 / math.sqrt(D) * 1.44269504

    @T.prim_func
    def decode(Q: T.Tensor((B, H, D), "bfloat16"), K: T.Tensor((NB * BS, D), "bfloat16"),
               V: T.Tensor((NB * BS, D), "bfloat16"), BlockTable: T.Tensor((B, MAXB), "int32"),
               O: T.Tensor((B, H, D), "bfloat16")):
        with T.Kernel(B, threads=128) as bz:
            q = T.alloc_shared((H, D), "bfloat16")
            k = T.alloc_shared((BS, D), "bfloat16")
            v = T.alloc_shared((BS, D), "bfloat16")
            acc_s = T.alloc_fragment((H, BS), "float32")
            p = T.alloc_fragment((H, BS), "bfloat16")
            acc_o = T.alloc_fragment((H, D), "float32")
            m = T.alloc_fragment((H,), "float32")
            m_prev = T.alloc_fragment((H,), "float32")
            rescale = T.alloc_fragment((H,), "float32")
            row_sum = T.alloc_fragment((H,), "float32")
            l = T.alloc_fragment((H,), "float32")
            T.copy(Q[bz, 0, 0], q)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float32"))
            for j in T.serial(MAXB):
                T.copy(K[BlockTable[bz, j] * BS, 0], k)
                T.copy(V[BlockTable[bz, j] * BS, 0], v)
                T.clear(acc_s)
                T.gemm(q, k, acc_s, transpose_B=True)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(H):
                    rescale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, jj in T.Parallel(H, BS):
                    acc_s[i, jj] = T.exp2(acc_s[i, jj] * scale - m[i] * scale)
                T.reduce_sum(acc_s, row_sum, dim=1)
                for i in T.Parallel(H):
                    l[i] = l[i] * rescale[i] + row_sum[i]
                for i, jj in T.Parallel(H, D):
                    acc_o[i, jj] = acc_o[i, jj] * rescale[i]
                T.copy(acc_s, p)
                T.gemm(p, v, acc_o)
            for i, jj in T.Parallel(H, D):
                acc_o[i, jj] = acc_o[i, jj] / l[i]
            T.copy(acc_o, O[bz, 0, 0])
    return decode


def moe_grouped_gemm(M, N, K, E, bm, bn, bk):
    """A grouped (MoE) GEMM: each block of bm token rows multiplies the weights of the expert a table names."""
    @T.prim_func
    def grouped(A: T.Tensor((M, K), "bfloat16"), W: T.Tensor((E, K, N), "bfloat16"),
                BlockExpert: T.Tensor((M // bm,), "int32"), C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "bfloat16")
            W_s = T.alloc_shared((bk, bn), "bfloat16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            expert = BlockExpert[by]
            T.clear(C_l)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(W[expert, k * bk, bx * bn], W_s)
                T.gemm(A_s, W_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])
    return grouped


def convolution(N, C, H, W, F, K, S, D, P, block_M=64, block_N=64, block_K=32, dtype="bfloat16"):
    """TileLang's example_convolution.py (2-D convolution as an implicit GEMM): NHWC data, [KH, KW, C, F] weights,
    ``T.im2col`` filling the A block of each K step."""
    KH = KW = K
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1

    @T.prim_func
    def main(data: T.Tensor((N, H, W, C), dtype), kernel: T.Tensor((KH, KW, C, F), dtype),
             out: T.Tensor((N, OH, OW, F), dtype)):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(N * OH * OW, block_M), threads=128) as (bx, by):
            data_shared = T.alloc_shared((block_M, block_K), dtype)
            kernel_shared = T.alloc_shared((block_K, block_N), dtype)
            out_local = T.alloc_fragment((block_M, block_N), "float32")
            out_shared = T.alloc_shared((block_M, block_N), dtype)
            kernel_flat = T.Tensor((KH * KW * C, F), dtype, kernel.data)
            out_flat = T.Tensor((N * OH * OW, F), dtype, out.data)
            T.clear(out_local)
            for k_iter in T.Pipelined(T.ceildiv(KH * KW * C, block_K), num_stages=2):
                T.im2col(data, data_shared, by, k_iter, KH, S, D, P)
                T.copy(kernel_flat[k_iter * block_K, bx * block_N], kernel_shared)
                T.gemm(data_shared, kernel_shared, out_local)
            T.copy(out_local, out_shared)
            T.copy(out_shared, out_flat[by * block_M, bx * block_N])

    return main


def varlen_attention(B, H, UQ, UKV, D, causal):
    """TileLang's example_mha_fwd_varlen as written there (bf16 here: a float16 output packs through bf16): sequence
    b's queries are rows cu_q[b]..cu_q[b + 1] of Q (keys: cu_k), none starting on a tile row; the grid is sized by
    the scalar max_seqlen_q; causal aligns at the bottom right, as flash_attn_varlen_func."""
    scale = (1.0 / D) ** 0.5 * 1.44269504
    bm = bn = 64

    @T.prim_func
    def main(Q: T.Tensor((UQ, H, D), "bfloat16"), K: T.Tensor((UKV, H, D), "bfloat16"),
             V: T.Tensor((UKV, H, D), "bfloat16"), cu_q: T.Tensor((B + 1,), "int32"), cu_k: T.Tensor((B + 1,), "int32"),
             max_seqlen_q: T.int32, O: T.Tensor((UQ, H, D), "bfloat16")):
        with T.Kernel(T.ceildiv(max_seqlen_q, bm), H, B, threads=128) as (bx, by, bz):
            Q_s = T.alloc_shared((bm, D), "bfloat16")
            K_s = T.alloc_shared((bn, D), "bfloat16")
            V_s = T.alloc_shared((bn, D), "bfloat16")
            O_s = T.alloc_shared((bm, D), "bfloat16")
            acc_s = T.alloc_fragment((bm, bn), "float32")
            acc_s_cast = T.alloc_fragment((bm, bn), "bfloat16")
            acc_o = T.alloc_fragment((bm, D), "float32")
            m = T.alloc_fragment((bm,), "float32")
            m_prev = T.alloc_fragment((bm,), "float32")
            sc = T.alloc_fragment((bm,), "float32")
            ssum = T.alloc_fragment((bm,), "float32")
            lsum = T.alloc_fragment((bm,), "float32")
            q_start, k_start = cu_q[bz], cu_k[bz]
            q_len, k_len = cu_q[bz + 1] - q_start, cu_k[bz + 1] - k_start
            T.copy(Q[q_start + bx * bm: q_start + bx * bm + bm, by, :], Q_s)
            T.fill(acc_o, 0)
            T.fill(lsum, 0)
            T.fill(m, -T.infinity("float32"))
            offset = k_len - q_len
            trips = (T.min(T.ceildiv(offset + (bx + 1) * bm, bn), T.ceildiv(k_len, bn)) if causal
                     else T.ceildiv(k_len, bn))
            for k in T.Pipelined(trips, num_stages=1):
                T.copy(K[k_start + k * bn: k_start + k * bn + bn, by, :], K_s)
                for i, j in T.Parallel(bm, bn):
                    if causal:
                        acc_s[i, j] = T.if_then_else((bx * bm + i + offset < k * bn + j)
                                                     or (bx * bm + i >= q_len or k * bn + j >= k_len), -1e9, 0)
                    else:
                        acc_s[i, j] = T.if_then_else(bx * bm + i >= q_len or k * bn + j >= k_len, -1e9, 0)
                T.gemm(Q_s, K_s, acc_s, transpose_B=True)
                T.copy(m, m_prev)
                T.fill(m, -T.infinity("float32"))
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(bm):
                    m[i] = T.max(m[i], m_prev[i])
                for i in T.Parallel(bm):
                    sc[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(bm, bn):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, ssum, dim=1)
                for i in T.Parallel(bm):
                    lsum[i] = lsum[i] * sc[i] + ssum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(bm, D):
                    acc_o[i, j] *= sc[i]
                T.copy(V[k_start + k * bn: k_start + k * bn + bn, by, :], V_s)
                T.gemm(acc_s_cast, V_s, acc_o)
            for i, j in T.Parallel(bm, D):
                acc_o[i, j] = acc_o[i, j] / lsum[i]
            T.copy(acc_o, O_s)
            for i, d in T.Parallel(bm, D):
                if bx * bm + i < q_len:
                    O[q_start + bx * bm + i, by, d] = O_s[i, d]

    return main
