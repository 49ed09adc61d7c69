"""Soak run of the random differential test: N seeded cases (default 1000) on the emulator against torch.

Run: .venv/bin/python benchmarks/soak.py [--cases 1000] [--seed 7]
Prints progress, every mismatch, and a summary (cases, mismatches, time).
"""

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TILELANG_TT_POISON_PADDING", "1")

import tilelang  # noqa: E402

import tilelang_tt  # noqa: E402,F401
from examples.random_cases import build, inputs_and_check, make_cases  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    cases = make_cases(args.cases, args.seed)
    t0 = time.perf_counter()
    mismatches = errors = 0
    for i, case in enumerate(cases):
        try:
            kernel = tilelang.compile(build(case), target={"kind": "tt", "arch": case.arch})
            tensors, check = inputs_and_check(case, seed=i)
            kernel(*tensors)
            ok, err, tol = check(tensors[-1])
            if not ok:
                mismatches += 1
                print(f"MISMATCH {i}: {case}: max error {err} > {tol}", flush=True)
        except Exception as exc:  # a crash is a finding too: report it and keep going
            errors += 1
            print(f"ERROR {i}: {case}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
        if (i + 1) % 50 == 0:
            print(f"{i + 1}/{len(cases)} cases, {mismatches} mismatches, {errors} errors, "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
    print(f"soak: {len(cases)} cases (seed {args.seed}), {mismatches} mismatches, {errors} errors, "
          f"{time.perf_counter() - t0:.0f} s")
    return 1 if mismatches or errors else 0


if __name__ == "__main__":
    sys.exit(main())
