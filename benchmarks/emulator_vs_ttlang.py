"""tt-sim against Tenstorrent's Python simulator (tt-lang-sim 1.1.6): time per matmul_tiles of one bf16 GEMM.

Run: .venv/bin/python benchmarks/emulator_vs_ttlang.py [--ttlang-python /tmp/ttls/bin/python] [--large]
tt-lang-sim is not a project dependency; install it in a venv of its own (torch first, so that pip does not pull
a CUDA build):
    python3 -m venv /tmp/ttls && /tmp/ttls/bin/pip install torch==2.13.0 && /tmp/ttls/bin/pip install tt-lang-sim==1.1.6
Without --ttlang-python the tt-lang-sim column is skipped.

Each case is an M^3 bf16 GEMM in BLOCK x BLOCK blocks: on tt-sim the generated kernel of examples/kernels.py
``design_gemm(M, M, M, block=BLOCK)`` (kernel.emulate, warm: kernel and host binary cached); on tt-lang-sim the same
blocking written in TT-Lang (benchmarks/ttlang_sim_gemm.py, its matmul tutorial reduced to y = a @ b) on the same
node grid, torch on one thread, in a subprocess of that venv's Python. Both are timed in CPU seconds (the machine
may be shared; tt-sim's include the Python side of emulate() and the emulator process, tt-lang-sim's the warm
kernel call) and divided by the tile products the GEMM performs, (M/32)^3. ratio = tt-lang-sim / tt-sim: above 1,
tt-sim is faster. Target (issue 12): ratio >= 1 with 128x128 blocks, > 1 with 32x32 blocks.
"""

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import tilelang  # noqa: E402
import torch  # noqa: E402

import tilelang_tt  # noqa: E402,F401
from examples import kernels as K  # noqa: E402

TILE = 32
CASES = [(512, 32), (512, 128), (1024, 128)]
LARGE = [(1024, 32), (2048, 128)]


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (the emulator runs as a child process)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def grid_side(M: int, block: int) -> int:
    return min(8, M // block)   # tt-sim's 8x8 worker grid; tt-lang-sim gets the same node grid


def tt_sim(M: int, block: int) -> dict:
    kernel = tilelang.compile(K.design_gemm(M, M, M, block=block), target="tt")
    a = torch.randn(M, M, dtype=torch.bfloat16)
    b = torch.randn(M, M, dtype=torch.bfloat16)
    c = torch.empty(M, M, dtype=torch.bfloat16)
    kernel.emulate(a, b, c)   # compiles the kernels and the host program (cached from here on)
    t0, c0 = time.perf_counter(), cpu_seconds()
    kernel.emulate(a, b, c)
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    total = kernel.report["total"]
    ref = a.float() @ b.float()
    return {"seconds": wall, "cpu_seconds": cpu, "matmul_tiles": total["matmul_tiles"],
            "tile_ops": total["matmul_tiles"] + total["tile_ops"] + total["packs"],
            "rel_err": ((c.float() - ref).abs().max() / ref.abs().max()).item()}


def tt_lang_sim(python: str, M: int, block: int) -> dict:
    g = grid_side(M, block)
    proc = subprocess.run([python, str(ROOT / "benchmarks" / "ttlang_sim_gemm.py"), *map(str, (M, M, M, block, g, g))],
                          capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"tt-lang-sim run failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ttlang-python", help="Python of a venv with tt-lang-sim 1.1.6 (see the docstring)")
    parser.add_argument("--large", action="store_true", help=f"also {', '.join(f'{m}^3/{b}' for m, b in LARGE)}")
    args = parser.parse_args()
    if args.ttlang_python is None:
        print("tt-lang-sim column skipped: pass --ttlang-python PY (install: see this file's docstring)")
    torch.manual_seed(0)
    print(f"{'bf16 GEMM':24s} {'tt-sim us/matmul_tiles':>24s} {'tt-lang-sim us/matmul_tiles':>28s} {'ratio':>7s}"
          "   (CPU time; wall in brackets)")
    verdicts = []
    for M, block in CASES + (LARGE if args.large else []):
        sim = tt_sim(M, block)
        n = sim["matmul_tiles"]
        assert n == (M // TILE) ** 3, n
        line = (f"{M}^3, {block}x{block} blocks".ljust(24) +
                f"{sim['cpu_seconds'] / n * 1e6:12.2f} [{sim['seconds'] / n * 1e6:8.2f}]".rjust(25))
        if args.ttlang_python:
            ttl = tt_lang_sim(args.ttlang_python, M, block)
            ratio = (ttl["cpu_seconds"] / ttl["matmul_tiles"]) / (sim["cpu_seconds"] / n)
            line += (f"{ttl['cpu_seconds'] / n * 1e6:16.2f} [{ttl['seconds'] / n * 1e6:8.2f}]".rjust(29) +
                     f"{ratio:8.2f}")
            verdicts.append((M, block, ratio))
        line += f"   tt-sim: {sim['tile_ops'] / sim['cpu_seconds']:9.0f} tile ops/s, rel err {sim['rel_err']:.1e}"
        print(line, flush=True)
    for M, block, ratio in verdicts:
        want, ok = (">= 1", ratio >= 1) if block >= 128 else ("> 1", ratio > 1)
        print(f"  {M}^3 {block}x{block}: ratio {ratio:.2f}, target {want}: {'met' if ok else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
