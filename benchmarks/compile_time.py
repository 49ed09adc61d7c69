"""Compile time: tilelang-tt beside TileLang's own CUDA lowering (source only, no nvcc), the persistent compile
cache across processes, the import time of tilelang_tt, and the dict target form against the string form.

Run: .venv/bin/python benchmarks/compile_time.py [--repeat N] [--only GEMM,softmax]
No GPU or TT device is needed. Every "cold" number is the first compile in a fresh process (imports excluded,
so lazy imports and first-use setup are included), the median over N fresh processes, the backends' processes
interleaved (one process is too noisy on a shared 2-core machine: +-50%); "warm" is the median of N further compiles in the first of them, with
TileLang's cache disabled so each one lowers again. The cache rows are medians over N pairs of processes. tilelang-tt is timed through ``tilelang.compile``
(lowering, codegen, plan validation and writing the artifact); CUDA through ``tilelang.lower(func, "cuda")``.
A kernel the TT backend cannot compile yet prints "unsupported: <error>" in its row.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _gemm():
    from examples import kernels as K

    return K.tilelang_example_gemm(1024, 1024, 1024)


def _elementwise():
    from examples import kernels as K

    return K.elementwise_add(1024, 1024, "float32")


def _softmax():
    from examples import kernels as K

    return K.softmax(1024, 1024, 32, "float32")


def _attention():
    """FlashAttention forward in the form of TileLang's example_mha_fwd_bhsd.py (one head)."""
    from examples import kernels as K

    return K.flash_attention(1, 1, 1024, 1024, 64, dtype="float16")


CASES = {
    "GEMM": ("GEMM 1024^3 (128x128x32 blocks, fp16/fp32, transpose_B)", _gemm),
    "elementwise": ("elementwise add 1024x1024 fp32 (32x32 blocks)", _elementwise),
    "softmax": ("softmax 1024x1024 fp32 (32-row blocks)", _softmax),
    "attention": ("FlashAttention fwd, seq 1024, dim 64 fp16 (64x64 blocks)", _attention),
}


# ---- workers: one fresh process per (backend, kernel) -------------------------------------------------------------
def _compile_tt(make, target):
    import tilelang

    func = make()
    t0 = time.perf_counter()
    kernel = tilelang.compile(func, target=target)
    return time.perf_counter() - t0, kernel


def _compile_cuda(make, target):
    from tilelang.engine.lower import lower
    from tvm.target import Target

    func = make()
    t0 = time.perf_counter()
    target = Target(target)
    with target:
        lower(func, target=target)
    return time.perf_counter() - t0, None


def worker(backend: str, case: str, repeat: int, target: str | None) -> dict:
    import tilelang

    import tilelang_tt  # noqa: F401  (registers "tt"; the CUDA run pays the same import)

    if backend != "tt-cache":
        tilelang.disable_cache()
    if backend == "tt-preloaded":   # the compiler's modules imported before the clock starts
        import tilelang_tt.codegen  # noqa: F401
        import tilelang_tt.pipeline  # noqa: F401
    compile_one = _compile_cuda if backend == "cuda" else _compile_tt
    target = target or ("cuda" if backend == "cuda" else "tt")
    target = json.loads(target) if target.startswith("{") else target
    make = CASES[case][1]
    try:
        cold, kernel = compile_one(make, target)
    except Exception as err:  # noqa: BLE001  (a row that fails prints why)
        return {"error": f"{type(err).__name__}: {str(err).strip().splitlines()[0][:100]}"}
    out = {"cold": cold}
    if backend == "tt-cache":
        out["cache"] = kernel.compile_info["cache"]
        return out
    if repeat:
        out["warm"] = statistics.median(compile_one(make, target)[0] for _ in range(repeat))
    return out


def _base_env() -> dict:
    """The caller's environment with bytecode cached as in any install (pip compiles TileLang's at install time,
    ours is written on first import): a PYTHONDONTWRITEBYTECODE would recompile each edited module per process."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _spawn(args: list[str], env: dict | None = None) -> dict:
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                          env={**_base_env(), **(env or {})})
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1][:100] if proc.stderr.strip() else "crashed"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _cold_rows(case: str, backends: tuple, repeat: int, env: dict) -> dict:
    """Per backend: the first process's result (cold, warm) with ``cold`` the median over ``repeat`` fresh
    processes (the others compile once). The backends' processes are interleaved round by round, so a load change
    on the machine reaches every backend alike."""
    rows: dict = {}
    for i in range(repeat):
        for backend in backends:
            if "error" in rows.get(backend, {}):
                continue
            run = _spawn(["--worker", backend, case, "--repeat", str(repeat if i == 0 else 0)], env)
            if "error" in run:
                rows[backend] = run
                continue
            rows.setdefault(backend, {**run, "colds": []})["colds"].append(run["cold"])
    for row in rows.values():
        if "colds" in row:
            row["cold"] = statistics.median(row.pop("colds"))
    return rows


def _import_times(repeat: int) -> tuple[float, float]:
    code = ("import time; t0 = time.perf_counter(); import tilelang; t1 = time.perf_counter(); import tilelang_tt; "
            "t2 = time.perf_counter(); print(t1 - t0, t2 - t1)")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_base_env()).stdout.split()
            for _ in range(repeat)]
    return statistics.median(float(r[0]) for r in runs), statistics.median(float(r[1]) for r in runs)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", default=",".join(CASES), help="comma-separated rows: " + ",".join(CASES))
    parser.add_argument("--worker", nargs=2, metavar=("BACKEND", "CASE"), help=argparse.SUPPRESS)
    parser.add_argument("--target", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], args.worker[1], args.repeat, args.target)))
        return 0

    scratch = Path(tempfile.mkdtemp(prefix="tt-compile-bench-"))
    env = {"TILELANG_CACHE_DIR": str(scratch / "tilelang-cache"), "TILELANG_TT_ARTIFACT_DIR": str(scratch / "art")}
    cases = [c for c in args.only.split(",") if c]

    tl_import, tt_import = _import_times(args.repeat)
    print(f"import tilelang: {_ms(tl_import)}; import tilelang_tt afterwards: {_ms(tt_import)} "
          f"(+{tt_import / tl_import * 100:.1f}%)\n")

    _spawn(["--worker", "tt", "elementwise", "--repeat", "0"], env)   # compiles the templates once, like .pyc
    print(f"{'kernel':58s} {'TT cold':>11s} {'CUDA cold':>11s} {'ratio':>6s} {'TT warm':>11s} {'CUDA warm':>11s} "
          f"{'ratio':>6s} {'TT cold*':>11s} {'ratio*':>6s}")
    for case in cases:
        title = CASES[case][0]
        rows = _cold_rows(case, ("tt", "tt-preloaded", "cuda"), args.repeat, env)
        tt, pre, cuda = rows["tt"], rows["tt-preloaded"], rows["cuda"]
        if "error" in tt:
            cuda_text = (f"(CUDA failed too: {cuda['error']})" if "error" in cuda
                         else f"(CUDA cold {_ms(cuda['cold'])}, warm {_ms(cuda['warm'])})")
            print(f"{title:58s} unsupported: {tt['error']} {cuda_text}")
            continue
        if "error" in cuda:
            print(f"{title:58s} {_ms(tt['cold'])}   CUDA failed: {cuda['error']}")
            continue
        print(f"{title:58s} {_ms(tt['cold'])} {_ms(cuda['cold'])} {tt['cold'] / cuda['cold']:5.2f}x "
              f"{_ms(tt['warm'])} {_ms(cuda['warm'])} {tt['warm'] / cuda['warm']:5.2f}x "
              f"{_ms(pre['cold'])} {pre['cold'] / cuda['cold']:5.2f}x")
    print("* TT cold with tilelang_tt's compiler modules (pipeline, codegen, Jinja2) imported before the "
          "clock starts, as TileLang's CUDA modules are by `import tilelang`")

    print("\npersistent compile cache (same kernel, two fresh processes sharing an empty cache; templates primed; "
          f"median of {args.repeat} pairs):")
    for case in cases:
        firsts, seconds, states = [], [], set()
        for i in range(args.repeat):
            cache_env = {**env, "TILELANG_CACHE_DIR": str(scratch / f"shared-cache-{case}-{i}")}
            _spawn(["--worker", "tt", "elementwise", "--repeat", "0"], cache_env)   # templates only: cache off
            first = _spawn(["--worker", "tt-cache", case], cache_env)
            if "error" in first:
                break
            second = _spawn(["--worker", "tt-cache", case], cache_env)
            firsts.append(first["cold"])
            seconds.append(second["cold"])
            states.add((first["cache"], second["cache"]))
        if not firsts:
            print(f"  {case:12s} unsupported: {first['error']}")
            continue
        f, s2 = statistics.median(firsts), statistics.median(seconds)
        print(f"  {case:12s} first process {_ms(f)} ({'/'.join(sorted(a for a, _ in states))}), second {_ms(s2)} "
              f"({'/'.join(sorted(b for _, b in states))}): ratio {s2 / f:.3f}")

    print("\ntarget spelling (first compile of the GEMM in a fresh process):")
    for spelling in ('"tt -arch=wormhole_b0"', '{"kind": "tt", "arch": "wormhole_b0"}'):
        target = json.loads(spelling) if spelling.startswith("{") else spelling.strip('"')
        res = _spawn(["--worker", "tt", "GEMM", "--repeat", "1", "--target",
                      json.dumps(target) if isinstance(target, dict) else target], env)
        print(f"  {spelling:42s} {_ms(res['cold']) if 'cold' in res else res['error']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
