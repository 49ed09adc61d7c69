"""The TT program's interface: which tensors each data-movement kernel addresses (with their tile grids) and every
kernel's ordered runtime-argument list. ``pipeline.build_program`` records it as ``Program.interface`` once the
program passes have run (TTMulticastReuse adds the multicast routes); the plan, the kernels' argument reads and the
host program's argument pushes are printed from it, so nothing downstream recomputes the order.

    {"tensors": [{"name", "param_index", "roles", "tiles_h", "tiles_w", "last_rows", "last_cols", "shape",
                  "dtype", "static", "shape_vars"}],
     "runtime_args": {role: [{"name", "kind", ...}]}}

A tile-grid field is an int, or the C++ expression of a symbolic dimension (``((n) + 31u) / 32u``).
"""

from __future__ import annotations

from .device import TILE
from .ttir import Tensor, calls

# The reader runtime args of one multicast group (TTMulticastReuse), in order: the sender's NoC coordinates, the
# group's low and high corners, how many cores receive, whether this core sends, the two semaphore ids.
MCAST_ARGS = ("sender_x", "sender_y", "first_x", "first_y", "last_x", "last_y", "num_dests", "is_sender",
              "sender_sem", "receiver_sem")


def kernel_tensors(ctx, program, role: str) -> list[int]:
    """The parameter indices of the tensors ``role``'s body addresses, in parameter order."""
    used = {a.name for c in calls(program.kernels[role].body) for a in c.args if isinstance(a, Tensor)}
    return [i for i, _ in ctx.tensors if ctx.tensor_names[i] in used]


def tiles(n):
    return -(-n // TILE) if isinstance(n, int) else f"(({n}) + {TILE - 1}u) / {TILE}u"


def last(n):
    """Valid elements in the last tile along a dimension of n elements."""
    return n - TILE * (-(-n // TILE) - 1) if isinstance(n, int) else \
        f"(({n}) - {TILE}u * ((({n}) + {TILE - 1}u) / {TILE}u - 1u))"


def _tensor(ctx, i: int, roles: list[str]) -> dict:
    buf = ctx.func.buffer_map[ctx.func.params[i]]
    shape = ctx.shape(buf)     # the 2-D view TilePadTT tiles the tensor as
    rows, cols = shape[-2], shape[-1]
    dims = (tiles(rows), tiles(cols), last(rows), last(cols))
    return {"name": ctx.tensor_names[i], "param_index": i, "roles": roles, "tiles_h": dims[0], "tiles_w": dims[1],
            "last_rows": dims[2], "last_cols": dims[3], "shape": "x".join(map(str, shape)), "dtype": str(buf.dtype),
            "static": all(isinstance(v, int) for v in dims), "shape_vars": sorted(ctx.shape_vars_of(buf))}


def _layout(ctx, program, role: str, tensor_names: list[str]) -> list[dict]:
    """``role``'s runtime arguments in the order the host pushes them and the kernel reads them: tensor
    addresses (data movement), the schedule's per-core values, symbolic dimensions, scalar parameters and, for the
    reader, each multicast group's route and semaphores."""
    layout = [{"name": f"{t}_addr", "kind": "buffer_address", "buffer": t} for t in tensor_names]
    layout += [{"name": n, "kind": "schedule"} for n in ctx.rt_names]
    layout += [{"name": v.name, "kind": "shape"} for v in ctx.shape_vars]
    layout += [{"name": v.name, "kind": "scalar"} for _, v, _ in ctx.scalars]
    if role == "reader" and program.multicast:   # per group: the core's route (TTMulticastReuse), semaphores
        layout += [{"name": f"{g['name']}_{f}", "kind": "multicast", "group": i, "field": f}
                   for i, g in enumerate(program.multicast["groups"]) for f in MCAST_ARGS]
    return layout


def describe(ctx, program) -> dict:
    per_role = {role: kernel_tensors(ctx, program, role) for role in ("reader", "writer")}
    indices = sorted(set(per_role["reader"]) | set(per_role["writer"]))
    tensors = [_tensor(ctx, i, [r for r in ("reader", "writer") if i in per_role[r]]) for i in indices]
    names = {r: [ctx.tensor_names[i] for i in per_role[r]] for r in per_role}
    return {"tensors": tensors,
            "runtime_args": {role: _layout(ctx, program, role, names.get(role, []))
                             for role in ("reader", "compute", "writer")}}
