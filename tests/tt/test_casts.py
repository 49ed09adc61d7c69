"""Casts inside an expression round where they stand, as on a GPU: to bfloat16 by round-to-nearest-even in DST
(``typecast_tile<Float32, Float16_b>``), to int32 by truncation toward zero; a float8 cast of a computed value (a
quantization TT cannot do in DST) or a scalar cast the RISC-V would not round is refused. They were dropped:
``float32(bfloat16(a))`` returned ``a``."""

import pytest
import tilelang
import tilelang.language as T
import torch

from tilelang_tt.errors import TTUnsupportedError

N = 32


def _compile(func, arch="wormhole_b0"):
    return tilelang.compile(func, target={"kind": "tt", "arch": arch})


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_inner_casts_round_as_a_gpu_does(arch):
    @T.prim_func
    def k(A: T.Tensor((N, N), "float32"), R: T.Tensor((N, N), "float32"), S: T.Tensor((N, N), "float32"),
          I: T.Tensor((N, N), "int32"), C: T.Tensor((N, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(N, N):
                R[i, j] = T.Cast("float32", T.Cast("bfloat16", A[i, j] * 3.0)) + 1.0
                S[i, j] = T.Cast("float32", T.Cast("int32", A[i, j]))
                I[i, j] = T.Cast("int32", A[i, j]) * 2 + 1
                C[i, j] = A[i, j] * T.Cast("bfloat16", 0.1)

    torch.manual_seed(0)
    A = torch.randn(N, N) * 3
    R, S, C = (torch.full((N, N), 7.0) for _ in range(3))
    I = torch.zeros(N, N, dtype=torch.int32)
    _compile(k, arch)(A, R, S, I, C)
    torch.testing.assert_close(R, (A * 3).bfloat16().float() + 1, rtol=0, atol=0)
    torch.testing.assert_close(S, A.trunc(), rtol=0, atol=0)
    torch.testing.assert_close(I, A.trunc().int() * 2 + 1, rtol=0, atol=0)
    torch.testing.assert_close(C, A * torch.tensor(0.1).bfloat16().float(), rtol=0, atol=0)


def test_bfloat16_rounding_is_to_nearest_even():
    @T.prim_func
    def k(A: T.Tensor((N, N), "float32"), R: T.Tensor((N, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(N, N):
                R[i, j] = T.Cast("float32", T.Cast("bfloat16", A[i, j] + 0.0))

    # exact ties between two bfloat16 values (both parities of the last kept bit), and values just off them
    one = torch.tensor(1.0).view(torch.int32).item()
    bits = torch.tensor([one + 0x8000, one + 0x18000, one + 0x8001, one + 0x7FFF] * (N * N // 4), dtype=torch.int32)
    A = bits.view(torch.float32).reshape(N, N).clone()
    R = torch.zeros(N, N)
    _compile(k)(A, R)
    torch.testing.assert_close(R, A.bfloat16().float(), rtol=0, atol=0)


@pytest.mark.parametrize("body,message", [
    ("float8", "no in-DST conversion to float8_e4m3"),
    ("scalar", "in a scalar operand: TT computes scalars in float32 on the RISC-V cores"),
])
def test_casts_tt_cannot_round_are_refused(body, message):
    @T.prim_func
    def k(A: T.Tensor((N, N), "float32"), alpha: T.float32, R: T.Tensor((N, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(N, N):
                if body == "float8":
                    R[i, j] = T.Cast("float32", T.Cast("float8_e4m3", A[i, j] / 3.0))
                else:
                    R[i, j] = A[i, j] * T.Cast("float32", T.Cast("bfloat16", alpha))

    with pytest.raises(TTUnsupportedError, match=message):
        _compile(k)
