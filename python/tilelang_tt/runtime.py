"""The object ``tilelang.compile(func, target="tt")`` returns, and the KernelCache that builds it."""

from __future__ import annotations

import logging
from pathlib import Path

from tilelang.cache.kernel_cache import KernelCache
from tilelang.jit.adapter import BaseKernelAdapter
from tilelang.jit.kernel import JITKernel
from tilelang.transform.pass_config import normalize_pass_configs

from ._tilelang_hooks import EXECUTION_BACKEND
from .codegen import Artifact, lookup_artifact
from .errors import TTError
from .target import options_from_target

logger = logging.getLogger(__name__)


class TTKernelAdapter(BaseKernelAdapter):
    """Holds the generated artifact. Execution arrives with the emulator; until then a call explains."""

    def __init__(self, params, result_idx, prim_func, host_mod, device_mod, kernel_source, target, artifact):
        self.kernel_source = kernel_source
        self.artifact = artifact
        self.target = target
        self.options = options_from_target(target)
        self.prim_func = prim_func
        super().__init__(device_mod, params, result_idx)

    def _convert_torch_func(self):
        def run(*args, **kwargs):
            raise TTError(
                "this build of tilelang-tt only emits TT programs (dry run); executing them needs a Tenstorrent "
                f"device or the CPU emulator. The artifact is in {self.artifact.directory}",
                construct="kernel call", fix="build the artifact with its CMakeLists.txt against a TT-Metalium SDK")
        return run

    def get_kernel_source(self, kernel_only: bool = True) -> str:
        return self.kernel_source


class TTJITKernel(JITKernel):
    """A compiled TT kernel: ``artifact_dir``, ``plan`` and ``get_kernel_source()`` (all sources)."""

    def _create_adapter_from_artifact(self, tilelang_func, out_idx, artifact, pass_configs, compile_metadata):
        art = lookup_artifact(artifact.kernel_source)
        if art is None:
            raise TTError("the TT codegen did not record an artifact for this kernel", construct="tilelang.compile")
        return TTKernelAdapter(artifact.params, out_idx, tilelang_func, artifact.host_mod, artifact.device_mod,
                               artifact.kernel_source, self.target, art)

    @property
    def tt_artifact(self) -> Artifact:
        return self.adapter.artifact

    @property
    def artifact_dir(self) -> Path:
        return self.adapter.artifact.directory

    @property
    def plan(self) -> dict:
        return self.adapter.artifact.plan

    def get_kernel_source(self, kernel_only: bool = True) -> str:
        return self.adapter.artifact.source()


class TTKernelCache(KernelCache):
    """In-memory cache of TT kernels (artifact directories are content-addressed on disk)."""

    _instance = None

    def cached(self, func=None, out_idx=None, *args, backend_context=None, verbose=False, pass_configs=None,
               compile_flags=None, **_):
        pass_configs = normalize_pass_configs(pass_configs)
        key = self._generate_key(func=func, out_idx=out_idx, execution_backend=EXECUTION_BACKEND, args=args,
                                 target=backend_context.target, target_host=backend_context.target_host,
                                 pass_configs=pass_configs, compile_flags=compile_flags)
        with self._lock:
            kernel = self._memory_cache.get(key)
        if kernel is not None:
            return kernel
        kernel = TTJITKernel(func, out_idx=out_idx, execution_backend=EXECUTION_BACKEND, verbose=verbose,
                             pass_configs=pass_configs, compile_flags=compile_flags, backend_context=backend_context)
        with self._lock:
            return self._memory_cache.setdefault(key, kernel)
