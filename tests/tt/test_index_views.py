"""How TileLang's sparse-attention examples index: region extents written as differences of block bounds
(``Q[s, H0:H1, :]`` with ``H1 = H0 + 16``), and the row numbers of a gather stored along the last dimension of an
index tensor (``KV[Indices[s, g, i0 + i], d]``: DeepSeek's sparse MLA)."""

import pytest
import tilelang
import tilelang.language as T
import torch

ARCHS = ["wormhole_b0", "blackhole"]


def _head_window(S=4, H=32, D=64):
    @T.prim_func
    def k(Q: T.Tensor((S, H, D), T.float32), O: T.Tensor((S, H, D), T.float32)):
        with T.Kernel(S, H // 16) as (bx, by):
            H0 = by * 16
            H1 = H0 + 16
            q = T.alloc_fragment((16, D), T.float32)
            T.copy(Q[bx, H0:H1, :], q)
            for i, j in T.Parallel(16, D):
                q[i, j] = q[i, j] * 2.0
            T.copy(q, O[bx, H0:H1, :])

    return k


@pytest.mark.parametrize("arch", ARCHS)
def test_extent_written_as_a_difference_of_bounds(arch):
    kernel = tilelang.compile(_head_window(), target={"kind": "tt", "arch": arch})
    q, o = torch.randn(4, 32, 64), torch.zeros(4, 32, 64)
    kernel(q, o)
    assert torch.equal(o, q * 2.0)


def _gather(S=3, K=32, N=96, D=64):
    @T.prim_func
    def k(KV: T.Tensor((N, D), T.float32), Idx: T.Tensor((S, 1, K), T.int32), O: T.Tensor((S * K, D), T.float32)):
        with T.Kernel(S) as bx:
            kv = T.alloc_shared((K, D), T.float32)
            for i, j in T.Parallel(K, D):
                kv[i, j] = KV[Idx[bx, 0, i], j]
            T.copy(kv, O[bx * K, 0])

    return k


@pytest.mark.parametrize("arch", ARCHS)
def test_gather_rows_named_along_the_last_dimension(arch):
    S, K, N, D = 3, 32, 96, 64
    kernel = tilelang.compile(_gather(S, K, N, D), target={"kind": "tt", "arch": arch})
    kv = torch.randn(N, D)
    idx = torch.randint(0, N, (S, 1, K), dtype=torch.int32)
    out = torch.zeros(S * K, D)
    kernel(kv, idx, out)
    assert torch.equal(out, kv[idx.reshape(-1).long()])
