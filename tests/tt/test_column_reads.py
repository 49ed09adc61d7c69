"""ColumnReadsTT: one head's per-token values of a [B, S, H] tensor (GDN's gates and betas), read as a per-row vector
by a copy or element by element inside T.Parallel, come from whole tile columns, masked and summed per row.

Values on a grid of 1/4 keep every product exact, so results equal torch's bit for bit."""

import pytest
import tilelang
import tilelang.language as T
import torch


D = 64


def scaled_rows(B, S, H, gdtype, form):
    """O[b, s, h, :] = X[b, s, h, :] * G[b, s, h]: G's column h for 64 tokens per block, as a copy or as element
    reads inside the T.Parallel nest that uses them."""

    @T.prim_func
    def by_copy(G: T.Tensor((B, S, H), gdtype), X: T.Tensor((B, S, H, D), "bfloat16"),
                O: T.Tensor((B, S, H, D), "float32")):
        with T.Kernel(S // 64, B * H, threads=128) as (bs, bbh):
            bb, bh = bbh // H, bbh % H
            g = T.alloc_shared((64,), gdtype)
            x = T.alloc_shared((64, D), "bfloat16")
            y = T.alloc_fragment((64, D), "float32")
            T.copy(G[bb, bs * 64:(bs + 1) * 64, bh], g)
            T.copy(X[bb, bs * 64:(bs + 1) * 64, bh, :], x)
            for i, j in T.Parallel(64, D):
                y[i, j] = x[i, j] * g[i]
            T.copy(y, O[bb, bs * 64:(bs + 1) * 64, bh, :])

    @T.prim_func
    def by_element(G: T.Tensor((B, S, H), gdtype), X: T.Tensor((B, S, H, D), "bfloat16"),
                   O: T.Tensor((B, S, H, D), "float32")):
        with T.Kernel(S // 64, B * H, threads=128) as (bs, bbh):
            bb, bh = bbh // H, bbh % H
            x = T.alloc_shared((64, D), "bfloat16")
            y = T.alloc_fragment((64, D), "float32")
            T.copy(X[bb, bs * 64:(bs + 1) * 64, bh, :], x)
            for i, j in T.Parallel(64, D):
                y[i, j] = x[i, j] * G[bb, bs * 64 + i, bh] + G[bb, bs * 64 + i, bh]
            T.copy(y, O[bb, bs * 64:(bs + 1) * 64, bh, :])

    return by_copy if form == "copy" else by_element


@pytest.mark.parametrize("B,S,H,gdtype,form,arch", [
    (1, 256, 32, "float32", "copy", "wormhole_b0"),
    (2, 128, 64, "bfloat16", "element", "wormhole_b0"),
    (1, 128, 96, "float32", "element", "wormhole_b0"),      # the column in the third tile column
    (1, 128, 32, "bfloat16", "copy", "blackhole"),
])
def test_a_column_of_a_bsh_tensor_is_a_per_row_vector(B, S, H, gdtype, form, arch):
    kernel = tilelang.compile(scaled_rows(B, S, H, gdtype, form), target={"kind": "tt", "arch": arch})
    g = torch.Generator().manual_seed(B * S + H)
    gate = (torch.randint(-8, 9, (B, S, H), generator=g) / 4).to(getattr(torch, gdtype))
    x = (torch.randint(-8, 9, (B, S, H, D), generator=g) / 4).bfloat16()
    o = torch.empty(B, S, H, D)
    kernel(gate, x, o)
    want = x.float() * gate.float()[..., None] + (gate.float()[..., None] if form == "element" else 0)
    torch.testing.assert_close(o, want, rtol=0, atol=0)
    # the reader moves whole tile columns of G's [B * S, H] view: G is read once per (block, head)
    reads = [c for c in kernel.plan["cbs"] if c["role"] == "input" and c["name"].startswith("G_cols")]
    assert len(reads) == 1 and reads[0]["block_tiles"] == 2      # 64 tokens x one 32-column tile


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_a_column_of_a_tensor_whose_last_axis_is_not_whole_tiles(arch):
    """H = 48: the column's tile column would reach past the tensor, so ColumnReadsTT leaves the read (once refused:
    a column at column h % 32 of its tile broadcast over whole tiles); compute now moves the column to the first
    column of its tile (the other columns zeroed, a row sum: exact) before the broadcast."""
    kernel = tilelang.compile(scaled_rows(1, 128, 48, "float32", "copy"), target={"kind": "tt", "arch": arch})
    g = torch.Generator().manual_seed(48)
    gate = (torch.randint(-8, 9, (1, 128, 48), generator=g) / 4).float()
    x = (torch.randint(-8, 9, (1, 128, 48, D), generator=g) / 4).bfloat16()
    o = torch.empty(1, 128, 48, D)
    kernel(gate, x, o)
    assert torch.equal(o, x.float() * gate[..., None])
    assert not any(c["name"].startswith("G_cols") for c in kernel.plan["cbs"])


def test_one_element_inside_its_tile_broadcast_over_whole_tiles():
    """``s`` is X[32 * by + 3, 32 * bx + 5], one element at row 3, column 5 of its tile, scaling a whole tile: it is
    moved to row 0 (a column sum), then to column 0 (a row sum; both exact), where the FPU broadcasts from."""

    @T.prim_func
    def scaled(A: T.Tensor((64, 64), "float32"), X: T.Tensor((64, 64), "float32"),
               O: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2) as (bx, by):
            a = T.alloc_fragment((32, 32), "float32")
            s = T.alloc_fragment((1, 1), "float32")
            T.copy(A[by * 32, bx * 32], a)
            T.copy(X[by * 32 + 3:by * 32 + 4, bx * 32 + 5:bx * 32 + 6], s)
            for i, j in T.Parallel(32, 32):
                a[i, j] = a[i, j] * s[0, 0]
            T.copy(a, O[by * 32, bx * 32])

    kernel = tilelang.compile(scaled, target="tt")
    g = torch.Generator().manual_seed(35)
    a, x = torch.randn(64, 64, generator=g), torch.randn(64, 64, generator=g)
    o = torch.empty(64, 64)
    kernel(a, x, o)
    scale = x[3::32, 5::32].repeat_interleave(32, 0).repeat_interleave(32, 1)
    assert torch.equal(o, a * scale)
