"""DRAM traffic of the irregular kernels against the minimum (tt-sim protocol-only counters, one run).

Paged-KV decode (block table), the MoE grouped GEMM (an expert per row block) and varlen FlashAttention
(sequences packed at unaligned rows) of examples/kernels.py, at LLM-like sizes on wormhole_b0. The minimum reads every input element the kernel needs once and writes every
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
    # a grid sized at launch (a scalar max_seqlen) has no compile-time mapping: the cores that moved data
    busy = len(kernel.plan["mapping"]) or sum(1 for c in kernel.report["cores"] if c["dram_read_bytes"])
    return total["dram_read_bytes"] + total["dram_write_bytes"], busy


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


def varlen_attention(H=8, D=128, lens=(500, 1000, 300, 700), causal=True):
    """TileLang's varlen FlashAttention forward: sequences packed back to back, none starting on a tile row. Each
    row of a block at an unaligned offset is read as its 16-element face-row segments, each through the 64-byte
    aligned chunk holding it (2x the bytes of a bf16 segment); K and V are read once per 64-row Q block of their
    sequence (causal: up to the diagonal), as in FlashAttention."""
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    total = int(cu[-1])
    q, k, v = (torch.randn(total, H, D).bfloat16() for _ in range(3))
    func = K.varlen_attention(len(lens), H, total, total, D, causal)
    moved, cores = measure(func, [q, k, v, cu, cu, max(lens), torch.zeros(total, H, D).bfloat16()])
    minimum = 4 * total * H * D * 2 + 2 * cu.numel() * 4
    return (f"varlen attention H={H} D={D}, {len(lens)} sequences of {'/'.join(map(str, lens))}"
            f"{' causal' if causal else ''}"), moved, minimum, cores


def main() -> int:
    print("| kernel | cores | DRAM read + written | minimum | x minimum |")
    print("|---|---|---|---|---|")
    for title, moved, minimum, cores in (paged_decode(), moe(), varlen_attention()):
        print(f"| {title} | {cores} | {moved / 1e6:.2f} MB | {minimum / 1e6:.2f} MB | {moved / minimum:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
