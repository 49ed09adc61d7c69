"""Dequantize GEMMs and block-float weights (examples/dequant_kernels.py) on tt-sim, against torch.

Numeric model (TT_KERNEL_PATTERNS.md 4.4, 5.2): matmul_tiles puts in1 (weights) in SrcA and in0 (activations) in
SrcB. At HiFi2 (phases 0-1) SrcB keeps the top 7 significant bits of each activation (truncated) and SrcA's weights
are exact (bf16 / Bfp8_b / Bfp4_b: at most 8 significant bits, SrcA hi+lo = 10); LoFi keeps 5 weight bits, so Bfp4_b
weights (3 bits) are exact at LoFi. DST accumulates in fp32 and the packer rounds to bf16. The dequant multiply
``int8 * scale[vector]`` runs on the FPU with the scale broadcast from SrcB: 7 bits of the scale, exact product,
rounded to bf16 when packed. Tolerances:
* against that model written here in torch (independent of the emulator): half a bf16 ulp of the result
  (the packer's rounding) plus 2^-16 of sum|a||w| (fp32 accumulation order);
* against torch's fp32 matmul of the dequantized weights: relative Frobenius error <= 2^-6 (activation
  truncation <= 2^-6 per product, scale truncation <= 2^-6, bf16 roundings 2^-8 each; Frobenius, not max);
* block-float weights against the *unquantized* bf16 weights: the format's bound |q - x| <= 2^-(W-1) max|block|
  (docs/formats.md) on top, i.e. <= 2^-5 for Bfp8_b, <= 2^-2 + 2^-6 for Bfp4_b.
The quantized weights are computed by the scalar reference encoder of test_blockfloat.py (written from the
format description), not by blockfloat.py.
"""

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tilelang
import tilelang_tt  # noqa: F401
from tilelang_tt.errors import TTUnsupportedError

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from examples import dequant_kernels as D  # noqa: E402
from tests.tt.helpers import bf16_away  # noqa: E402
from tests.tt.test_blockfloat import W_OF, ref_decode_datum, ref_encode_block  # noqa: E402

M, N, K = 128, 128, 256   # a 2x2 block grid (a 2x1 one hits an unused kLatticeRows in host.cpp.j2)


def ref_quantize(mat: torch.Tensor, fmt: str, rounding: str = "host") -> torch.Tensor:
    """Host rounding (``rounding="device"``: the packer's) of a row-major matrix to Bfp, decoded as the host does:
    every 16 consecutive elements of a row share an exponent."""
    x = mat.float().numpy()
    bits = x.view(np.uint32)
    out = np.empty_like(bits)
    w = W_OF[fmt]
    for r in range(x.shape[0]):
        for c0 in range(0, x.shape[1], 16):
            shared, codes = ref_encode_block([int(b) for b in bits[r, c0:c0 + 16]], w, rounding)
            out[r, c0:c0 + 16] = [ref_decode_datum(code, shared, w, "host") for code in codes]
    return torch.from_numpy(out.view(np.float32).copy())


def trunc(x: torch.Tensor, keep: int) -> torch.Tensor:
    """Keep ``keep`` significant bits of each float (SrcA/SrcB fidelity masks), truncating."""
    u = x.float().contiguous().view(torch.int32)
    return (u & ~((1 << (24 - keep)) - 1)).view(torch.float32)


def check_model(c, a, w, act_bits=7, w_bits=8):
    model = trunc(a, act_bits) @ trunc(w, w_bits)
    scale = (a.float().abs() @ w.float().abs())
    ulp = torch.ldexp(torch.ones_like(model), torch.frexp(model)[1] - 8)   # bf16 ulp of |model|
    err = (c.float() - model).abs()
    bound = ulp / 2 + scale * 2 ** -16
    assert bool((err <= bound).all()), f"max excess {(err - bound).max().item()}"
    return err.max().item()


def rel_fro(c, ref):
    return ((c.float() - ref).norm() / ref.norm()).item()


@pytest.fixture(scope="module")
def act():
    torch.manual_seed(0)
    return torch.randn(M, K, dtype=torch.bfloat16)


@pytest.mark.parametrize("fmt,fidelity", [("Bfp8_b", None), ("Bfp4_b", None), ("Bfp4_b", "LoFi"),
                                          ("Bfp8_b", "LoFi")])
def test_bfp_weight_gemm(act, fmt, fidelity):
    torch.manual_seed(1)
    b = torch.randn(K, N, dtype=torch.bfloat16)
    kernel = tilelang.compile(D.bfp_gemm(M, N, K, fmt, math_fidelity=fidelity), target="tt")
    plan = kernel.plan
    assert plan["math_fidelity"] == (fidelity or "HiFi2")      # ttnn's default for bf16 x bfp: HiFi2
    bufs = {x["name"]: x for x in plan["buffers"]}
    from tilelang_tt.device import TILE_FORMATS
    assert bufs["B"]["format"] == fmt and bufs["B"]["page_size"] == TILE_FORMATS[fmt].tile_bytes
    assert bufs["B"]["bytes"] == (K // 32) * (N // 32) * TILE_FORMATS[fmt].tile_bytes
    cb = {x["name"]: x for x in plan["cbs"]}["B_shared"]
    assert cb["format"] == fmt and cb["page_size"] == TILE_FORMATS[fmt].tile_bytes
    assert f"tt::DataFormat::{fmt}" in (Path(kernel.artifact_dir) / "host.cpp").read_text()
    c = torch.empty(M, N, dtype=torch.bfloat16)
    kernel(act, b, c)
    bq = ref_quantize(b, fmt)
    w_bits = 5 if fidelity == "LoFi" else 8
    check_model(c, act, bq, w_bits=w_bits)
    assert rel_fro(c, act.float() @ bq) <= (2 ** -6 if w_bits == 8 or fmt == "Bfp4_b" else 2 ** -4)
    fmt_bound = 2 ** -(W_OF[fmt] - 1)
    assert rel_fro(c, act.float() @ b.float()) <= fmt_bound + 2 ** -6


def test_bfp4_lofi_equals_hifi2(act):
    # Bfp4_b weights have 3 significant bits: SrcA's LoFi half already holds them, so HiFi2's second phase adds 0.
    torch.manual_seed(2)
    b = torch.randn(K, N, dtype=torch.bfloat16)
    outs = []
    for fid in ("LoFi", "HiFi2"):
        c = torch.empty(M, N, dtype=torch.bfloat16)
        tilelang.compile(D.bfp_gemm(M, N, K, "Bfp4_b", math_fidelity=fid), target="tt")(act, b, c)
        outs.append(c)
    assert torch.equal(outs[0], outs[1])


def test_dequant_int8_per_channel(act):
    torch.manual_seed(3)
    b = torch.randint(-127, 128, (N, K), dtype=torch.int8)
    s = (torch.rand(N) * 0.02 + 0.001).to(torch.bfloat16)
    kernel = tilelang.compile(D.dequant_gemm_int8(M, N, K), target="tt")
    bufs = {x["name"]: x for x in kernel.plan["buffers"]}
    assert (bufs["B"]["dtype"], bufs["B"]["format"]) == ("int8", "Bfp8_b")
    c = torch.empty(M, N, dtype=torch.bfloat16)
    kernel(act, b, s, c)
    w_model = bf16_away(b.float() * trunc(s, 7)[:, None])
    check_model(c, act, w_model.T)
    ref = act.float() @ (b.to(torch.bfloat16) * s[:, None]).float().T
    assert rel_fro(c, ref) <= 2 ** -6


@pytest.mark.parametrize("g", [64, 128])
def test_dequant_int8_per_group(act, g):
    # TileLang's plain Scale[K // g, N]: the host stores row r of the scales as row 0 of its own tile (row_pad)
    torch.manual_seed(4)
    b = torch.randint(-127, 128, (K, N), dtype=torch.int8)
    s = (torch.rand(K // g, N) * 0.02 + 0.001).to(torch.bfloat16)
    c = torch.empty(M, N, dtype=torch.bfloat16)
    kernel = tilelang.compile(D.dequant_gemm_int8_grouped(M, N, K, group_size=g), target="tt")
    scale = {x["name"]: x for x in kernel.plan["buffers"]}["Scale"]
    assert scale["shape"] == [K // g, N] and scale["view"] == [K // g * 32, N]
    assert scale["row_pad"] == {"outer": K // g, "rows": 1, "padded_rows": 32}
    kernel(act, b, s, c)
    s_full = s.repeat_interleave(g, 0)
    check_model(c, act, bf16_away(b.float() * trunc(s_full, 7)))
    ref = act.float() @ (b.to(torch.bfloat16) * s_full).float()
    assert rel_fro(c, ref) <= 2 ** -6


def _int8_grouped_kernel(scale_rows, scale_row):
    """int8 B[K, N] times scales S[scale_rows, N] read at row ``scale_row(k, i)`` in 64x64x64 blocks."""
    import tilelang.language as T

    @T.prim_func
    def f(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((K, N), "int8"), S: T.Tensor((scale_rows, N), "bfloat16"),
          C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(N // 64, M // 64) as (bx, by):
            A_s = T.alloc_shared((64, 64), "bfloat16")
            B_s = T.alloc_shared((64, 64), "int8")
            B_d = T.alloc_shared((64, 64), "bfloat16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.clear(C_l)
            for k in T.serial(K // 64):
                T.copy(A[by * 64, k * 64], A_s)
                T.copy(B[k * 64, bx * 64], B_s)
                for i, j in T.Parallel(64, 64):
                    B_d[i, j] = B_s[i, j].astype("bfloat16") * S[scale_row(k, i), bx * 64 + j]
                T.gemm(A_s, B_d, C_l)
            T.copy(C_l, C[by * 64, bx * 64])
    return f


def test_dequant_int8_per_group_row_per_tile_form(act):
    # the form written for TT before: Scale[K // g * 32, N], group r's scales at row 32 r (rows provably aligned)
    g = 128
    f = _int8_grouped_kernel(K // g * 32, lambda k, i: k * 64 // g * 32)
    torch.manual_seed(4)
    b = torch.randint(-127, 128, (K, N), dtype=torch.int8)
    s = (torch.rand(K // g, N) * 0.02 + 0.001).to(torch.bfloat16)
    sp = torch.zeros(K // g * 32, N, dtype=torch.bfloat16)
    sp[::32] = s
    kernel = tilelang.compile(f, target="tt")
    assert "row_pad" not in {x["name"]: x for x in kernel.plan["buffers"]}["S"]
    c = torch.empty(M, N, dtype=torch.bfloat16)
    kernel(act, b, sp, c)
    check_model(c, act, bf16_away(b.float() * trunc(s.repeat_interleave(g, 0), 7)))


def test_int8_weights_hold_every_value_in_range():
    # int8 stored as Bfp8_b: every integer of [-127, 127] survives, whatever its row's maximum
    torch.manual_seed(5)
    b = torch.randint(-127, 128, (64, 64), dtype=torch.int8)
    b[:, :16] = torch.randint(-3, 4, (64, 16), dtype=torch.int8)     # rows with small maxima
    from tilelang_tt import emulator
    raw = emulator.to_block_float(b, {"format": "Bfp8_b"}, (64, 64), (64, 64))
    rows = []
    for t in range(raw.size // 1088):   # decode with the reference decoder: tile t, datum k
        tile = raw[t * 1088:(t + 1) * 1088]
        rows.append([ref_decode_datum(int(tile[64 + k]), int(tile[k // 16]), 7, "host") for k in range(1024)])
    vals = np.array(rows, dtype=np.uint32).view(np.float32)
    from tilelang_tt.blockfloat import untilize
    assert np.array_equal(untilize(vals, (64, 64)), b.numpy().astype(np.float32))


def test_int8_weight_minus_128_is_refused(act):
    # Bfp8_b holds [-127, 127] exactly; -128 would need the row's exponent one higher (odd neighbours would round)
    b = torch.randint(-127, 128, (N, K), dtype=torch.int8)
    b[5, 7] = -128
    s = torch.ones(N, dtype=torch.bfloat16)
    kernel = tilelang.compile(D.dequant_gemm_int8(M, N, K), target="tt")
    from tilelang_tt.emulator import TTSimError
    with pytest.raises(TTSimError, match=r"B: integer weights stored as Bfp8_b must lie in \[-127, 127\] \(a sign "
                                         r"and 7 magnitude bits\); got -128\.\.127") as err:
        kernel(act, b, s, torch.empty(M, N, dtype=torch.bfloat16))
    assert "uint8 weights with a zero point" in str(err.value)


def test_int8_result_is_refused():
    import tilelang.language as T

    @T.prim_func
    def f(A: T.Tensor((64, 64), "int8"), C: T.Tensor((64, 64), "int8")):
        with T.Kernel(2, 2) as (bx, by):
            s = T.alloc_shared((32, 32), "int8")
            T.copy(A[by * 32, bx * 32], s)
            T.copy(s, C[by * 32, bx * 32])
    with pytest.raises(TTUnsupportedError, match=r"dtype 'int8' has no supported TT data format; int8 tensors are "
                                                 r"read-only weights"):
        tilelang.compile(f, target="tt")


# ---- packed int4 ---------------------------------------------------------------------------------------------
def ref_unpack_int4(packed: torch.Tensor, source_format: str, axis: int) -> torch.Tensor:
    """Two int4 per byte, low nibble first (element x = byte x // 2, nibble x % 2), as tilelang.quantize defines
    them: "uint" 0..15; "int" / "int_reinterpret" two's complement -8..7; "uint_zp" 0..15 minus 8."""
    q = packed.view(torch.uint8).to(torch.int16)
    w = torch.stack([q & 15, q >> 4], dim=axis + 1).flatten(axis, axis + 1)
    if source_format in ("int", "int_reinterpret"):
        w = torch.where(w >= 8, w - 16, w)
    if source_format == "uint_zp":
        w = w - 8
    return w.float()


FORMS = [("uint", "uint8"), ("uint", "int8"), ("int", "int8"), ("int", "uint8"), ("int_reinterpret", "uint8"),
         ("uint_zp", "uint8")]


@pytest.mark.parametrize("source_format,storage", FORMS)
def test_dequant_int4_table(source_format, storage):
    # the plan's host table is the kernel's unpack expression for every byte: compare it with the definition
    kernel = tilelang.compile(D.dequant_gemm_int4(M, N, K, source_format, True, storage_dtype=storage),
                              target="tt -compile_only=true")
    b = {x["name"]: x for x in kernel.plan["buffers"]}["B"]
    assert (b["dtype"], b["format"], b["shape"]) == ("int8", "Bfp8_b", [N, K])
    unpack = b["host_unpack"]
    assert (unpack["shape"], unpack["dtype"], unpack["axis"], unpack["factor"]) == ([N, K // 2], storage, 1, 2)
    every = ref_unpack_int4(torch.arange(256, dtype=torch.int16).to(torch.uint8)[None, :], source_format, 1)[0]
    assert torch.equal(torch.tensor(unpack["table"], dtype=torch.float32).T.flatten(), every)
    assert b["bytes"] == (N // 32) * (K // 32) * 1088        # DRAM holds Bfp8_b tiles of the unpacked weights
    from tilelang_tt import perf_model
    stored = perf_model.model_for_artifact(kernel.artifact_dir, kernel.plan)["block_float_dram"]["tensors"]
    assert {"tensor": "B", "format": "Bfp8_b", "bytes": b["bytes"], "packed_host_bytes": N * K // 2}.items() <= \
        stored[0].items()


@pytest.mark.parametrize("source_format,storage", FORMS)
def test_dequant_int4_per_channel(act, source_format, storage):
    torch.manual_seed(6)
    qb = torch.randint(0, 256, (N, K // 2), dtype=torch.uint8).view(getattr(torch, storage))
    s = (torch.rand(N) * 0.02 + 0.001).to(torch.bfloat16)
    kernel = tilelang.compile(D.dequant_gemm_int4(M, N, K, source_format, True, storage_dtype=storage), target="tt")
    c = torch.empty(M, N, dtype=torch.bfloat16)
    kernel(act, qb, s, c)
    w = ref_unpack_int4(qb, source_format, 1)
    check_model(c, act, bf16_away(w * trunc(s, 7)[:, None]).T)        # int4 values exact, scale as the FPU sees it
    assert rel_fro(c, act.float() @ (w * s.float()[:, None]).T) <= 2 ** -6


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_dequant_int4_unscaled(act, arch):
    # TileLang's example_dequant_gemv_fp16xint4 reference: B[:, j] = (qB[:, j // 2] >> (4 * (j % 2))) & 0xF
    torch.manual_seed(7)
    qb = torch.randint(0, 256, (N, K // 2), dtype=torch.uint8)
    kernel = tilelang.compile(D.dequant_gemm_int4(M, N, K, "uint"), target=f"tt -arch={arch}")
    c = torch.empty(M, N, dtype=torch.bfloat16)
    kernel(act, qb, torch.ones(N, dtype=torch.bfloat16), c)
    w = torch.empty(N, K)
    for j in range(K):
        w[:, j] = ((qb[:, j // 2] >> (4 * (j % 2))) & 0xF).float()
    check_model(c, act, w.T)


@pytest.mark.parametrize("arch,g,source_format", [("wormhole_b0", 64, "uint_zp"), ("blackhole", 128, "int"),
                                                  ("wormhole_b0", 128, "uint"), ("blackhole", 64, "uint")])
def test_dequant_int4_per_group(act, arch, g, source_format):
    # (unpack(B) - Zeros[g, n]) * Scale[g, n]: "uint" with zero points 6..9, the signed forms with zeros 0
    torch.manual_seed(8)
    qb = torch.randint(0, 256, (K, N // 2), dtype=torch.uint8)
    s = (torch.rand(K // g, N) * 0.02 + 0.001).to(torch.bfloat16)
    z = torch.randint(6, 10, (K // g, N)) if source_format == "uint" else torch.zeros(K // g, N)
    z = z.to(torch.bfloat16)
    kernel = tilelang.compile(D.dequant_gemm_int4_grouped(M, N, K, source_format, group_size=g),
                              target=f"tt -arch={arch}")
    c = torch.empty(M, N, dtype=torch.bfloat16)
    kernel(act, qb, s, z, c)
    w = ref_unpack_int4(qb, source_format, 1) - z.float().repeat_interleave(g, 0)      # integers: exact
    s_full = s.repeat_interleave(g, 0)
    # the zero point is a row-broadcast subtract on the FPU (exact on integers); the scale then multiplies the
    # result in DST on the SFPU (mul_binary_tile: fp32 product of two bf16, exact), rounded to bf16 when packed
    check_model(c, act, bf16_away(w * s_full.float()))
    assert rel_fro(c, act.float() @ (w * s_full.float())) <= 2 ** -6


@pytest.mark.parametrize("arch,g,source_format", [("wormhole_b0", 64, "int"), ("blackhole", 128, "uint_zp")])
def test_dequant_int4_per_group_transposed(act, arch, g, source_format):
    # B[N, K // 2] with Scale[N, K // g] (TileLang's mxfp4 examples' indexing): a column broadcast, each scale
    # column stored at column 0 of its own tiles (col_pad)
    torch.manual_seed(10)
    qb = torch.randint(0, 256, (N, K // 2), dtype=torch.uint8)
    s = (torch.rand(N, K // g) * 0.02 + 0.001).to(torch.bfloat16)
    kernel = tilelang.compile(D.dequant_gemm_int4(M, N, K, source_format, True, group_size=g),
                              target=f"tt -arch={arch}")
    scale = {x["name"]: x for x in kernel.plan["buffers"]}["Scale"]
    assert (scale["shape"], scale["view"], scale["col_pad"]) == ([N, K // g], [N, K // g * 32],
                                                                 {"cols": 1, "padded_cols": 32})
    c = torch.empty(M, N, dtype=torch.bfloat16)
    kernel(act, qb, s, c)
    w, s_full = ref_unpack_int4(qb, source_format, 1), s.repeat_interleave(g, 1)
    check_model(c, act, bf16_away(w * trunc(s_full, 7)).T)
    assert rel_fro(c, act.float() @ (w * s_full.float()).T) <= 2 ** -6


def test_dequant_int4_read_from_the_tensor_in_the_parallel(act):
    # no shared copy: B[bx * 64 + i, (k * 64 + j) // 2] >> (4 * (j % 2)) in the T.Parallel; the position j % 2 is
    # the element k * 64 + j's (k * 64 is even), and the reader stages the int8 block in its Bfp8_b format
    import tilelang.language as T

    @T.prim_func
    def f(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K // 2), "uint8"), C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(N // 64, M // 64) as (bx, by):
            A_s = T.alloc_shared((64, 64), "bfloat16")
            B_d = T.alloc_shared((64, 64), "bfloat16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.clear(C_l)
            for k in T.serial(K // 64):
                T.copy(A[by * 64, k * 64], A_s)
                for i, j in T.Parallel(64, 64):
                    B_d[i, j] = ((B[bx * 64 + i, (k * 64 + j) // 2] >> (4 * (j % 2)).astype("uint8")) &
                                 T.uint8(15)).astype("bfloat16")
                T.gemm(A_s, B_d, C_l, transpose_B=True)
            T.copy(C_l, C[by * 64, bx * 64])
    torch.manual_seed(11)
    qb = torch.randint(0, 256, (N, K // 2), dtype=torch.uint8)
    kernel = tilelang.compile(f, target="tt")
    assert {x["name"]: x for x in kernel.plan["cbs"]}["B_tile"]["format"] == "Bfp8_b"
    c = torch.empty(M, N, dtype=torch.bfloat16)
    kernel(act, qb, c)
    check_model(c, act, ref_unpack_int4(qb, "uint", 1).T)


def test_dequant_int4_packed_along_k(act):
    # B[K // 2, N] int8, two K rows per byte, sign-extended by a left shift and an arithmetic right shift in int8
    import tilelang.language as T

    @T.prim_func
    def f(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((K // 2, N), "int8"), C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(N // 64, M // 64) as (bx, by):
            A_s = T.alloc_shared((64, 64), "bfloat16")
            B_s = T.alloc_shared((32, 64), "int8")
            B_d = T.alloc_shared((64, 64), "bfloat16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.clear(C_l)
            for k in T.serial(K // 64):
                T.copy(A[by * 64, k * 64], A_s)
                T.copy(B[k * 32, bx * 64], B_s)
                for i, j in T.Parallel(64, 64):
                    B_d[i, j] = ((B_s[i // 2, j] << (4 - 4 * (i % 2)).astype("int8")) >> T.int8(4)).astype("bfloat16")
                T.gemm(A_s, B_d, C_l)
            T.copy(C_l, C[by * 64, bx * 64])
    torch.manual_seed(12)
    qb = torch.randint(-128, 128, (K // 2, N), dtype=torch.int8)
    kernel = tilelang.compile(f, target="tt")
    unpack = {x["name"]: x for x in kernel.plan["buffers"]}["B"]["host_unpack"]
    assert (unpack["axis"], unpack["shape"]) == (0, [K // 2, N])
    c = torch.empty(M, N, dtype=torch.bfloat16)
    kernel(act, qb, c)
    check_model(c, act, ref_unpack_int4(qb, "int", 0))


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_dequant_int4_tilelang_readme_form(arch):
    # TileLang's README kernel: int8 storage, _tir_packed_to_unsigned_convert("int", 8) into a fragment, the
    # dequantized weights as in0 (SrcB: 0..15 keep all their bits), Ct[N, M] = B_deq @ A^T
    torch.manual_seed(13)
    a = torch.randn(M, K, dtype=torch.bfloat16)
    qb = torch.randint(-128, 128, (N, K // 2), dtype=torch.int8)
    kernel = tilelang.compile(D.dequant_gemm_tilelang_readme(M, N, K), target=f"tt -arch={arch}")
    ct = torch.empty(N, M, dtype=torch.bfloat16)
    kernel(a, qb, ct)
    check_model(ct, ref_unpack_int4(qb, "uint", 1), a.T)


def test_dequant_int4_tilelang_readme_form_fp16():
    # fp16 activations (TileLang's default dtype): Float16 CBs, HiFi4, fp32 accumulation. SrcA's lowest fp16
    # mantissa bit is consumed by no fidelity phase (2^-10 relative per product), and an fp16 output packed from fp32
    # DST goes through bf16 (TT_KERNEL_PATTERNS 5b: 8 significant bits, 2^-9 relative): Frobenius error below
    # 2^-9 + 2^-10
    torch.manual_seed(14)
    a = torch.randn(M, K, dtype=torch.float16)
    qb = torch.randint(-128, 128, (N, K // 2), dtype=torch.int8)
    kernel = tilelang.compile(D.dequant_gemm_tilelang_readme(M, N, K, in_dtype="float16", out_dtype="float16"),
                              target="tt")
    assert kernel.plan["math_fidelity"] == "HiFi4"
    ct = torch.empty(N, M, dtype=torch.float16)
    kernel(a, qb, ct)
    assert rel_fro(ct, ref_unpack_int4(qb, "uint", 1) @ a.float().T) <= 2 ** -9 + 2 ** -10


def test_dequant_int4_package_roundtrip(act, tmp_path):
    # the exported package carries the host table: a loaded kernel unpacks the same way
    torch.manual_seed(9)
    qb = torch.randint(0, 256, (N, K // 2), dtype=torch.uint8)
    s = (torch.rand(N) * 0.02 + 0.001).to(torch.bfloat16)
    kernel = tilelang.compile(D.dequant_gemm_int4(M, N, K, "int", True, storage_dtype="uint8"), target="tt")
    loaded = tilelang_tt.load(kernel.export(tmp_path / "int4.ttpkg"))
    outs = []
    for k in (kernel, loaded):
        c = torch.empty(M, N, dtype=torch.bfloat16)
        k(act, qb, s, c)
        outs.append(c)
    assert torch.equal(outs[0], outs[1])


def _packed_kernel(unpack):
    """Packed uint8 B[N, K // 2] unpacked by ``unpack(B_s, i, j, z)``, ``z`` the element of a uint8 Z[N] for row i."""
    import tilelang.language as T

    @T.prim_func
    def f(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K // 2), "uint8"), Z: T.Tensor((N,), "uint8"),
          C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(N // 64, M // 64) as (bx, by):
            A_s = T.alloc_shared((64, 64), "bfloat16")
            B_s = T.alloc_shared((64, 32), "uint8")
            B_d = T.alloc_shared((64, 64), "bfloat16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.clear(C_l)
            for k in T.serial(K // 64):
                T.copy(A[by * 64, k * 64], A_s)
                T.copy(B[bx * 64, k * 32], B_s)
                for i, j in T.Parallel(64, 64):
                    B_d[i, j] = unpack(B_s, i, j, Z[bx * 64 + i])
                T.gemm(A_s, B_d, C_l, transpose_B=True)
            T.copy(C_l, C[by * 64, bx * 64])
    return f


def test_packed_values_outside_int8_are_refused():
    # a "packed" byte taken whole (values up to 255) is not an int8 weight: the error names the values
    f = _packed_kernel(lambda B_s, i, j, z: (B_s[i, j // 2] >> (j % 2).astype("uint8")).astype("bfloat16"))
    with pytest.raises(TTUnsupportedError, match=r"the unpacked values of B_shared|the unpacked values of B_s .*"
                                                 r"include \[128\.0.*exact for integers in \[-127, 127\] only"):
        tilelang.compile(f, target="tt")


def test_uint8_read_unpacked_is_refused():
    # not indexed as e // 2, so not a packed weight: a plain uint8 tile (tests/tt/test_uint8.py), read at a gather
    f = _packed_kernel(lambda B_s, i, j, z: B_s[i, j % 32].astype("bfloat16"))
    with pytest.raises(TTUnsupportedError, match=r"index \[i, j % 32\] of B_s is not \(offset \+ i, offset \+ j\)"):
        tilelang.compile(f, target="tt")


def test_packed_byte_read_whole_is_refused():
    f = _packed_kernel(lambda B_s, i, j, z: ((B_s[i, j // 2] >> (4 * (j % 2)).astype("uint8")) & T_u8(15)).astype(
        "bfloat16") + B_s[i, 0].astype("bfloat16"))
    with pytest.raises(TTUnsupportedError, match=r"the packed buffer B_s is read other than by an unpack expression"):
        tilelang.compile(f, target="tt")


def T_u8(v):
    import tilelang.language as T
    return T.uint8(v)


@pytest.mark.parametrize("g,extra", [(16, "for groups below 32 expand the scales on the host"),
                                     (32, "use block_K <= group_size")])
def test_per_group_scale_within_a_block_is_refused(g, extra):
    f = _int8_grouped_kernel(K // g, lambda k, i: (k * 64 + i) // g)
    with pytest.raises(TTUnsupportedError) as e:
        tilelang.compile(f, target="tt")
    text = str(e.value)
    assert f"changes every {g} values of the T.Parallel's row variable i" in text
    assert "TT broadcasts one row per 32x32 tile" in text and extra in text
    assert re.search(r"test_dequant\.py:\d+", text)


def test_per_group_column_scale_within_a_block_is_refused():
    with pytest.raises(TTUnsupportedError, match=r"Scale\[.*\] changes every 32 values of the T.Parallel's column "
                                                 r"variable j: a per-group column is broadcast over a whole block"):
        tilelang.compile(D.dequant_gemm_int4(M, N, K, "uint", True, group_size=32), target="tt")


def test_bad_format_annotation():
    from tilelang_tt.errors import TTAnnotationError
    import tilelang.language as T
    with pytest.raises(TTAnnotationError, match=r"format='Bfp2_b' is not one of \['Bfp4_b', 'Bfp8_b', 'Int8'\]"):
        T.TTShard(format="Bfp2_b")


def test_perf_model_reports_block_float_dram_saving():
    from tilelang_tt import perf_model
    from tilelang_tt.device import TILE_FORMATS

    models = {}
    for fmt in ("Bfp8_b", "Bfp4_b"):
        kernel = tilelang.compile(D.bfp_gemm(M, N, K, fmt), target="tt")
        models[fmt] = perf_model.model_for_artifact(kernel.artifact_dir, kernel.plan)
    tiles = (K // 32) * (N // 32)
    for fmt in ("Bfp8_b", "Bfp4_b"):
        saving = models[fmt]["block_float_dram"]
        assert saving["tensors"][0]["tensor"] == "B"
        assert saving["bytes"] == tiles * TILE_FORMATS[fmt].tile_bytes
        assert saving["saved_bytes"] == tiles * (TILE_FORMATS["Float16_b"].tile_bytes - TILE_FORMATS[fmt].tile_bytes)
    # the DRAM reads of the whole kernel shrink by B's re-reads: Bfp4_b reads fewer bytes than Bfp8_b
    assert models["Bfp4_b"]["dram_read_bytes"] < models["Bfp8_b"]["dram_read_bytes"]


def test_integer_zero_point_tensor_is_refused_with_the_float_form():
    f = _packed_kernel(lambda B_s, i, j, z: (((B_s[i, j // 2] >> (4 * (j % 2)).astype("uint8")) & T_u8(15)) - z)
                       .astype("bfloat16"))
    with pytest.raises(TTUnsupportedError, match=r"(?s)\(uint8\) meets .* in integer arithmetic.*cast the "
                                                 r"unpacked value to the float dtype first"):
        tilelang.compile(f, target="tt")
