"""FlashAttention at the Llama-3.1-8B prefill shape (PERF_ANCHORS section 5): our kernel beside TTNN's, both modeled.

Run: .venv/bin/python benchmarks/sdpa_perf.py [--seq 4096] [--protocol]
Shape: batch 1, 32 query / 8 K/V heads, head dim 128, causal, bf16, TileLang's example kernel
(examples/kernels.py flash_attention) with 64x64 and 128x128 Q/K blocks through SDPAFusionTT, on blackhole with the
full 11x10 grid and with 64 cores (8x8). Printed per configuration: the work split SDPAFusionTT chose, DRAM bytes
against the formula (Q and O once, K and V once per visited (Q chunk, K/V chunk) pair) and against the minimum
(Q, K, V, O once), K and V bytes read against their size (1x: each K/V head read once, whatever its GQA group
does), our modeled time; and, on the same shape, grid and dtype, the same
performance model applied to TTNN's SDPA program (tilelang_tt/ttnn_reference.py: q chunk 256, k chunk 512,
HiFi2) and our time over TTNN's (a model against a model). The published times of tt-metal's SDPA on a p100a (2.27 ms on
11x10, 2.99 ms on 8x8, S=4096, causal) are printed as they are, beside neither ratio, next to both models run again
with the p100a's DRAM (448 GB/s; the blackhole profile is a p150, 512 GB/s). "query heads per block": the query
heads of a GQA group SDPAFusionTT put in one block (K/V read once for them). --protocol also runs tt-sim
protocol-only (counts without math) and prints its DRAM and matmul-tile counters beside the formula.
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tilelang  # noqa: E402

import tilelang_tt  # noqa: E402,F401
from examples import kernels as K  # noqa: E402
from tilelang_tt import device  # noqa: E402
from tilelang_tt import perf_model as pm  # noqa: E402
from tilelang_tt import ttnn_reference as ref  # noqa: E402

PUBLISHED_MS = {None: 2.27, 64: 2.99}     # PERF_ANCHORS sec. 5: p100a, 11x10 / 8x8, S=4096 causal [P] S17 #56898


def _protocol(kernel, dram: int, flops: int) -> None:
    import torch

    tensors = [torch.zeros(*b["shape"], dtype=torch.bfloat16) for b in kernel.plan["buffers"]]
    t0 = time.perf_counter()
    kernel.emulate(*tensors, protocol_only=True)
    total = kernel.report["total"]
    moved = total["dram_read_bytes"] + total["dram_write_bytes"]
    print(f"    tt-sim protocol-only: DRAM {moved / 1e6:.1f} MB (formula {dram / 1e6:.1f} MB), matmul tiles "
          f"{total['matmul_tiles']} (formula {flops // (2 * 32 ** 3)}); run {time.perf_counter() - t0:.0f} s",
          flush=True)


def _line(shape: tuple, block: int, cores, causal: bool, kernel, compile_s: float) -> tuple:
    B, H, HK, S, D = shape
    sdpa, model = kernel.plan["sdpa"], kernel.report["model"]
    q_bytes, kv_bytes = (sdpa[f"{x}_chunk_tiles"] * 32 * D * 2 for x in ("q", "k"))
    n = S * D * 2 // q_bytes
    heads = sdpa.get("heads_per_block", 1)             # query heads of a K/V group per block: K/V read once for them
    pairs = sum(sdpa["work"])
    dram = B * H * 2 * n * q_bytes + B * (H // heads) * 2 * pairs * kv_bytes   # Q read + O written; K, V per pair
    minimum = B * (2 * H + 2 * HK) * S * D * 2                 # Q, O once; K, V once per K/V head
    q_rows, kv_rows = q_bytes // (2 * D), kv_bytes // (2 * D)
    flops = 4 * B * H * pairs * q_rows * kv_rows * D            # QK^T and P.V
    gx, gy = (8, 8) if cores == 64 else (11, 10)
    ttnn = ref.model_sdpa(ref.SdpaConfig(B, H, HK, S, D, causal, (gx, gy)), "blackhole")
    loads = sdpa.get("core_loads")
    split = f"zigzag={sdpa['zigzag']} K/V chunks per core {loads[0]}..{loads[1]}" if loads else "plain split"
    kv_reads = model["dram_read_bytes"] - B * H * S * D * 2        # all reads but Q's
    published = ""
    if causal and S == 4096:      # the published point is a p100a: both models on its DRAM, the measurement beside
        p100a = device.board_perf("p100a")
        works, source = pm.modeled_work(kernel.artifact_dir, kernel.plan)
        ours = pm.evaluate(works, "blackhole", pm.plan_fidelity(kernel.plan), source, p100a)
        theirs = ref.model_sdpa(ref.SdpaConfig(B, H, HK, S, D, causal, (gx, gy)), "blackhole", p100a)
        published = (f"\n    p100a (448 GB/s): ours {ours['seconds'] * 1e3:.2f} ms, TTNN's SDPA modeled "
                     f"{theirs['seconds'] * 1e3:.2f} ms | published TTNN measurement {PUBLISHED_MS[cores]:.2f} ms")
    print(f"{block}x{block} {'causal' if causal else 'full  '} {len(kernel.plan['mapping']):3d} cores ({split}, "
          f"{heads} query heads per block): DRAM {model['dram_bytes'] / 1e6:.1f} MB (formula {dram / 1e6:.1f}) = "
          f"{model['dram_bytes'] / minimum:.2f}x the minimum, K/V read {kv_reads / (B * HK * S * D * 2 * 2):.1f}x "
          f"their size | ours {model['seconds'] * 1e3:.2f} ms {model['tflops']:.1f} TFLOPS {model['bound']}-bound | "
          f"TTNN's SDPA {ttnn['seconds'] * 1e3:.2f} ms {ttnn['bound']}-bound | time ours/TTNN "
          f"{model['seconds'] / ttnn['seconds']:.2f}x{published}; compile {compile_s:.1f} s", flush=True)
    return dram, flops


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--protocol", action="store_true", help="also count with a protocol-only tt-sim run")
    args = parser.parse_args()
    shape = (1, 32, 8, args.seq, 128)
    t_start = time.perf_counter()
    for block, cores, causal in [(b, c, ca) for b in (64, 128) for c in (None, 64) for ca in (True, False)]:
        target = {"kind": "tt", "arch": "blackhole"}
        if cores:
            target["max_cores"] = cores
        t0 = time.perf_counter()
        kernel = tilelang.compile(K.flash_attention(*shape[:2], shape[3], shape[3], shape[4], kv_heads=shape[2],
                                                    is_causal=causal, block_M=block, block_N=block), target=target)
        dram, flops = _line(shape, block, cores, causal, kernel, time.perf_counter() - t0)
        if args.protocol:
            _protocol(kernel, dram, flops)
    print("(modeled, not measured: perf_model.py with device.PERF, blackhole = p150; TTNN's SDPA from "
          "tilelang_tt/ttnn_reference.py with our dtype, bf16; the published figures are measurements on a p100a)")
    print(f"total {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
