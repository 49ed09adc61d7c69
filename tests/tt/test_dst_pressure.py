"""DST pressure (issue 24): an element-wise expression that needs more DST tiles than the device has computes its
largest part that fits into a compute-owned CB first (TensorizeTT's spill) instead of being refused."""

import pytest
import tilelang
import tilelang.language as T
import torch

ARCHS = ["wormhole_b0", "blackhole"]


@pytest.mark.parametrize("arch", ARCHS)
def test_expression_deeper_than_dst_spills(arch):
    M, N = 64, 64

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32"),
          D: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(N // 32, M // 32, threads=128) as (bx, by):
            for i, j in T.Parallel(32, 32):
                a = A[by * 32 + i, bx * 32 + j]
                b = B[by * 32 + i, bx * 32 + j]
                c = C[by * 32 + i, bx * 32 + j]
                d = D[by * 32 + i, bx * 32 + j]
                Y[by * 32 + i, bx * 32 + j] = ((a + b) * (c + d) + (a - b) * (c - d)) * ((a * c + b * d) -
                                                                                      (a * d - b * c))

    kernel = tilelang.compile(k, target={"kind": "tt", "arch": arch})
    g = torch.Generator().manual_seed(0)
    a, b, c, d = (torch.randn(M, N, generator=g) for _ in range(4))
    y = torch.zeros(M, N)
    kernel(a, b, c, d, y)
    # float32 throughout (the spilled part is packed as Float32): torch's operations in the same order
    assert torch.equal(y, ((a + b) * (c + d) + (a - b) * (c - d)) * ((a * c + b * d) - (a * d - b * c)))
    spills = [cb for cb in kernel.plan["cbs"] if "_spill" in cb["name"]]
    assert spills and all(cb["format"] == "Float32" for cb in spills)


def test_spill_inside_a_loop_with_an_accumulator():
    M, N, KS = 32, 64, 3

    @T.prim_func
    def k(A: T.Tensor((M, N * KS), "float32"), B: T.Tensor((M, N * KS), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((32, N), "float32")
            b = T.alloc_shared((32, N), "float32")
            acc = T.alloc_fragment((32, N), "float32")
            T.clear(acc)
            for ks in T.serial(KS):
                T.copy(A[0, ks * N], a)
                T.copy(B[0, ks * N], b)
                for i, j in T.Parallel(32, N):
                    acc[i, j] = acc[i, j] + ((a[i, j] + b[i, j]) * (a[i, j] - b[i, j]) + (a[i, j] * 2.0 + b[i, j])
                                             * (a[i, j] - b[i, j] * 3.0)) * ((a[i, j] + 1.0) * (b[i, j] + 2.0) -
                                                                             (a[i, j] - 1.0) * (b[i, j] - 2.0))
            T.copy(acc, Y[bx * 32, 0])

    kernel = tilelang.compile(k, target="tt")
    g = torch.Generator().manual_seed(1)
    A, B = torch.randn(M, N * KS, generator=g), torch.randn(M, N * KS, generator=g)
    y = torch.zeros(M, N)
    kernel(A, B, y)
    ref = torch.zeros(M, N)
    for ks in range(KS):
        a, b = A[:, ks * N:(ks + 1) * N], B[:, ks * N:(ks + 1) * N]
        ref = ref + ((a + b) * (a - b) + (a * 2.0 + b) * (a - b * 3.0)) * ((a + 1.0) * (b + 2.0) - (a - 1.0) * (b - 2.0))
    assert torch.equal(y, ref)


def test_statements_reuse_their_spill_cbs():
    """Two statements that each spill twice: a spill CB is dead once its statement has read it, so the second
    reuses the first one's (two spill CBs, not four); each result against torch in the same order."""
    M, N = 32, 64

    def expr(a, b, c, d):
        return ((a + b) * (c + d) + (a - b) * (c - d)) * ((a * c + b * d) - (a * d - b * c))

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32"),
          D: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32"), Z: T.Tensor((M, N), "float32")):
        with T.Kernel(N // 32, threads=128) as bx:
            for i, j in T.Parallel(32, 32):
                Y[i, bx * 32 + j] = expr(A[i, bx * 32 + j], B[i, bx * 32 + j], C[i, bx * 32 + j], D[i, bx * 32 + j])
            for i, j in T.Parallel(32, 32):
                Z[i, bx * 32 + j] = expr(D[i, bx * 32 + j], C[i, bx * 32 + j], B[i, bx * 32 + j], A[i, bx * 32 + j])

    kernel = tilelang.compile(k, target="tt")
    g = torch.Generator().manual_seed(2)
    a, b, c, d = (torch.randn(M, N, generator=g) for _ in range(4))
    y, z = torch.zeros(M, N), torch.zeros(M, N)
    kernel(a, b, c, d, y, z)
    assert torch.equal(y, expr(a, b, c, d)) and torch.equal(z, expr(d, c, b, a))
    assert sorted(cb["name"] for cb in kernel.plan["cbs"] if "_spill" in cb["name"]) == ["Y_out_spill0",
                                                                                        "Y_out_spill1"]
