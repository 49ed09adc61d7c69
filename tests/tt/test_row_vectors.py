"""A vector of per-row values (a row reduction's result, a column of its tiles) stored as a row of a tensor:
FlashAttention's forward writing its log-sum-exp, ``T.copy(logsum, LSE[b, h, s0:s0 + bm])``, as TileLang's
backward examples do. Compute transposes the vector's tiles and spreads the row to its place in the tile; the
writer stores that one row of each tile."""

import math

import pytest
import tilelang
import tilelang.language as T
import torch
import torch.nn.functional as F



def flash_fwd_with_lse(batch, heads, seq, dim, block_M=64, block_N=64, groups=1):
    """The forward kernel of TileLang's example_gqa_bwd.py (bshd, fp16 there; bf16 here), non-causal."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    head_kv = heads // groups

    @T.prim_func
    def flash_fwd(Q: T.Tensor([batch, seq, heads, dim], "bfloat16"), K: T.Tensor([batch, seq, head_kv, dim], "bfloat16"),
                  V: T.Tensor([batch, seq, head_kv, dim], "bfloat16"),
                  Output: T.Tensor([batch, seq, heads, dim], "bfloat16"), lse: T.Tensor([batch, heads, seq], "float32")):
        with T.Kernel(T.ceildiv(seq, block_M), heads, batch, threads=256) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], "bfloat16")
            K_shared = T.alloc_shared([block_N, dim], "bfloat16")
            V_shared = T.alloc_shared([block_N, dim], "bfloat16")
            acc_s = T.alloc_fragment([block_M, block_N], "float32")
            acc_s_cast = T.alloc_fragment([block_M, block_N], "bfloat16")
            acc_o = T.alloc_fragment([block_M, dim], "float32")
            scores_max = T.alloc_fragment([block_M], "float32")
            scores_max_prev = T.alloc_fragment([block_M], "float32")
            scores_scale = T.alloc_fragment([block_M], "float32")
            scores_sum = T.alloc_fragment([block_M], "float32")
            logsum = T.alloc_fragment([block_M], "float32")

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity("float32"))
            for k in T.Pipelined(T.ceildiv(seq, block_N), num_stages=1):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by // groups, :], K_shared)
                T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by // groups, :], V_shared)
                T.copy(scores_max, scores_max_prev)
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.copy(acc_s, acc_s_cast)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])
            for i in T.Parallel(block_M):
                logsum[i] = T.log2(logsum[i]) + scores_max[i] * scale
            T.copy(logsum, lse[bz, by, bx * block_M:(bx + 1) * block_M])

    return flash_fwd


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_flash_forward_writes_its_log_sum_exp(arch):
    B, H, S, D = 1, 4, 256, 64
    kernel = tilelang.compile(flash_fwd_with_lse(B, H, S, D, groups=2), target={"kind": "tt", "arch": arch})
    q = torch.randn(B, S, H, D, dtype=torch.bfloat16)
    k, v = (torch.randn(B, S, H // 2, D, dtype=torch.bfloat16) for _ in range(2))
    o = torch.empty_like(q)
    lse = torch.full((B, H, S), 1000.0)
    kernel(q, k, v, o, lse)
    qf, kf = q.float().transpose(1, 2), k.float().transpose(1, 2).repeat_interleave(2, dim=1)
    scores = qf @ kf.transpose(-1, -2) / math.sqrt(D)
    ref = torch.logsumexp(scores, dim=-1) / math.log(2)       # log2 of the row sums, as the kernel keeps it
    # the scores reach the exp2 through HiFi2 (Q's last bit) and TF32: <= 2^-7 of |q||k| per score, summed
    bound = 2.0 ** -7 * (qf.abs() @ kf.abs().transpose(-1, -2)).amax(-1) / math.sqrt(D) / math.log(2) + 1e-3
    assert ((lse - ref).abs() <= bound).all(), (lse - ref).abs().max()
    ref_o = F.scaled_dot_product_attention(qf, kf, v.float().transpose(1, 2).repeat_interleave(2, dim=1))
    assert (o.float().transpose(1, 2) - ref_o).abs().max() < 0.05


def test_vector_stored_as_a_row_exactly():
    """A row maximum (exact in any format) stored as a row of a 2-D and of a 3-D tensor: every value where it
    belongs, and the rest of the tensor untouched."""
    B, H, S, N = 1, 4, 128, 64

    @T.prim_func
    def rowmax(X: T.Tensor((B, H, S, N), "float32"), L: T.Tensor((B, H, S), "float32"),
               L2: T.Tensor((H, S), "bfloat16")):
        with T.Kernel(S // 64, H, B, threads=128) as (bx, by, bz):
            xs = T.alloc_fragment((64, N), "float32")
            m = T.alloc_fragment((64,), "float32")
            T.copy(X[bz, by, bx * 64:(bx + 1) * 64, :], xs)
            T.reduce_max(xs, m, dim=1)
            T.copy(m, L[bz, by, bx * 64:(bx + 1) * 64])
            T.copy(m, L2[by, bx * 64:(bx + 1) * 64])

    kernel = tilelang.compile(rowmax, target="tt")
    x = torch.randn(B, H, S, N).bfloat16().float()
    lse, l2 = torch.zeros(B, H, S), torch.zeros(H, S, dtype=torch.bfloat16)
    kernel(x, lse, l2)
    assert torch.equal(lse, x.amax(-1)) and torch.equal(l2.float(), x.amax(-1)[0])


def test_row_read_into_a_column_vector_once_refused():
    @T.prim_func
    def k(X: T.Tensor((64, 64), "float32"), L: T.Tensor((4, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            xs = T.alloc_fragment((64, 64), "float32")
            m = T.alloc_fragment((64,), "float32")
            T.copy(X[0, 0], xs)
            T.copy(L[bx, 0:64], m)
            for i, j in T.Parallel(64, 64):
                xs[i, j] = xs[i, j] - m[i]
            T.copy(xs, Y[0, 0])

    kernel = tilelang.compile(k, target="tt")      # the row is read, then transposed into a column on chip
    x, lse, y = torch.randn(64, 64), torch.randn(4, 64), torch.zeros(64, 64)
    kernel(x, lse, y)
    assert torch.equal(y, x - lse[0][:, None])


def _crosswise(reduce_dim, both):
    """A vector computed in one orientation (a reduction's result, then a 1-D T.Parallel) and read in a 2-D nest by
    the other loop variable (``x[i, j] * sc[i]`` of a row vector: the combine step of TileLang's split-KV decode);
    with ``both`` the same vector is also read by the nest's own variable (``sc[i] * sc[j]``)."""
    M = N = 64

    @T.prim_func
    def crosswise(L: T.Tensor((M, N), "float32"), X: T.Tensor((M, N), "float32"), O: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            l = T.alloc_fragment((M, N), "float32")
            mx = T.alloc_fragment((M,), "float32")
            sc = T.alloc_fragment((M,), "float32")
            x = T.alloc_fragment((M, N), "float32")
            T.copy(L, l)
            T.reduce_max(l, mx, dim=reduce_dim)
            for i in T.Parallel(M):
                sc[i] = mx[i] * 2.0 + 1.0
            T.copy(X, x)
            for i, j in T.Parallel(M, N):
                if both:
                    x[i, j] = x[i, j] * sc[i] * sc[j] if reduce_dim == 0 else x[i, j] * sc[j] * sc[i]
                else:
                    x[i, j] = x[i, j] * sc[i] if reduce_dim == 0 else x[i, j] * sc[j]
            T.copy(x, O)

    return crosswise


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
@pytest.mark.parametrize("reduce_dim,both", [(0, False), (1, False), (0, True), (1, True)],
                         ids=["row_read_per_row", "column_read_per_column", "row_read_both_ways",
                              "column_read_both_ways"])
def test_vector_read_by_the_other_loop_variable(arch, reduce_dim, both):
    kernel = tilelang.compile(_crosswise(reduce_dim, both), target={"kind": "tt", "arch": arch})
    L, X, O = torch.randn(64, 64), torch.randn(64, 64), torch.zeros(64, 64)
    kernel(L, X, O)
    sc = L.max(dim=reduce_dim).values * 2.0 + 1.0
    # the vector's tiles are transposed on chip (a copy: exact); each product is one fp32 multiply, as torch's
    if reduce_dim == 0:
        want = X * sc[:, None] * sc[None, :] if both else X * sc[:, None]
    else:
        want = X * sc[None, :] * sc[:, None] if both else X * sc[None, :]
    assert torch.equal(O, want)
    transposes = [c for c in kernel.plan["cbs"] if c["name"].startswith("sc") and c["name"] != "sc"]
    assert len(transposes) == 1 and transposes[0]["producer"] == ["compute"]


def _row_into_column(R, M, dtype):
    """``T.copy(L[b, 0:M], v)`` into a vector read by the row variable (``x[i, j] * v[i]``): row b sits at row
    b % 32 of its tile; M < 32 is part of one tile."""
    step = max(M, 32)

    @T.prim_func
    def k(L: T.Tensor((R, M), dtype), X: T.Tensor((R * step, 64), "float32"),
          O: T.Tensor((R * step, 64), "float32")):
        with T.Kernel(R) as bx:
            v = T.alloc_fragment((M,), "float32")
            x = T.alloc_fragment((M, 64), "float32")
            T.copy(L[bx, 0:M], v)
            T.copy(X[bx * step, 0], x)
            for i, j in T.Parallel(M, 64):
                x[i, j] = x[i, j] * v[i]
            T.copy(x, O[bx * step, 0])

    return k


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
@pytest.mark.parametrize("M,dtype", [(64, "float32"), (16, "bfloat16"), (4, "float32")])
def test_row_read_into_a_column_vector(arch, M, dtype):
    R, step = 6, max(M, 32)
    kernel = tilelang.compile(_row_into_column(R, M, dtype), target={"kind": "tt", "arch": arch})
    L = torch.randn(R, M).to(getattr(torch, dtype))
    X, O = torch.randn(R * step, 64), torch.zeros(R * step, 64)
    kernel(L, X, O)
    want = torch.zeros(R * step, 64)
    for b in range(R):      # the row is moved and transposed (exact), then one float32 multiply per element
        want[b * step:b * step + M] = X[b * step:b * step + M] * L[b].float()[:, None]
    assert torch.equal(O, want)


def _first_row_over_its_max(R, D):
    """Each block stores one row of Y (row ``bx``: row ``bx % 32`` of a tile) from a row of its block and one
    element of a reduction (``rmax[0]``: a 1x1 value)."""
    @T.prim_func
    def k(X: T.Tensor((R * 32, D), "float32"), Y: T.Tensor((R, D), "float32")):
        with T.Kernel(R, threads=128) as bx:
            xs = T.alloc_shared((32, D), "float32")
            rmax = T.alloc_fragment((32,), "float32")
            T.copy(X[bx * 32, 0], xs)
            T.reduce_max(xs, rmax, dim=1)
            for d in T.Parallel(D):
                Y[bx, d] = xs[0, d] / rmax[0]

    return k


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_one_value_over_a_row_stored_at_row_bx(arch):
    """The 1x1 value is broadcast to every row of the tile (``unary_bcast_scalar``), since the writer stores row
    ``bx % 32``; its column broadcast filled row 0 alone, and rows 1.. of Y were ``x / 0`` (NaN and inf)."""
    R, D = 5, 64
    kernel = tilelang.compile(_first_row_over_its_max(R, D), target={"kind": "tt", "arch": arch})
    x = torch.rand(R * 32, D, generator=torch.Generator().manual_seed(3)) + 0.5
    y = torch.full((R, D), float("nan"))
    kernel(x, y)
    first = x.view(R, 32, D)[:, 0, :]
    want = first / first.amax(1, keepdim=True)     # one float32 division per element (the SFPU's is exact here)
    torch.testing.assert_close(y, want, rtol=2 ** -22, atol=0)


def _block_amax_quant(R, D):
    """TileLang's fp8 block pooling, in float32: a column sum into a 1-D vector, its absmax reduced to one value
    (``T.reduce_absmax(acc, max_abs, dim=0)`` of a 1-D ``acc``), a per-block scale from it stored as one element
    of a tensor outside any T.Parallel (``S[bx] = scale``)."""
    @T.prim_func
    def k(X: T.Tensor((R * 32, D), "float32"), Y: T.Tensor((R, D), "float32"), S: T.Tensor((R,), "float32")):
        with T.Kernel(R, threads=128) as bx:
            xs = T.alloc_shared((32, D), "float32")
            acc = T.alloc_fragment((D,), "float32")
            max_abs = T.alloc_fragment((1,), "float32")
            T.copy(X[bx * 32, 0], xs)
            T.reduce_sum(xs, acc, dim=0)
            T.reduce_absmax(acc, max_abs, dim=0)
            scale = T.max(max_abs[0] / 448.0, 1e-10)
            for d in T.Parallel(D):
                Y[bx, d] = acc[d] / scale
            S[bx] = scale

    return k


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_a_vector_reduced_to_one_value(arch):
    """A 1-D vector's only axis is the reduced one: along the columns of the row vector it is (it was reduced
    along rows and refused, "expected [1, 128]"); the scale and the scaled sums against float64."""
    R, D = 3, 128
    kernel = tilelang.compile(_block_amax_quant(R, D), target={"kind": "tt", "arch": arch})
    x = torch.randn(R * 32, D, generator=torch.Generator().manual_seed(4))
    y, s = torch.zeros(R, D), torch.zeros(R)
    kernel(x, y, s)
    acc = x.double().view(R, 32, D).sum(1)
    scale = (acc.abs().amax(1) / 448).clamp(min=1e-10)
    # float32 sums of 32 terms (a few ulps of the sum of |x|), then one division each
    assert ((s.double() - scale).abs() <= 2 ** -20 * scale).all()
    assert ((y.double() - acc / scale[:, None]).abs() <= 2 ** -18 * (x.double().abs().view(R, 32, D).sum(1)
                                                                      / scale[:, None])).all()


def test_a_column_vector_reduced_to_one_value():
    """Row sums (a column vector: T.reduce_sum(dim=1)) reduced to their maximum (``dim=0``, the vector's only axis:
    along the column's rows), then one value over the whole block: a scalar broadcast."""
    R, D = 96, 64

    @T.prim_func
    def k(X: T.Tensor((R, D), "float32"), Y: T.Tensor((R, D), "float32")):
        with T.Kernel(R // 32, threads=128) as bx:
            xs = T.alloc_shared((32, D), "float32")
            rs = T.alloc_fragment((32,), "float32")
            m = T.alloc_fragment((1,), "float32")
            T.copy(X[bx * 32, 0], xs)
            T.reduce_sum(xs, rs, dim=1)
            T.reduce_max(rs, m, dim=0)
            for i, d in T.Parallel(32, D):
                Y[bx * 32 + i, d] = xs[i, d] / m[0]

    x = torch.rand(R, D, generator=torch.Generator().manual_seed(9)) + 0.1
    y = torch.zeros(R, D)
    tilelang.compile(k, target="tt")(x, y)
    xv = x.double().view(R // 32, 32, D)
    want = (xv / xv.sum(2).amax(1)[:, None, None]).view(R, D)
    # a float32 sum of 64 positive terms (a few ulps), one division
    assert ((y.double() - want).abs() <= 2 ** -19 * want).all()


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_a_one_row_nest_updates_a_row_vector(arch):
    """``for i, j in T.Parallel(1, D): acc[j] += x[i, j] * 2`` (TileLang's LayerNorm backward accumulates its weight
    gradients so): the loop of one iteration is its minimum, the update element-wise along the row (it was refused
    as an operand "indexed transposed"). Exact: doubling and one addition of float32 values."""
    R, D = 4, 128

    @T.prim_func
    def k(X: T.Tensor((R * 32, D), "float32"), Y: T.Tensor((R * 32, D), "float32")):
        with T.Kernel(R, threads=128) as bx:
            x = T.alloc_shared((1, D), "float32")
            acc = T.alloc_fragment((D,), "float32")
            out = T.alloc_fragment((1, D), "float32")
            T.clear(acc)
            T.copy(X[bx * 32, 0], x)
            for i, j in T.Parallel(1, D):
                acc[j] += x[i, j] * 2.0
            for i, j in T.Parallel(1, D):
                out[i, j] = acc[j] + x[i, j]
            T.copy(out, Y[bx * 32, 0])

    x = torch.randn(R * 32, D, generator=torch.Generator().manual_seed(10))
    y = torch.full((R * 32, D), 7.0)
    tilelang.compile(k, target={"kind": "tt", "arch": arch})(x, y)
    want = torch.full((R * 32, D), 7.0)
    want[::32] = 3 * x[::32]
    assert torch.equal(y, want)


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_rows_read_one_per_iteration_accumulate_in_place(arch):
    """``T.copy(X[bx * 32 + kk, 0], x)`` puts row kk at row kk % 32 of its tile; ``acc[j] += x[0, j]`` keeps acc
    where T.clear left it (the first row) and moves each row there first. acc used to take the rows' place,
    ``kk % 32``, which outlives the loop: the compute kernel named ``kk`` after it and did not compile."""
    R, D, KS = 2, 64, 4

    @T.prim_func
    def k(X: T.Tensor((R * 32, D), "float32"), Y: T.Tensor((R * 32, D), "float32")):
        with T.Kernel(R, threads=128) as bx:
            x = T.alloc_shared((1, D), "float32")
            acc = T.alloc_fragment((D,), "float32")
            T.clear(acc)
            for kk in T.serial(KS):
                T.copy(X[bx * 32 + kk, 0], x)
                for j in T.Parallel(D):
                    acc[j] += x[0, j]
            for i, j in T.Parallel(32, D):
                Y[bx * 32 + i, j] = acc[j]

    x = torch.randn(R * 32, D, generator=torch.Generator().manual_seed(12))
    y = torch.zeros(R * 32, D)
    tilelang.compile(k, target={"kind": "tt", "arch": arch})(x, y)
    sums = torch.zeros(R, D)
    for kk in range(KS):             # float32 additions in the kernel's order
        sums = sums + x.view(R, 32, D)[:, kk, :]
    assert torch.equal(y, sums[:, None, :].expand(R, 32, D).reshape(R * 32, D))


def test_a_block_whose_place_moves_with_the_loop_cannot_update_in_place():
    """8-row blocks read at rows ``kk * 8`` sit at row ``kk % 4 * 8`` of their tiles, a place that changes every
    iteration, while the accumulator they update stays where it is: refused (moving a one-row block is what the
    test above does; adding an 8-row block at another place in the tile would pair the wrong rows)."""
    from tilelang_tt.errors import TTUnsupportedError

    R, D, KS = 8, 64, 2

    @T.prim_func
    def k(X: T.Tensor((KS * 8, D * R), "float32"), Y: T.Tensor((R * 8, D), "float32")):
        with T.Kernel(R, threads=128) as bx:
            x = T.alloc_shared((8, D), "float32")
            acc = T.alloc_fragment((8, D), "float32")
            T.clear(acc)
            for kk in T.serial(KS):
                T.copy(X[kk * 8, bx * D], x)
                for i, j in T.Parallel(8, D):
                    acc[i, j] += x[i, j]
            T.copy(acc, Y[bx * 8, 0])

    with pytest.raises(TTUnsupportedError, match=r"(?s)x sits at row kk % 4 \* 8 of its tiles, which changes every "
                                                 r"iteration of a loop, and updates acc in place.*fix: read the block "
                                                 r"at the same offset modulo 32 in every iteration"):
        tilelang.compile(k, target="tt")
