"""TileLang's own examples, run unchanged on Tenstorrent (tt-sim), each classified by what happened.

    python benchmarks/tilelang_examples.py [EXAMPLES_DIR] [-j 2] [--timeout 300] [-k FILTER ...]
                                           [--json out.json] [--markdown out.md] [--logs DIR] [--list]

EXAMPLES_DIR is a copy of TileLang's ``examples/`` folder (default: ``../shared/tilelang-examples`` beside the
repository, when present). Nothing in it is edited or copied: each unit runs in its own Python process, from a
scratch working directory, with the example's folder first on ``sys.path``, and these changes made at start-up:

* the default target is "tt": ``TILELANG_DEFAULT_TARGET=tt`` (TileLang's variable, read by ``tilelang.compile``,
  ``@tilelang.jit`` and the autotuner) and a "tt" target detector registered last with TileLang's
  ``register_target_detector``, so ``target="auto"`` resolves to "tt" when no GPU detector finds a device;
* CUDA devices map to the CPU: a torch function mode rewrites ``device="cuda"`` / ``torch.device("cuda")``
  arguments of every torch call to the CPU and makes ``.cuda()`` the identity; ``torch.cuda.synchronize``,
  ``empty_cache``, ``set_device``, streams and NVTX ranges are no-ops. Device queries
  (``get_device_capability``, ``get_device_properties``, ``is_available``) are left alone;
* timing calls return the modeled time: ``tilelang.profiler.do_bench(fn)`` and ``torch.cuda.Event``'s
  ``elapsed_time`` give the performance model's time of the TT launches in between (``tilelang_tt.profiler``),
  and a kernel's own ``get_profiler().do_bench()`` is modeled anyway.

Units: every ``test_*`` function of a ``test_*.py`` file (TileLang's CI calls the examples this way, at CI sizes;
pytest's skip marks are not applied), and every example program (a file that imports tilelang and has an
``if __name__ == "__main__"`` block or a script's top-level calls) that no test function calls, run as
``__main__`` with no arguments. ``regression_*.py`` and ``benchmark*.py`` files, and the folders in ``EXCLUDED``
(AutoDD's deliberately failing inputs), are not units.

Each unit is one of:

* CORRECT: it finished; its own checks passed (the detail says how many checks and TT launches were seen);
* WRONG: one of its checks failed after a TT kernel ran (``torch.testing.assert_close``, TileLang's
  ``torch_assert_close`` / ``assert_allclose``, ``numpy.testing``, or an ``assert`` in the example's own code);
* CLEAR: refused with a tilelang-tt error (a ``TTError`` subclass);
* UNSUPPORTED-ARCH: CUDA-specific by design, by a marker: TileLang's test requires compute capability >= 9,
  the source uses WGMMA / TMA / tcgen05 / warp specialisation / mbarriers / PTX, MMA-emitter or MFMA intrinsics /
  clusters, the folder is AMD's, it asks torch.cuda or TileLang's carver for the GPU, or
  it needs a GPU-only package (triton, ...). CORRECT and WRONG outrank these markers (a unit whose checks all
  passed before a GPU-only package stopped it is CORRECT, its reason says what did not run);
* UNCLEAR: anything else (a raw traceback, a timeout, a crash).
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_ROOT = REPO.parent / "shared" / "tilelang-examples"
STATUSES = ("CORRECT", "WRONG", "CLEAR", "UNSUPPORTED-ARCH", "UNCLEAR")
GPU_ONLY_PACKAGES = {"triton": "Triton", "flash_attn": "FlashAttention", "deep_gemm": "DeepGEMM",
                     "fla": "flash-linear-attention (Triton)", "cutlass": "CUTLASS", "aiter": "AMD aiter",
                     "cuda": "cuda-python", "flash_mla": "FlashMLA", "vllm": "vLLM"}
# (regex over the example's source, reason): CUDA / AMD features a Tensix core has no counterpart of
SOURCE_MARKERS = (
    (r"\bT\.wgmma_gemm\b|\bwgmma\w*\(", "WGMMA (Hopper warpgroup MMA)"),
    (r"\btma_copy\b|\bcreate_tma_descriptor\b", "TMA copies (Hopper tensor memory accelerator)"),
    (r"\btcgen0?5\w*", "tcgen05 / tensor memory (NVIDIA Blackwell sm100)"),
    (r"\bT\.ws\(|\bset_max_nreg\b", "warp specialisation (T.ws / set_max_nreg)"),
    (r"\bT\.alloc_barrier\b|\bmbarrier_\w+", "mbarrier producer/consumer pipelines"),
    (r"\bT\.ptx_\w+|\bptx_ldmatrix\b|\bmma_sync\b", "PTX intrinsics"),
    (r"\bmfma\w*", "AMD MFMA intrinsics"),
    (r"\bcluster_dims\b", "thread-block clusters"),
    (r"\bTensorCoreIntrinEmitter\w*|\bmma_macro_generator\b", "CUDA tensor-core MMA intrinsics (ldmatrix/mma)"),
    (r"\bk_pack\s*=", "AMD MFMA operand packing (T.gemm k_pack=)"),
    (r"target\s*=\s*[\"'](cuda|hip)\b", "compiles for a target it names (target=\"cuda\" / \"hip\")"),
)
CUDA_MESSAGES = ("CUDA is not available", "CUDA is required", "requires CUDA", "Torch not compiled with CUDA",
                 "Cannot find cuda device", "GPU Device is not detected", "Failed to get device properties",
                 "No CUDA architecture was specified or GPU detected")
ARCH_FOLDERS = {"amd": "an AMD (ROCm) example (amd/)"}
# not units: folders whose programs are not kernel examples
EXCLUDED = {"autodd": "inputs of TileLang's AutoDD bug minimiser, written to fail (tilelang_buggy.py)",
            "plot_layout": "draws GPU (MMA / MFMA) fragment layouts with matplotlib; no kernel runs"}


@dataclass
class Unit:
    folder: str
    file: str                          # path relative to the root
    func: str | None = None            # a test function, or None: run the file as __main__
    modules: list[str] = field(default_factory=list)   # example files (relative) the unit runs
    marks: list[str] = field(default_factory=list)     # arch-specific test marks

    @property
    def id(self) -> str:
        return f"{self.file}::{self.func}" if self.func else self.file


@dataclass
class Result:
    id: str
    folder: str
    status: str
    reason: str
    seconds: float
    log: str | None = None


# ---- discovery ------------------------------------------------------------------------------------------------
def _is_program(path: Path) -> bool:
    """Imports tilelang and runs something: an ``if __name__ == "__main__"`` block, or a script's top-level call
    (``quickstart.py``) other than TileLang's settings (``tilelang.set_log_level``)."""
    name = path.name
    if name.startswith(("test_", "regression_", "benchmark")) or name == "conftest.py":
        return False
    text = path.read_text(errors="replace")
    if re.search(r"^\s*(import|from)\s+tilelang\b", text, re.M) is None:
        return False
    if "__main__" in text:
        return True
    calls = [n.value for n in ast.parse(text).body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)]
    return any(not ast.unparse(c.func).startswith("tilelang.") for c in calls)


def _test_marks(func: ast.FunctionDef) -> list[str]:
    """Marks like ``@tilelang.testing.requires_cuda_compute_version_eq(9, 0)`` that need sm90 or newer."""
    marks = []
    for dec in func.decorator_list:
        if not isinstance(dec, ast.Call):
            continue
        name = ast.unparse(dec.func)
        args = [a.value for a in dec.args if isinstance(a, ast.Constant)]
        if "requires_cuda_compute_version" in name and args and args[0] >= 9 and not name.endswith(("_lt", "_le")):
            call = f"{name.rsplit('.', 1)[-1]}({', '.join(map(str, args))})"
            marks.append(f"TileLang's test is marked {call}: an sm90+ (Hopper/Blackwell) test")
    return marks


def _test_units(root: Path, test_file: Path) -> list[Unit]:
    tree = ast.parse(test_file.read_text(errors="replace"))
    folder = test_file.parent
    local = {p.stem for p in folder.glob("*.py")}
    units = []
    for node in tree.body:
        if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
            continue
        used = sorted({n.value.id for n in ast.walk(node) if isinstance(n, ast.Attribute)
                       and isinstance(n.value, ast.Name) and n.value.id in local})
        units.append(Unit(str(folder.relative_to(root)), str(test_file.relative_to(root)), node.name,
                          [str((folder / f"{m}.py").relative_to(root)) for m in used] or
                          [str(test_file.relative_to(root))], _test_marks(node)))
    return units


def discover(root: Path) -> list[Unit]:
    """Every test function, then every example program no test function calls (see the module docstring)."""
    root = Path(root)
    units: list[Unit] = []
    for test_file in sorted(root.rglob("test_*.py")):
        units += _test_units(root, test_file)
    covered = {m for u in units for m in u.modules}
    for path in sorted(root.rglob("*.py")):
        rel = str(path.relative_to(root))
        if rel not in covered and _is_program(path):
            units.append(Unit(str(path.parent.relative_to(root)), rel, None, [rel]))
    for unit in units:
        unit.marks += [why for name, why in ARCH_FOLDERS.items() if name in Path(unit.folder).parts]
    return sorted((u for u in units if Path(u.folder).parts[:1] not in {(name,) for name in EXCLUDED}),
                  key=lambda u: (u.folder, u.id))


# ---- running (parent side) ------------------------------------------------------------------------------------
def _child_env(jobs: int) -> dict:
    env = dict(os.environ, TILELANG_DEFAULT_TARGET="tt", PYTHONHASHSEED="0", PYTHONUNBUFFERED="1")
    threads = str(max(1, (os.cpu_count() or 1) // max(1, jobs)))
    env.setdefault("OMP_NUM_THREADS", threads)
    env.setdefault("TILELANG_TT_ARTIFACT_DIR", str(Path(tempfile.gettempdir()) / "tilelang-examples-artifacts"))
    # the examples folder stays as it is (read-only in CI): bytecode of the examples goes elsewhere
    env.setdefault("PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "tilelang-examples-pycache"))
    return env


def run_unit(root: Path, unit: Unit, timeout: float, logs: Path, jobs: int = 1) -> Result:
    """Run one unit in a fresh process (its own session, killed as a group on timeout) and classify it."""
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / (re.sub(r"[^\w.-]+", "_", unit.id) + ".log")
    work = Path(tempfile.mkdtemp(prefix="tl-example-"))
    result_file = work / "result.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(asdict(unit)),
           str(Path(root).resolve()), str(result_file)]
    t0 = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=work, stdout=out, stderr=subprocess.STDOUT, env=_child_env(jobs),
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    seconds = time.perf_counter() - t0
    if (work / "autotuner.log").is_file():        # TileLang's autotuner keeps each config's error there
        with open(log, "a") as out:
            out.write("\n[tilelang_examples] autotuner.log:\n" + (work / "autotuner.log").read_text(errors="replace"))
    try:
        data = json.loads(result_file.read_text())
        status, reason = data["status"], data["reason"]
    except (OSError, ValueError, KeyError):
        status = "UNCLEAR"
        reason = (f"timeout after {timeout:.0f} s" if seconds >= timeout else
                  f"the process died (exit status {proc.returncode}) before reporting")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Result(unit.id, unit.folder, status, reason, round(seconds, 1), str(log))


def run_units(root: Path, units: list[Unit], jobs: int = 1, timeout: float = 300.0, logs: Path | None = None,
              progress: bool = True) -> list[Result]:
    """Run ``units`` ``jobs`` at a time, with a tqdm progress bar on stderr when it is a terminal (``progress``
    False: never); results in the units' order."""
    from tilelang_tt.progress import bar as progress_bar

    logs = Path(logs or Path(tempfile.gettempdir()) / "tilelang-examples-logs")
    results: dict[str, Result] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool, \
            progress_bar(total=len(units), desc="TileLang examples on tt", unit="ex", show=progress) as bar:
        futures = {pool.submit(run_unit, root, u, timeout, logs, jobs): u for u in units}
        for fut in concurrent.futures.as_completed(futures):
            res = fut.result()
            results[res.id] = res
            bar.set_postfix_str(f"{res.status} {res.id[-40:]}")
            bar.update(1)
    return [results[u.id] for u in units]


# ---- report ---------------------------------------------------------------------------------------------------
def counts(results: list[Result]) -> dict[str, int]:
    return {s: sum(r.status == s for r in results) for s in STATUSES}


def last_line(results: list[Result]) -> str:
    c = counts(results)
    return (f"examples: {c['CORRECT']}/{len(results)} correct ({c['WRONG']} wrong, {c['CLEAR']} clear, "
            f"{c['UNSUPPORTED-ARCH']} arch, {c['UNCLEAR']} unclear)")


def text_report(results: list[Result]) -> str:
    """A table per folder, then per-kind totals (test functions, programs) and the last line."""
    lines, width = [], max((len(r.id) for r in results), default=10)
    for folder in sorted({r.folder for r in results}):
        lines.append(f"\n== {folder}")
        for r in (r for r in results if r.folder == folder):
            lines.append(f"  {r.id:<{width}}  {r.status:<16} {r.seconds:7.1f}s  {r.reason}")
    tests = [r for r in results if "::" in r.id]
    mains = [r for r in results if "::" not in r.id]
    lines.append("")
    lines.append(f"TileLang's test functions: {counts(tests)['CORRECT']}/{len(tests)} correct; "
                 f"example programs no test calls: {counts(mains)['CORRECT']}/{len(mains)} correct")
    correct = [r for r in results if r.status == "CORRECT"]
    lines.append(f"of the {len(correct)} correct: {sum('no check seen' in r.reason for r in correct)} ran no "
                 f"check, {sum(' 0 TT launch' in r.reason for r in correct)} launched no TT kernel")
    lines.append("not run: " + "; ".join(f"{name}/: {why}" for name, why in EXCLUDED.items()))
    lines.append(last_line(results))
    return "\n".join(lines)


def markdown_report(results: list[Result]) -> str:
    """The per-folder summary table and the per-unit table, in Markdown (docs/usage.md)."""
    out = ["| folder | units | correct | wrong | clear | arch | unclear |", "|---|---|---|---|---|---|---|"]
    for folder in sorted({r.folder for r in results}):
        c, n = counts([r for r in results if r.folder == folder]), sum(r.folder == folder for r in results)
        out.append(f"| {folder} | {n} | " + " | ".join(str(c[s]) for s in STATUSES) + " |")
    out += ["", "| unit | status | reason |", "|---|---|---|"]
    for r in results:
        # paths relative to the repository: the table goes into docs/usage.md, not this machine's layout
        reason = r.reason.replace(f"{REPO}/", "").replace(f"{REPO.parent}/", "../").replace("|", "\\|")
        reason = reason.replace("\n", " ")
        out.append(f"| `{r.id}` | {r.status} | {reason} |")
    return "\n".join(out + ["", f"`{last_line(results)}`"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", nargs="?", default=None, help=f"TileLang examples folder (default {DEFAULT_ROOT})")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="units run in parallel (default 1)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per unit (default 300)")
    ap.add_argument("-k", "--filter", action="append", default=[], help="run units whose id contains this")
    ap.add_argument("--list", action="store_true", help="list the units and exit")
    ap.add_argument("--json", type=Path, help="write the results as JSON")
    ap.add_argument("--markdown", type=Path, help="write the tables as Markdown")
    ap.add_argument("--logs", type=Path, help="each unit's output (default $TMPDIR/tilelang-examples-logs)")
    args = ap.parse_args(argv)
    root = Path(args.root) if args.root else DEFAULT_ROOT
    if not root.is_dir():
        ap.error(f"no examples folder at {root}: pass the path of TileLang's examples/")
    units = [u for u in discover(root) if not args.filter or any(f in u.id for f in args.filter)]
    if args.list:
        print("\n".join(u.id for u in units))
        return 0
    results = run_units(root, units, args.jobs, args.timeout, args.logs)
    print(text_report(results))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    if args.markdown:
        args.markdown.write_text(markdown_report(results) + "\n")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from tilelang_examples_child import child_main

        sys.exit(child_main(json.loads(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])))
    sys.exit(main())
