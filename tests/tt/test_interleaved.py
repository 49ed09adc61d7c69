"""Stride-2 columns (InterleavedColumnsTT): interleaved (GPT-J style) RoPE, ``x[i, 2 * j]`` and ``x[i, 2 * j + 1]``,
as TileLang users write it, through selection matmuls on the FPU; bit-exact for bfloat16 data against torch's float32
arithmetic rounded as the packer rounds (nearest, ties away from zero)."""

import pytest
import tilelang
import tilelang.language as T
import torch

from tilelang_tt.errors import TTUnsupportedError

from .helpers import bf16_away

ARCHS = ["wormhole_b0", "blackhole"]
S, D, BS = 64, 128, 32


def _rope(dtype, staged: bool, out_dtype=None, fidelity=None):
    """Y[r, 2j] = x0 cos - x1 sin, Y[r, 2j + 1] = x0 sin + x1 cos with (x0, x1) = X[r, 2j], X[r, 2j + 1], computed in
    float32; ``staged``: X copied into a fragment first (else read from the tensor in the T.Parallel)."""
    out_dtype = out_dtype or dtype

    @T.prim_func
    def rope(X: T.Tensor((S, D), dtype), Cos: T.Tensor((S, D // 2), dtype), Sin: T.Tensor((S, D // 2), dtype),
             Y: T.Tensor((S, D), out_dtype)):
        with T.Kernel(S // BS, threads=128) as bx:
            x = T.alloc_fragment((BS, D), dtype)
            cos = T.alloc_fragment((BS, D // 2), dtype)
            sin = T.alloc_fragment((BS, D // 2), dtype)
            if fidelity is not None:
                T.annotate_tt_compute(math_fidelity=fidelity)
            if staged:
                T.copy(X[bx * BS, 0], x)
            T.copy(Cos[bx * BS, 0], cos)
            T.copy(Sin[bx * BS, 0], sin)
            for i, j in T.Parallel(BS, D // 2):
                c = T.Cast("float32", cos[i, j])
                s = T.Cast("float32", sin[i, j])
                x0 = T.Cast("float32", x[i, 2 * j] if staged else X[bx * BS + i, 2 * j])
                x1 = T.Cast("float32", x[i, 2 * j + 1] if staged else X[bx * BS + i, 2 * j + 1])
                Y[bx * BS + i, 2 * j] = x0 * c - x1 * s
                Y[bx * BS + i, 2 * j + 1] = x0 * s + x1 * c

    return rope


def _inputs(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(S, D, generator=g).to(dtype)
    angle = torch.randn(S, D // 2, generator=g)
    return x, angle.cos().to(dtype), angle.sin().to(dtype)


def _reference(x, cos, sin):
    x0, x1, c, s = x[:, 0::2].float(), x[:, 1::2].float(), cos.float(), sin.float()
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).reshape(x.shape)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("staged", [False, True], ids=["tensor", "fragment"])
def test_interleaved_rope_is_bit_exact_in_bfloat16(arch, staged):
    kernel = tilelang.compile(_rope("bfloat16", staged), target={"kind": "tt", "arch": arch})
    x, cos, sin = _inputs(torch.bfloat16)
    y = torch.zeros(S, D, dtype=torch.bfloat16)
    kernel(x, cos, sin, y)
    ref = _reference(x, cos, sin)
    assert torch.equal(y.float(), bf16_away(ref))
    # products of bfloat16 values often end exactly halfway between two bfloat16 values: the ties are what the
    # packer rounds away from zero where torch rounds to even
    assert not torch.equal(y, ref.bfloat16())
    assert kernel.plan["kernels"]["compute"]["math_fidelity"] == "HiFi4"
    # X is read from DRAM once (its row block), not once per parity
    assert kernel.report["total"]["dram_read_bytes"] == (x.numel() + cos.numel() + sin.numel()) * 2


def test_interleaved_rope_in_float16():
    """float16 data moves exactly (SrcB keeps its 11 bits at HiFi4); the float32 rotations are interleaved by a
    selection matmul, whose unpacker narrows them to FP16 by truncation (the plan's ``matmul: fp16``: below 2^-10
    relative), and the results reach the host as Float32 pages it rounds to float16 (``float16_results``: at most
    2^-11 more), not through the packer's bfloat16 (2^-9). The truncation, where a GPU's float16 stores round, is
    the one thing warned (the parity halves held as float32: ``matmul_operands`` in0 ``truncated``)."""
    import warnings

    from tilelang_tt import TTPrecisionWarning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = tilelang.compile(_rope("float16", staged=False), target="tt")
    lines = [str(w.message).split("\n  - ")[1:] for w in caught if issubclass(w.category, TTPrecisionWarning)]
    assert len(lines) == 1 and len(lines[0]) == 1 and lines[0][0].startswith(
        "a matmul (T.gemm, or the selection matmul moving stride-2 columns) reads its in0, float16 values compute "
        "wrote and holds as float32, truncated to float16")
    assert "truncated" in kernel.plan["precision"]["matmul_operands"]["in0"]
    assert kernel.plan["precision"]["float16_results"] == ["Y"]
    x, cos, sin = _inputs(torch.float16, seed=1)
    y = torch.zeros(S, D, dtype=torch.float16)
    kernel(x, cos, sin, y)
    ref = _reference(x, cos, sin)
    assert kernel.plan["precision"]["ops"]["matmul"] == "fp16"
    assert ((y.float() - ref).abs() <= (2.0 ** -10 + 2.0 ** -11) * ref.abs()).all()


def test_stride_two_refusals():
    with pytest.raises(TTUnsupportedError, match=r"(?s)X \(float32\): stride-2 columns move through a selection "
                                                 r"matmul, and the FPU multiplies 19 bits of float32 data.*fix: keep "
                                                 r"the data in bfloat16 or float16"):
        tilelang.compile(_rope("float32", staged=False), target="tt")
    with pytest.raises(TTUnsupportedError, match=r"(?s)exact only when the FPU multiplies every bit of the data, at "
                                                 r"HiFi4; this kernel computes at HiFi2 \(T.annotate_tt_compute\).*"
                                                 r'fix: T.annotate_tt_compute\(math_fidelity="HiFi4"\)'):
        tilelang.compile(_rope("bfloat16", staged=True, fidelity="HiFi2"), target="tt")

    @T.prim_func
    def even_only(X: T.Tensor((S, D), "bfloat16"), Y: T.Tensor((S, D), "bfloat16")):
        with T.Kernel(S // BS, threads=128) as bx:
            for i, j in T.Parallel(BS, D // 2):
                Y[bx * BS + i, 2 * j] = X[bx * BS + i, 2 * j + 1]

    with pytest.raises(TTUnsupportedError, match=r"(?s)Y: the nest stores its columns 2 \* j \+ 0 only.*fix: store "
                                                 r"both Y\[\.\.\., 2 \* j\] and Y\[\.\.\., 2 \* j \+ 1\]"):
        tilelang.compile(even_only, target="tt")

    @T.prim_func
    def narrow(X: T.Tensor((S, 32), "bfloat16"), Y: T.Tensor((S, 16), "bfloat16")):
        with T.Kernel(S // BS, threads=128) as bx:
            for i, j in T.Parallel(BS, 16):
                Y[bx * BS + i, j] = X[bx * BS + i, 2 * j] + X[bx * BS + i, 2 * j + 1]

    with pytest.raises(TTUnsupportedError, match=r"(?s)X: stride-2 columns of rows 32 wide: each parity's 16 columns "
                                                 r"are not whole 32-column tiles.*fix: use rows that are a multiple "
                                                 r"of 64 wide"):
        tilelang.compile(narrow, target="tt")
