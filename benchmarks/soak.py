"""Soak run of the random differential test: N seeded cases (default 1000) of examples/random_cases.py compiled,
run on the emulator and checked against float64 math (a mismatch: an output element outside its derived bounds;
an error: any exception, a refusal included: the generator writes only constructs docs/usage.md supports).

Run: .venv/bin/python benchmarks/soak.py [--cases 1000] [--seed 7] [--kinds rows,expr] [--start 0] [--only 3,17]
[--show]
Prints every mismatch and error (``--show``: with the kernel's source), progress every 50 cases, and last:
``soak: N cases (seed S), M mismatches, E errors, T s``. Exit status 1 when anything failed.

The same command runs against another checkout of the compiler (e.g. the commit before a fix) when that checkout's
``python/`` is imported instead of the editable install; see the commit message of this file for the before/after
command.
"""

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TILELANG_TT_POISON_PADDING", "1")   # padding must never leak into results

import tilelang  # noqa: E402

import tilelang_tt  # noqa: E402,F401
from examples.random_cases import make_cases, run_case, source  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--start", type=int, default=0, help="skip the first cases (resume a run)")
    parser.add_argument("--kinds", default="", help="comma-separated kinds to run (default: all)")
    parser.add_argument("--only", default="", help="comma-separated case numbers to run (default: all)")
    parser.add_argument("--show", action="store_true", help="print the source of every failing generated kernel")
    args = parser.parse_args()
    kinds = set(filter(None, args.kinds.split(",")))
    only = {int(i) for i in filter(None, args.only.split(","))}
    cases = make_cases(args.cases, args.seed)
    print(f"tilelang_tt from {Path(tilelang_tt.__file__).parent}", flush=True)
    t0 = time.perf_counter()
    mismatches = errors = ran = 0
    for i, case in enumerate(cases):
        if i < args.start or (kinds and case.kind not in kinds) or (only and i not in only):
            continue
        ran += 1
        try:
            ok, err, tol, detail = run_case(case, i, tilelang.compile)
            if not ok:
                mismatches += 1
                print(f"MISMATCH {i}: {case}: max error {err:.6g} (bound {tol:.6g}); {detail}", flush=True)
        except Exception as exc:  # a crash is a finding too: report it and keep going
            errors += 1
            where = traceback.extract_tb(exc.__traceback__)[-1]
            first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
            print(f"ERROR {i}: {case}: {type(exc).__name__}: {first} [{Path(where.filename).name}:{where.lineno}]",
                  flush=True)
            ok = False
        if not ok and args.show and source(case):
            print(source(case), flush=True)
        if ran % 50 == 0:
            print(f"{i + 1}/{len(cases)} cases, {mismatches} mismatches, {errors} errors, "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
    print(f"soak: {ran} cases (seed {args.seed}), {mismatches} mismatches, {errors} errors, "
          f"{time.perf_counter() - t0:.0f} s")
    return 1 if mismatches or errors else 0


if __name__ == "__main__":
    sys.exit(main())
