"""Each precision path of tilelang-tt, measured on tt-sim against float64 on 1M random values (docs/usage.md,
"Precision"). Prints a Markdown table: the path, the measured worst error, the bound it is documented with, and
which operations use it by default.

    .venv/bin/python benchmarks/precision.py [--size 1024] [--seed 0]

Every case is a generated kernel on a size x size tensor (1M values at 1024) of standard normal values (the
reductions: values near 1000, the issue's case, where TF32's loss is largest relative to the result). Errors:
elementwise |y - ref| / |ref|; reductions and GEMMs |y - ref| / sum|terms| (the scale every summation bound uses).
"""

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TILELANG_TT_ARTIFACT_DIR", "/tmp/tilelang-tt-precision")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402
import torch  # noqa: E402

import tilelang_tt  # noqa: E402,F401  (registers the tt target)

BLOCK = 32


def binary(n: int, in_dtype: str, out_dtype: str, allow_tf32=None, extra_fp16=False):
    """C = A * B over n x n tensors; ``extra_fp16`` adds a float16 tensor copied through the same kernel (a program
    with a Float16 CB: its Float32 CBs reach SrcA/SrcB as FP16)."""
    if not extra_fp16:
        @T.prim_func
        def k(A: T.Tensor((n, n), in_dtype), B: T.Tensor((n, n), in_dtype), C: T.Tensor((n, n), out_dtype)):
            with T.Kernel(n // BLOCK, n // BLOCK, threads=128) as (bx, by):
                if allow_tf32 is not None:
                    T.annotate_tt_compute(allow_tf32=allow_tf32)
                a = T.alloc_shared((BLOCK, BLOCK), in_dtype)
                b = T.alloc_shared((BLOCK, BLOCK), in_dtype)
                c = T.alloc_fragment((BLOCK, BLOCK), out_dtype)
                T.copy(A[by * BLOCK, bx * BLOCK], a)
                T.copy(B[by * BLOCK, bx * BLOCK], b)
                for i, j in T.Parallel(BLOCK, BLOCK):
                    c[i, j] = a[i, j] * b[i, j]
                T.copy(c, C[by * BLOCK, bx * BLOCK])
        return k

    @T.prim_func
    def k16(A: T.Tensor((n, n), in_dtype), B: T.Tensor((n, n), in_dtype), C: T.Tensor((n, n), out_dtype),
            H: T.Tensor((n, n), "float16"), H2: T.Tensor((n, n), "float16")):
        with T.Kernel(n // BLOCK, n // BLOCK, threads=128) as (bx, by):
            T.annotate_tt_compute(allow_tf32=True)
            a = T.alloc_shared((BLOCK, BLOCK), in_dtype)
            b = T.alloc_shared((BLOCK, BLOCK), in_dtype)
            h = T.alloc_shared((BLOCK, BLOCK), "float16")
            c = T.alloc_fragment((BLOCK, BLOCK), out_dtype)
            h2 = T.alloc_fragment((BLOCK, BLOCK), "float16")
            T.copy(A[by * BLOCK, bx * BLOCK], a)
            T.copy(B[by * BLOCK, bx * BLOCK], b)
            T.copy(H[by * BLOCK, bx * BLOCK], h)
            for i, j in T.Parallel(BLOCK, BLOCK):
                c[i, j] = a[i, j] * b[i, j]
            for i, j in T.Parallel(BLOCK, BLOCK):
                h2[i, j] = h[i, j] * 2.0
            T.copy(c, C[by * BLOCK, bx * BLOCK])
            T.copy(h2, H2[by * BLOCK, bx * BLOCK])
    return k16


def cast(n: int, in_dtype: str, out_dtype: str):
    """C = A through a float32 fragment: the pack of an fp32 DST into C's format."""
    @T.prim_func
    def k(A: T.Tensor((n, n), in_dtype), C: T.Tensor((n, n), out_dtype)):
        with T.Kernel(n // BLOCK, n // BLOCK, threads=128) as (bx, by):
            a = T.alloc_fragment((BLOCK, BLOCK), "float32")
            c = T.alloc_fragment((BLOCK, BLOCK), out_dtype)
            T.copy(A[by * BLOCK, bx * BLOCK], a)
            for i, j in T.Parallel(BLOCK, BLOCK):
                c[i, j] = a[i, j] * 1.0
            T.copy(c, C[by * BLOCK, bx * BLOCK])
    return k


def row_sum(n: int, allow_tf32=None):
    @T.prim_func
    def k(A: T.Tensor((n, n), "float32"), R: T.Tensor((n,), "float32")):
        with T.Kernel(n // BLOCK, threads=128) as by:
            if allow_tf32 is not None:
                T.annotate_tt_compute(allow_tf32=allow_tf32)
            a = T.alloc_fragment((BLOCK, n), "float32")
            r = T.alloc_fragment((BLOCK,), "float32")
            T.copy(A[by * BLOCK, 0], a)
            T.reduce_sum(a, r, dim=1)
            T.copy(r, R[by * BLOCK])
    return k


def gemm(n: int, k_dim: int, dtype: str, accum: str = "float32"):
    @T.prim_func
    def k(A: T.Tensor((n, k_dim), dtype), B: T.Tensor((k_dim, n), dtype), C: T.Tensor((n, n), dtype)):
        with T.Kernel(n // 64, n // 64, threads=128) as (bx, by):
            a = T.alloc_shared((64, 32), dtype)
            b = T.alloc_shared((32, 64), dtype)
            c = T.alloc_fragment((64, 64), accum)
            T.clear(c)
            for kk in T.serial(k_dim // 32):
                T.copy(A[by * 64, kk * 32], a)
                T.copy(B[kk * 32, bx * 64], b)
                T.gemm(a, b, c)
            T.copy(c, C[by * 64, bx * 64])
    return k


def worst(y, ref, scale) -> float:
    return ((y.double() - ref).abs() / scale.clamp_min(1e-300)).max().item()


def measure(n: int, seed: int) -> list[tuple]:
    g = torch.Generator().manual_seed(seed)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g).to(dtype)

    rows = []

    def run(func, args, target="tt"):
        kernel = tilelang.compile(func, target=target)
        kernel(*args)
        return kernel

    # float32 elementwise, exact (SFPU on values unpacked to DST) and on the FPU (allow_tf32)
    a, b = randn(n, n), randn(n, n)
    ref = a.double() * b.double()
    for tf32 in (None, True):
        c = torch.empty(n, n)
        kernel = run(binary(n, "float32", "float32", allow_tf32=tf32), [a, b, c])
        path = kernel.plan["precision"]["ops"]["eltwise"]
        rows.append((f"{path}: float32 a * b" + (" (allow_tf32)" if tf32 else ""), worst(c, ref, ref.abs()),
                     "2^-24 = 6.0e-08 (one rounding)" if path == "fp32" else "2^-9 + 2^-10 = 2.9e-03",
                     "float32 elementwise, GEMM epilogues" if path == "fp32" else "opt-in: allow_tf32"))
    # float32 row sums near 1000
    x = 1000.0 + torch.rand(n, n, generator=g, dtype=torch.float64).float()
    ref, mag = x.double().sum(1), x.double().abs().sum(1)
    for tf32 in (None, True):
        r = torch.empty(n)
        kernel = run(row_sum(n, tf32), [x, r])
        path = kernel.plan["precision"]["ops"]["reduce"]
        depth = n // BLOCK - 1 + 5
        rows.append((f"{path}: float32 row sum of {n} values near 1000" + (" (allow_tf32)" if tf32 else ""),
                     worst(r, ref, mag),
                     f"{depth} * 2^-24 = {depth * 2.0 ** -24:.1e} (add tree depth {depth})" if path == "fp32"
                     else "2^-10 = 9.8e-04 (+ fp32 adds)",
                     "float32 reductions (sum, max, min, abs)" if path == "fp32" else "opt-in: allow_tf32"))
    # float32 GEMM: TF32 operands (the only matmul the FPU has)
    kd = 256
    ga, gb = randn(n, kd), randn(kd, n)
    c = torch.empty(n, n)
    run(gemm(n, kd, "float32"), [ga, gb, c])
    rows.append(("tf32: float32 T.gemm (K = 256)", worst(c, ga.double() @ gb.double(), ga.double().abs() @
                                                           gb.double().abs()),
                 "2^-9 + 2^-10 (+ fp32 sums) = 2.9e-03", "float32 T.gemm (no fp32 multiplier on the FPU)"))
    # bf16 elementwise: exact operands, the packer's rounding to bf16 (ties away)
    a16, b16 = randn(n, n, dtype=torch.bfloat16), randn(n, n, dtype=torch.bfloat16)
    c = torch.empty(n, n, dtype=torch.bfloat16)
    run(binary(n, "bfloat16", "bfloat16"), [a16, b16, c])
    ref = a16.double() * b16.double()
    rows.append(("bf16: bfloat16 a * b (HiFi4)", worst(c, ref, ref.abs()), "2^-8 = 3.9e-03 (half a bf16 ulp)",
                 "bfloat16 kernels"))
    # bf16 GEMM at ttnn's HiFi2 default; fp16 GEMM at HiFi4 (SrcA's lowest mantissa bit is in no fidelity phase)
    for dtype, label, bound, where in (
            (torch.bfloat16, "bf16: bfloat16 T.gemm, HiFi2", "2^-7 + output rounding", "bfloat16 T.gemm (ttnn's HiFi2)"),
            (torch.float16, "fp16: float16 T.gemm, HiFi4", "2^-10 (in1's 10th bit) + output packed through bf16",
             "float16 T.gemm")):
        ga, gb = randn(n, kd, dtype=dtype), randn(kd, n, dtype=dtype)
        c = torch.empty(n, n, dtype=dtype)
        run(gemm(n, kd, str(dtype).removeprefix("torch.")), [ga, gb, c])
        rows.append((f"{label} (K = {kd})", worst(c, ga.double() @ gb.double(), ga.double().abs() @ gb.double().abs()),
                     bound, where))
    # fp16 output packed from an fp32 DST: through bf16
    a = randn(n, n)
    c = torch.empty(n, n, dtype=torch.float16)
    kernel = run(cast(n, "float32", "float16"), [a, c])
    assert kernel.plan["precision"].get("float16_pack") == "bf16"
    normal = a.abs() >= 2.0 ** -14        # below FP16's normal range the packer flushes to 0
    rows.append(("bf16 pack: float16 output of an fp32-accumulating kernel",
                 worst(c[normal], a.double()[normal], a.double().abs()[normal]),
                 "2^-8 = 3.9e-03 (bf16's 8 bits, not fp16's 2^-11); below 2^-14: 0",
                 "every float16 output when DST is fp32"))
    # a Float32 CB beside Float16 CBs reaches the FPU as FP16 (allow_tf32, so the FPU reads it)
    a, b = randn(n, n), randn(n, n)
    c, h, h2 = torch.empty(n, n), randn(n, n, dtype=torch.float16), torch.empty(n, n, dtype=torch.float16)
    kernel = run(binary(n, "float32", "float32", extra_fp16=True), [a, b, c, h, h2])
    assert kernel.plan["precision"]["float32_operands"] == "fp16"
    ref = a.double() * b.double()
    normal = (a.abs() >= 2.0 ** -14) & (b.abs() >= 2.0 ** -14)    # FP16's range: smaller operands read as 0
    rows.append(("fp16 operands: float32 a * b on the FPU in a kernel with float16 tensors (allow_tf32)",
                 worst(c[normal], ref[normal], ref.abs()[normal]),
                 "2^-9 + 2^-10 = 2.9e-03 inside FP16's range (2^-14 .. 131008; below: 0)",
                 "opt-in: allow_tf32 with float16 tensors"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="n: every case has n x n values (default 1M)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = measure(args.size, args.seed)
    print(f"| path | measured worst error vs float64 ({args.size * args.size} values) | bound | used by default for |")
    print("|---|---|---|---|")
    for path, err, bound, where in rows:
        print(f"| {path} | {err:.2e} | {bound} | {where} |")


if __name__ == "__main__":
    main()
