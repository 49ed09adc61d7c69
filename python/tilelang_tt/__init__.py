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
                     TTPlanError, TTScheduleError, TTShapeError, TTTargetError, TTUnsupportedError, TTVersionError)
from .annotations import TTShard, annotate_tt_schedule, annotate_tt_sharding  # noqa: E402

annotations.install_into_tilelang_language()
logging.getLogger(__name__).addHandler(logging.NullHandler())

__version__ = "0.1.0"
__all__ = ["TTError", "TTTargetError", "TTAnnotationError", "TTScheduleError", "TTShapeError", "TTUnsupportedError",
           "TTLoweringError", "TTPlanError", "TTVersionError", "TTPackageError", "TTCallError", "TTShard",
           "annotate_tt_schedule", "annotate_tt_sharding", "backend", "language", "load"]


def load(path, out_idx=None):
    """A callable kernel from a package written by ``kernel.export(path)`` or from an artifact directory
    (``package.py``); a corrupted, truncated, other-version or hash-mismatched file raises TTPackageError."""
    from .package import load as load_package

    return load_package(path, out_idx)
