"""DRAM traffic of the irregular kernels against the minimum (tt-sim protocol-only counters, one run).

Paged-KV decode (block table) and the MoE grouped GEMM (an expert per row block) of examples/kernels.py, at
LLM-like sizes on wormhole_b0. The minimum reads every input element the kernel needs once and writes every
output once; index tensors count their elements (4 B each).

Run: .venv/bin/python benchmarks/irregular_traffic.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tilelang  # noqa: E402
import torch  # noqa: E402

import tilelang_tt  # noqa: E402,F401
from examples import kernels as K  # noqa: E402


def measure(func, tensors):
    kernel = tilelang.compile(func, target="tt -arch=wormhole_b0")
    kernel.emulate(*tensors, protocol_only=True)
    total = kernel.report["total"]
    return total["dram_read_bytes"] + total["dram_write_bytes"], len(kernel.plan["mapping"])


def paged_decode(B=8, H=32, D=128, BS=32, MAXB=32, NB=512):
    q = torch.randn(B, H, D).bfloat16()
    k, v = (torch.randn(NB * BS, D).bfloat16() for _ in range(2))
    table = torch.stack([torch.randperm(NB)[:MAXB] for _ in range(B)]).int()
    moved, cores = measure(K.paged_decode(B, H, D, BS, MAXB, NB), [q, k, v, table, torch.empty(B, H, D).bfloat16()])
    minimum = 2 * q.numel() * 2 + 2 * B * MAXB * BS * D * 2 + table.numel() * 4
    return f"paged decode B={B} H={H} D={D}, {MAXB} blocks of {BS} (ctx {MAXB * BS})", moved, minimum, cores


def moe(M=1024, N=1024, K_=1024, E=8, bm=128, bn=128, bk=64):
    a, w = torch.randn(M, K_).bfloat16(), torch.randn(E, K_, N).bfloat16()
    experts = torch.arange(M // bm, dtype=torch.int32) % E
    moved, cores = measure(K.moe_grouped_gemm(M, N, K_, E, bm, bn, bk), [a, w, experts, torch.empty(M, N).bfloat16()])
    used = len(set(experts.tolist()))
    minimum = a.numel() * 2 + used * K_ * N * 2 + M * N * 2 + experts.numel() * 4
    return f"MoE grouped GEMM {M}x{N}x{K_}, {E} experts, {bm}-row blocks", moved, minimum, cores


def main() -> int:
    print("| kernel | cores | DRAM read + written | minimum | x minimum |")
    print("|---|---|---|---|---|")
    for title, moved, minimum, cores in (paged_decode(), moe()):
        print(f"| {title} | {cores} | {moved / 1e6:.2f} MB | {minimum / 1e6:.2f} MB | {moved / minimum:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
