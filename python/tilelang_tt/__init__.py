"""tilelang-tt: the Tenstorrent (TT-Metalium) backend for TileLang, as a plugin.

``import tilelang_tt`` registers the ``tt`` target; then ``tilelang.compile(func, target="tt")`` (or
``"tt -arch=blackhole"``, or ``{"kind": "tt", "arch": ..., "max_cores": ...}``) lowers an unchanged
TileLang grid kernel to persistent reader/compute/writer kernels, a host program and ``tt.plan.json``.
"""

import logging

import tilelang  # noqa: F401  (TileLang first: it sets up its TVM)

from ._tilelang_hooks import check_tilelang_version

check_tilelang_version()

from . import annotations, backend, language  # noqa: E402
from .errors import (TTAnnotationError, TTCallError, TTError, TTLoweringError, TTPackageError,  # noqa: E402
                     TTPlanError, TTPrecisionWarning, TTScheduleError, TTShapeError, TTTargetError, TTUnsupportedError,
                     TTVersionError)
from .annotations import TTShard, annotate_tt_schedule, annotate_tt_sharding  # noqa: E402

annotations.install_into_tilelang_language()
logging.getLogger(__name__).addHandler(logging.NullHandler())

from .version import __version__  # noqa: E402
__all__ = ["TTError", "TTTargetError", "TTAnnotationError", "TTScheduleError", "TTShapeError", "TTUnsupportedError",
           "TTLoweringError", "TTPlanError", "TTVersionError", "TTPackageError", "TTCallError", "TTPrecisionWarning", "TTShard",
           "annotate_tt_schedule", "annotate_tt_sharding", "backend", "language", "load", "torch_op"]


def load(path, out_idx=None):
    """A callable kernel from a package written by ``kernel.export(path)`` or from an artifact directory, without
    the TileLang source; a corrupted, truncated, other-version or hash-mismatched file raises TTPackageError.

    ``out_idx`` defaults to the one the kernel was exported with (none for a directory: pass every tensor).
    Calls run on tt-sim here, or on a Tenstorrent device where one is present (as for compiled kernels).
    (Here, above both: ``package.py`` reads the files, ``runtime.py`` makes the kernel, and only the runtime's
    kernels import the package format, to export themselves.)"""
    from tilelang.backend.module import create_backend_context

    from ._tilelang_hooks import EXECUTION_BACKEND
    from .codegen import Artifact
    from .package import kernel_options, params_from_plan, read_kernel
    from .runtime import kernel_from_files
    from .target import make_options, make_tt_target

    header, files, plan = read_kernel(path)
    options, default_out = kernel_options(header, plan)
    context = create_backend_context(make_tt_target(make_options(**options)), None, EXECUTION_BACKEND)
    out = list(default_out) if out_idx is None else out_idx
    kernel = kernel_from_files(plan["kernel"], files, Artifact(plan["kernel"], files, plan).source(), None, out,
                               backend_context=context, params=params_from_plan(plan))
    kernel.package_header = header
    return kernel


def torch_op(kernel, name: str):
    """Register a compiled kernel as the torch custom op ``name`` ("namespace::op") and return it: it runs inside
    ``torch.compile`` graphs, its fake implementation allocating outputs from the plan (``torch_ops.py``)."""
    from .torch_ops import torch_op as register

    return register(kernel, name)
