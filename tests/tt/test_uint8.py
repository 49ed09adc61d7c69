"""UInt8 tensors and CBs (docs/formats.md "Integers"): casts between uint8 and float tiles, a uint8 dequant GEMM, the
emulator's checks of integer DST tiles (seeded bugs) and the errors for what stays unsupported.

Numeric model (0.81.1 ``ckernel_sfpu_typecast.h``): uint8 -> float is exact (``calculate_typecast_uint32_to_fp32`` /
``_fp16b`` on 0..255); float -> uint8 is ``calculate_typecast_fp32_to_uint8``: truncation toward zero, the low byte
of the two's complement value (modulo 256), 0 for |x| >= 2^31, Inf and NaN (the golden of tt-llk's
``test_eltwise_unary_typecast.py::_fp32_to_uint8_wrap``). A float32 input CB reaches DST exactly (UnpackToDestFp32),
a bfloat16 one too (fp32 DST), so every comparison here is exact.
"""

import math
import re
import shutil
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
from tests.tt.test_dequant import bf16_away, check_model, rel_fro  # noqa: E402


def cast_in(M, N, out="float32"):
    @T.prim_func
    def f(A: T.Tensor((M, N), "uint8"), B: T.Tensor((M, N), out)):
        with T.Kernel(N // 32, M // 32) as (bx, by):
            A_s = T.alloc_shared((32, 32), "uint8")
            B_l = T.alloc_fragment((32, 32), out)
            T.copy(A[by * 32, bx * 32], A_s)
            for i, j in T.Parallel(32, 32):
                B_l[i, j] = T.Cast(out, A_s[i, j])
            T.copy(B_l, B[by * 32, bx * 32])
    return f


def cast_out(M, N, inp="float32"):
    @T.prim_func
    def f(A: T.Tensor((M, N), inp), B: T.Tensor((M, N), "uint8")):
        with T.Kernel(N // 32, M // 32) as (bx, by):
            A_s = T.alloc_shared((32, 32), inp)
            B_l = T.alloc_fragment((32, 32), "uint8")
            T.copy(A[by * 32, bx * 32], A_s)
            for i, j in T.Parallel(32, 32):
                B_l[i, j] = T.Cast("uint8", A_s[i, j])
            T.copy(B_l, B[by * 32, bx * 32])
    return f


def to_uint8_model(x: torch.Tensor) -> torch.Tensor:
    """calculate_typecast_fp32_to_uint8, element by element (Python ints: no overflow)."""
    return torch.tensor([[0 if not math.isfinite(v) or abs(v) >= 2 ** 31 else math.trunc(v) % 256 for v in row]
                         for row in x.float().tolist()], dtype=torch.uint8)


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
@pytest.mark.parametrize("out", ["float32", "bfloat16"])
def test_uint8_to_float_is_exact(out, arch):
    kernel = tilelang.compile(cast_in(64, 96, out), target=f"tt -arch={arch}")
    assert kernel.plan["kernels"]["compute"]["fp32_dest_acc_en"] is True
    assert [c["format"] for c in kernel.plan["cbs"] if c["name"] == "A_s"] == ["UInt8"]
    a = torch.arange(64 * 96).reshape(64, 96).remainder(256).to(torch.uint8)[torch.randperm(64)]   # every value
    b = torch.empty(64, 96, dtype=getattr(torch, out))
    kernel(a, b)
    assert torch.equal(b, a.to(b.dtype))


@pytest.mark.parametrize("inp", ["float32", "bfloat16"])
def test_float_to_uint8_truncates_modulo_256(inp):
    kernel = tilelang.compile(cast_out(64, 64, inp), target="tt")
    torch.manual_seed(1)
    a = (torch.randn(64, 64) * 300).to(getattr(torch, inp))
    edge = [0.99, -0.99, 255.9, 256.0, -1.0, -129.5, 1e10, -3e9, float("inf"), -float("inf"), float("nan"), 65535.0]
    a[0, :len(edge)] = torch.tensor(edge).to(a.dtype)
    b = torch.empty(64, 64, dtype=torch.uint8)
    kernel(a, b)
    assert torch.equal(b, to_uint8_model(a))
    inside = (a.float() >= 0) & (a.float() < 256)          # in range: torch's own cast
    assert torch.equal(b[inside], a.float()[inside].to(torch.uint8))


def test_uint8_dequant_gemm():
    M = N = 128
    K = 256
    kernel = tilelang.compile(D.dequant_gemm_uint8(M, N, K), target="tt")
    torch.manual_seed(2)
    a = torch.randn(M, K).to(torch.bfloat16)
    w = torch.randint(0, 256, (N, K), dtype=torch.uint8)
    z = torch.randint(100, 156, (N,)).to(torch.bfloat16)
    s = (torch.rand(N) * 0.02 + 0.001).to(torch.bfloat16)
    c = torch.empty(M, N, dtype=torch.bfloat16)
    kernel(a, w, z, s, c)
    exact = (w.float() - z.float()[:, None]) * s.float()[:, None]
    # the dequant runs on the SFPU in fp32 (w - z exact, one fp32 rounding of the product), packed to bf16 by the
    # packer (ties away); the GEMM then follows test_dequant's HiFi2 model
    check_model(c, a, bf16_away(exact).T)
    assert rel_fro(c, a.float() @ exact.T) <= 2 ** -6


def test_runtime_refuses_float_and_out_of_range_uint8_arguments():
    kernel = tilelang.compile(cast_in(32, 32), target="tt")
    out = torch.empty(32, 32)
    with pytest.raises(TTSimError, match=r"a UInt8 tensor argument: integer tile formats take integer arrays"):
        kernel(torch.rand(32, 32), out)
    with pytest.raises(TTSimError, match=r"values out of range for UInt8 \[0, 255\]: -1\.\.300"):
        kernel(torch.tensor([[-1, 300] * 16] * 32, dtype=torch.int32), out)
    kernel(torch.full((32, 32), 7, dtype=torch.int64), out)        # other integer dtypes in range are accepted
    assert bool((out == 7).all())


# ---- errors for what stays unsupported --------------------------------------------------------------------------
def _parallel_u8(body, out="bfloat16"):
    @T.prim_func
    def f(A: T.Tensor((64, 64), "uint8"), B: T.Tensor((64, 64), out)):
        with T.Kernel(1, 1) as (bx, by):
            A_s = T.alloc_shared((64, 64), "uint8")
            B_s = T.alloc_shared((64, 64), out)
            T.copy(A[0, 0], A_s)
            for i, j in T.Parallel(64, 64):
                B_s[i, j] = body(A_s, i, j)
            T.copy(B_s, B[0, 0])
    return f


def _assert_error(func, pattern):
    with pytest.raises(TTUnsupportedError) as e:
        tilelang.compile(func, target="tt")
    text = str(e.value)
    assert re.search(pattern, text, re.S), text
    assert re.search(r"test_uint8\.py:\d+", text) and "fix:" in text, text


def test_uint8_integer_arithmetic_is_refused():
    _assert_error(_parallel_u8(lambda A_s, i, j: (A_s[i, j] - T.uint8(3)).astype("bfloat16")),
                  r"A_s \(uint8\) is read in integer arithmetic: TT's tile math is float.*fix: cast the uint8 value "
                  r"to a float dtype where it is read")


def test_uint8_written_from_a_float_without_cast_form_is_refused():
    _assert_error(_parallel_u8(lambda A_s, i, j: A_s[i, j] + T.uint8(1), out="uint8"),
                  r"A_s \(uint8\) is read in integer arithmetic")
    _assert_error(_parallel_u8(lambda A_s, i, j: T.Cast("uint8", T.Cast("int32", A_s[i, j])), out="uint8"),
                  r"A_s \(uint8\) is cast to int32: TT converts integer tiles to and from floats only")


def test_uint8_gemm_operand_is_refused():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "bfloat16"), W: T.Tensor((64, 64), "uint8"), C: T.Tensor((64, 64), "bfloat16")):
        with T.Kernel(1, 1) as (bx, by):
            A_s = T.alloc_shared((64, 64), "bfloat16")
            W_s = T.alloc_shared((64, 64), "uint8")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.copy(A[0, 0], A_s)
            T.copy(W[0, 0], W_s)
            T.clear(C_l)
            T.gemm(A_s, W_s, C_l)
            T.copy(C_l, C[0, 0])
    _assert_error(f, r"T.gemm reads W_s \(uint8\): the TT matmul multiplies float tiles.*fix: dequantize first")


def test_uint8_without_fp32_dest_is_refused():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "uint8"), B: T.Tensor((64, 64), "bfloat16")):
        with T.Kernel(1, 1) as (bx, by):
            A_s = T.alloc_shared((64, 64), "uint8")
            B_s = T.alloc_shared((64, 64), "bfloat16")
            T.annotate_tt_compute(fp32_dest_acc=False)
            T.copy(A[0, 0], A_s)
            for i, j in T.Parallel(64, 64):
                B_s[i, j] = A_s[i, j].astype("bfloat16")
            T.copy(B_s, B[0, 0])
    _assert_error(f, r"fp32_dest_acc=False with the integer tile buffer A_s \(UInt8\) in compute: TT moves integer "
                     r"tiles through DST as 32-bit values")


# ---- the emulator's checks of integer DST tiles: one seeded bug each ---------------------------------------------
TC_IN = ("typecast_tile<static_cast<uint32_t>(DataFormat::UInt8), static_cast<uint32_t>(DataFormat::Float32)>(0);")
TC_OUT = ("typecast_tile<static_cast<uint32_t>(DataFormat::Float32), static_cast<uint32_t>(DataFormat::UInt8)>(0);")
SEEDED = [
    # the uint8 tile is packed into the float CB without being converted
    ("missing_typecast_in", "in", "kernels/compute.cpp", TC_IN, "", 1,
     r"pack_tile of DST\[0\], which holds 32-bit integers, into CB \d+ \(Float16_b\): the packer would take the "
     r"integers' bits for floats"),
    # an SFPU float op on the integers before the typecast
    ("sfpu_on_integers", "in", "kernels/compute.cpp", TC_IN, "relu_tile(0);\n        " + TC_IN, 1,
     r"relu_tile reads DST\[0\], which holds 32-bit integers"),
    # the float value is packed into the UInt8 CB without being converted
    ("missing_typecast_out", "out", "kernels/compute.cpp", TC_OUT, "", 1,
     r"pack_tile of DST\[0\], which holds floats, into CB \d+ \(UInt8\): the packer reads DST as 32-bit integers"),
    # the conversion run twice: the second one meets integers
    ("typecast_out_twice", "out", "kernels/compute.cpp", TC_OUT, TC_OUT + "\n        " + TC_OUT, 1,
     r"typecast_tile<float, UInt8> on DST\[0\], which holds 32-bit integers"),
    # the FPU reads the uint8 CB directly (add_tiles) instead of copy_tile + typecast_tile
    ("fpu_reads_uint8_cb", "in", "kernels/compute.cpp", "copy_tile(cb_A_s, 0, 0);",
     "add_init(cb_A_s, cb_A_s);\n        add_tiles(cb_A_s, cb_A_s, 0, 0, 0);", 1,
     r"eltwise binary tile op reads CB \d+ \(UInt8\): the emulator models integer tiles on the copy_tile \+ "
     r"typecast_tile path"),
    # packer L1 accumulation onto UInt8 pages
    ("l1_acc_into_uint8", "out", "kernels/compute.cpp", TC_OUT, TC_OUT + "\n        pack_reconfig_l1_acc(1);", 1,
     r"pack_tile into CB \d+ \(UInt8\) with L1 accumulation \(pack_reconfig_l1_acc\(1\)\): not supported for "
     r"integer tiles"),
    # 16-bit DST: the unpacker cannot hold the integers
    ("uint8_with_16bit_dst", "in", "host.cpp", ".fp32_dest_acc_en = true", ".fp32_dest_acc_en = false", 1,
     r"copy_tile of CB \d+ \(UInt8\) with fp32_dest_acc_en off"),
]


@pytest.fixture(scope="module")
def seeded_bases():
    # bfloat16 out: fp32 DST only for the uint8 tile (a float32 CB would also be unpacked to DST)
    return {"in": tilelang.compile(cast_in(64, 64, "bfloat16"), target={"kind": "tt", "max_cores": 2}),
            "out": tilelang.compile(cast_out(64, 64), target={"kind": "tt", "max_cores": 2})}


@pytest.mark.parametrize("case", SEEDED, ids=[c[0] for c in SEEDED])
def test_emulator_catches(case, tmp_path, seeded_bases):
    name, base, rel, old, new, count, message = case
    kernel = seeded_bases[base]
    tensors = {"in": lambda: (torch.randint(0, 256, (64, 64), dtype=torch.uint8),
                              torch.empty(64, 64, dtype=torch.bfloat16)),
               "out": lambda: (torch.randn(64, 64) * 100, torch.empty(64, 64, dtype=torch.uint8))}[base]()
    emulator.run(kernel.artifact_dir, kernel.plan, dict(enumerate(tensors)), timeout_s=120)   # the base is clean
    broken = tmp_path / "artifact"
    shutil.copytree(kernel.artifact_dir, broken)
    path = broken / rel
    text = path.read_text()
    assert text.count(old) == count, f"{name}: {old!r} x{text.count(old)} in {rel}"
    path.write_text(text.replace(old, new))
    with pytest.raises(TTSimError, match=message):
        emulator.run(broken, kernel.plan, dict(enumerate(tensors)), timeout_s=120)


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_uint8_mask_compared_with_an_integer(arch):
    """``Mk[i, j] != 0`` / ``> 100``: TileLang widens the uint8 to int32 to compare with the literal; every uint8
    is exact as a float, so the comparison runs on the typecast tile."""
    @T.prim_func
    def k(X: T.Tensor((64, 64), "bfloat16"), Mk: T.Tensor((64, 64), "uint8"), O: T.Tensor((64, 64), "float32"),
          P: T.Tensor((64, 64), "float32")):
        with T.Kernel(2) as bx:
            for i, j in T.Parallel(32, 64):
                O[bx * 32 + i, j] = T.if_then_else(Mk[bx * 32 + i, j] != 0, T.Cast("float32", X[bx * 32 + i, j]), -1.0)
            for i, j in T.Parallel(32, 64):
                P[bx * 32 + i, j] = T.if_then_else(Mk[bx * 32 + i, j] > 100, 1.0, 0.0)

    kernel = tilelang.compile(k, target={"kind": "tt", "arch": arch})
    torch.manual_seed(0)
    x, mk = torch.randn(64, 64).bfloat16(), torch.randint(0, 256, (64, 64), dtype=torch.uint8)
    mk[0, :3] = torch.tensor([0, 100, 101], dtype=torch.uint8)
    o, p = torch.zeros(64, 64), torch.zeros(64, 64)
    kernel(x, mk, o, p)
    assert torch.equal(o, torch.where(mk != 0, x.float(), torch.tensor(-1.0)))
    assert torch.equal(p, (mk > 100).float())
