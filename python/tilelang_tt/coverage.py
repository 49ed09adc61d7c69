"""Which output tensors the writer provably stores whole.

An output tensor is not uploaded before the launch (plan ``io`` "output"): what the kernel does not write would be
whatever the device buffer held. TileLang's kernels write device memory in place, so elements a kernel leaves
alone keep the caller's values; a grid that covers part of ``C``, blocks that store a window of their tile, a
tensor written under a data-dependent ``if`` all rely on it. ``partially_written`` walks the writer of every core
of the plan's mapping, enumerating its ``write_tiles`` calls, and names each output whose logical elements are not
all stored; the plan marks those ``inout`` (uploaded first). Whatever it cannot enumerate statically (symbolic
shapes, offsets read from tensors, more than ``MAX_WRITES`` calls) counts as partial: an upload too many costs host
time, an upload too few returns zeros.
"""

from __future__ import annotations

import numpy as np

from . import ttir, ttir_json
from .device import TILE

MAX_WRITES = 200_000


class _Unknown(Exception):
    """A write whose place is not known before the run."""


def partially_written(kernels: dict[str, list], plan: dict) -> set[str]:
    """The ``io == "output"`` buffers of ``plan`` whose logical elements the ``writer`` body (``ttir`` nodes) does
    not all store, over the cores of ``plan["mapping"]``."""
    outputs = {b["name"]: b for b in plan["buffers"] if b["io"] == "output"}
    if not outputs:
        return set()
    if plan["schedule"].get("dynamic") or not plan["mapping"] or any(
            not all(isinstance(d, int) for d in b["view"]) or "col_pad" in b for b in outputs.values()):
        return set(outputs)
    stored = {name: np.zeros([-(-d // TILE) * TILE for d in b["view"]], dtype=bool) for name, b in outputs.items()}
    common = {k: v for k, v in plan["schedule"].get("common_args", {}).items() if isinstance(v, int)}
    budget = [MAX_WRITES]
    try:
        for entry in plan["mapping"]:
            env = {**common, **{k: v for k, v in entry.items() if k != "core" and isinstance(v, int)}}
            _walk(kernels["writer"], env, stored, budget)
    except (_Unknown, LookupError, ttir_json.ProgramFormatError):
        return set(outputs)
    return {name for name, mask in stored.items() if not _needed(outputs[name], mask).all()}


def _walk(body: list, env: dict, stored: dict, budget: list) -> None:
    for n in body:
        if isinstance(n, ttir.For):
            lo = ttir_json.evaluate(n.min, env)
            for v in range(lo, lo + ttir_json.evaluate(n.extent, env)):
                _walk(n.body, {**env, n.var.name: v}, stored, budget)
        elif isinstance(n, ttir.Let):
            try:
                env = {**env, n.var.name: ttir_json.evaluate(n.value, env)}
            except (LookupError, ttir_json.ProgramFormatError):
                env = {k: v for k, v in env.items() if k != n.var.name}    # a value read at run time
        elif isinstance(n, ttir.Call) and n.op in ("write_tiles", "write_tiles_window"):
            name = n.args[1].name
            if name not in stored:
                continue
            budget[0] -= 1
            if budget[0] < 0:
                raise _Unknown(f"more than {MAX_WRITES} writes")
            row0, col0, rows, cols = (ttir_json.evaluate(a, env) for a in n.args[2:6])
            r_off, nrows, c_off, ncols = (ttir_json.evaluate(a, env) for a in n.args[6:10]) \
                if n.op == "write_tiles_window" else (0, TILE, 0, TILE)
            mask = stored[name]
            if (r_off, nrows, c_off, ncols) == (0, TILE, 0, TILE):
                mask[row0 * TILE:(row0 + rows) * TILE, col0 * TILE:(col0 + cols) * TILE] = True
                continue
            for r in range(row0, row0 + rows):
                for c in range(col0, col0 + cols):
                    mask[r * TILE + r_off:r * TILE + r_off + nrows, c * TILE + c_off:c * TILE + c_off + ncols] = True


def _needed(buf: dict, mask: np.ndarray) -> np.ndarray:
    """The part of ``mask`` over the tensor's logical elements (the view's rows and columns; with ``row_pad``, the
    first ``rows`` of every group of ``padded_rows``)."""
    rows, cols = buf["view"]
    view = mask[:rows, :cols]
    pad = buf.get("row_pad")
    if pad:
        view = view.reshape(-1, pad["padded_rows"], cols)[:, :pad["rows"]]
    return view
