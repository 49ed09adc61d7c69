"""Seeded random kernels for the differential test (tests) and the soak run (benchmarks).

Each case is a GEMM or an elementwise kernel with a random shape (any size, tails included), block size,
dtype, schedule policy and arch, plus its torch reference and tolerance.
"""

import random
from dataclasses import dataclass

import tilelang.language as T
import torch

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


def make_cases(n: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    sizes = [1, 7, 32, 33, 64, 75, 96, 100, 128, 160, 168, 200]
    cases = []
    for i in range(n):
        arch = rng.choice(["wormhole_b0", "blackhole"])
        schedule = rng.choice(POLICIES)
        if i % 2 == 0:
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
    return eltwise(*case.shape, *case.block, case.dtype, case.schedule, case.op)


def inputs_and_check(case: Case, seed: int):
    """(args, check(out) -> (ok, error)) for one case."""
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case.dtype)
    if case.kind == "gemm":
        M, N, K_ = case.shape
        a, b = torch.randn(M, K_, generator=g).to(dt), torch.randn(K_, N, generator=g).to(dt)
        ref = a.float() @ b.float()
        eps = 2.0 ** -8 if case.dtype == "bfloat16" else 2.0 ** -11
        # fp32 accumulation; one rounding of the output (+ slack for fp32 summation order)
        tol = 2 * eps * max(ref.abs().max().item(), 1e-30) + 1e-6
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
