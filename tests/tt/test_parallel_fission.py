"""A serial loop inside T.Parallel (ParallelFissionTT): the nest distributes over its statements and moves inside the
serial loop when its iterations are independent, as in DeepSeek's mHC post-mix; a row of a small fragment read by
the nest's row variable (``a[k, i]``) is picked out and transposed into a column."""

import pytest
import tilelang
import tilelang.language as T
import torch
from tvm import tirx

from tilelang_tt.errors import TTUnsupportedError
from tilelang_tt.transform.parallel_fission import parallel_fission


def mixed_rows(hc=4, h=256, h_blk=128):
    """TileLang's example_mhc_post.py kernel, bf16 in and out, a T.dynamic token count."""
    n = T.dynamic("num_tokens")

    @T.prim_func
    def mix(a: T.Tensor((n, hc, hc), "float32"), b: T.Tensor((n, hc, h), "bfloat16"), c: T.Tensor((n, hc), "float32"),
            d: T.Tensor((n, h), "bfloat16"), x: T.Tensor((n, hc, h), "bfloat16")):
        with T.Kernel(n, threads=128) as i_n:
            x_shared = T.alloc_shared((hc, h_blk), "bfloat16")
            b_shared = T.alloc_shared((hc, h_blk), "bfloat16")
            d_shared = T.alloc_shared(h_blk, "bfloat16")
            x_local = T.alloc_fragment((hc, h_blk), "float32")
            b_local = T.alloc_fragment((hc, h_blk), "float32")
            d_local = T.alloc_fragment(h_blk, "float32")
            a_local = T.alloc_fragment((hc, hc), "float32")
            c_local = T.alloc_fragment(hc, "float32")
            T.copy(a[i_n, 0, 0], a_local)
            T.copy(c[i_n, 0], c_local)
            for i0_h in T.Pipelined(T.ceildiv(h, h_blk), num_stages=2):
                T.copy(b[i_n, 0, i0_h * h_blk], b_shared)
                T.copy(d[i_n, i0_h * h_blk], d_shared)
                T.copy(b_shared, b_local)
                T.copy(d_shared, d_local)
                for i_hco, i1_h in T.Parallel(hc, h_blk):
                    x_local[i_hco, i1_h] = c_local[i_hco] * d_local[i1_h]
                    for i_hci in T.serial(hc):
                        x_local[i_hco, i1_h] += a_local[i_hci, i_hco] * b_local[i_hci, i1_h]
                T.copy(x_local, x_shared)
                T.copy(x_shared, x[i_n, 0, i0_h * h_blk])
    return mix


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_accumulation_inside_a_parallel_nest_runs(arch):
    kernel = tilelang.compile(mixed_rows(), target={"kind": "tt", "arch": arch})
    g = torch.Generator().manual_seed(7)
    n = 3
    a, c = torch.randn(n, 4, 4, generator=g), torch.randn(n, 4, generator=g)
    b, d = torch.randn(n, 4, 256, generator=g).bfloat16(), torch.randn(n, 256, generator=g).bfloat16()
    x = torch.empty(n, 4, 256, dtype=torch.bfloat16)
    kernel(a, b, c, d, x)
    want = c[:, :, None] * d.float()[:, None, :] + torch.einsum("nki,nkh->nih", a.double(), b.double()).float()
    # float32 products and sums on the SFPU, one bf16 rounding of the result (2^-8 relative) plus the fp32 sums
    torch.testing.assert_close(x.float(), want, rtol=2 ** -8, atol=1e-5)


def _loop_kinds(func):
    """"parallel" / "serial" for every T.Parallel / T.serial loop, outermost first, in program order."""
    out = []

    def visit(n):
        if isinstance(n, tirx.For) and n.kind in (tirx.ForKind.PARALLEL, tirx.ForKind.SERIAL):
            out.append("parallel" if n.kind == tirx.ForKind.PARALLEL else "serial")
        return True

    tirx.stmt_functor.pre_order_visit(func.body, visit)
    return out


def _doubled(step):
    """x = A, then x[i, j] = x[i, step(j)] * 2 three times, in one T.Parallel nest."""
    @T.prim_func
    def k(A: T.Tensor((32, 32), "float32"), C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((32, 32), "float32")
            for i, j in T.Parallel(32, 32):
                x[i, j] = A[i, j]
                for _ in T.serial(3):
                    x[i, j] = x[i, step(j)] * 2.0
            T.copy(x, C[0, 0])
    return k


def test_independent_nest_is_distributed_and_a_dependent_one_left_alone():
    own = _doubled(lambda j: j)
    neighbour = _doubled(lambda j: (j + 1) % 32)     # another iteration's element: the order of iterations matters
    assert _loop_kinds(own)[-3:] == ["parallel", "parallel", "serial"]
    assert _loop_kinds(parallel_fission(own))[-5:] == ["parallel", "parallel", "serial", "parallel", "parallel"]
    assert parallel_fission(neighbour).body.same_as(neighbour.body)
    with pytest.raises(TTUnsupportedError, match="For inside T.Parallel"):
        tilelang.compile(neighbour, target="tt")
    kernel = tilelang.compile(own, target="tt")
    a, c = torch.randn(32, 32), torch.empty(32, 32)
    kernel(a, c)
    assert torch.equal(c, a * 8.0)
