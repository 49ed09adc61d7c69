"""Seeded random kernels for the differential test (tests) and the soak run (benchmarks).

Each case is a GEMM, an elementwise kernel, a row reduction with a broadcast back (softmax / rmsnorm), a GEMM
with a bias + ReLU epilogue or two chained GEMMs, with a random shape (any size, tails included), block size,
dtype, schedule policy and arch, plus its torch reference and tolerance.
"""

import random
from dataclasses import dataclass

import tilelang.language as T
import torch

from examples import kernels as K

POLICIES = [None, dict(policy="strided"), dict(policy="rect"), dict(policy="contiguous", order="block_linear(2)")]


@dataclass
class Case:
    kind: str
    shape: tuple
    block: tuple
    dtype: str
    schedule: dict | None
    arch: str
    op: str = "add"

    def __str__(self):
        return f"{self.kind}{self.shape} block{self.block} {self.dtype} {self.schedule} {self.arch} {self.op}"


def gemm(M, N, K_, bm, bn, bk, dtype, schedule):
    @T.prim_func
    def gemm_k(A: T.Tensor((M, K_), dtype), B: T.Tensor((K_, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_l = T.alloc_fragment((bm, bn), "float32")
            if schedule is not None:
                T.annotate_tt_schedule(**schedule)
            T.clear(C_l)
            for k in T.serial(T.ceildiv(K_, bk)):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return gemm_k


def eltwise(M, N, bm, bn, dtype, schedule, op):
    fns = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "sub": lambda a, b: a - b,
           "chain": lambda a, b: T.exp(a) * b + 1.0}
    fn = fns[op]

    @T.prim_func
    def elt(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            if schedule is not None:
                T.annotate_tt_schedule(**schedule)
            for i, j in T.Parallel(bm, bn):
                C[by * bm + i, bx * bn + j] = fn(A[by * bm + i, bx * bn + j], B[by * bm + i, bx * bn + j])

    return elt


def rowwise(M, N, bm, dtype, schedule, op):
    """softmax (fp32 statistics) or rmsnorm over rows of N (the whole row is the block)."""

    @T.prim_func
    def rows(A: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as by:
            A_s = T.alloc_shared((bm, N), dtype)
            x = T.alloc_fragment((bm, N), "float32")
            stat = T.alloc_fragment((bm,), "float32")
            if schedule is not None:
                T.annotate_tt_schedule(**schedule)
            T.copy(A[by * bm, 0], A_s)
            T.copy(A_s, x)
            if op == "softmax":
                T.reduce_max(x, stat, dim=1)
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.exp(x[i, j] - stat[i])
                T.reduce_sum(x, stat, dim=1)
                for i, j in T.Parallel(bm, N):
                    x[i, j] = x[i, j] / stat[i]
            else:
                sq = T.alloc_fragment((bm, N), "float32")
                for i, j in T.Parallel(bm, N):
                    sq[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(sq, stat, dim=1)
                for i in T.Parallel(bm):
                    stat[i] = T.rsqrt(stat[i] / N + 1e-6)
                for i, j in T.Parallel(bm, N):
                    x[i, j] = x[i, j] * stat[i]
            T.copy(x, C[by * bm, 0])

    return rows


def epilogue(M, N, K_, bm, bn, bk, dtype, schedule):
    @T.prim_func
    def epi(A: T.Tensor((M, K_), dtype), B: T.Tensor((K_, N), dtype), bias: T.Tensor((N,), dtype),
            C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_l = T.alloc_fragment((bm, bn), "float32")
            if schedule is not None:
                T.annotate_tt_schedule(**schedule)
            T.clear(C_l)
            for k in T.serial(T.ceildiv(K_, bk)):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            for i, j in T.Parallel(bm, bn):
                C_l[i, j] = T.max(C_l[i, j] + bias[bx * bn + j], 0.0)
            T.copy(C_l, C[by * bm, bx * bn])

    return epi


def make_cases(n: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    sizes = [1, 7, 32, 33, 64, 75, 96, 100, 128, 160, 168, 200]
    cases = []
    for i in range(n):
        arch = rng.choice(["wormhole_b0", "blackhole"])
        schedule = rng.choice(POLICIES)
        if i % 5 == 3:    # row reductions with a broadcast back; the reduced extent is whole tiles
            shape = (rng.choice(sizes), rng.choice([32, 64, 96, 128]))
            op = rng.choice(["softmax", "rmsnorm"])
            cases.append(Case("rowwise", shape, (rng.choice([32, 64]),), rng.choice(["float32", "bfloat16"]),
                              schedule if schedule is None or schedule.get("policy") != "rect" else None, arch, op))
        elif i % 5 == 1 and i % 10 == 1:
            shape = tuple(rng.choice(sizes) for _ in range(3))
            block = (rng.choice([32, 64]), rng.choice([32, 64]), rng.choice([32, 64]))
            cases.append(Case("epilogue", shape, block, rng.choice(["bfloat16", "float16"]), schedule, arch))
        elif i % 10 == 6:
            shape = (rng.choice(sizes), rng.choice([32, 64]), rng.choice([32, 64, 96]))
            cases.append(Case("chained", shape, (32,), "bfloat16", None, arch))
        elif i % 2 == 0:
            shape = tuple(rng.choice(sizes) for _ in range(3))
            block = (rng.choice([32, 64]), rng.choice([32, 64]), rng.choice([32, 64]))
            cases.append(Case("gemm", shape, block, rng.choice(["bfloat16", "float16"]), schedule, arch))
        else:
            shape = (rng.choice(sizes), rng.choice(sizes))
            block = (rng.choice([32, 64]), rng.choice([32, 64]))
            op = rng.choice(["add", "mul", "sub", "chain"])
            dtype = rng.choice(["float32", "bfloat16"] if op != "chain" else ["bfloat16", "float32"])
            cases.append(Case("eltwise", shape, block, dtype, schedule, arch, op))
    return cases


def build(case: Case):
    if case.kind == "gemm":
        M, N, K_ = case.shape
        return gemm(M, N, K_, *case.block, case.dtype, case.schedule)
    if case.kind == "rowwise":
        return rowwise(*case.shape, case.block[0], case.dtype, case.schedule, case.op)
    if case.kind == "epilogue":
        return epilogue(*case.shape, *case.block, case.dtype, case.schedule)
    if case.kind == "chained":     # the two-layer MLP of examples/kernels.py (hidden activation kept on chip)
        return K.mlp(*case.shape, case.block[0], case.dtype)
    return eltwise(*case.shape, *case.block, case.dtype, case.schedule, case.op)


def _in0_truncation(dtype: str, a, b) -> float:
    """The bound on a GEMM's error from the operand bits the math fidelity drops (TT_KERNEL_PATTERNS section 5.2,
    defaults in compute_config.py): bf16 at HiFi2 keeps 1 + 6 mantissa bits of in0 in SrcB (2^-7 relative per
    product); fp16 at HiFi4 keeps 1 + 4 + 5 bits of in1 in SrcA, one fewer than fp16's 10 (2^-10)."""
    rel = {"bfloat16": 2.0 ** -7, "float16": 2.0 ** -10}.get(dtype, 0.0)
    return rel * (a.float().abs() @ b.float().abs()).max().item() if rel else 0.0


def inputs_and_check(case: Case, seed: int):
    """(args, check(out) -> (ok, error)) for one case."""
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case.dtype)
    out_eps = 2.0 ** -8 if case.dtype == "bfloat16" else 2.0 ** -11 if case.dtype == "float16" else 2.0 ** -20
    if case.kind == "rowwise":
        M, N = case.shape
        a = torch.randn(M, N, generator=g).to(dt)
        x = a.float()
        if case.op == "softmax":
            ref = torch.softmax(x, dim=1)
            # x and its row max reach the FPU's subtraction as TF32 (2^-10 relative each): exp's argument moves by
            # 2^-10 (|x| + |max|), p by that relatively; the row sum by 2^-10; one rounding of the output
            rel = 2.0 ** -10 * 2 * x.abs().max().item() + 2.0 ** -10 + 2 * out_eps
        else:
            ref = x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + 1e-6)
            # the sum of squares as TF32 (2^-10, halved by rsqrt), x * rstd of TF32 operands (2^-10 each)
            rel = 3 * 2.0 ** -10 + 2 * out_eps
        tol = rel * ref.abs().max().item() + 1e-6
        out = torch.empty(M, N, dtype=dt)

        def check(c):
            err = (c.float() - ref).abs().max().item()
            return err <= tol, err, tol

        return [a, out], check
    if case.kind in ("epilogue", "chained"):
        if case.kind == "epilogue":
            M, N, K_ = case.shape
            a, b = torch.randn(M, K_, generator=g).to(dt), torch.randn(K_, N, generator=g).to(dt)
            bias = torch.randn(N, generator=g).to(dt)
            ref = torch.relu(a.float() @ b.float() + bias.float())
            args = [a, b, bias, torch.empty(M, N, dtype=dt)]
            # fp32 accumulation, the bias added in fp32, one rounding of the output; at HiFi2 (bf16's default)
            # in0 reaches SrcB without its last mantissa bit (2^-7 relative)
            tol = (2 * out_eps * max(ref.abs().max().item(), 1e-30) + _in0_truncation(case.dtype, a, b)
                   + 1e-6)
        else:
            M, D, H = case.shape
            x = torch.randn(M, D, generator=g).to(dt)
            w1 = (torch.randn(D, H, generator=g) / D ** 0.5).to(dt)
            w2 = (torch.randn(H, D, generator=g) / H ** 0.5).to(dt)
            hidden = torch.relu(x.float() @ w1.float()).to(dt).float()   # kept on chip in the kernel's dtype
            ref = hidden @ w2.float()
            args = [x, w1, w2, torch.empty(M, D, dtype=dt)]
            # the hidden activation can round the other way than torch's (fp32 sums in another order): allow
            # one bf16 ulp of each hidden value through W2, plus the output rounding; at HiFi2 in0 (x, then the
            # hidden activation) loses its last mantissa bit: 2^-7 |x||W1| through W2, 2^-7 |h||W2|
            trunc = 2.0 ** -7 if case.dtype == "bfloat16" else 0.0
            through = (x.float().abs() @ w1.float().abs()) @ w2.float().abs()
            tol = ((2 * out_eps + trunc) * (hidden.abs() @ w2.float().abs()).max().item()
                   + trunc * through.max().item() + 1e-6)

        def check(c):
            err = (c.float() - ref).abs().max().item()
            return err <= tol, err, tol

        return args, check
    if case.kind == "gemm":
        M, N, K_ = case.shape
        a, b = torch.randn(M, K_, generator=g).to(dt), torch.randn(K_, N, generator=g).to(dt)
        ref = a.float() @ b.float()
        eps = 2.0 ** -8 if case.dtype == "bfloat16" else 2.0 ** -11
        # fp32 accumulation; one rounding of the output (+ slack for fp32 summation order); HiFi2's in0 truncation
        tol = 2 * eps * max(ref.abs().max().item(), 1e-30) + _in0_truncation(case.dtype, a, b) + 1e-6
        out = torch.empty(M, N, dtype=dt)
    else:
        M, N = case.shape
        a, b = torch.randn(M, N, generator=g).to(dt), torch.randn(M, N, generator=g).to(dt)
        if case.op == "chain":
            ref = torch.exp(a.float()) * b.float() + 1
            eps = 2.0 ** -8 if case.dtype == "bfloat16" else 2.0 ** -20
            tol = 4 * eps * ref.abs().max().item() + 1e-5
        else:
            ref = {"add": a + b, "mul": a * b, "sub": a - b}[case.op].float()   # same rounding as torch
            tol = 0.0
        out = torch.empty(M, N, dtype=dt)

    def check(c):
        err = (c.float() - ref).abs().max().item()
        return err <= tol, err, tol

    return [a, b, out], check
