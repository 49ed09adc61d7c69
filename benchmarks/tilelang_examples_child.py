"""The process that runs one TileLang example unit for ``tilelang_examples.py``: the start-up changes (target,
CUDA -> CPU, modeled timing), the run, and the classification. Nothing here edits an example."""

from __future__ import annotations

import ast
import contextlib
import importlib
import json
import os
import random
import re
import runpy
import sys
import time
import traceback
from pathlib import Path

from tilelang_examples import CUDA_MESSAGES, GPU_ONLY_PACKAGES, SOURCE_MARKERS, Unit


class State:
    """What the run showed: the TT launches (models), the checks seen, the check that failed, TT errors raised."""

    def __init__(self):
        self.launches: list[dict] = []
        self.checks = 0
        self.failed_check: BaseException | None = None
        self.tt_errors: list[BaseException] = []
        self.precision_warnings: list[str] = []   # TTPrecisionWarning lines: what the kernels compute less exactly


STATE = State()


# ---- start-up changes -----------------------------------------------------------------------------------------
def _cuda_to_cpu(device):
    import torch

    if isinstance(device, torch.device):
        return torch.device("cpu") if device.type == "cuda" else device
    if isinstance(device, str) and device.split(":")[0] == "cuda":
        return "cpu"
    if isinstance(device, int) and not isinstance(device, bool):
        return "cpu"        # torch reads a bare integer device as a CUDA ordinal
    return device


def _device_mode():
    """A torch function mode: CUDA device arguments of any torch call become the CPU; ``.cuda()`` is the identity
    (the tensor already is where "cuda" now means)."""
    import torch
    from torch.overrides import TorchFunctionMode

    class CudaToCpu(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func is torch.Tensor.cuda:
                return args[0]
            if "device" in kwargs:
                kwargs["device"] = _cuda_to_cpu(kwargs["device"])
            if func is torch.Tensor.to and len(args) > 1 and not isinstance(args[1], (torch.dtype, torch.Tensor)):
                args = (args[0], _cuda_to_cpu(args[1]), *args[2:])
            return func(*args, **kwargs)

    return CudaToCpu()


class ModeledEvent:
    """``torch.cuda.Event``: ``elapsed_time`` is the modeled time of the TT launches between the two records
    (ms), or the host's wall time when none happened in between."""

    def __init__(self, *args, **kwargs):
        self.mark = None

    def record(self, stream=None):
        self.mark = (len(STATE.launches), sum(m.get("seconds", 0.0) for m in STATE.launches), time.perf_counter())

    def elapsed_time(self, end) -> float:
        if end.mark[0] > self.mark[0]:
            return (end.mark[1] - self.mark[1]) * 1e3
        return (end.mark[2] - self.mark[2]) * 1e3

    def synchronize(self):
        pass

    def wait(self, stream=None):
        pass

    def query(self) -> bool:
        return True


class _Stream(contextlib.nullcontext):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def synchronize(self):
        pass

    def wait_stream(self, other):
        pass

    def wait_event(self, event):
        pass


def _stub_torch_cuda() -> None:
    """No-ops for what only orders or frees GPU work; events are modeled; device queries stay as they are."""
    import torch

    def returning(value):       # one function object per name: torch._dynamo keeps a rule per torch function
        return lambda *args, **kwargs: value

    for name in ("synchronize", "empty_cache", "set_device", "init", "reset_peak_memory_stats", "ipc_collect",
                 "manual_seed", "manual_seed_all"):
        setattr(torch.cuda, name, returning(None))
    for name in ("current_device", "memory_allocated", "max_memory_allocated", "memory_reserved"):
        setattr(torch.cuda, name, returning(0))
    torch.cuda.Event = ModeledEvent
    torch.cuda.Stream = torch.cuda.stream = torch.cuda.device = _Stream
    torch.cuda.current_stream = returning(_Stream())
    torch.cuda.default_stream = returning(_Stream())
    for name in ("range_push", "range_pop", "mark"):
        setattr(torch.cuda.nvtx, name, returning(None))
    torch.cuda.nvtx.range = _Stream
    torch.cuda.profiler.start, torch.cuda.profiler.stop = returning(None), returning(None)


def _cpu_generators() -> None:
    """``torch.Generator(device="cuda")`` is a CPU generator (a subclass, so torch still accepts it)."""
    import torch

    base = torch.Generator

    class Generator(base):
        def __new__(cls, device="cpu"):
            return base.__new__(cls, device=_cuda_to_cpu(device))

        def __init__(self, device="cpu"):
            pass

    torch.Generator = Generator


def _modeled_do_bench(fn, *args, quantiles=None, **kwargs):
    """``tilelang.profiler.do_bench``: the modeled time of the TT launches ``fn`` makes (ms)."""
    from tilelang_tt.profiler import modeled_time

    latency = modeled_time(fn)
    if quantiles is not None:
        return [latency] * len(quantiles) if len(quantiles) > 1 else latency
    return latency


def _counted(fn, name: str):
    """Wrap a check: count it; remember the exception it raises (a failed check)."""
    def check(*args, **kwargs):
        STATE.checks += 1
        try:
            return fn(*args, **kwargs)
        except BaseException as err:
            STATE.failed_check = STATE.failed_check or err
            raise
    check.__wrapped__ = fn
    check.__name__ = name
    return check


def _observe_checks() -> None:
    import numpy.testing
    import tilelang.profiler
    import tilelang.utils.tensor
    import torch

    import tilelang_tt.profiler as ttp

    torch.testing.assert_close = _counted(torch.testing.assert_close, "assert_close")
    torch.allclose = _counted(torch.allclose, "allclose")
    for name in ("assert_allclose", "assert_array_equal", "assert_array_almost_equal", "assert_equal"):
        setattr(numpy.testing, name, _counted(getattr(numpy.testing, name), name))
    for mod in (tilelang.utils.tensor, ttp):
        mod.torch_assert_close = _counted(tilelang.utils.tensor.__dict__["torch_assert_close"], "torch_assert_close")
    for cls in (tilelang.profiler.Profiler, ttp.TTProfiler):
        for name in ("assert_allclose", "manual_assert_close"):
            setattr(cls, name, _counted(cls.__dict__[name], name))


def _observe_tt_errors() -> None:
    """TT errors raised by a compile are kept: the autotuner swallows them ("Auto-tuning failed")."""
    from tilelang_tt.errors import TTError
    from tilelang_tt.runtime import TTKernelCache

    cached = TTKernelCache.cached

    def observed(self, *args, **kwargs):
        try:
            return cached(self, *args, **kwargs)
        except TTError as err:
            STATE.tt_errors.append(err)
            raise

    TTKernelCache.cached = observed


def _observe_precision_warnings() -> None:
    """TTPrecisionWarnings are kept (every one, not once per call site): a WRONG result says whether the compile
    warned of the bits its kernels lose."""
    import warnings

    from tilelang_tt.errors import TTPrecisionWarning

    shown = warnings.showwarning

    def observed(message, category, *args, **kwargs):
        if issubclass(category, TTPrecisionWarning):
            for line in str(message).splitlines()[1:]:
                if line.strip() not in STATE.precision_warnings:
                    STATE.precision_warnings.append(line.strip())
        return shown(message, category, *args, **kwargs)

    warnings.simplefilter("always", TTPrecisionWarning)
    warnings.showwarning = observed


def set_up() -> contextlib.ExitStack:
    """Every start-up change; returns the context that keeps the device mode and the launch observer on."""
    os.environ["TILELANG_DEFAULT_TARGET"] = "tt"
    import numpy as np
    import tilelang
    import tilelang.profiler
    import tilelang.profiler.bench
    import torch
    from tilelang.backend.target import register_target_detector

    import tilelang_tt  # noqa: F401  (registers the target)
    from tilelang_tt.profiler import observe_launches

    register_target_detector("tt", lambda: "tt", override=True)    # tried after the GPU detectors
    _stub_torch_cuda()
    _cpu_generators()
    tilelang.profiler.do_bench = tilelang.profiler.bench.do_bench = _modeled_do_bench
    _observe_checks()
    _observe_tt_errors()
    _observe_precision_warnings()
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    stack = contextlib.ExitStack()
    STATE.launches = stack.enter_context(observe_launches(every_thread=True))
    stack.enter_context(_device_mode())
    return stack


def _every_thread_in_device_mode() -> None:
    """Torch function modes are per thread: threads the example (or TileLang's autotuner) starts enter it too."""
    import threading

    run = threading.Thread.run

    def run_in_mode(self):
        with _device_mode():
            run(self)

    threading.Thread.run = run_in_mode


# ---- run ------------------------------------------------------------------------------------------------------
def run(root: Path, unit: Unit) -> None:
    path = root / unit.file
    sys.path.insert(0, str(path.parent))
    if unit.func is None:
        sys.argv = [str(path)]
        runpy.run_path(str(path), run_name="__main__")
        return
    module = importlib.import_module(path.stem)
    getattr(module, unit.func)()


# ---- classification -------------------------------------------------------------------------------------------
def _chain(err: BaseException) -> list[BaseException]:
    out = []
    while err is not None and err not in out:
        out.append(err)
        err = err.__cause__ or err.__context__
    return out


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:300]


def _message(err: BaseException, lines: int = 4) -> str:
    """The first lines of a failed check's message (torch's says how many elements and by how much)."""
    text = [t.strip() for t in str(err).strip().splitlines() if t.strip()][:lines]
    return f"{type(err).__name__}: {'; '.join(text)}"[:500]


def _where(err: BaseException, root: Path, in_examples: bool = False) -> str:
    """The innermost frame of the traceback (in the examples with ``in_examples``), relative to the examples or
    site-packages when it is in them."""
    frames = traceback.extract_tb(err.__traceback__)
    if in_examples:
        frames = [f for f in frames if f.filename.startswith(str(root))] or frames
    if not frames:
        return ""
    f = frames[-1]
    name = f.filename
    for base in (str(root) + "/", "site-packages/"):
        if base in name:
            name = name.split(base, 1)[1]
    return f" at {name}:{f.lineno}"


def _source_markers(root: Path, unit: Unit) -> list[str]:
    text = "\n".join((root / m).read_text(errors="replace") for m in unit.modules if (root / m).exists())
    text = re.sub(r"#[^\n]*", "", text)          # markers in comments do not count
    return [reason for pattern, reason in SOURCE_MARKERS if re.search(pattern, text)]


def _gpu_only_import(root: Path, unit: Unit, name: str) -> str | None:
    """The GPU-only package ``name`` was to be imported from (an optional import the example guards with
    ``try: from fla.ops... import name``)."""
    for rel in unit.modules:
        for node in ast.walk(ast.parse((root / rel).read_text(errors="replace"))):
            if (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in GPU_ONLY_PACKAGES
                    and any((a.asname or a.name) == name for a in node.names)):
                return node.module.split(".")[0]
    return None


def _missing_package(e: BaseException) -> str | None:
    """The top-level package a ModuleNotFoundError could not import."""
    return (e.name or "").split(".")[0] if isinstance(e, ModuleNotFoundError) else None


def _missing_gpu_package(err: BaseException) -> str | None:
    """The GPU-only package whose import ended the run, if one did."""
    return next((p for p in map(_missing_package, _chain(err)) if p in GPU_ONLY_PACKAGES), None)


def _arch_reason(err: BaseException, root: Path, unit: Unit) -> str | None:
    marks = unit.marks + _source_markers(root, unit)
    for e in _chain(err):
        package = _missing_package(e)
        if isinstance(e, NameError) and e.name:
            package = _gpu_only_import(root, unit, e.name)
        target = re.match(r"Target ((cuda|hip)\b.*?) is not supported", str(e))
        if package in GPU_ONLY_PACKAGES:
            marks.append(f"needs {GPU_ONLY_PACKAGES[package]} (a GPU-only package)")
        elif target:
            marks.append(f"compiles for target {target.group(1)!r}, which it names")
        elif any(m in str(e) for m in CUDA_MESSAGES):
            calls = [f.name for f in traceback.extract_tb(e.__traceback__) if "/torch/cuda/" in f.filename]
            marks.append(f"asks torch.cuda for the device ({calls[0]})" if calls else
                         f"requires a CUDA device ({_first_line(e)}{_where(e, root, in_examples=True)})")
    return "; ".join(dict.fromkeys(marks)) or None


def _is_check_failure(err: BaseException, root: Path) -> bool:
    if not STATE.launches:
        return False
    chain = _chain(err)
    if STATE.failed_check is not None and STATE.failed_check in chain:
        return True
    frames = traceback.extract_tb(err.__traceback__)
    return isinstance(err, AssertionError) and bool(frames) and frames[-1].filename.startswith(str(root))


def _autotuner_error() -> str:
    """The last exception line of TileLang's ``autotuner.log`` (in the working directory), where the autotuner
    writes why each config failed."""
    log = Path("autotuner.log")
    lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
    errors = [t.strip() for t in lines if re.match(r"^\s*[\w.]+(Error|Exception): ", t)]
    return f" (last config's error: {errors[-1][:300]})" if errors else ""


def classify(err: BaseException | None, root: Path, unit: Unit) -> tuple[str, str]:
    from tilelang_tt.errors import TTError

    n, ms = len(STATE.launches), sum(m.get("seconds", 0.0) for m in STATE.launches) * 1e3
    if err is None:
        seen = f"{STATE.checks} check(s)" if STATE.checks else "no check seen"
        return "CORRECT", f"{seen}, {n} TT launch(es), {ms:.3f} ms modeled"
    if _is_check_failure(err, root):
        warned = f" [warned: {'; '.join(w.lstrip('- ') for w in STATE.precision_warnings)}]" \
            if STATE.precision_warnings else " [no TTPrecisionWarning]"
        return "WRONG", _message(err) + _where(err, root, in_examples=True) + warned
    package = _missing_gpu_package(err)
    if package and STATE.checks and STATE.launches and STATE.failed_check is None:
        # its checks passed; what stopped it afterwards is a GPU-only package it compares speed with
        return "CORRECT", (f"{STATE.checks} check(s), {n} TT launch(es), {ms:.3f} ms modeled; then needs "
                           f"{GPU_ONLY_PACKAGES[package]} (a GPU-only package), not run")
    tuning = "Auto-tuning failed" in str(err)
    if tuning and STATE.launches and STATE.failed_check is not None:
        return "WRONG", "the autotuner's check failed: " + _message(STATE.failed_check)
    arch = _arch_reason(err, root, unit)
    if arch:
        return "UNSUPPORTED-ARCH", arch
    tt = next((e for e in _chain(err) if isinstance(e, TTError)), None)
    if tt is None and STATE.tt_errors and tuning:
        tt = STATE.tt_errors[-1]
    if tt is not None and "does not compile" not in str(tt):     # generated code that does not build is a bug
        return "CLEAR", f"{type(tt).__name__}: {' '.join(str(tt).split())}"[:400]
    return "UNCLEAR", _first_line(err) + _where(err, root) + (_autotuner_error() if tuning else "")


def child_main(spec: dict, root: Path, result_file: Path) -> int:
    unit = Unit(**spec)
    err = None
    try:
        with set_up():
            _every_thread_in_device_mode()
            run(root, unit)
    except SystemExit as exit_:
        if exit_.code not in (None, 0):
            err = exit_
    except BaseException as caught:       # the example's failure is the result, whatever it is
        err = caught
    if err is not None:
        traceback.print_exception(err)
    status, reason = classify(err, root, unit)
    result_file.write_text(json.dumps({"status": status, "reason": reason}))
    print(f"\n[tilelang_examples] {status}: {reason}", flush=True)
    return 0
