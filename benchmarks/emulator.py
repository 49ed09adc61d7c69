"""tt-sim speed: end-to-end runs of generated GEMMs on the CPU emulator.

Run: .venv/bin/python benchmarks/emulator.py [--skip-large]
Prints, for each case: compile+first-run time, warm run time (kernel and host caches hot), matmul_tiles/s
and tile ops/s. Targets (issue 3): bf16 GEMM 512^3 warm <= 2 s; 2048^3 <= 60 s; protocol-only 4096^3
counters <= 30 s. Against tt-lang-sim (Tenstorrent's Python simulator): benchmarks/emulator_vs_ttlang.py.
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tilelang  # noqa: E402
import torch  # noqa: E402

import tilelang_tt  # noqa: E402,F401
from examples import kernels as K  # noqa: E402


def bench(title, func, M, N, K_, protocol_only=False, check=True):
    kernel = tilelang.compile(func, target="tt")
    a = torch.randn(M, K_, dtype=torch.bfloat16)
    b = torch.randn(K_, N, dtype=torch.bfloat16)
    c = torch.empty(M, N, dtype=torch.bfloat16)
    t0 = time.perf_counter()
    kernel.emulate(a, b, c, protocol_only=protocol_only)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    kernel.emulate(a, b, c, protocol_only=protocol_only)
    warm = time.perf_counter() - t0
    total = kernel.report["total"]
    tile_ops = total["matmul_tiles"] + total["tile_ops"] + total["packs"] + total["tiles_read"] + total["tiles_written"]
    line = (f"{title:42s} first {first:7.2f} s   warm {warm:7.2f} s   "
            f"{total['matmul_tiles'] / warm:11.0f} matmul_tiles/s   {tile_ops / warm:11.0f} tile ops/s")
    if check and not protocol_only:
        ref = a.float() @ b.float()
        line += f"   rel err {((c.float() - ref).abs().max() / ref.abs().max()).item():.1e}"
    print(line, flush=True)
    return warm


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-large", action="store_true", help="only the 512^3 case")
    args = parser.parse_args()
    torch.manual_seed(0)
    w512 = bench("bf16 GEMM 512^3 (32x32 blocks, 64 cores)", K.design_gemm(512, 512, 512), 512, 512, 512)
    print(f"  target warm <= 2 s: {'met' if w512 <= 2 else 'MISSED'}")
    if not args.skip_large:
        w2048 = bench("bf16 GEMM 2048^3 (32x32 blocks, 64 cores)", K.design_gemm(2048, 2048, 2048), 2048, 2048, 2048)
        print(f"  target <= 60 s: {'met' if w2048 <= 60 else 'MISSED'}")
        w4096 = bench("protocol-only bf16 GEMM 4096^3", K.design_gemm(4096, 4096, 4096), 4096, 4096, 4096,
                      protocol_only=True)
        print(f"  target <= 30 s: {'met' if w4096 <= 30 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
