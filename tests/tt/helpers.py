"""Shared test helpers: lower a kernel through the TT pipeline without the JIT layer."""

import tvm

from tilelang_tt.codegen import generate
from tilelang_tt.pipeline import lower_module
from tilelang_tt.target import make_options


def lower(func, **options):
    opts = make_options(**options)
    return lower_module(tvm.IRModule({"main": func}), opts)["main"], opts


def artifact(func, **options):
    """Generate (and write, so that the session's real-SDK check sees it) one kernel's artifact."""
    from tilelang_tt.codegen import write_artifact

    lowered, opts = lower(func, **options)
    art = generate(lowered, opts)
    art.directory = write_artifact(art.files, art.name)
    return art


def blocks_of(plan):
    """Every (by, bx) the plan's mapping assigns, with the owning core, recomputed from the plan alone."""
    from tilelang_tt.schedule import order_to_coord

    grid_y, grid_x = plan["grid"]
    order = plan["order"]
    k = int(order[len("block_linear("):-1]) if order.startswith("block_linear") else None
    out = []
    for m in plan["mapping"]:
        if plan["policy"] == "contiguous":
            ids = range(m["start_id"], m["start_id"] + m["count"])
        elif plan["policy"] == "strided":
            step = plan["schedule"]["common_args"]["step"]
            ids = [m["first_id"] + n * step for n in range(m["count"])]
        else:
            out += [((m["rect_y"] + q // m["rect_w"], m["rect_x"] + q % m["rect_w"]), tuple(m["core"]))
                    for q in range(m["count"])]
            continue
        out += [(order_to_coord(i, grid_y, grid_x, k), tuple(m["core"])) for i in ids]
    return out
