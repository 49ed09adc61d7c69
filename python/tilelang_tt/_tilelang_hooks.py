"""The only module that touches TileLang internals.

TileLang 0.1.15 names its execution backends in two private places: ``tilelang.cache._dispatch_map``
(which KernelCache serves a backend) and ``JITKernel._create_adapter_from_artifact`` (which adapter wraps
the compiled artifact). The TT backend registers its own entries there. It also moves its target normalizer
to the front of ``tilelang.backend.target._TARGET_NORMALIZERS``: TileLang tries normalizers in order, and the
CuTeDSL one builds ``Target(dict)`` for every dict target, whose first failure costs about a second. The autotuner's
disk persistence (``AutotuneResult.save_to_disk``) also names backends; it is skipped for tt kernels. Everything
else goes through TileLang's public backend registry (``tilelang.backend``).
"""

from __future__ import annotations

import logging

import tilelang

from .errors import TTVersionError

SUPPORTED_TILELANG = ("0.1.15",)
EXECUTION_BACKEND = "tt"


def check_tilelang_version() -> None:
    version = str(getattr(tilelang, "__version__", "unknown")).split("+")[0]
    if version not in SUPPORTED_TILELANG:
        raise TTVersionError(
            f"tilelang {version} is installed; tilelang-tt hooks into TileLang internals that are only known "
            f"for {', '.join(SUPPORTED_TILELANG)}", construct="import tilelang_tt",
            fix=f"pip install tilelang=={SUPPORTED_TILELANG[-1]}")
    import tilelang.cache as cache
    from tilelang.jit.kernel import JITKernel

    if not isinstance(getattr(cache, "_dispatch_map", None), dict) or not hasattr(
            JITKernel, "_create_adapter_from_artifact"):
        raise TTVersionError("tilelang's kernel-cache dispatch table is not where tilelang-tt expects it",
                             construct="import tilelang_tt", fix=f"pip install tilelang=={SUPPORTED_TILELANG[-1]}")


def install_kernel_cache(cache_instance) -> None:
    """Route ``execution_backend="tt"`` to our KernelCache."""
    import tilelang.cache as cache

    cache._dispatch_map[EXECUTION_BACKEND] = cache_instance


def register_target_normalizer_first(name: str, normalize) -> None:
    """Register ``normalize`` with TileLang and make it the first normalizer tried.

    Ours returns None at once for anything that is not a ``tt`` target, so trying it first changes nothing for
    other targets, and a ``{"kind": "tt", ...}`` dict never reaches the normalizers that build a TVM Target
    from every dict (the first, failing ``Target({"kind": "tt"})`` of a process costs about a second)."""
    from tilelang.backend import target as tl_target

    tl_target.register_target_normalizer(name, normalize, override=True)
    table = getattr(tl_target, "_TARGET_NORMALIZERS", None)
    if isinstance(table, dict) and name in table:
        ours = table.pop(name)
        rest = list(table.items())
        table.clear()
        table[name] = ours
        table.update(rest)


def keep_tt_autotune_results_in_memory() -> None:
    """TileLang's autotuner saves its best kernel to disk by execution-backend name (``autotuner/param.py``:
    a ``kernel_lib.so`` from ``adapter.libpath``) and reloads it through the base ``JITKernel``, neither of which
    knows "tt". For tt kernels the save is skipped (the result stays in the autotuner's memory cache; the compiled
    configs stay in tilelang-tt's compile cache, so tuning again in a new process re-lowers nothing)."""
    from tilelang.autotuner.param import AutotuneResult

    save = AutotuneResult.save_to_disk
    if getattr(save, "_tt_guard", False):
        return

    def save_to_disk(self, path, verbose: bool = False):
        if getattr(self.kernel, "execution_backend", None) == EXECUTION_BACKEND:
            logging.getLogger("tilelang_tt").debug("autotune result of a tt kernel kept in memory only (%s)", path)
            return None
        return save(self, path, verbose)

    save_to_disk._tt_guard = True
    AutotuneResult.save_to_disk = save_to_disk
