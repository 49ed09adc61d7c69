"""Varlen rows (issue 24's varlen attention, TileLang's ``*_varlen`` examples): sequences packed back to back in one
tensor start at ``cu_seqlens[b]``, which is not a multiple of 32. A block of rows at such an offset straddles tile
rows of the tensor: the reader moves each row's face-row segments into its row of the block (``offset_rows``), the
writer writes each row back where it lives (``write_rows``), only the rows a T.Parallel's guard ``i < n`` keeps; the
launch grid may be sized by an int32 scalar parameter (``T.ceildiv(max_seqlen, 64)``), split over the cores by the
host program at launch.
"""

import math

import pytest
import tilelang
import tilelang.language as T
import torch

from examples import kernels as K

ARCHS = ["wormhole_b0", "blackhole"]


def _varlen_scale(B, TOTAL, D, guarded=True):
    """y = 2 x + 1 over each sequence's rows; rows past a sequence's end (the guard) are not written."""
    @T.prim_func
    def k(X: T.Tensor((TOTAL, D), "bfloat16"), cu: T.Tensor((B + 1,), "int32"), max_len: T.int32,
          Y: T.Tensor((TOTAL, D), "float32")):
        with T.Kernel(T.ceildiv(max_len, 64), B, threads=128) as (bx, bz):
            x = T.alloc_shared((64, D), "bfloat16")
            y = T.alloc_fragment((64, D), "float32")
            start = cu[bz]
            n = cu[bz + 1] - start
            T.copy(X[start + bx * 64: start + bx * 64 + 64, :], x)
            for i, j in T.Parallel(64, D):
                y[i, j] = x[i, j] * 2.0 + 1.0
            if guarded:
                for i, j in T.Parallel(64, D):
                    if bx * 64 + i < n:
                        Y[start + bx * 64 + i, j] = y[i, j]
            else:
                for i, j in T.Parallel(64, D):
                    Y[start + bx * 64 + i, j] = y[i, j]

    return k


@pytest.mark.parametrize("arch", ARCHS)
def test_varlen_rows_read_and_written_at_their_offsets(arch):
    """Sequences of 45, 70 and 1 rows (starts 0, 45, 115): every row of each sequence is 2 x + 1, exactly; the rows
    after the last sequence keep what the caller put there (the guard keeps the block's rows past a sequence's end
    from being written: with it dropped, the last sequence's block writes 63 rows it does not own)."""
    B, D = 3, 64
    lens = [45, 70, 1]
    total = 128
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    kernel = tilelang.compile(_varlen_scale(B, total, D), target={"kind": "tt", "arch": arch})
    g = torch.Generator().manual_seed(3)
    x = torch.randn(total, D, generator=g).bfloat16()
    y = torch.full((total, D), -7.0)
    kernel(x, cu, max(lens), y)
    end = int(cu[-1])
    assert torch.equal(y[:end], x[:end].float() * 2 + 1)
    assert torch.equal(y[end:], torch.full((total - end, D), -7.0))
    plan = kernel.plan
    assert plan["schedule"]["dynamic"] and plan["scalar_args"][0]["name"] == "max_len"
    kernels = kernel.artifact_dir / "kernels"
    assert "gather_row(" in (kernels / "reader.cpp").read_text()
    assert "scatter_row(" in (kernels / "writer.cpp").read_text()


@pytest.mark.parametrize("arch", ARCHS)
def test_rows_past_the_tensor_read_zeros_and_are_not_written(arch):
    """Without a guard, a block that runs past the tensor's last row reads zeros there and writes only the rows
    inside the tensor (one sequence of 100 rows starting at row 20 of a 120-row tensor: its second block is rows
    84..147)."""
    B, D, total = 1, 32, 120
    cu = torch.tensor([20, 120], dtype=torch.int32)
    kernel = tilelang.compile(_varlen_scale(B, total, D, guarded=False), target={"kind": "tt", "arch": arch})
    x = torch.randn(total, D).bfloat16()
    y = torch.full((total, D), -7.0)
    kernel(x, cu, 100, y)
    assert torch.equal(y[20:], x[20:].float() * 2 + 1)
    assert torch.equal(y[:20], torch.full((20, D), -7.0))


@pytest.mark.parametrize("arch", ARCHS)
def test_gemm_reading_rows_at_an_odd_offset(arch):
    """C = A[16 + by * 32 : ...] @ B: every A block straddles two tile rows of A; the last one runs 16 rows past A's
    96 and reads zeros there (as TileLang's bounds-checked T.copy does)."""
    M, N, K = 96, 64, 64

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((K, N), "bfloat16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // 32, M // 32, threads=128) as (bx, by):
            a = T.alloc_shared((32, K), "bfloat16")
            b = T.alloc_shared((K, 32), "bfloat16")
            c = T.alloc_fragment((32, 32), "float32")
            T.clear(c)
            T.copy(A[by * 32 + 16, 0], a)
            T.copy(B[0, bx * 32], b)
            T.gemm(a, b, c)
            T.copy(c, C[by * 32, bx * 32])

    kernel = tilelang.compile(gemm, target={"kind": "tt", "arch": arch})
    a = torch.randint(-8, 8, (M, K)).bfloat16()
    b = torch.randint(-8, 8, (K, N)).bfloat16()
    c = torch.empty(M, N)
    kernel(a, b, c)
    shifted = torch.cat([a[16:], torch.zeros(16, K).bfloat16()]).float()
    assert torch.equal(c, shifted @ b.float())      # small integers: every product and sum exact


@pytest.mark.parametrize("causal", [False, True])
def test_varlen_attention_against_float64(causal):
    """Three sequences of 50, 100 and 37 query rows (K/V of 61, 100 and 37 rows), none starting on a tile row: each
    sequence's output is softmax(q k^T / sqrt(D)) v of its own rows (causal: aligned at the bottom right, as
    flash_attn_varlen_func), within the error model of helpers.attention_error_bound (P in bf16, in0 at the
    kernel's fidelity, TF32 scores and rescales, one bf16 rounding of the output)."""
    B, H, D = 3, 2, 64
    lq, lk = [50, 100, 37], [61, 100, 37]
    cu_q = torch.tensor([0, *torch.tensor(lq).cumsum(0).tolist()], dtype=torch.int32)
    cu_k = torch.tensor([0, *torch.tensor(lk).cumsum(0).tolist()], dtype=torch.int32)
    UQ, UKV = int(cu_q[-1]), int(cu_k[-1])
    kernel = tilelang.compile(K.varlen_attention(B, H, UQ, UKV, D, causal), target="tt")
    truncated = kernel.plan["math_fidelity"] in ("LoFi", "HiFi2")
    g = torch.Generator().manual_seed(5)
    q = torch.randn(UQ, H, D, generator=g).bfloat16()
    k, v = (torch.randn(UKV, H, D, generator=g).bfloat16() for _ in range(2))
    o = torch.zeros(UQ, H, D).bfloat16()
    kernel(q, k, v, cu_q, cu_k, max(lq), o)
    scale = D ** -0.5 * math.log2(math.e)
    for b in range(B):
        qs, ks = slice(int(cu_q[b]), int(cu_q[b + 1])), slice(int(cu_k[b]), int(cu_k[b + 1]))
        keep = torch.ones(lq[b], lk[b], dtype=torch.bool)
        if causal:
            keep = torch.arange(lk[b])[None, :] <= torch.arange(lq[b])[:, None] + (lk[b] - lq[b])
        for h in range(H):
            qq, kk, vv = q[qs, h].double(), k[ks, h].double(), v[ks, h].double()
            s = qq @ kk.T
            w = torch.softmax((s / math.sqrt(D)).masked_fill(~keep, float("-inf")), -1)
            ref, pv = w @ vv, w @ vv.abs()
            e = 2.0 ** -11 * s.abs() + (2.0 ** -7 * (qq.abs() @ kk.abs().T) if truncated else 0.0)
            e_row = e.masked_fill(~keep, 0).amax(dim=-1, keepdim=True)
            rel = 2.0 ** -8 + (2.0 ** -7 if truncated else 0.0) + 2 * math.log(2) * scale * e_row \
                + 2.0 ** -11 * -(-lk[b] // 64)
            bound = 2.0 ** -8 * ref.abs() + rel * pv + 1e-6
            err = (o[qs, h].double() - ref).abs()
            assert (err <= bound).all(), (b, h, (err - bound).max())
    # rows of no sequence (none here: the sequences fill Q) and the K/V rows each block reads: every output row
    # was written exactly by its sequence
    assert o.abs().sum(dim=(1, 2)).gt(0).all()


def test_a_grid_sized_by_a_float_scalar_is_refused():
    """Only integer scalars size a grid (the host splits ceil(n / 64) blocks at launch)."""
    @T.prim_func
    def k(X: T.Tensor((128, 32), "float32"), n: T.float32, Y: T.Tensor((128, 32), "float32")):
        with T.Kernel(T.ceildiv(T.Cast("int32", n), 32), threads=128) as bx:
            x = T.alloc_fragment((32, 32), "float32")
            T.copy(X[bx * 32, 0], x)
            T.copy(x, Y[bx * 32, 0])

    from tilelang_tt.errors import TTUnsupportedError
    with pytest.raises(TTUnsupportedError, match="neither a tensor dimension nor an integer scalar parameter"):
        tilelang.compile(k, target="tt")


@pytest.mark.parametrize("arch", ARCHS)
def test_offset_read_from_a_table_at_a_place_read_from_a_tensor(arch):
    """The last K/V block of each sequence, found as MLA's paged decode finds it: the block table is read at a place
    computed from another tensor's element (Table[b, ceildiv(Lens[b], 32) - 1]), then rows from a row offset of 5
    into that block (the reader reads Lens[b] first, then the table element at the place it gives)."""
    B, NB, D = 3, 8, 32

    @T.prim_func
    def last_block(KV: T.Tensor((NB * 32, D), "float32"), Table: T.Tensor((B, 4), "int32"),
                   Lens: T.Tensor((B,), "int32"), Out: T.Tensor((B * 32, D), "float32")):
        with T.Kernel(B, threads=128) as bx:
            kv = T.alloc_shared((32, D), "float32")
            T.copy(KV[Table[bx, (Lens[bx] + 31) // 32 - 1] * 32 + 5, 0], kv)
            T.copy(kv, Out[bx * 32, 0])

    kernel = tilelang.compile(last_block, target={"kind": "tt", "arch": arch})
    kv = torch.randn(NB * 32, D)
    table = torch.tensor([[3, 1, 6, 0], [7, 2, 5, 4], [0, 6, 1, 2]], dtype=torch.int32)
    lens = torch.tensor([70, 32, 128], dtype=torch.int32)
    out = torch.empty(B * 32, D)
    kernel(kv, table, lens, out)
    padded = torch.cat([kv, torch.zeros(32, D)])
    for b in range(B):
        block = int(table[b, (int(lens[b]) + 31) // 32 - 1])
        assert torch.equal(out[b * 32:(b + 1) * 32], padded[block * 32 + 5: block * 32 + 37]), b


def test_varlen_rows_of_a_tensor_with_a_dynamic_row_count():
    """The packed tensor's row count is T.dynamic (the total tokens of the batch): rows past it read zeros and are
    not written, with the count a runtime argument of the reader and the writer."""
    total = T.dynamic("total")
    kernel = tilelang.compile(_varlen_scale(2, total, 32, guarded=False), target="tt")
    for n_total, lens in ((100, [40, 60]), (75, [70, 5])):
        cu = torch.tensor([0, lens[0], lens[0] + lens[1]], dtype=torch.int32)
        x = torch.randn(n_total, 32).bfloat16()
        y = torch.full((n_total, 32), -7.0)
        kernel(x, cu, max(lens), y)
        assert torch.equal(y, x.float() * 2 + 1), n_total


def _moe_rows(E, TOTAL, D, bm=64):
    """TileLang's fused MoE down projection stores each expert's rows scaled by their routing weight, guarded by
    the rows the expert has: Y[m_start + i, j] = acc[i, j] * W[m_start + i] if i < rows (m_start from offsets)."""
    @T.prim_func
    def k(X: T.Tensor((TOTAL, D), "bfloat16"), W: T.Tensor((TOTAL,), "bfloat16"), Start: T.Tensor((E,), "int32"),
          Rows: T.Tensor((E,), "int32"), Y: T.Tensor((TOTAL, D), "bfloat16")):
        with T.Kernel(E, threads=128) as bx:
            x = T.alloc_fragment((bm, D), "bfloat16")
            acc = T.alloc_fragment((bm, D), "float32")
            m_start = Start[bx]
            actual_rows = T.max(0, T.min(bm, Rows[bx]))
            T.copy(X[m_start: m_start + bm, 0:D], x)
            for i, j in T.Parallel(bm, D):
                acc[i, j] = x[i, j] * 3.0
            for i, j in T.Parallel(bm, D):
                if i < actual_rows:
                    Y[m_start + i, j] = acc[i, j] * W[m_start + i]

    return k


@pytest.mark.parametrize("arch", ARCHS)
def test_rows_scaled_by_a_per_row_weight_at_their_offsets(arch):
    """Experts of 37, 0, 64 and 20 rows at offsets 0, 37, 37, 101: each kept row is 3 x * w (bf16 products of
    small integers and powers of two: exact), rows no expert owns keep the caller's values."""
    E, TOTAL, D = 4, 128, 64
    kernel = tilelang.compile(_moe_rows(E, TOTAL, D), target={"kind": "tt", "arch": arch})
    rows = torch.tensor([37, 0, 64, 20], dtype=torch.int32)
    start = torch.tensor([0, 37, 37, 101], dtype=torch.int32)
    g = torch.Generator().manual_seed(11)
    x = torch.randint(-8, 9, (TOTAL, D), generator=g).bfloat16()
    w = (2.0 ** torch.randint(-3, 3, (TOTAL,), generator=g)).bfloat16()
    y = torch.full((TOTAL, D), -5.0).bfloat16()
    kernel(x, w, start, rows, y)
    ref = torch.full((TOTAL, D), -5.0)
    for e in range(E):
        s, n = int(start[e]), int(rows[e])
        ref[s:s + n] = x[s:s + n].float() * 3 * w[s:s + n, None].float()
    assert torch.equal(y.float(), ref)


def test_protocol_only_counters_of_a_data_dependent_kernel_are_the_full_runs():
    """Trip counts and offsets come from cu_seqlens: a protocol-only run (no math) still reads the Int32 index
    pages, so it moves exactly the bytes the full run moves (before, it read zeros: no sequence, no writes)."""
    lens = (50, 100, 37)
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    total = int(cu[-1])
    kernel = tilelang.compile(K.varlen_attention(3, 2, total, total, 64, True), target="tt")
    q, k, v = (torch.randn(total, 2, 64).bfloat16() for _ in range(3))
    counts = []
    for protocol_only in (False, True):
        kernel.emulate(q, k, v, cu, cu, max(lens), torch.zeros(total, 2, 64).bfloat16(), protocol_only=protocol_only)
        t = kernel.report["total"]
        counts.append((t["dram_read_bytes"], t["dram_write_bytes"], t["matmul_tiles"]))
    assert counts[0] == counts[1] and counts[0][1] == total * 2 * 64 * 2
