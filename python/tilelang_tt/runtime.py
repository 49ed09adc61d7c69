"""The object ``tilelang.compile(func, target="tt")`` returns, and the KernelCache that builds it."""

from __future__ import annotations

import json
import logging
import numbers
import struct
import sys
import time
from pathlib import Path

from tilelang import env
from tilelang.cache.kernel_cache import KernelCache
from tilelang.jit.adapter import BaseKernelAdapter
from tilelang.jit.kernel import JITKernel
from tilelang.transform.pass_config import normalize_pass_configs

from ._tilelang_hooks import EXECUTION_BACKEND
from .device import torch_dtype_name
from .dims import bound_dims, dim_value
from .errors import TTCallError, TTError
from .sequence import SEQUENCE_FILE, SequenceArtifact
from .target import options_from_target

logger = logging.getLogger(__name__)


def warn_precision(plan: dict) -> None:
    """A ``TTPrecisionWarning`` naming what this kernel computes less exactly than its dtypes (nothing when it is
    exact, or the user chose the fidelity / TF32 that costs the bits)."""
    import warnings

    from .compute_config import precision_warnings
    from .errors import TTPrecisionWarning

    lines = precision_warnings(plan.get("precision", {}), plan.get("math_fidelity", "HiFi4"))
    if lines:
        warnings.warn(TTPrecisionWarning(f"kernel '{plan['kernel']}' ({plan.get('source', '')}) computes less exactly "
                                         "than its dtypes:\n" + "\n".join(f"  - {line}" for line in lines)),
                      stacklevel=3)


class TTKernelAdapter(BaseKernelAdapter):
    """Runs the generated artifact: on tt-sim (the CPU emulator) when no Tenstorrent device is present.

    Calling convention as in TileLang: ``kernel(a, b, c)`` with every tensor, or ``kernel(a, b)`` returning
    the outputs named by ``out_idx`` (allocated here). torch CPU tensors and NumPy arrays are accepted.
    """

    def __init__(self, params, result_idx, prim_func, host_mod, device_mod, kernel_source, target, artifact):
        self.kernel_source = kernel_source
        self.artifact = artifact
        self.target = target
        self.options = options_from_target(target)
        self.prim_func = prim_func
        self.last_report: dict | None = None
        self.compile_model: dict | None = None
        self._specs: list[ParamSpec] | None = None
        super().__init__(device_mod, params, result_idx)
        for plan in getattr(artifact, "stage_plans", [artifact.plan]):    # a sequence: each launch's own
            warn_precision(plan)

    def _allocate(self, index: int, dims: dict[str, int]):
        """The output ``index`` of an ``out_idx`` call, its symbolic dimensions (T.dynamic) taken from the inputs
        that carry them (``dims``: name -> value, ``dims.bound_dims``)."""
        import torch

        spec = self.param_specs()[index]
        try:
            shape = [int(dim_value(d, dims)) for d in spec.shape]
        except NameError as err:
            source = [str(d) for d in self.params[index].shape]     # the TileLang names (the plan's are C++'s)
            unbound = next((src for src, d in zip(source, spec.shape) if d == err.name), err.name)
            raise TTError(f"cannot allocate output {index} ({spec.name}): its shape [{', '.join(source)}] names "
                          f"{unbound}, which no input tensor's shape gives", construct="out_idx",
                          fix="pass the output tensor explicitly") from None
        return torch.empty(shape, dtype=getattr(torch, torch_dtype_name(spec.dtype)))

    def run(self, *args, protocol_only: bool | None = None, backend: str | None = None):
        if self.options.compile_only:
            raise TTError("this kernel was compiled with compile_only=True (dry run)", construct="kernel call",
                          fix=f"compile without compile_only to execute; the artifact is in {self.artifact.directory}")

        n = len(self.params)
        outs = list(self.result_idx)
        specs = self.param_specs()
        if len(args) == n:
            full = list(args)
        elif len(args) == n - len(outs):
            it = iter(args)
            full = [None if i in outs else next(it) for i in range(n)]
            dims = bound_dims([spec.shape for spec in specs], full)
            for i in outs:
                full[i] = self._allocate(i, dims)
        else:
            raise _count_error(specs, outs, len(args))
        full = [check_argument(spec, value) for spec, value in zip(specs, full)]
        if hasattr(self.artifact, "stage_plans"):     # several T.Kernel launches: one TT program each, in order
            from .sequence import allocate_intermediates, combined_report

            description = self.artifact.description
            args = full + allocate_intermediates(description, bound_dims([s.shape for s in specs], full))
            reports = [self._launch(directory, plan, args, protocol_only, backend)
                       for directory, plan in zip(self.artifact.stage_dirs(), self.artifact.stage_plans)]
            self.last_report = combined_report(reports)
        else:
            self.last_report = self._launch(self.artifact.directory, self.artifact.plan, full, protocol_only, backend)
        if not outs:
            return None
        return full[outs[0]] if len(outs) == 1 else [full[i] for i in outs]

    @staticmethod
    def _launch(directory, plan: dict, args: list, protocol_only, backend) -> dict:
        """Run one TT program (``plan``'s parameters from ``args``, by index): its report with the performance
        model of the launch, which timing calls observe (profiler.py)."""
        from . import emulator, perf_model   # imported on use (perf_model loads the intrinsic table)
        from .profiler import note_launch

        result = emulator.run(directory, plan, dict(enumerate(args)), protocol_only=protocol_only, backend=backend)
        report = result.report
        if "precision" in plan:     # the precision contract of the run (docs/usage.md, Precision)
            report["precision"] = plan["precision"]
        report["model"] = perf_model.model_for_run(directory, plan, result.report)
        note_launch(report["model"])
        return report

    def param_specs(self) -> list[ParamSpec]:
        """What each parameter takes, from the plan (dtypes, shapes, io), else from TileLang's params; named as in
        the TileLang source where it is known (the plan may rename a scalar)."""
        if self._specs is None:
            plan = self.artifact.plan
            by_index = {}
            for b in plan["buffers"]:
                packed = b.get("host_unpack")      # packed sub-byte weights: the caller passes the packed tensor
                src = packed or b
                by_index[b["param_index"]] = ParamSpec(self._source_name(b["param_index"], b["name"]), src["dtype"],
                                                       list(src["shape"]), b["io"], packed is not None)
            limits = plan.get("tile_int_limits", {})
            for a in plan.get("scalar_args", []):
                by_index[a["param_index"]] = ParamSpec(self._source_name(a["param_index"], a["name"]), a["dtype"],
                                                       None, "scalar", limit=limits.get(a["name"]))
            self._specs = [by_index.get(i) or self._spec_from_param(i) for i in range(len(self.params))]
        return self._specs

    def _source_name(self, index: int, default: str) -> str:
        func = self.prim_func
        if func is None or index >= len(func.params):
            return default
        var = func.params[index]
        return func.buffer_map[var].name if var in func.buffer_map else var.name

    def _spec_from_param(self, index: int) -> ParamSpec:
        param, name = self.params[index], self._source_name(index, f"parameter {index}")
        if param.is_scalar():
            return ParamSpec(name, str(param.dtype), None, "scalar")
        shape = [int(s) if isinstance(s, int) or hasattr(s, "value") else str(s) for s in param.shape]
        return ParamSpec(name, str(param.dtype), shape, "input")

    def _convert_torch_func(self):
        return self.run

    def get_kernel_source(self, kernel_only: bool = True) -> str:
        return self.kernel_source


class ParamSpec:
    """One kernel parameter as a call sees it: ``shape`` None for a scalar; ``io`` input/output/inout/unused/scalar;
    ``packed``: a packed sub-byte weight tensor, passed bit for bit (its dtype exactly)."""

    def __init__(self, name: str, dtype: str, shape: list | None, io: str, packed: bool = False,
                 limit: int | None = None):
        self.name, self.dtype, self.shape, self.io, self.packed = name, dtype, shape, io, packed
        self.limit = limit      # an integer scalar tiles compute with: |value| below it (the plan's tile_int_limits)

    def describe(self) -> str:
        a = "an" if self.dtype.startswith(("int", "uint")) else "a"
        if self.shape is None:
            return f"{a} {self.dtype} scalar"
        return f"{a} {self.dtype} tensor of shape {self.shape}" + (" (packed weights)" if self.packed else "")


# An integer scalar parameter's values: its dtype's range, within the one 32-bit runtime argument it is passed as
_INT_SCALAR_RANGE = {"int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-2**31, 2**31 - 1),
                     "int16": (-2**15, 2**15 - 1), "uint16": (0, 2**16 - 1), "int8": (-2**7, 2**7 - 1),
                     "uint8": (0, 2**8 - 1)}
# NumPy has no bfloat16: a float32 array stands for a bfloat16 parameter (rounded to nearest even on the way in,
# exact on the way out).
_NUMPY_STAND_INS = {"bfloat16": {"float32"}}


def _call_error(spec: ParamSpec, problem: str, fix: str) -> TTCallError:
    return TTCallError(f"parameter {spec.name} takes {spec.describe()}; {problem}", construct="kernel call", fix=fix)


def _count_error(specs: list[ParamSpec], outs: list[int], given: int) -> TTCallError:
    names = [s.name for s in specs]
    inputs = [s.name for i, s in enumerate(specs) if i not in outs]
    also = (f", or the {len(inputs)} without the outputs of out_idx={outs} ({', '.join(inputs)})" if outs else "")
    return TTCallError(f"the kernel takes {len(names)} arguments ({', '.join(names)}){also}; got {given}",
                       construct="kernel call", fix="pass one tensor or scalar per parameter, in order")


def check_argument(spec: ParamSpec, value):
    """``value`` checked against its parameter (a TTCallError names what is wrong); scalars come back as the
    Python int or float the kernel receives."""
    if spec.shape is None:
        return _check_scalar(spec, value)
    import numpy as np

    torch = sys.modules.get("torch")      # a torch tensor means torch is imported; it is optional otherwise
    if torch is not None and isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        if value.device.type != "cpu":
            no_data = " (a meta tensor has no data)" if value.device.type == "meta" else ""
            raise _call_error(spec, f"got a tensor on device {value.device}{no_data}",
                              "pass a CPU tensor (x.cpu()): tt-sim and the TT host program read and write host "
                              "memory; for an output, copy the result to the device after the call")
    elif isinstance(value, np.ndarray):
        dtype = str(value.dtype)
    else:
        raise _call_error(spec, f"got {_short(value)} ({type(value).__name__})", "pass a torch tensor or NumPy array")
    _check_dtype(spec, dtype, isinstance(value, np.ndarray))
    _check_shape(spec, [int(n) for n in value.shape])
    if spec.io in ("output", "inout"):
        _check_writable(spec, value)
    return value


def _check_dtype(spec: ParamSpec, dtype: str, is_numpy: bool) -> None:
    """TileLang's adapters take exactly the declared dtype; so do we, but for two lossless cases: NumPy's float32
    for bfloat16 (NumPy has none) and any integer dtype for an integer input (range-checked by the emulator,
    which also refuses floats there)."""
    if dtype in (spec.dtype, torch_dtype_name(spec.dtype)) or (is_numpy and dtype in _NUMPY_STAND_INS.get(spec.dtype, ())):
        return
    if dtype.startswith("complex"):
        raise _call_error(spec, f"got a tensor of dtype {dtype} (its imaginary part would be lost)",
                          "pass the real part (x.real), or real and imaginary parts as separate real tensors")
    if spec.dtype.startswith(("int", "uint")) and spec.io == "input" and not spec.packed and dtype != "bool":
        return
    cast = f"x.astype(np.{spec.dtype})" if is_numpy else f"x.to(torch.{spec.dtype})"
    alloc = f"np.empty(shape, np.{spec.dtype})" if is_numpy else f"torch.empty_like(x, dtype=torch.{spec.dtype})"
    if spec.io in ("output", "inout"):
        raise _call_error(spec, f"got a tensor of dtype {dtype} (the {spec.dtype} results would be converted to "
                          f"{dtype})", f"pass a {spec.dtype} output ({alloc}) and convert the result afterwards")
    raise _call_error(spec, f"got a tensor of dtype {dtype} (its values would be converted to {spec.dtype})",
                      f"pass a {spec.dtype} tensor ({cast})")


def _check_shape(spec: ParamSpec, shape: list[int]) -> None:
    """Rank and static dimensions (symbolic ones are bound, and checked for agreement, by the emulator)."""
    ok = len(shape) == len(spec.shape) and all(not isinstance(w, int) or w == g for w, g in zip(spec.shape, shape))
    if not ok:
        raise _call_error(spec, f"got shape {shape}", f"pass a tensor of shape {spec.shape}")


def _check_writable(spec: ParamSpec, value) -> None:
    """An output the results can be written into in place: no element shared by two indices, writeable."""
    strides = value.stride() if hasattr(value, "stride") and callable(value.stride) else value.strides
    if any(st == 0 and n > 1 for st, n in zip(strides, value.shape)):
        raise _call_error(spec, f"got an output whose elements overlap in memory (strides {list(strides)}, e.g. "
                          "from expand or broadcast_to)", "pass a tensor that owns its elements (x.contiguous())")
    if getattr(getattr(value, "flags", None), "writeable", True) is False:
        raise _call_error(spec, "got a read-only NumPy array as an output", "pass a writeable array (x.copy())")


def _check_scalar(spec: ParamSpec, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _call_error(spec, f"got {_short(value)} ({type(value).__name__})",
                          f"pass a Python {'float' if spec.dtype.startswith('float') else 'int'}"
                          " (x.item() for a one-element tensor)")
    if spec.dtype in _INT_SCALAR_RANGE:
        lo, hi = _INT_SCALAR_RANGE[spec.dtype]
        if not isinstance(value, numbers.Integral):
            raise _call_error(spec, f"got {value!r} ({type(value).__name__}), which is not an integer",
                              "pass an int; round explicitly (round(x), math.floor(x)) if that is what you mean")
        if not lo <= int(value) <= hi:
            raise _call_error(spec, f"got {int(value)}, outside [{lo}, {hi}]",
                              f"pass a value in [{lo}, {hi}], or declare the parameter with a wider dtype")
        if spec.limit is not None and abs(int(value)) >= spec.limit:
            raise _call_error(spec, f"got {int(value)}: the kernel computes with it on tiles in float32, exact for "
                              f"integers only below {spec.limit} (2^{spec.limit.bit_length() - 1}) in magnitude",
                              f"pass a value below {spec.limit}, or compute with it per block (outside T.Parallel)")
        return int(value)
    try:
        struct.pack("<f", float(value))     # OverflowError: finite, but beyond float32's range
    except OverflowError:
        raise _call_error(spec, f"got {_short(value)}, outside float32's range (|x| <= 3.4028235e38)",
                          "pass a value float32 can hold (float('inf') if infinity is meant)") from None
    return float(value)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class TTJITKernel(JITKernel):
    """A compiled TT kernel: ``artifact_dir``, ``plan`` and ``get_kernel_source()`` (all sources)."""

    compile_info: dict | None = None   # {"cache": "hit" | "miss" | "off", "key", "path", "seconds"}

    def _create_adapter_from_artifact(self, tilelang_func, out_idx, artifact, pass_configs, compile_metadata):
        from .codegen import lookup_artifact

        art = lookup_artifact(artifact.kernel_source)
        if art is None:
            raise TTError("the TT codegen did not record an artifact for this kernel", construct="tilelang.compile")
        return TTKernelAdapter(artifact.params, out_idx, tilelang_func, artifact.host_mod, artifact.device_mod,
                               artifact.kernel_source, self.target, art)

    @property
    def tt_artifact(self):
        """The ``codegen.Artifact`` (or, from the compile cache or a package, an ``artifact.StoredArtifact``)."""
        return self.adapter.artifact

    @property
    def artifact_dir(self) -> Path:
        return self.adapter.artifact.directory

    @property
    def plan(self) -> dict:
        return self.adapter.artifact.plan

    def get_kernel_source(self, kernel_only: bool = True) -> str:
        return self.adapter.artifact.source()

    @property
    def report(self) -> dict:
        """The emulator's run report of the last call (counters per core and in total), and ``model``: the
        performance model (``perf_model``) of this kernel, from the run's counters once it ran, else from the
        compiled program alone."""
        if self.adapter.last_report is not None:
            return self.adapter.last_report
        if self.adapter.compile_model is None:
            from . import perf_model

            art = self.adapter.artifact
            if hasattr(art, "stage_plans"):
                from .sequence import combined_report

                self.adapter.compile_model = combined_report(
                    [{"model": perf_model.model_for_artifact(d, p)} for d, p in zip(art.stage_dirs(),
                                                                                   art.stage_plans)])["model"]
            else:
                self.adapter.compile_model = perf_model.model_for_artifact(self.artifact_dir, self.plan)
        return {"model": self.adapter.compile_model}

    def trace(self, path=None) -> dict:
        """The modeled per-core schedule of ``report["model"]`` (the last call's counters, else the compiled
        program) as a Chrome trace-event dict (``trace.py``; open the file in ui.perfetto.dev); with ``path``, also
        written there as JSON: a new file or one tilelang-tt wrote (never a user's file, ``TTFileError``)."""
        from . import trace

        if hasattr(self.adapter.artifact, "stage_plans"):
            raise TTError("a kernel of several T.Kernel launches has one timeline per launch",
                          construct="kernel.trace",
                          fix="trace each launch from its directory: tilelang-tt model --trace out.json "
                              f"{self.artifact_dir}/<stage>")
        timeline = trace.trace_for_artifact(self.artifact_dir, self.plan, self.adapter.last_report)
        if path is not None:
            trace.write(timeline, path, what="kernel.trace")
        return timeline

    def get_profiler(self, tensor_supply_type=None):
        """TileLang's profiler: ``assert_allclose`` on tt-sim, ``do_bench`` the modeled time (profiler.py)."""
        from tilelang.profiler import TensorSupplyType

        from .profiler import TTProfiler

        return TTProfiler.for_kernel(self, tensor_supply_type or TensorSupplyType.Auto)

    def get_host_source(self) -> str:
        """The generated host program (``host.cpp``; a kernel of several launches: each launch's, in order)."""
        art = self.adapter.artifact
        return art.host_source() if hasattr(art, "host_source") else art.files["host.cpp"]

    def export_library(self, kernel_file) -> Path:
        """TileLang's export: a tt kernel exports as a ``.ttpkg`` package (``package.export_library``)."""
        from . import package

        return package.export_library(self, kernel_file)

    def export(self, path) -> Path:
        """Write this kernel as one versioned, hashed package file (``package.py``); ``tilelang_tt.load(path)``
        returns a callable kernel from it in another process."""
        from . import package

        return package.export(self, path)

    def as_torch_op(self, name: str):
        """This kernel as the torch custom op ``name`` ("namespace::op"), callable inside ``torch.compile`` graphs,
        with a fake implementation from the plan's shapes (``torch_ops.py``)."""
        from .torch_ops import torch_op

        return torch_op(self, name)

    def emulate(self, *args, protocol_only: bool = False):
        """Run on tt-sim explicitly; ``protocol_only=True`` counts traffic and tile ops without the math."""
        return self.adapter.run(*args, protocol_only=protocol_only, backend="sim")

    def run_on(self, backend: str, *args):
        """Run with an explicit backend: "sim" (tt-sim), "hw" (device through $TT_METAL_HOME) or "auto"."""
        return self.adapter.run(*args, backend=backend)


class TTKernelCache(KernelCache):
    """TT kernels: in memory, then in the persistent compile cache (``cache.py``), else compiled."""

    _instance = None

    def cached(self, func=None, out_idx=None, *args, backend_context=None, verbose=False, pass_configs=None,
               compile_flags=None, **_):
        pass_configs = normalize_pass_configs(pass_configs)
        compile_args = dict(func=func, out_idx=out_idx, verbose=verbose, pass_configs=pass_configs,
                            compile_flags=compile_flags, backend_context=backend_context)
        if not env.is_cache_enabled():     # TileLang's switches: TILELANG_DISABLE_CACHE, tilelang.disable_cache()
            return _timed(lambda: _compile(**compile_args), {"cache": "off"})
        key = self._generate_key(func=func, out_idx=out_idx, execution_backend=EXECUTION_BACKEND, args=args,
                                 target=backend_context.target, target_host=backend_context.target_host,
                                 pass_configs=pass_configs, compile_flags=compile_flags)
        with self._lock:
            kernel = self._memory_cache.get(key)
        if kernel is not None:
            return kernel
        kernel = _from_disk_or_compile(key, compile_args)
        with self._lock:
            return self._memory_cache.setdefault(key, kernel)


def _compile(**compile_args) -> TTJITKernel:
    return TTJITKernel(compile_args.pop("func"), execution_backend=EXECUTION_BACKEND, **compile_args)


def _timed(make, info: dict) -> TTJITKernel:
    t0 = time.perf_counter()
    kernel = make()
    kernel.compile_info = dict(info, seconds=time.perf_counter() - t0)
    return kernel


def _from_disk_or_compile(tilelang_key: str, compile_args: dict) -> TTJITKernel:
    from . import cache

    if not cache.enabled():
        return _timed(lambda: _compile(**compile_args), {"cache": "off"})
    key = cache.make_key(tilelang_key)
    t0 = time.perf_counter()
    entry = cache.load(key)
    if entry is not None:
        kernel = kernel_from_files(entry.name, entry.files, entry.source, compile_args["func"],
                                   compile_args["out_idx"], backend_context=compile_args["backend_context"],
                                   pass_configs=compile_args["pass_configs"],
                                   compile_flags=compile_args["compile_flags"])
        kernel.compile_info = {"cache": "hit", "key": key, "path": str(entry.path),
                               "seconds": time.perf_counter() - t0}
        logger.info("tilelang-tt: compile cache hit %s (%s)", entry.path, entry.name)
        return kernel
    kernel = _compile(**compile_args)
    art = kernel.tt_artifact
    path = cache.store(key, art.name, art.files, art.source())
    kernel.compile_info = {"cache": "miss", "key": key, "path": str(path) if path else None,
                           "seconds": time.perf_counter() - t0}
    logger.info("tilelang-tt: compile cache miss, stored %s (%s)", path, art.name)
    return kernel


def kernel_from_files(name: str, files: dict[str, str], source: str, func, out_idx, *, backend_context,
                      params=None, pass_configs=None, compile_flags=None, artifact_dir=None) -> TTJITKernel:
    """A callable TTJITKernel from an artifact's files, without compiling: the cache-hit and ``load`` path.

    ``params`` default to those of ``func`` (TileLang's KernelParams); the files are written (atomically,
    content-addressed) under the artifact root unless ``artifact_dir`` already holds them."""
    from . import artifact as artifact_mod

    kernel = TTJITKernel(func, out_idx=out_idx, execution_backend=EXECUTION_BACKEND, pass_configs=pass_configs,
                         compile_flags=compile_flags, backend_context=backend_context, from_database=True)
    if params is None:
        from tilelang.engine.lower import extrac_params

        params = extrac_params(func)
    directory = Path(artifact_dir) if artifact_dir is not None else artifact_mod.write_artifact(files, name)
    if SEQUENCE_FILE in files:
        art = SequenceArtifact.from_files(name, files, directory, source)
    else:
        art = artifact_mod.StoredArtifact(name, files, json.loads(files["tt.plan.json"]), directory, source)
    kernel.adapter = TTKernelAdapter(params, out_idx, func, None, None, source, kernel.target, art)
    kernel.torch_function = kernel.adapter.func
    return kernel
