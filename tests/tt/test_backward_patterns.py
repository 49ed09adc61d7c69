"""What TileLang's attention backward examples do besides their GEMMs: a float32 gradient converted by a
global-to-global ``T.copy`` (``flash_bwd_post``), and per-(batch, head) log-sum-exps read as a row vector from row
``b * H + h`` of their ``[B * H, S]`` view and broadcast over the block (``qkT[i, j] * scale - lse_shared[j]``)."""

import pytest
import tilelang
import tilelang.language as T
import torch

from .helpers import bf16_away

ARCHS = ["wormhole_b0", "blackhole"]
B, H, S, D = 2, 3, 128, 64


def _post(out_dtype):
    @T.prim_func
    def post(dQ: T.Tensor((B, H, S, D), "float32"), dQ_out: T.Tensor((B, H, S, D), out_dtype)):
        with T.Kernel(S // 64, H, B) as (bx, by, bz):
            T.copy(dQ[bz, by, bx * 64:(bx + 1) * 64, :], dQ_out[bz, by, bx * 64:(bx + 1) * 64, :])

    return post


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16"])
def test_global_to_global_copy(arch, out_dtype):
    kernel = tilelang.compile(_post(out_dtype), target={"kind": "tt", "arch": arch})
    dq = torch.randn(B, H, S, D)
    out = torch.zeros(B, H, S, D, dtype=getattr(torch, out_dtype))
    kernel(dq, out)
    # float32 moves bit for bit; bfloat16 is packed from float32 (nearest, ties away from zero)
    assert torch.equal(out.float(), dq if out_dtype == "float32" else bf16_away(dq))
    assert [b["io"] for b in kernel.plan["buffers"]] == ["input", "output"]


def _scores_minus_lse():
    @T.prim_func
    def k(X: T.Tensor((B, H, S, S), "float32"), lse: T.Tensor((B, H, S), "float32"),
          O: T.Tensor((B, H, S, S), "float32")):
        with T.Kernel(S // 64, H, B) as (bx, by, bz):
            x = T.alloc_fragment((64, S), "float32")
            lse_shared = T.alloc_shared((S,), "float32")
            T.copy(X[bz, by, bx * 64:(bx + 1) * 64, :], x)
            T.copy(lse[bz, by, :], lse_shared)
            for i, j in T.Parallel(64, S):
                x[i, j] = T.exp2(x[i, j] * 0.5 - lse_shared[j])
            T.copy(x, O[bz, by, bx * 64:(bx + 1) * 64, :])

    return k


@pytest.mark.parametrize("arch", ARCHS)
def test_row_vector_at_a_row_inside_its_tile_is_broadcast(arch):
    """lse[b, h, :] is row b * H + h of the [B * H, S] view: 5 of the 6 rows sit below the first row of their tile,
    which is the only row TT broadcasts; compute moves the row to the top first (adding zeros: exact)."""
    kernel = tilelang.compile(_scores_minus_lse(), target={"kind": "tt", "arch": arch})
    x, lse = torch.randn(B, H, S, S), torch.randn(B, H, S)
    out = torch.zeros(B, H, S, S)
    kernel(x, lse, out)
    want = torch.exp2(x * 0.5 - lse[:, :, None, :])
    # the subtraction is exact as torch's; exp2 on the SFPU is within a few float32 ulps
    assert torch.allclose(out, want, rtol=2 ** -20, atol=0)
    assert any(cb["name"].startswith("lse_shared_line") for cb in kernel.plan["cbs"])


def test_global_to_global_copy_of_2d_blocks():
    """The 2-D form (once a bad input here): each 32x32 block of A copied to the same block of C."""
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            T.copy(A[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], C[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32])

    kernel = tilelang.compile(k, target="tt")
    a, c = torch.randn(64, 64), torch.zeros(64, 64)
    kernel(a, c)
    assert torch.equal(c, a)


@pytest.mark.parametrize("arch", ARCHS)
def test_one_element_fragment_set_outside_t_parallel(arch):
    """``D_local[0, 0] = T.Cast("float32", D[0, h])`` (TileLang's Mamba chunk scan): a store of the one element of a
    1x1 fragment at the block level, then the element scales a block."""
    @T.prim_func
    def k(X: T.Tensor((64, 64), T.float32), Dv: T.Tensor((1, 2), T.bfloat16), O: T.Tensor((64, 64), T.float32)):
        with T.Kernel(2) as bx:
            d = T.alloc_fragment((1, 1), T.float32)
            x = T.alloc_fragment((32, 64), T.float32)
            d[0, 0] = T.Cast("float32", Dv[0, bx])
            T.copy(X[bx * 32, 0], x)
            for i, j in T.Parallel(32, 64):
                x[i, j] = x[i, j] * d[0, 0]
            T.copy(x, O[bx * 32, 0])

    kernel = tilelang.compile(k, target={"kind": "tt", "arch": arch})
    x, dv, o = torch.randn(64, 64), torch.randn(1, 2).bfloat16(), torch.zeros(64, 64)
    kernel(x, dv, o)
    assert torch.equal(o, x * dv.float().repeat_interleave(32, dim=1)[0][:, None])
