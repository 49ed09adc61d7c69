"""int8 tensors stored as their two's-complement bytes (``T.TTShard(format="Int8")``, docs/formats.md "Integers").

typecast.h (0.81.1) reads Int8 from a CB declared UInt8: the unpacker zero-extends the byte into 32-bit DST and
``typecast_tile<Int8, Float32>`` (``calculate_typecast_int8_to_fp32``: (byte ^ 0x80) - 128) makes it the signed
value, exact for all of -128..127 (the default int8 storage, Bfp8_b, holds only -127..127). The casts are compared
exactly; the dequant GEMM against test_dequant's HiFi2 model and torch; then the errors for what stays refused and
a seeded bug (the unsigned typecast on a signed tile) the comparison must catch.
"""

import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
import tilelang_tt  # noqa: F401
from tilelang_tt import emulator
from tilelang_tt.emulator import TTSimError
from tilelang_tt.errors import TTUnsupportedError

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from examples import dequant_kernels as D  # noqa: E402
from tests.tt.helpers import broken_copy  # noqa: E402
from tests.tt.test_dequant import bf16_away, check_model, rel_fro  # noqa: E402

TC_INT8 = "typecast_tile<static_cast<uint32_t>(DataFormat::Int8), static_cast<uint32_t>(DataFormat::Float32)>"


def cast_in(M, N, out="float32"):
    @T.prim_func
    def f(A: T.Tensor((M, N), "int8"), B: T.Tensor((M, N), out)):
        with T.Kernel(N // 32, M // 32) as (bx, by):
            A_s = T.alloc_shared((32, 32), "int8")
            B_l = T.alloc_fragment((32, 32), out)
            T.annotate_tt_sharding({A: T.TTShard(format="Int8")})
            T.copy(A[by * 32, bx * 32], A_s)
            for i, j in T.Parallel(32, 32):
                B_l[i, j] = T.Cast(out, A_s[i, j])
            T.copy(B_l, B[by * 32, bx * 32])
    return f


def _every_int8(M, N):
    return (torch.arange(M * N).reshape(M, N).remainder(256) - 128).to(torch.int8)[torch.randperm(M)]


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
@pytest.mark.parametrize("out", ["float32", "bfloat16"])
def test_int8_to_float_is_exact(out, arch):
    kernel = tilelang.compile(cast_in(64, 96, out), target=f"tt -arch={arch}")
    bufs = {b["name"]: b for b in kernel.plan["buffers"]}
    assert (bufs["A"]["dtype"], bufs["A"]["format"], bufs["A"]["page_size"]) == ("int8", "UInt8", 1024)
    assert [c["format"] for c in kernel.plan["cbs"] if c["name"] == "A_s"] == ["UInt8"]
    assert kernel.plan["kernels"]["compute"]["fp32_dest_acc_en"] is True
    assert TC_INT8 in (kernel.artifact_dir / "kernels" / "compute.cpp").read_text()
    a = _every_int8(64, 96)
    assert int(a.min()) == -128 and int(a.max()) == 127
    b = torch.empty(64, 96, dtype=getattr(torch, out))
    kernel(a, b)
    assert torch.equal(b, a.to(b.dtype))


def _dequant_int8_annotated(M, N, K, block=64):
    """examples/dequant_kernels.py dequant_gemm_int8 with its weights stored as Int8."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "int8"), Scale: T.Tensor((N,), "bfloat16"),
             C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block, block), "bfloat16")
            B_shared = T.alloc_shared((block, block), "int8")
            B_dequantize_shared = T.alloc_shared((block, block), "bfloat16")
            C_local = T.alloc_fragment((block, block), "float32")
            T.annotate_tt_sharding({B: T.TTShard(format="Int8")})
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block), num_stages=2):
                T.copy(A[by * block, k * block], A_shared)
                T.copy(B[bx * block, k * block], B_shared)
                for i, j in T.Parallel(block, block):
                    B_dequantize_shared[i, j] = B_shared[i, j].astype("bfloat16") * Scale[bx * block + i]
                T.gemm(A_shared, B_dequantize_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block, bx * block])

    return main


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_int8_dequant_gemm_holds_minus_128(arch):
    M = N = 128
    K = 256
    kernel = tilelang.compile(_dequant_int8_annotated(M, N, K), target=f"tt -arch={arch}")
    bufs = {b["name"]: b for b in kernel.plan["buffers"]}
    assert (bufs["B"]["format"], bufs["B"]["bytes"]) == ("UInt8", N * K)     # 1 byte per weight, no exponents
    torch.manual_seed(3)
    a = torch.randn(M, K).to(torch.bfloat16)
    w = torch.randint(-128, 128, (N, K), dtype=torch.int8)
    w[0, :4] = torch.tensor([-128, 127, -127, 0], dtype=torch.int8)
    s = (torch.rand(N) * 0.02 + 0.001).to(torch.bfloat16)
    c = torch.empty(M, N, dtype=torch.bfloat16)
    kernel(a, w, s, c)
    exact = w.float() * s.float()[:, None]
    # the dequant runs on the SFPU in fp32 (one rounding of the product), packed to bf16; the GEMM follows
    # test_dequant's HiFi2 model
    check_model(c, a, bf16_away(exact).T)
    assert rel_fro(c, a.float() @ exact.T) <= 2 ** -6


def test_the_bfp8_default_still_refuses_minus_128_and_names_the_annotation():
    M = N = 128
    K = 256
    kernel = tilelang.compile(D.dequant_gemm_int8(M, N, K), target="tt")
    w = torch.zeros(N, K, dtype=torch.int8)
    w[1, 2] = -128
    with pytest.raises(TTSimError, match=r"must lie in \[-127, 127\]") as err:
        kernel(torch.zeros(M, K, dtype=torch.bfloat16), w, torch.ones(N, dtype=torch.bfloat16),
               torch.empty(M, N, dtype=torch.bfloat16))
    assert 'T.TTShard(format="Int8")' in str(err.value)


def test_runtime_refuses_float_int8_arguments():
    kernel = tilelang.compile(cast_in(32, 32), target="tt")
    with pytest.raises(TTSimError, match=r"an int8 tensor argument stored as Int8"):
        kernel(torch.zeros(32, 32), torch.empty(32, 32))


def test_int8_written_by_the_kernel_is_refused():
    @T.prim_func
    def f(A: T.Tensor((32, 32), "float32"), W: T.Tensor((32, 32), "int8"), B: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, 1) as (bx, by):
            W_s = T.alloc_shared((32, 32), "int8")
            W_l = T.alloc_fragment((32, 32), "int8")
            A_s = T.alloc_shared((32, 32), "float32")
            B_l = T.alloc_fragment((32, 32), "float32")
            T.annotate_tt_sharding({W: T.TTShard(format="Int8")})
            T.copy(A[0, 0], A_s)
            T.copy(W[0, 0], W_s)
            for i, j in T.Parallel(32, 32):
                W_l[i, j] = T.Cast("int8", A_s[i, j])
            for i, j in T.Parallel(32, 32):
                B_l[i, j] = T.Cast("float32", W_l[i, j]) + T.Cast("float32", W_s[i, j])
            T.copy(B_l, B[0, 0])
    # an int8 tile buffer exists only as the copy of an int8 tensor (its CB takes the tensor's format)
    with pytest.raises(TTUnsupportedError, match=r"tile buffer W_l: dtype 'int8' has no supported TT data format; "
                                                 r"int8 tensors are read-only weights"):
        tilelang.compile(f, target="tt")


def test_unsigned_typecast_on_a_signed_tile_is_caught(tmp_path):
    """Seeded bug: the compute kernel converts the int8 bytes as UInt8. Every negative weight comes out 256 too large
    (the byte read unsigned), which the exact comparison of test_int8_to_float_is_exact rejects."""
    kernel = tilelang.compile(cast_in(32, 32), target="tt")
    a = _every_int8(32, 32)
    clean = torch.empty(32, 32)
    emulator.run(kernel.artifact_dir, kernel.plan, {0: a, 1: clean}, timeout_s=120)
    assert torch.equal(clean, a.float())
    compute = (kernel.artifact_dir / "kernels" / "compute.cpp").read_text()
    assert compute.count("DataFormat::Int8") == 2          # typecast_tile_init and typecast_tile
    broken = broken_copy(kernel.artifact_dir, tmp_path / "artifact", "kernels/compute.cpp", compute,
                         compute.replace("DataFormat::Int8", "DataFormat::UInt8"))
    wrong = torch.empty(32, 32)
    emulator.run(broken, kernel.plan, {0: a, 1: wrong}, timeout_s=120)
    assert torch.equal(wrong, a.float() + 256 * (a < 0).float())


def test_cli_run_reads_and_draws_int8(tmp_path, capsys):
    """`tilelang-tt run` on an Int8-stored tensor: seeded random inputs span all of int8 and go through exactly."""
    import numpy as np

    from tilelang_tt import cli

    kernel = tilelang.compile(cast_in(64, 64), target="tt")
    out = tmp_path / "out"
    assert cli.main(["run", str(kernel.artifact_dir), "--seed", "3", "--out", str(out)]) == 0
    a = np.load(next((out / "inputs").glob("A*.npy")))
    b = np.load(out / "B.npy")
    assert a.dtype == np.int8 and int(a.min()) == -128 and int(a.max()) == 127
    assert np.array_equal(b, a.astype(np.float32))


def int8_gemm(K, block_k=128):
    @T.prim_func
    def k(A: T.Tensor((32, K), "int8"), B: T.Tensor((K, 32), "int8"), C: T.Tensor((32, 32), "int32")):
        with T.Kernel(1) as bx:
            As = T.alloc_shared((32, block_k), "int8")
            Bs = T.alloc_shared((block_k, 32), "int8")
            acc = T.alloc_fragment((32, 32), "int32")
            T.clear(acc)
            for kk in T.Pipelined(K // block_k, num_stages=2):
                T.copy(A[0, kk * block_k], As)
                T.copy(B[kk * block_k, 0], Bs)
                T.gemm(As, Bs, acc)
            T.copy(acc, C)
    return k


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_int8_gemm_into_int32_exact_below_2_24(arch):
    """int8 x int8 -> int32: bf16 operands (exact) and a float32 DST, exact while every sum stays below 2^24
    (K = 512 products of at most 128 x 128)."""
    kernel = tilelang.compile(int8_gemm(512), target={"kind": "tt", "arch": arch})
    a = torch.full((32, 512), 127, dtype=torch.int8)
    a[1::2] = torch.randint(-127, 128, (16, 512), dtype=torch.int8)
    b = torch.full((512, 32), 127, dtype=torch.int8)
    b[:, 1::2] = torch.randint(-127, 128, (512, 16), dtype=torch.int8)
    c = torch.zeros(32, 32, dtype=torch.int32)
    kernel(a, b, c)
    assert torch.equal(c, (a.long() @ b.long()).int())


def test_int8_gemm_sums_beyond_2_24_are_refused():
    """K = 1280 of int8 products may reach 20971520: float32 accumulation would round it (CUDA's int32 MMA does
    not), so the accumulator's bound (K x 128 x 128 over the loop's trips) is refused."""
    with pytest.raises(TTUnsupportedError, match=r"T.gemm of int8 x int8 into int32 may add up to 20971520 in "
                                                  r"magnitude: TT accumulates in float32, exact only below 2\^24"):
        tilelang.compile(int8_gemm(1280), target="tt")
