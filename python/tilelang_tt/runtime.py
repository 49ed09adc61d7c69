"""The object ``tilelang.compile(func, target="tt")`` returns, and the KernelCache that builds it."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from tilelang import env
from tilelang.cache.kernel_cache import KernelCache
from tilelang.jit.adapter import BaseKernelAdapter
from tilelang.jit.kernel import JITKernel
from tilelang.transform.pass_config import normalize_pass_configs

from ._tilelang_hooks import EXECUTION_BACKEND
from .errors import TTError
from .target import options_from_target

logger = logging.getLogger(__name__)


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
        super().__init__(device_mod, params, result_idx)

    def _allocate(self, index: int):
        import torch

        param = self.params[index]
        if not all(isinstance(s, int) or hasattr(s, "value") for s in param.shape):
            raise TTError(f"cannot allocate output {index}: its shape {list(param.shape)} is symbolic",
                          construct="out_idx", fix="pass the output tensor explicitly")
        shape = [int(s) for s in param.shape]
        dtype = getattr(torch, str(param.dtype))
        return torch.empty(shape, dtype=dtype)

    def run(self, *args, protocol_only: bool | None = None, backend: str | None = None):
        if self.options.compile_only:
            raise TTError("this kernel was compiled with compile_only=True (dry run)", construct="kernel call",
                          fix=f"compile without compile_only to execute; the artifact is in {self.artifact.directory}")
        from . import emulator

        n = len(self.params)
        outs = list(self.result_idx)
        if len(args) == n:
            full = list(args)
        elif len(args) == n - len(outs):
            it = iter(args)
            full = [None if i in outs else next(it) for i in range(n)]
            for i in outs:
                full[i] = self._allocate(i)
        else:
            raise TTError(f"expected {n - len(outs)} tensors (or all {n}), got {len(args)}", construct="kernel call")
        result = emulator.run(self.artifact.directory, self.artifact.plan, dict(enumerate(full)),
                              protocol_only=protocol_only, backend=backend)
        self.last_report = result.report
        from . import perf_model   # imported on use: it loads the intrinsic table (keeps `import tilelang_tt` light)

        self.last_report["model"] = perf_model.model_for_run(self.artifact.directory, self.artifact.plan, result.report)
        from .profiler import note_launch   # timing calls price the launches they observe (profiler.py)

        note_launch(self.last_report["model"])
        if not outs:
            return None
        return full[outs[0]] if len(outs) == 1 else [full[i] for i in outs]

    def _convert_torch_func(self):
        return self.run

    def get_kernel_source(self, kernel_only: bool = True) -> str:
        return self.kernel_source


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

            self.adapter.compile_model = perf_model.model_for_artifact(self.artifact_dir, self.plan)
        return {"model": self.adapter.compile_model}

    def get_profiler(self, tensor_supply_type=None):
        """TileLang's profiler: ``assert_allclose`` on tt-sim, ``do_bench`` the modeled time (profiler.py)."""
        from tilelang.profiler import TensorSupplyType

        from .profiler import TTProfiler

        return TTProfiler.for_kernel(self, tensor_supply_type or TensorSupplyType.Auto)

    def get_host_source(self) -> str:
        """The generated host program (``host.cpp``)."""
        return self.adapter.artifact.files["host.cpp"]

    def export_library(self, kernel_file) -> Path:
        """TileLang's export: a tt kernel exports as a ``.ttpkg`` package (``package.export_library``)."""
        from . import package

        return package.export_library(self, kernel_file)

    def export(self, path) -> Path:
        """Write this kernel as one versioned, hashed package file (``package.py``); ``tilelang_tt.load(path)``
        returns a callable kernel from it in another process."""
        from . import package

        return package.export(self, path)

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
    art = artifact_mod.StoredArtifact(name, files, json.loads(files["tt.plan.json"]), directory, source)
    kernel.adapter = TTKernelAdapter(params, out_idx, func, None, None, source, kernel.target, art)
    kernel.torch_function = kernel.adapter.func
    return kernel
