"""Time of the real-header check for one artifact (three kernels, five translation units) on a warm cache.

Run: .venv/bin/python benchmarks/realcheck.py [--repeat N]     Target (issue 4): <= 5 s.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tilelang  # noqa: E402

import tilelang_tt  # noqa: E402,F401
from examples import kernels as K  # noqa: E402
from tilelang_tt.realcheck import check_artifact  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for title, func in (("design GEMM 512^3 bf16", K.design_gemm(512, 512, 512)),
                        ("TileLang example GEMM 1024^3 fp16/fp32", K.tilelang_example_gemm(1024, 1024, 1024)),
                        ("fused exp(a)*b+1 bf16", K.fused_chain(128, 128))):
        artifact = tilelang.compile(func, target="tt").artifact_dir
        check_artifact(artifact)  # warm: wheel extracted, SFPI stand-in generated
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            result = check_artifact(artifact)
            times.append(time.perf_counter() - t0)
            assert result.ok, result.summary()
        med = statistics.median(times)
        print(f"{title:42s} {len(result.units)} TUs + host symbols: {med:5.2f} s (median of {args.repeat})  "
              f"target <= 5 s: {'met' if med <= 5 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
