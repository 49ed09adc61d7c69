"""Rows wider than L1 (RowStreamTT): a softmax / RMSNorm / LayerNorm whose row block does not fit L1 sweeps its rows
in column chunks, one sweep per group of reductions and one for the stores, against float64 torch."""

import pytest
import tilelang
import tilelang.language as T
import torch

from examples import kernels as K
from tilelang_tt.errors import TTResourceError

M, N = 64, 32768          # a 32-row block of 32768 float32 columns: 4 MB per tile buffer


def _rel(out, ref):
    return ((out.double() - ref).abs().max() / ref.abs().max()).item()


def test_softmax_wider_than_l1_runs_in_three_sweeps():
    """max, sum of exp, normalise: X is read three times and Y written once (the DRAM counters); fp32 all the
    way (exp2 on the SFPU, TT's fp32 reduce), so the result is good to a few fp32 ulps."""
    kernel = tilelang.compile(K.softmax(M, N, 32, "float32"), target="tt")
    stream = kernel.plan["row_stream"]
    assert stream["width"] == N and N % stream["chunk"] == 0 and stream["sweeps"] == 3
    torch.manual_seed(0)
    x, y = torch.randn(M, N), torch.empty(M, N)
    kernel(x, y)
    assert _rel(y, torch.softmax(x.double(), 1)) < 2e-6
    total = kernel.report["total"]
    assert total["dram_read_bytes"] == 3 * M * N * 4 and total["dram_write_bytes"] == M * N * 4


def test_tilelang_online_softmax_sweeps_of_one_iteration_stream():
    """TileLang's online softmax with its default BLOCK_N = N: each column-block loop runs once, and its body is a
    row block of 8192 columns (3.6 MB of CBs) that streams like the straight-line softmax. Result against float64
    torch within the float16 output's rounding; the plan records the stream."""
    kernel = tilelang.compile(K.online_softmax(64, 8192), target="tt")
    assert kernel.plan["row_stream"]["width"] == 8192
    torch.manual_seed(2)
    x = torch.randn(64, 8192, dtype=torch.float16)
    y = torch.empty(64, 8192, dtype=torch.float16)
    kernel(x, y)
    ref = torch.softmax(x.double(), 1)
    assert ((y.double() - ref).abs() <= 2 ** -10 * ref + 2 ** -24).all()


def test_bf16_softmax_wider_than_l1():
    """TileLang's softmax form: bf16 rows copied into a float32 fragment, statistics in fp32, bf16 out."""
    kernel = tilelang.compile(K.softmax(M, N, 32, "bfloat16"), target="tt")
    assert kernel.plan["row_stream"]["sweeps"] == 3
    x = torch.randn(M, N, dtype=torch.bfloat16)
    y = torch.empty(M, N, dtype=torch.bfloat16)
    kernel(x, y)
    ref = torch.softmax(x.double(), 1)
    assert ((y.double() - ref).abs() <= 2 ** -8 * ref + 1e-12).all()


def test_rms_norm_wider_than_l1_runs_in_two_sweeps():
    kernel = tilelang.compile(K.rms_norm(M, N, 32), target="tt")
    assert kernel.plan["row_stream"]["sweeps"] == 2
    a, b = torch.randn(M, N), torch.empty(M, N)
    kernel(a, b)
    ad = a.double()
    ref = ad * (torch.rsqrt((ad * ad).sum(1, keepdim=True) / N) + 1e-12)
    assert _rel(b, ref) < 2e-6
    assert kernel.report["total"]["dram_read_bytes"] == 2 * M * N * 4


def test_layernorm_wider_than_l1_shares_one_sweep_between_its_sums():
    """TileLang's layernorm example: the sum and the sum of squares need nothing from each other, so one sweep
    computes both; gamma and beta (1-D row vectors) are read a chunk at a time; Mean and Rstd are stored between
    the sweeps."""
    kernel = tilelang.compile(K.layernorm(M, N, blk_m=32, in_dtype="float32", out_dtype="float32"), target="tt")
    assert kernel.plan["row_stream"]["sweeps"] == 2
    x, g, b = torch.randn(M, N), torch.randn(N), torch.randn(N)
    y, mean, rstd = torch.empty(M, N), torch.empty(M), torch.empty(M)
    kernel(x, g, b, y, mean, rstd)
    xd = x.double()
    mu = xd.mean(1)
    r = torch.rsqrt((xd * xd).mean(1) - mu * mu + 1e-5)
    assert _rel(mean, mu) < 1e-5 and _rel(rstd, r) < 1e-5
    assert _rel(y, (xd - mu[:, None]) * r[:, None] * g.double() + b.double()) < 1e-5
    assert kernel.report["total"]["dram_read_bytes"] == 2 * M * N * 4 + 2 * N * 4 * (M // 32)


def test_rows_that_fit_are_left_as_written():
    kernel = tilelang.compile(K.softmax(64, 512, 32, "float32"), target="tt")
    assert "row_stream" not in kernel.plan


def test_a_statistic_changed_before_its_use_is_replayed_is_not_streamed():
    """The centred rows are computed from row_max, which changes afterwards: recomputing them in the sum's sweep
    would read the new value, so the kernel is not streamed and the L1 overflow is reported as before."""

    @T.prim_func
    def changed(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(M // 32, threads=128) as bx:
            X_f = T.alloc_fragment((32, N), "float")
            row_max = T.alloc_fragment((32,), "float")
            row_sum = T.alloc_fragment((32,), "float")
            T.copy(X[bx * 32, 0], X_f)
            T.reduce_max(X_f, row_max, dim=1)
            for i, j in T.Parallel(32, N):
                X_f[i, j] = X_f[i, j] - row_max[i]
            for i in T.Parallel(32):
                row_max[i] = row_max[i] * 2.0
            T.reduce_sum(X_f, row_sum, dim=1)
            for i, j in T.Parallel(32, N):
                X_f[i, j] = X_f[i, j] / row_sum[i] + row_max[i]
            T.copy(X_f, Y[bx * 32, 0])

    with pytest.raises(TTResourceError, match="circular buffers need"):
        tilelang.compile(changed, target="tt")


def test_tilelang_layernorm_example_at_its_own_width():
    """TileLang's examples/norm/layernorm.py forward at its D = 8192 (bf16, one row per block): the one-row
    buffers take whole tiles of L1 (6.8 MB of CBs), so the rows stream; checked as the example checks itself."""
    n, d = 8, 8192
    kernel = tilelang.compile(K.layernorm(n, d, blk_m=1), target="tt")
    assert kernel.plan["row_stream"]["sweeps"] == 2
    x, g, b = (torch.randn(*s, dtype=torch.bfloat16) for s in ((n, d), (d,), (d,)))
    y = torch.empty(n, d, dtype=torch.bfloat16)
    kernel(x, g, b, y, torch.empty(n), torch.empty(n))
    ref = torch.nn.functional.layer_norm(x.float(), (d,), g.float(), b.float(), 1e-5)
    torch.testing.assert_close(y.float(), ref, rtol=1e-2, atol=1e-2)
