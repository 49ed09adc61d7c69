"""TileLang's profiler and autotuner with target "tt": checks on tt-sim, time from the performance model.

``kernel.get_profiler()`` returns a :class:`TTProfiler`, TileLang's ``Profiler`` (its input generation, its
``torch_assert_close``) with three changes:

* ``assert_allclose`` / ``manual_assert_close`` run the kernel where it runs (tt-sim, the CPU emulator, when no
  card is present) and never call ``torch.cuda.synchronize``;
* ``do_bench()`` returns the **modeled** time of one launch in milliseconds (``perf_model``: the emulator's
  counters of a protocol-only run priced with the device's rates), as a :class:`Latency` (a float) whose
  ``source`` is ``"modeled"`` and whose ``model`` is the whole model; the same is logged and kept in
  ``profiler.last_bench``. With a card present (``hardware.hardware_available()``) it is the measured wall time
  of the host program's run instead (``source == "measured"``);
* ``do_bench(fn)`` of any other callable: the modeled time of the TT kernel launches ``fn`` makes, or, when it
  launches none (a torch reference program), the host CPU's wall time of one call (``source == "host wall"``).

``@tilelang.autotune`` and ``tilelang.autotuner.AutoTuner`` use the profiler unchanged, so with target "tt" the
cost of a config is its modeled time (``result.latency.source == "modeled"``), and ``ref_prog`` (unless
``skip_check``) checks each config on the emulator with ``assert_allclose``.

:func:`modeled_time` and :func:`observe_launches` serve any timing call (the example harness maps
``tilelang.profiler.do_bench`` and CUDA events to them).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

from tilelang.profiler import Profiler, TensorSupplyType
from tilelang.utils.tensor import is_float8_dtype, torch_assert_close

logger = logging.getLogger(__name__)

MODELED = "modeled"
MEASURED = "measured"
HOST_WALL = "host wall"
_local = threading.local()
_process_sinks: list[list] = []      # observe_launches(every_thread=True)


class Latency(float):
    """Milliseconds, with where they come from: ``source`` (modeled | measured | host wall), ``label`` (a sentence)
    and, when modeled, ``model`` (the performance model of the launch, or ``models`` of several)."""

    source: str
    label: str
    models: list

    def __new__(cls, ms: float, source: str, label: str, models: list | None = None):
        obj = super().__new__(cls, ms)
        obj.source, obj.label, obj.models = source, label, list(models or [])
        return obj

    @property
    def model(self) -> dict | None:
        return self.models[0] if len(self.models) == 1 else None

    def __reduce__(self):       # pickles (the autotuner's cache) and deep-copies as a Latency
        return (Latency, (float(self), self.source, self.label, self.models))


# ---- launches ------------------------------------------------------------------------------------------------
def note_launch(model: dict) -> None:
    """Called by the runtime after every launch with its performance model."""
    for sink in (*getattr(_local, "sinks", ()), *_process_sinks):
        sink.append(model)


@contextlib.contextmanager
def observe_launches(every_thread: bool = False):
    """Collect the performance models of the TT launches made inside the block: by this thread, or by any
    thread with ``every_thread=True``."""
    sinks = _process_sinks if every_thread else getattr(_local, "sinks", None)
    if sinks is None:
        sinks = _local.sinks = []
    models: list[dict] = []
    sinks.append(models)
    try:
        yield models
    finally:
        sinks.remove(models)


def modeled_time(fn: Callable, *args, **kwargs) -> Latency:
    """Call ``fn`` once: the summed modeled time of the TT launches it made, else its host wall time (ms)."""
    with observe_launches() as models:
        t0 = time.perf_counter()
        fn(*args, **kwargs)
        wall_ms = (time.perf_counter() - t0) * 1e3
    priced = [m for m in models if "seconds" in m]
    if not models:
        return Latency(wall_ms, HOST_WALL, "host CPU wall time of one call (it launched no TT kernel)")
    if len(priced) < len(models):
        errors = "; ".join(m.get("error", "?") for m in models if "seconds" not in m)
        logger.warning("tilelang-tt: %d of %d launches have no modeled time (%s)", len(models) - len(priced),
                       len(models), errors)
    ms = sum(m["seconds"] for m in priced) * 1e3
    return Latency(ms, MODELED, f"modeled by the tilelang-tt performance model ({len(priced)} launch(es)), "
                   "not measured", priced)


# ---- the profiler ---------------------------------------------------------------------------------------------
def _as_list(outs) -> list:
    if outs is None:
        return []
    if isinstance(outs, (list, tuple)):
        return list(outs)
    return [outs]


class TTProfiler(Profiler):
    """TileLang's Profiler for a tt kernel (see the module docstring)."""

    last_bench: Latency | None = None

    @classmethod
    def for_kernel(cls, kernel, tensor_supply_type=TensorSupplyType.Auto) -> TTProfiler:
        return cls(kernel.params, kernel.out_idx, tensor_supply_type).with_default_adapter(kernel.adapter)

    def _outputs(self, reference_program: Callable, input_tensors):
        ins = self._get_inputs() if input_tensors is None else input_tensors
        return _as_list(self.func(*ins)), _as_list(reference_program(*ins))

    def assert_allclose(self, reference_program: Callable, input_tensors=None, atol: float = 1e-2,
                        rtol: float = 1e-2, max_mismatched_ratio=0.01):
        """TileLang's check (same tolerances and mismatch ratio) of the kernel's run on tt-sim / the card."""
        lib_outs, ref_outs = self._outputs(reference_program, input_tensors)
        assert len(lib_outs) == len(ref_outs), f"{len(lib_outs)=} not equals to {len(ref_outs)=} !"
        for lhs, rhs in zip(lib_outs, ref_outs):
            if lhs is None or rhs is None:
                continue
            torch_assert_close(lhs.float() if is_float8_dtype(lhs.dtype) else lhs,
                               rhs.float() if is_float8_dtype(rhs.dtype) else rhs, rtol=rtol, atol=atol,
                               max_mismatched_ratio=max_mismatched_ratio, base_name="tilelang", ref_name="ref")

    def manual_assert_close(self, reference_program: Callable, input_tensors=None, manual_check_prog=None):
        lib_outs, ref_outs = self._outputs(reference_program, input_tensors)
        assert len(lib_outs) == len(ref_outs), f"{len(lib_outs)=} not equals to {len(ref_outs)=} !"
        manual_check_prog(lib_outs, ref_outs)

    def do_bench(self, func: Callable | None = None, warmup: int = 25, rep: int = 100, n_warmup: int = 0,
                 n_repeat: int = 0, input_tensors=None, backend: str = "event", quantiles=None,
                 return_mode: str = "mean", dynamic_symbolic_constraints=None, device=None,
                 early_stop_baseline=None) -> Latency:
        """The kernel's modeled time in ms (measured with a card); ``func``: see :func:`modeled_time`. TileLang's
        repetition, backend and quantile arguments are accepted and ignored: a model has no variance."""
        if input_tensors is not None:
            ins = input_tensors
        else:
            ins = self._get_inputs(dynamic_symbolic_constraints=dynamic_symbolic_constraints)
        if func is not None and func is not self.adapter:
            latency = modeled_time(func, *ins)
        else:
            latency = self._bench_kernel(ins)
        logger.info("tilelang-tt: do_bench: %.6f ms, %s", latency, latency.label)
        self.last_bench = latency
        if quantiles is not None:
            return [latency] * len(quantiles) if len(quantiles) > 1 else latency
        return latency

    def _bench_kernel(self, ins) -> Latency:
        from .hardware import hardware_available

        if hardware_available():
            t0 = time.perf_counter()
            self.adapter.run(*ins, backend="hw")
            return Latency((time.perf_counter() - t0) * 1e3, MEASURED,
                           "measured: wall time of the host program's run on the Tenstorrent card")
        return modeled_time(self.adapter.run, *ins, protocol_only=True)
