"""Human-readable summaries of a plan (used by the CLI and the main job)."""

from __future__ import annotations


def plan_summary(plan: dict, max_rows: int = 8) -> str:
    dev = plan["device"]
    gy, gx = plan["grid"]
    if isinstance(gy, int) and isinstance(gx, int):
        grid = f"{gy}x{gx} = {gy * gx} blocks"
    else:     # a grid sized by symbolic dimensions: C++ expressions the host program evaluates at launch
        grid = f"({gy}) x ({gx}) blocks, decided at launch"
    lines = [
        f"kernel {plan['kernel']} on {dev['arch']} ({dev['board']}, grid {dev['grid'][0]}x{dev['grid'][1]})",
        f"  block grid {grid}, policy {plan['policy']}, order {plan['order']}, "
        + (f"{len(plan['mapping'])} cores" if plan["mapping"] else "blocks split over the cores at launch"),
    ]
    counts = [m["count"] for m in plan["mapping"]]
    if counts:   # empty for a dynamic schedule: the host program splits the blocks at launch
        lines.append(f"  blocks per core: min {min(counts)}, max {max(counts)}")
    for m in plan["mapping"][:max_rows]:
        extra = ", ".join(f"{k}={v}" for k, v in m.items() if k not in ("core",))
        lines.append(f"    core (y={m['core'][0]}, x={m['core'][1]}): {extra}")
    if len(plan["mapping"]) > max_rows:
        lines.append(f"    ... {len(plan['mapping']) - max_rows} more cores")
    l1 = sum(cb["bytes"] for cb in plan["cbs"])
    cbs = ", ".join(f"c_{cb['index']}={cb['name']}({cb['num_pages']}x{cb['format']})" for cb in plan["cbs"])
    lines.append(f"  CBs: {cbs}; L1 {l1} B of {dev['l1_bytes']} B")
    lines.append(f"  compute: math fidelity {plan['math_fidelity']}, "
                 f"fp32 accumulation {plan['kernels']['compute']['fp32_dest_acc_en']}")
    return "\n".join(lines)
