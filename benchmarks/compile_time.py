"""Compile time: tilelang-tt (TT passes + codegen) beside TileLang's own CUDA lowering (source only).

Run: .venv/bin/python benchmarks/compile_time.py [--repeat N]
Prints the median of N runs for each kernel; no GPU or TT device is needed.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tvm  # noqa: E402
from tvm.target import Target  # noqa: E402

import tilelang_tt  # noqa: E402,F401
from examples import kernels as K  # noqa: E402
from tilelang_tt.codegen import generate  # noqa: E402
from tilelang_tt.pipeline import lower_module  # noqa: E402
from tilelang_tt.target import make_options  # noqa: E402

CASES = [
    ("GEMM 1024^3 (128x128x32 blocks, fp16/fp32, transpose_B)", lambda: K.tilelang_example_gemm(1024, 1024, 1024)),
    ("elementwise add 1024x1024 fp32 (32x32 blocks)", lambda: K.elementwise_add(1024, 1024, "float32")),
]


def time_tt(make) -> float:
    func = make()
    opts = make_options(arch="wormhole_b0")
    t0 = time.perf_counter()
    lowered = lower_module(tvm.IRModule({"main": func}), opts)["main"]
    generate(lowered, opts)
    return time.perf_counter() - t0


def time_cuda(make) -> float:
    from tilelang.engine.lower import lower

    func = make()
    target = Target("cuda")
    t0 = time.perf_counter()
    with target:
        lower(func, target=target)
    return time.perf_counter() - t0


def median(fn, make, repeat):
    fn(make)  # warm-up (imports, FFI caches)
    return statistics.median(fn(make) for _ in range(repeat))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'kernel':60s} {'tilelang-tt':>12s} {'TileLang CUDA':>14s} {'ratio':>7s}")
    for title, make in CASES:
        tt = median(time_tt, make, args.repeat)
        try:
            cuda = median(time_cuda, make, args.repeat)
            cuda_text, ratio = f"{cuda * 1e3:11.1f} ms", f"{tt / cuda:6.2f}x"
        except Exception as err:  # the CUDA lowering is the reference only; report why it could not run
            cuda_text, ratio = f"failed: {type(err).__name__}", "-"
        print(f"{title:60s} {tt * 1e3:9.1f} ms {cuda_text:>14s} {ratio:>7s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
