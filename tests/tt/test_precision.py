"""The precision contract (docs/usage.md "Precision"): float32 kernels compute in float32 by default, TF32 is an opt-in
reported in the plan and ``kernel.report``, and tt-sim rounds fp16 as the card does.

* float32 reductions take the SFPU path (copy_tile with UnpackToDestFp32, fp32 SFPU folds, ``sfpu_reduce``): a sum
  of n values whose adds form a tree of depth d is within d * 2^-24 * sum|x| of the float64 sum (each fp32 add
  rounds once, relative 2^-24); max / min / abs-max are exact. Before, the FPU reduce read the data as TF32: rows
  of values near 1000 came back 2.6e-4 off.
* ``allow_tf32`` (``T.annotate_tt_compute`` or ``-allow_tf32=true``) puts float32 reductions and elementwise ops on
  the FPU: each operand truncated to TF32 (the low 13 mantissa bits dropped: relative error < 2^-10,
  TT_KERNEL_PATTERNS.md 5.1), so a sum is within 2^-10 * sum|x| (plus the fp32 adds).
* The packer's FP32 -> Float16 with fp32 accumulation goes through BF16 (TT_KERNEL_PATTERNS.md 5b: the 0.81 library
  picks Float16_b as the pack source format of a Float16 CB, and tt-llk's cpack_common.h sets Round_10b_mant only
  when that format is Float16): round to BF16, nearest with ties away from zero, then widen to FP16
  (tt-isa-documentation Packers/FormatConversion.md). A Float32 CB in a program with a Float16 CB reaches SrcA/SrcB as
  FP16 (the library's unpack format selection), not TF32: 10 mantissa bits, truncated as every FP32 -> Src conversion
  is (UNPACR_Regular.md). The references below are written from those texts in NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
import torch

from tests.tt import test_numerics as N
from tests.tt.test_everyday import COMBINE, TORCH_REDUCE, reduce_kernel
from tilelang_tt import emulator

U = 2.0 ** -24          # fp32 unit roundoff
TF32 = 2.0 ** -10       # TF32 truncation, relative


# ---- generated kernels -----------------------------------------------------------------------------------------
# test_everyday's reduce_kernel(kind, dim, clear, M, N): T.reduce_<kind> of each (32, N) block of A along dim into
# R, clear=False folding into Init
REF = TORCH_REDUCE


def run_reduce(kind, dim, clear=True, a=None, target="tt", M=64, N=256):
    a = a if a is not None else 1000.0 + torch.rand(M, N, dtype=torch.float64).float()
    n = 32 if dim == 1 else N
    init, r = torch.randn(M // 32 * n), torch.empty(M // 32 * n)
    kernel = tilelang.compile(reduce_kernel(kind, dim, clear, M, N), target=target)
    kernel(a, init, r)
    blocks = a.double().view(M // 32, 32, N)
    ref = REF[kind](blocks, 2 if dim == 1 else 1).reshape(-1)
    mag = blocks.abs().sum(2 if dim == 1 else 1).reshape(-1)
    if not clear:
        ref = COMBINE[kind](ref, init.double())
        mag = mag + init.double().abs()
    return kernel, r.double(), ref, mag


def sum_depth(inner_tiles: int, clear: bool) -> int:
    """The adds on the longest path of the exact path's sum: the tiles folded one after another (inner - 1), the
    32 values of a row / column in a 5-level tree, the previous value (clear=False)."""
    return inner_tiles - 1 + 5 + (0 if clear else 1)


def test_fp32_row_sum_near_1000_is_float32():
    """The issue's kernel: rows of values near 1000, summed in float32 (2.6e-4 relative off through TF32 before)."""
    torch.manual_seed(0)
    kernel, r, ref, mag = run_reduce("sum", 1)
    bound = sum_depth(256 // 32, True) * U * mag
    err = (r - ref).abs()
    assert (err <= bound).all(), (err / mag).max().item()
    assert (err / mag).max().item() < 1e-6
    assert kernel.plan["precision"]["ops"]["reduce"] == "fp32"
    source = kernel.get_kernel_source()
    assert "sfpu_reduce<PoolType::SUM, DataFormat::Float32, ReduceDim::REDUCE_ROW>" in source
    assert "reduce_tile" not in source and not any(cb["name"] == "reduce_scaler" for cb in kernel.plan["cbs"])


CASES = [(k, d, c) for k in sorted(REF) for d in (1, 0) for c in (True, False) if c or k in COMBINE]


@pytest.mark.parametrize("kind,dim,clear", CASES)
def test_fp32_reductions_within_fp32_bounds(kind, dim, clear):
    torch.manual_seed(1)
    a = torch.randn(64, 96) * 100.0 - 30.0       # mixed signs: a max / min starting from 0 would be wrong
    _, r, ref, mag = run_reduce(kind, dim, clear, a=a, N=96)
    err = (r - ref).abs()
    if "sum" in kind:
        inner = 96 // 32 if dim == 1 else 1
        assert (err <= sum_depth(inner, clear) * U * mag).all(), (err / mag).max().item()
    else:       # max / min / abs-max pick one of the fp32 values: exact
        assert (err == 0).all(), err.max().item()


def test_allow_tf32_is_reported_and_within_the_tf32_bound():
    torch.manual_seed(0)
    kernel, r, ref, mag = run_reduce("sum", 1, target="tt -allow_tf32=true")
    source = "target option"
    precision = kernel.plan["precision"]
    assert precision["allow_tf32"] is True and precision["allow_tf32_source"] == source
    assert precision["ops"]["reduce"] == "tf32" and precision["float32_operands"] == "tf32"
    assert kernel.report["precision"] == precision
    err = (r - ref).abs()
    # each datum truncated to TF32 (< 2^-10 relative), the products with the scaler exact at HiFi4, fp32 sums
    assert (err <= (TF32 + 64 * U) * mag).all(), (err / mag).max().item()
    assert (err / mag).max().item() > 1e-5     # the TF32 path really ran: far beyond the fp32 bound


def test_default_precision_is_reported():
    kernel, *_ = run_reduce("max", 0)
    precision = kernel.plan["precision"]
    assert precision["allow_tf32"] is False and precision["allow_tf32_source"].startswith("default")
    assert precision["ops"] == {"eltwise": "fp32", "reduce": "fp32"}
    assert kernel.report["precision"] == precision


def mul_kernel(M=64, N=64, allow_tf32=None):
    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // 32, M // 32, threads=128) as (bx, by):
            if allow_tf32 is not None:
                T.annotate_tt_compute(allow_tf32=allow_tf32)
            a = T.alloc_shared((32, 32), "float32")
            b = T.alloc_shared((32, 32), "float32")
            c = T.alloc_fragment((32, 32), "float32")
            T.copy(A[by * 32, bx * 32], a)
            T.copy(B[by * 32, bx * 32], b)
            for i, j in T.Parallel(32, 32):
                c[i, j] = a[i, j] * b[i, j]
            T.copy(c, C[by * 32, bx * 32])

    return k


@pytest.mark.parametrize("allow_tf32", [None, True])
def test_fp32_elementwise_exact_by_default_tf32_on_request(allow_tf32):
    torch.manual_seed(4)
    a, b, c = torch.randn(64, 64), torch.randn(64, 64), torch.empty(64, 64)
    kernel = tilelang.compile(mul_kernel(allow_tf32=allow_tf32), target="tt")
    kernel(a, b, c)
    rel = ((c.double() - a.double() * b.double()).abs() / (a.double() * b.double()).abs()).max().item()
    if allow_tf32:
        assert kernel.plan["precision"]["ops"]["eltwise"] == "tf32"
        assert kernel.plan["precision"]["allow_tf32_source"] == "T.annotate_tt_compute"
        # both operands truncated to TF32; SrcA's last TF32 bit is in no fidelity phase (9 bits), SrcB keeps 10
        assert 1e-6 < rel <= 2 * TF32 + TF32      # 2^-9 (SrcA) + 2^-10 (SrcB)
    else:
        assert kernel.plan["precision"]["ops"]["eltwise"] == "fp32"
        assert rel <= U                          # one fp32 rounding of the exact product


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_float32_math_on_16_bit_data_keeps_fp32_intermediates(dtype):
    """16-bit tensors, arithmetic written in float32 (how TileLang's examples upcast): DST holds fp32, so
    (x + 1000) - 1000 returns x exactly; a 16-bit DST would round x + 1000 to the 16-bit format's spacing there
    (4 for bf16, 0.5 for fp16). The plan reports DST's width."""
    @T.prim_func
    def k(A: T.Tensor((64, 64), dtype), C: T.Tensor((64, 64), dtype), offset: T.float32):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            a = T.alloc_shared((32, 32), dtype)
            T.copy(A[by * 32, bx * 32], a)
            for i, j in T.Parallel(32, 32):
                C[by * 32 + i, bx * 32 + j] = T.Cast(dtype, (T.Cast("float32", a[i, j]) + offset) - offset)

    torch.manual_seed(6)
    x = torch.randn(64, 64)   # |a| >= 1/4: a's lowest bit is >= 2^-13, so a + 1000 is exact in fp32
    a = (torch.sign(x) * (0.25 + x.abs())).to(getattr(torch, dtype))
    c = torch.empty_like(a)
    kernel = tilelang.compile(k, target="tt")
    kernel(a, c, 1000.0)
    # a float16 result of the fp32 DST reaches the host as a Float32 page (not through the packer's bf16 rounding)
    torch.testing.assert_close(c, a, rtol=0, atol=0)
    assert kernel.plan["precision"]["dst"] == "fp32"
    assert kernel.plan["precision"].get("float16_results", []) == (["C"] if dtype == "float16" else [])


def test_fp32_gemm_is_reported_as_tf32():
    """T.gemm has no fp32 multiplier on TT (the FPU's SrcA/SrcB hold 19 bits): a float32 GEMM stays TF32 with or
    without allow_tf32, and the plan says so."""
    from examples import kernels as K

    kernel = tilelang.compile(K.design_gemm(64, 64, 64, dtype="float32"), target="tt")
    assert kernel.plan["precision"]["ops"]["matmul"] == "tf32"
    assert kernel.plan["precision"]["allow_tf32"] is False


def test_fp32_reduce_kernel_compiles_against_the_real_sdk():
    from tilelang_tt.realcheck import check_artifact

    for kind, dim in (("sum", 1), ("min", 0), ("absmax", 1)):
        kernel = tilelang.compile(reduce_kernel(kind, dim, True, N=64), target="tt")
        result = check_artifact(kernel.artifact_dir)
        assert result.ok, result.summary()


# ---- hand-written probes: fp16 packing and FP16 in SrcA/SrcB ----------------------------------------------------
# test_numerics' one-tile artifact (A, B -> C, one op), with a data format per CB (Float16 added).
def _host() -> str:
    host = N.HOST
    edits = [
        ('return name == "Float32" ? tt::DataFormat::Float32 : tt::DataFormat::Float16_b;',
         'return name == "Float32" ? tt::DataFormat::Float32 : name == "Float16" ? tt::DataFormat::Float16 '
         ': tt::DataFormat::Float16_b;'),
        ('const tt::DataFormat out_fmt = format_of(env("NUM_OUT_FMT", "Float32"));',
         'const tt::DataFormat out_fmt = format_of(env("NUM_OUT_FMT", "Float32"));\n'
         '    const tt::DataFormat b_fmt = format_of(env("NUM_B_FMT", "Float32"));\n'
         '    const uint32_t b_tile = b_fmt == tt::DataFormat::Float32 ? 4096 : 2048;'),
        ("auto A = make(in_tile), B = make(in_tile), C = make(out_tile);",
         "auto A = make(in_tile), B = make(b_tile), C = make(out_tile);"),
        ("CircularBufferConfig(in_tile, {{1, in_fmt}}).set_page_size(1, in_tile)",
         "CircularBufferConfig(b_tile, {{1, b_fmt}}).set_page_size(1, b_tile)"),
        ('read_tensor(data_dir + "/B.bin", in_tile)', 'read_tensor(data_dir + "/B.bin", b_tile)'),
    ]
    for old, new in edits:
        assert old in host, old
        host = host.replace(old, new)
    return host


PAGE = {"Float32": 4096, "Float16_b": 2048, "Float16": 2048}
TORCH = {"Float32": torch.float32, "Float16_b": torch.bfloat16, "Float16": torch.float16}


def _plan(a_fmt, b_fmt, c_fmt, fp32):
    plan = N._plan("Float32", "Float32", fp32, "HiFi4")
    for buf, cb, fmt in zip(plan["buffers"], plan["cbs"], (a_fmt, b_fmt, c_fmt)):
        buf.update(dtype=fmt, format=fmt, page_size=PAGE[fmt], bytes=PAGE[fmt])
        cb["format"] = fmt
    return plan


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    root = tmp_path_factory.mktemp("precision")
    (root / "kernels").mkdir()
    (root / "host.cpp").write_text(_host())
    (root / "kernels" / "reader.cpp").write_text(N.READER)
    (root / "kernels" / "writer.cpp").write_text(N.WRITER)
    (root / "kernels" / "compute.cpp").write_text(N.COMPUTE)
    return root


def copy_a(probe, monkeypatch, a, *, a_fmt="Float32", b_fmt="Float32", c_fmt="Float32", fp32=True,
           unpack_to_dest=False):
    """copy_tile(A) -> pack into C, in a program whose CBs A, B, C have the given formats; returns C."""
    monkeypatch.setenv("NUM_OP", str(N.OP_COPY))
    monkeypatch.setenv("NUM_IN_FMT", a_fmt)
    monkeypatch.setenv("NUM_B_FMT", b_fmt)
    monkeypatch.setenv("NUM_OUT_FMT", c_fmt)
    monkeypatch.setenv("NUM_FP32", "1" if fp32 else "0")
    monkeypatch.setenv("NUM_FIDELITY", "HiFi4")
    monkeypatch.setenv("NUM_UTD", str(1 << N.CB_A) if unpack_to_dest else "0")
    c = torch.zeros(32, 32, dtype=TORCH[c_fmt])
    emulator.run(probe, _plan(a_fmt, b_fmt, c_fmt, fp32),
                 {0: torch.from_numpy(a).to(TORCH[a_fmt]), 1: torch.zeros(32, 32, dtype=TORCH[b_fmt]), 2: c},
                 timeout_s=120)
    return c


def fp16_from_bf16_packer(x) -> np.ndarray:
    """FP32 DST -> Float16 CB with fp32 accumulation, from the sources: the early conversion rounds to BF16 (nearest,
    ties away from zero; denormals and -0 to +0), the late one widens BF16 to FP16 (exact for FP16's normal range;
    TT's FP16 keeps exponent 31 finite, so BF16 values up to (2 - 2^-7) * 2^16 saturate at (2 - 2^-10) * 2^16:
    not tested here, torch reads that pattern as NaN), |x| < 2^-14 flushed (the ISA: flushed or mishandled)."""
    b = N.packer_bf16(x).astype(np.float64)
    b[np.abs(b) < 2.0 ** -14] = 0.0
    return b.astype(np.float16)


def tiles_for_fp16_pack():
    g = np.random.default_rng(7)
    x = (g.standard_normal((32, 32)) * 4).astype(np.float32)
    # exact BF16 ties (ties away from zero: RNE would round half of them down), values whose 11-bit fp16 rounding
    # keeps bits BF16 drops, a value below FP16's normal range and zeros
    ulp = 2.0 ** -7
    x[0, :8] = np.float32([1 + ulp / 2, 1 + 3 * ulp / 2, -(1 + ulp / 2), 2 + ulp, 3.0 + 2.0 ** -9, 1.2345678,
                           -7.654321, 2.0 ** -15])
    x[1, :3] = [0.0, -0.0, 1000.123]
    return x


def test_fp16_output_packs_through_bf16_with_fp32_accumulation(probe, monkeypatch):
    x = tiles_for_fp16_pack()
    c = copy_a(probe, monkeypatch, x, b_fmt="Float16", c_fmt="Float16", unpack_to_dest=True)
    want = fp16_from_bf16_packer(x)
    np.testing.assert_array_equal(c.numpy().view(np.uint16), want.view(np.uint16))
    # 8 significant bits: a real loss against fp16's own rounding
    assert np.abs(c.numpy().astype(np.float64) - x.astype(np.float16).astype(np.float64)).max() > 0


def test_fp16_output_from_a_16_bit_dst_is_fp16(probe, monkeypatch):
    """Without fp32 accumulation a Float16 CB's data sits in DST as FP16 and packs unchanged."""
    x = tiles_for_fp16_pack().astype(np.float16)
    c = copy_a(probe, monkeypatch, x.astype(np.float32), a_fmt="Float16", b_fmt="Float16", c_fmt="Float16",
               fp32=False)
    np.testing.assert_array_equal(c.numpy().view(np.uint16), x.view(np.uint16))


def fp16_src(x) -> np.ndarray:
    """FP32 -> FP16 into SrcA/SrcB: 10 mantissa bits kept by truncation (as FP32 -> TF32 / BF16 truncate), values
    below FP16's normal range read as 0 by the FPU (FloatBitPatterns.md); tested inside the FP16 range."""
    t = N.from_bits(N.bits(x) & np.uint32(0xFFFFE000)).astype(np.float64)
    t[np.abs(t) < 2.0 ** -14] = 0.0
    return t.astype(np.float32)


def test_fp32_cb_reaches_src_as_fp16_beside_a_float16_cb(probe, monkeypatch):
    g = np.random.default_rng(11)
    x = (g.standard_normal((32, 32)) * 50).astype(np.float32)
    x[0, 0] = 2.0 ** -16                         # below FP16's normal range: 0 in SrcA
    fp16 = copy_a(probe, monkeypatch, x, b_fmt="Float16").numpy()
    np.testing.assert_array_equal(fp16, fp16_src(x))
    tf32 = copy_a(probe, monkeypatch, x, b_fmt="Float16_b").numpy()     # no Float16 CB: TF32
    np.testing.assert_array_equal(tf32, N.tf32(x))
    assert not np.array_equal(fp16, tf32)
    exact = copy_a(probe, monkeypatch, x, b_fmt="Float16", unpack_to_dest=True).numpy()   # unpack-to-DEST: exact
    np.testing.assert_array_equal(exact, x)


def fp16_cast_kernel(M=64, N=64):
    """float32 in, float32 fragment, float16 out: the fp16 pack of an fp32-accumulating kernel."""
    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // 32, M // 32, threads=128) as (bx, by):
            a = T.alloc_fragment((32, 32), "float32")
            c = T.alloc_fragment((32, 32), "float16")
            T.copy(A[by * 32, bx * 32], a)
            for i, j in T.Parallel(32, 32):
                c[i, j] = a[i, j] * 1.0
            T.copy(c, C[by * 32, bx * 32])

    return k


def fp16_update_kernel(M=64, N=64):
    """C += A in float16 with a float32 fragment: C is read and written, so its pages stay Float16."""
    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // 32, M // 32, threads=128) as (bx, by):
            a = T.alloc_fragment((32, 32), "float32")
            c_in = T.alloc_shared((32, 32), "float16")
            c = T.alloc_fragment((32, 32), "float16")
            T.copy(A[by * 32, bx * 32], a)
            T.copy(C[by * 32, bx * 32], c_in)
            for i, j in T.Parallel(32, 32):
                c[i, j] = a[i, j] + c_in[i, j]
            T.copy(c, C[by * 32, bx * 32])

    return k


def test_fp16_result_gets_float32_pages_the_host_rounds():
    """A float16 tensor the kernel only writes, from an fp32 DST: its CB and pages are Float32 and the host rounds
    them to float16, nearest-even (torch's ``.half()``), where the packer would keep 8 significant bits."""
    torch.manual_seed(5)
    a, c = torch.randn(64, 64) * 8, torch.empty(64, 64, dtype=torch.float16)
    kernel = tilelang.compile(fp16_cast_kernel(), target="tt")
    kernel(a, c)
    assert kernel.plan["precision"]["float16_results"] == ["C"]
    assert "float16_pack" not in kernel.plan["precision"]
    assert {b["name"]: b["format"] for b in kernel.plan["buffers"]} == {"A": "Float32", "C": "Float32"}
    assert {cb["format"] for cb in kernel.plan["cbs"]} == {"Float32"}
    assert torch.equal(c, a.half())
    assert not torch.equal(c, torch.from_numpy(fp16_from_bf16_packer(a.numpy())))


def test_fp16_tensor_updated_in_place_is_packed_through_bf16_and_reported():
    """A float16 tensor the kernel also reads keeps its Float16 pages: the 0.81 packer rounds the fp32 DST to bf16
    (8 significant bits, ties away) and widens it; tt-sim does exactly that, and the plan and a warning say so."""
    torch.manual_seed(5)
    a, c = torch.randn(64, 64) * 8, torch.zeros(64, 64, dtype=torch.float16)
    kernel, warned = _compile_recording(fp16_update_kernel(), "tt")
    kernel(a, c)
    assert kernel.plan["precision"].get("float16_pack") == "bf16"
    assert "float16_results" not in kernel.plan["precision"]
    assert any("packed through bfloat16" in w for w in warned)
    want = fp16_from_bf16_packer(a.numpy())
    np.testing.assert_array_equal(c.numpy().view(np.uint16), want.view(np.uint16))


def fp16_transposed_gemm(M=64, N=64, K=64):
    """T.gemm(transpose_A=True) of fp16 blocks into a float32 output: A is transposed on chip before the matmul."""
    @T.prim_func
    def k(A: T.Tensor((K, M), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // 32, M // 32, threads=128) as (bx, by):
            a = T.alloc_shared((32, 32), "float16")
            b = T.alloc_shared((32, 32), "float16")
            acc = T.alloc_fragment((32, 32), "float32")
            T.clear(acc)
            for kk in T.serial(K // 32):
                T.copy(A[kk * 32, by * 32], a)
                T.copy(B[kk * 32, bx * 32], b)
                T.gemm(a, b, acc, transpose_A=True)
            T.copy(acc, C[by * 32, bx * 32])

    return k


def test_fp16_transpose_keeps_fp16_bits():
    """The on-chip transpose of an fp16 block passes through DST: packed into a Float16 scratch with fp32
    accumulation it would keep bf16's 8 significant bits (3 of fp16's 11 lost), so the scratch is Float32. A has
    11 significant bits (in0, SrcB: all multiplied at HiFi4), B small integers (in1, SrcA: 10 of 11 bits
    multiplied, TT_KERNEL_PATTERNS 5b): every product and sum is exact in fp32, so C equals the float64 product."""
    torch.manual_seed(9)
    a = (1 + torch.randint(0, 1024, (64, 64)) / 1024).to(torch.float16)   # 11 significant bits
    a = a * torch.where(torch.rand(64, 64) < 0.5, -1, 1).to(torch.float16)
    b = torch.randint(-4, 5, (64, 64)).to(torch.float16)
    c = torch.empty(64, 64)
    kernel = tilelang.compile(fp16_transposed_gemm(), target={"kind": "tt", "math_fidelity": "HiFi4"})
    kernel(a, b, c)
    np.testing.assert_array_equal(c.numpy(), (a.double().T @ b.double()).float().numpy())


# ---- what a T.gemm multiplies, warned (TTPrecisionWarning) --------------------------------------------------------
def _compile_recording(func, target):
    import warnings

    from tilelang_tt import TTPrecisionWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = tilelang.compile(func, target=target)
    return kernel, [str(w.message) for w in caught if issubclass(w.category, TTPrecisionWarning)]


@pytest.mark.parametrize("target,bits,warned", [("tt", 7, True), ("tt -math_fidelity=HiFi2", 7, False),
                                                ("tt -math_fidelity=HiFi4", 8, False)])
def test_gemm_operand_bits_are_reported_warned_and_what_tt_sim_multiplies(target, bits, warned):
    """A bf16 T.gemm at the default HiFi2 multiplies 7 of in0's 8 significant bits (SrcB's first phase holds 1 + 6):
    the plan says so, a TTPrecisionWarning names it and the fidelity that multiplies all 8, and tt-sim computes
    exactly that: (1 + 2^-7) * 1 comes out as 1. A fidelity the user chose is not warned about."""
    from examples import kernels as K

    kernel, warnings = _compile_recording(K.design_gemm(32, 32, 32), target)
    assert kernel.plan["precision"]["matmul_operands"] == {"in0": {"format": "Float16_b", "bits": bits, "of": 8},
                                                          "in1": {"format": "Float16_b", "bits": 8, "of": 8}}
    assert len(warnings) == int(warned)
    if warned:
        assert ("T.gemm multiplies 7 of the 8 significant bits of its bfloat16 in0 at HiFi2: relative error up to "
                '2^-6 per product; math_fidelity="HiFi4" (T.annotate_tt_compute) multiplies all 8') in warnings[0]
    x = 1 + 2.0 ** -7
    a = (torch.eye(32) * x).bfloat16()
    c = torch.empty(32, 32, dtype=torch.bfloat16)
    kernel(a, torch.eye(32).bfloat16(), c)
    assert c[0, 0].item() == (x if bits == 8 else 1.0)


def test_fp16_gemm_in1_is_split_so_every_bit_is_multiplied():
    """float16 in1 reaches SrcA, whose multiplier takes 1 + 9 bits at any fidelity: the last of fp16's 11 is in no
    phase (TT_KERNEL_PATTERNS.md 5b). Float16OperandsTT multiplies in1 as a bfloat16 high part plus a low part
    (two matmuls): (1 + 2^-10) survives, the plan says "split", nothing is warned. allow_fp16_reduced=True accepts
    SrcA's 10 bits: one matmul, (1 + 2^-10) comes out as 1 while (1 + 2^-9) survives; the plan reports it and the
    user who chose it is not warned."""
    kernel, warnings = _compile_recording(fp16_transposed_gemm(32, 32, 32), "tt")
    assert kernel.plan["precision"]["float16_in1"] == "split"
    assert kernel.plan["precision"]["matmul_operands"]["in1"] == {"format": "Float16_b", "bits": 8, "of": 8}
    assert not warnings
    reduced, warned = _compile_recording(fp16_transposed_gemm(32, 32, 32), "tt -allow_fp16_reduced=true")
    assert reduced.plan["precision"]["matmul_operands"]["in1"] == {"format": "Float16", "bits": 10, "of": 11}
    assert reduced.plan["precision"]["allow_fp16_reduced"] is True and "float16_in1" not in reduced.plan["precision"]
    assert not warned
    # a fidelity the user lowers is not split (it drops bits of both operands), and in1's loss is still warned
    _, lowered = _compile_recording(fp16_transposed_gemm(32, 32, 32), "tt -math_fidelity=HiFi2")
    assert len(lowered) == 1 and ("T.gemm multiplies 10 of the 11 significant bits of its float16 in1 at HiFi2" in
                                  lowered[0]) and 'at math_fidelity="HiFi4" Float16OperandsTT splits in1' in lowered[0]
    for k, x, want in ((kernel, 1 + 2.0 ** -10, 1 + 2.0 ** -10), (reduced, 1 + 2.0 ** -10, 1.0),
                       (reduced, 1 + 2.0 ** -9, 1 + 2.0 ** -9)):
        c = torch.empty(32, 32)
        k(torch.eye(32).half(), (torch.eye(32) * x).half(), c)
        assert c[0, 0].item() == want


def fp16_gemm_fp32_out(M, N, K, reduced=None):
    """TileLang's GEMM example with a float32 output (no float16 packing): float16 A and B, float32 accumulator."""
    @T.prim_func
    def k(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // 64, M // 64, threads=128) as (bx, by):
            if reduced is not None:
                T.annotate_tt_compute(allow_fp16_reduced=reduced)
            a = T.alloc_shared((64, 32), "float16")
            b = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for kk in T.Pipelined(K // 32, num_stages=2):
                T.copy(A[by * 64, kk * 32], a)
                T.copy(B[kk * 32, bx * 64], b)
                T.gemm(a, b, acc)
            T.copy(acc, C[by * 64, bx * 64])

    return k


def test_fp16_gemm_products_are_exact_sums_fp32():
    """Random float16 operands, K = 256: split, each product is exact and only the fp32 DST's sums round, so the
    error against float64 stays below K * 2^-24 of sum |a||b| (observed ~1e-7 of it); with the 10-bit in1 accepted
    (annotation) it is ~2^-11 of it, which the same bound catches."""
    torch.manual_seed(5)
    a, b = torch.randn(128, 256).half(), torch.randn(256, 128).half()
    exact = a.double() @ b.double()
    scale = a.double().abs() @ b.double().abs()
    errors = {}
    for reduced in (None, True):
        c = torch.empty(128, 128)
        tilelang.compile(fp16_gemm_fp32_out(128, 128, 256, reduced), target="tt")(a, b, c)
        errors[reduced] = ((c.double() - exact).abs() / scale).max().item()
    assert errors[None] < 256 * 2.0 ** -24, errors
    assert errors[True] > 2.0 ** -13, errors


def test_float32_gemm_is_warned_exact_kernels_are_not():
    """TileLang's fp16 GEMM example (fp16 in and out, fp32 accumulation) loses nothing: in1 split, C in Float32 pages; a float32
    T.gemm of its TF32 operands unless allow_tf32 accepts them; a bf16 softmax (no T.gemm, no float16) of nothing."""
    from examples import kernels as K

    # shapes no other test here compiles: TileLang's in-process kernel cache returns a kernel it built before as it is
    kernel, warnings = _compile_recording(K.tilelang_example_gemm(128, 128, 96), "tt")
    assert not warnings, warnings     # in1 is split: its bits are kept; C's float16 results get Float32 pages
    assert kernel.plan["precision"]["float16_results"] == ["C"]
    _, warnings = _compile_recording(K.design_gemm(96, 64, 64, dtype="float32"), "tt")
    assert len(warnings) == 1 and "significant bits of its float32 in0 (the FPU's SrcA/SrcB hold TF32)" in warnings[0]
    assert not _compile_recording(K.design_gemm(96, 64, 64, dtype="float32"), "tt -allow_tf32=true")[1]
    assert not _compile_recording(K.softmax(96, 64), "tt")[1]


def fp16_fragment_gemm(first=(2.0, 0.0), second=(0.5, 0.0)):
    """A float16 fragment updated in place (T.Parallel: ``f = f * m + c``, twice) and multiplied (T.gemm in0) in a
    kernel with a float32 accumulator: TileLang's Mamba chunk scan keeps ``cb_local`` so."""
    (m1, c1), (m2, c2) = first, second

    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            a_s = T.alloc_shared((32, 32), "float16")
            b_s = T.alloc_shared((32, 32), "float16")
            f = T.alloc_fragment((32, 32), "float16")
            acc = T.alloc_fragment((32, 32), "float32")
            T.clear(acc)
            for kk in T.serial(2):
                T.copy(A[by * 32, kk * 32], a_s)
                T.copy(a_s, f)
                for i, j in T.Parallel(32, 32):
                    f[i, j] = f[i, j] * m1 + c1
                for i, j in T.Parallel(32, 32):
                    f[i, j] = f[i, j] * m2 + c2
                T.copy(B[kk * 32, bx * 32], b_s)
                T.gemm(f, b_s, acc)
            T.copy(acc, C[by * 32, bx * 32])

    return k


def test_fp16_fragment_keeps_fp16_bits_through_updates():
    """Each update of ``f`` packs an fp32 DST: into a Float16 CB it would keep bf16's 8 significant bits (0.81's
    pack configuration, TT_KERNEL_PATTERNS 5b), so the fragment is held as Float32 and the matmul's unpacker reads
    it as FP16. A has 11 significant bits (in0: all multiplied at HiFi4), B small integers (in1: exact in SrcA's 10
    bits, split by Float16OperandsTT anyway): C equals the float64 product. The updates (x 2, x 0.5) keep float16
    values, so reading them truncated to FP16 loses nothing here; in general it is one float16 ulp, which is what
    the one warning says (test_fp16_fragment_read_truncated_is_warned)."""
    torch.manual_seed(11)
    a = (1 + torch.randint(0, 1024, (64, 64)) / 1024).to(torch.float16)   # 11 significant bits
    a = a * torch.where(torch.rand(64, 64) < 0.5, -1, 1).to(torch.float16)
    b = torch.randint(-4, 5, (64, 64)).to(torch.float16)
    c = torch.empty(64, 64)
    kernel, warned = _compile_recording(fp16_fragment_gemm(), "tt")
    kernel(a, b, c)
    np.testing.assert_array_equal(c.numpy(), (a.double() @ b.double()).float().numpy())
    f = next(cb for cb in kernel.plan["cbs"] if cb["name"] == "f")
    assert f["format"] == "Float32"          # the float16 fragment, held as Float32
    assert len(warned) == 1 and warned[0].count("\n  - ") == 2 and "\n  - a matmul (T.gemm, or the selection " \
        "matmul moving stride-2 columns) reads its in0, float16 values compute wrote and holds as float32, " \
        "truncated to float16" in warned[0]    # in1 split: nothing else
    assert "\n  - float16 tile buffers f hold the float32 values compute wrote, unrounded" in warned[0]    # updates
    assert "float16_pack" not in kernel.plan["precision"]


def test_fp16_fragment_read_truncated_is_warned():
    """``f = f * 0.3`` leaves fp32 values a GPU store rounds to the nearest float16; held as Float32 they reach SrcB
    truncated to FP16 (tt-sim's unpacker): C equals the float64 product of A * 0.3 truncated to float16, is within
    one float16 ulp per element of the rounded model, and the warning says so (allow_fp16_reduced accepts it)."""
    torch.manual_seed(13)
    a = (1 + torch.randint(0, 1024, (64, 64)) / 1024).to(torch.float16)
    b = torch.randint(-4, 5, (64, 64)).to(torch.float16)
    c = torch.empty(64, 64)
    kernel, warned = _compile_recording(fp16_fragment_gemm((0.3, 0.0), (1.0, 0.0)), "tt")
    kernel(a, b, c)
    scaled = a.float() * torch.tensor(0.3, dtype=torch.float32)      # the fp32 product compute holds
    truncated = (scaled.view(torch.int32) & ~((1 << 13) - 1)).view(torch.float32)    # 11 significant bits kept
    np.testing.assert_array_equal(c.numpy(), (truncated.double() @ b.double()).float().numpy())
    rounded = scaled.half().double()
    assert ((c.double() - rounded @ b.double()).abs() <=
            2.0 ** -10 * rounded.abs() @ b.double().abs() + 1e-6).all()
    assert (truncated.double() != rounded).any()          # the data does tell truncation from rounding
    assert [w.split("\n  - ")[1:] for w in warned] == [[
        "a matmul (T.gemm, or the selection matmul moving stride-2 columns) reads its in0, float16 values compute "
        "wrote and holds as float32, truncated to float16 (SrcA/SrcB hold FP16) where a GPU rounds each store to the "
        "nearest: one float16 ulp at most (relative 2^-10) per element; allow_fp16_reduced=True "
        "(T.annotate_tt_compute) accepts this",
        "float16 tile buffers f hold the float32 values compute wrote, unrounded (0.81 has no float16 rounding in an "
        "fp32 DST): where a GPU rounds each store to float16 (relative 2^-11; beyond 65504 to inf, below 2^-24 to "
        "zero), these keep float32's precision and range; declare them float32 to say so, or bfloat16 to round; "
        "allow_fp16_reduced=True (T.annotate_tt_compute) accepts this"]]
    # the CB the matmul reads: Float16OperandsTT's copy of f for the matmul (its updates read f from DST)
    assert kernel.plan["precision"]["matmul_operands"]["in0"]["truncated"] == "f_mm"
    _, accepted = _compile_recording(fp16_fragment_gemm((0.3, 0.0), (1.0, 0.0)),
                                     {"kind": "tt", "allow_fp16_reduced": True})
    assert not accepted


def test_fp16_fragment_updated_in_place_is_multiplied_from_a_copy():
    """``f`` is nudged by +2^-12, then -2^-12 (exact in fp32, below float16's last bit for |a| >= 1). It is read by
    its updates (copy_tile) and by the matmul (SrcB): a CB the FPU reads cannot unpack to DST, so each update would
    read ``f`` narrowed to FP16 by truncation and the nudges would not cancel (a - 2^-12 reaches the matmul as
    a - 2^-10). Float16OperandsTT gives the matmul a copy (``f_mm``): ``f`` unpacks to DST (exact
    fp32), the updates cancel and C equals the float64 product of A (11 significant bits) and B (small integers)."""
    torch.manual_seed(12)
    a = (1 + torch.randint(0, 1024, (64, 64)) / 1024).to(torch.float16)   # 11 significant bits, |a| in [1, 2)
    a = a * torch.where(torch.rand(64, 64) < 0.5, -1, 1).to(torch.float16)
    b = torch.randint(-4, 5, (64, 64)).to(torch.float16)
    c = torch.empty(64, 64)
    kernel = tilelang.compile(fp16_fragment_gemm((1.0, 2.0 ** -12), (1.0, -2.0 ** -12)), target="tt")
    kernel(a, b, c)
    np.testing.assert_array_equal(c.numpy(), (a.double() @ b.double()).float().numpy())
    cbs = {cb["name"]: cb for cb in kernel.plan["cbs"]}
    assert cbs["f"]["index"] in kernel.plan["kernels"]["compute"]["unpack_to_dest"]
    assert cbs["f_mm"]["index"] not in kernel.plan["kernels"]["compute"]["unpack_to_dest"]


def test_fp16_in1_split_that_does_not_fit_l1_is_left_unsplit_and_warned():
    """The split adds two CBs of in1's block: a 256x256x384 block GEMM fits L1 unsplit (1310720 bytes) but not split
    (1703936 > 1393312): it is compiled as written, the plan says why and the warning names the reason and the fix."""
    from examples import kernels as K

    kernel, warnings = _compile_recording(K.tilelang_example_gemm(256, 256, 768, 256, 256, 384, num_stages=2),
                                          "tt -multicast=false")
    precision = kernel.plan["precision"]
    assert precision["float16_in1"] == "unsplit"
    assert precision["float16_in1_reason"].startswith("tile buffers: circular buffers need 1703936 bytes of L1 per core")
    assert precision["matmul_operands"]["in1"] == {"format": "Float16", "bits": 10, "of": 11}
    assert "splitting in1 into two matmuls does not fit (tile buffers: circular buffers need 1703936 bytes" in warnings[0]
    assert "use smaller blocks for every bit, or allow_fp16_reduced=True" in warnings[0]


def test_float32_gemm_beside_float16_data_warns_of_fp16_range():
    """A float32 T.gemm in a kernel with a float16 input reads its operands as FP16 (one SrcA/SrcB format per
    kernel): B ~ 1e-4 * randn loses most of its values below 2^-14 (90% of the result off); the warning says so,
    where it used to name only the lost mantissa bits."""
    from tilelang_tt import TTPrecisionWarning

    M, N, K = 32, 32, 64

    @T.prim_func
    def k(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), bias: T.Tensor((N,), "float16"),
          C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((M, K), "float32")
            b = T.alloc_shared((K, N), "float32")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.clear(acc)
            T.gemm(a, b, acc)
            for i, j in T.Parallel(M, N):
                acc[i, j] = acc[i, j] * 1e4 + bias[j]
            T.copy(acc, C)

    with pytest.warns(TTPrecisionWarning, match=r"reads its float32 in0 as FP16 .* below 2\^-14 flushed to zero"):
        kernel = tilelang.compile(k, target="tt")
    assert kernel.plan["precision"]["float32_operands"] == "fp16"
