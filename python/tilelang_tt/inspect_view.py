"""``tilelang-tt inspect FILE_OR_DIR``: the plan summary, and an SVG of the core map and the L1 layout.

The SVG (hand-written, no dependencies) has three panels:

* the core map: one cell (``<rect class="core">``) per core of the device grid, labelled with the blocks it
  runs (block ids, ``(by, bx)`` ranges) or "idle";
* the block grid: one cell per block, coloured like the core that runs it;
* the L1 of one core: the firmware reserve, each CB (index, name, pages x page size) and the free space;
* for a mesh kernel (plan ``mesh``), first: the mesh of chips (``<rect class="chip">``), each labelled with its
  blocks along the split axis, and each tensor's distribution (sharded along a dimension, or replicated).
"""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import escape

_PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
            "#bab0ac")
CELL, GAP, PAD = 64, 4, 20


def core_blocks(plan: dict) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """(core y, core x) -> the (by, bx) blocks it visits, in order, from the plan's ``mapping``."""
    from .schedule import make_schedule_spec, order_to_coord

    grid_y, grid_x = plan["grid"]
    if plan["schedule"].get("dynamic") or not isinstance(grid_y, int):
        return {}
    k = make_schedule_spec(order=plan["order"]).block_linear_k
    step = plan["schedule"].get("common_args", {}).get("step")
    out = {}
    for m in plan["mapping"]:
        if "rect_y" in m:
            blocks = [(m["rect_y"] + q // m["rect_w"], m["rect_x"] + q % m["rect_w"]) for q in range(m["count"])]
        else:
            ids = (range(m["start_id"], m["start_id"] + m["count"]) if "start_id" in m
                   else range(m["first_id"], m["first_id"] + step * m["count"], step))
            blocks = [order_to_coord(b, grid_y, grid_x, k) for b in ids]
        out[tuple(m["core"])] = blocks
    return out


def _label(plan: dict, blocks: list) -> str:
    if not blocks:
        return "idle"
    grid_x = plan["grid"][1]
    ids = [by * grid_x + bx for by, bx in blocks]
    if ids == list(range(ids[0], ids[0] + len(ids))):
        return f"{ids[0]}" if len(ids) == 1 else f"{ids[0]}-{ids[-1]}"
    return ",".join(map(str, ids[:3])) + ("..." if len(ids) > 3 else "")


def _text(x, y, text, size=11, anchor="start", cls="label") -> str:
    return (f'<text class="{cls}" x="{x}" y="{y}" font-size="{size}" text-anchor="{anchor}" '
            f'font-family="monospace">{escape(str(text))}</text>')


def _rect(x, y, w, h, fill, cls, title) -> str:
    return (f'<rect class="{cls}" x="{x}" y="{y}" width="{w}" height="{h}" fill="{fill}" stroke="#333">'
            f'<title>{escape(title)}</title></rect>')


def mesh_lines(plan: dict) -> list[str]:
    """The mesh of a mesh kernel in words: its shape and split, each chip's blocks, each tensor's distribution."""
    mesh = plan["mesh"]
    out = [f"mesh {mesh['shape'][0]}x{mesh['shape'][1]} ({mesh['chips']} chips): grid axis {mesh['axis']} "
           f"({mesh['grid_extent']} blocks) split, {mesh['per_chip']} per chip"]
    out += [f"  chip {tuple(c['chip'])}: blocks {c['blocks'][0]}..{c['blocks'][0] + c['blocks'][1] - 1}"
            for c in mesh["chip_schedule"]]
    for b in plan["buffers"]:
        d = b.get("distribution", {})
        kind = f"sharded along dim {d['dim']}" if d.get("kind") == "sharded" else d.get("kind", "replicated")
        out.append(f"  {b['name']} {list(b['shape'])}: {kind}")
    return out


def _mesh_panel(plan: dict, parts: list, top: int) -> int:
    """Draws the mesh of chips at ``top``; returns the y below it."""
    mesh = plan["mesh"]
    rows, cols = mesh["shape"]
    parts.append(_text(PAD, top - 6, f"mesh of {rows}x{cols} chips: grid axis {mesh['axis']} split "
                                     f"({mesh['per_chip']} blocks per chip)"))
    w, h = CELL * 2, CELL
    for c in mesh["chip_schedule"]:
        r, col = c["chip"]
        first, count = c["blocks"]
        x, y = PAD + col * (w + GAP), top + r * (h + GAP)
        title = f"chip ({r}, {col}): {mesh['axis']} blocks {first}..{first + count - 1}"
        parts.append(_rect(x, y, w, h, _PALETTE[(r * cols + col) % len(_PALETTE)], "chip", title))
        parts.append(_text(x + 3, y + 12, f"chip {r},{col}", 9))
        parts.append(_text(x + w / 2, y + h / 2 + 4, f"{mesh['axis']} {first}..{first + count - 1}", 10, "middle"))
    y = top + rows * (h + GAP) + 14
    for line in mesh_lines(plan)[1 + len(mesh["chip_schedule"]):]:
        parts.append(_text(PAD, y, line.strip()))
        y += 16
    return y


def render_svg(plan: dict) -> str:
    """The SVG of the plan's panels (module docstring): the mesh, the core map, the block grid, one core's L1."""
    owned = core_blocks(plan)
    colour = {core: _PALETTE[i % len(_PALETTE)] for i, core in enumerate(sorted(owned))}
    parts = [_text(PAD, PAD, f"{plan['kernel']} on {plan['device']['arch']}: {plan['policy']} / {plan['order']}",
                   14, cls="title")]
    top = PAD + 24
    if "mesh" in plan:
        top = _mesh_panel(plan, parts, top) + 24
    width, bottom = _core_map_panel(plan, parts, top, owned, colour)
    if owned:
        width, bottom = _block_grid_panel(plan, parts, top, owned, colour, width, bottom)
    height = _l1_panel(plan, parts, width, bottom)
    body = "\n".join(parts)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{int(width)}" height="{int(height)}" '
            f'viewBox="0 0 {int(width)} {int(height)}">\n<rect width="100%" height="100%" fill="white"/>\n'
            f"{body}\n</svg>\n")


def _core_map_panel(plan: dict, parts: list, top: int, owned: dict, colour: dict) -> tuple:
    """Draws the core map at ``top``, each core labelled with the blocks it runs; returns its (right, bottom)."""
    dev_y, dev_x = plan["device"]["grid"]
    parts.append(_text(PAD, top - 6, f"core map ({dev_y}x{dev_x} cores): blocks each core runs (block ids)"))
    for y in range(dev_y):
        for x in range(dev_x):
            blocks = owned.get((y, x), [])
            dynamic = bool(plan["schedule"].get("dynamic"))
            label = "dynamic" if dynamic and not blocks else _label(plan, blocks)
            cx, cy = PAD + x * (CELL + GAP), top + y * (CELL + GAP)
            fill = colour.get((y, x), "#eeeeee")
            title = f"core (y={y}, x={x}): " + (", ".join(f"({b[0]},{b[1]})" for b in blocks) or label)
            parts.append(_rect(cx, cy, CELL, CELL, fill, "core", title))
            parts.append(_text(cx + 3, cy + 12, f"{y},{x}", 9))
            parts.append(_text(cx + CELL / 2, cy + CELL / 2 + 4, label, 10, "middle"))
    return PAD * 2 + dev_x * (CELL + GAP), top + dev_y * (CELL + GAP)


def _block_grid_panel(plan: dict, parts: list, top: int, owned: dict, colour: dict, width: int, bottom: int) -> tuple:
    """Draws the block grid right of ``width``, each block coloured like the core that runs it; returns the
    (right, bottom) of the panels so far."""
    grid_y, grid_x = plan["grid"]
    owner = {b: core for core, blocks in owned.items() for b in blocks}
    bcell = max(6, min(24, 640 // max(grid_x, 1)))
    left = width + PAD
    parts.append(_text(left, top - 6, f"block grid ({grid_y}x{grid_x}), coloured by core"))
    for by in range(grid_y):
        for bx in range(grid_x):
            core = owner.get((by, bx))
            parts.append(_rect(left + bx * bcell, top + by * bcell, bcell, bcell,
                               colour.get(core, "#ffffff"), "block", f"block (by={by}, bx={bx}) on core {core}"))
    return left + grid_x * bcell + PAD, max(bottom, top + grid_y * bcell)


def _l1_panel(plan: dict, parts: list, width: int, bottom: int) -> int:
    """Draws the L1 of one core below ``bottom`` (firmware reserve, each CB, free space) and its legend; returns
    the height of the SVG."""
    from .device import get_device

    dev = get_device(plan["device"]["arch"])
    l1 = plan["device"]["l1_bytes"]
    bar_w, y0 = max(width - 2 * PAD, 600), bottom + 40
    scale = bar_w / l1
    parts.append(_text(PAD, y0 - 8, f"L1 of one core: {l1} B ({dev.l1_unreserved_base} B firmware reserve)"))
    parts.append(_rect(PAD, y0, dev.l1_unreserved_base * scale, 40, "#999999", "l1-reserved",
                       f"firmware, mailboxes, kernel config: 0..{dev.l1_unreserved_base}"))
    addr = dev.l1_unreserved_base
    legend_y = y0 + 60
    for i, cb in enumerate(plan["cbs"]):
        w = max(cb["bytes"] * scale, 2)
        text = (f"c_{cb['index']} {cb['name']}: {cb['num_pages']} x {cb['page_size']} B {cb['format']} = "
                f"{cb['bytes']} B at {addr:#x} ({cb['role']})")
        fill = _PALETTE[i % len(_PALETTE)]
        parts.append(_rect(PAD + addr * scale, y0, w, 40, fill, "cb", text))
        parts.append(_rect(PAD, legend_y + 16 * i - 10, 10, 10, fill, "legend", text))
        parts.append(_text(PAD + 16, legend_y + 16 * i, text))
        addr += cb["bytes"]
    parts.append(_rect(PAD + addr * scale, y0, max((l1 - addr) * scale, 0), 40, "#ffffff", "l1-free",
                       f"free: {l1 - addr} B"))
    parts.append(_text(PAD, legend_y + 16 * len(plan["cbs"]),
                       f"used by CBs: {addr - dev.l1_unreserved_base} B; free {l1 - addr} B"))
    return legend_y + 16 * len(plan["cbs"]) + PAD


def inspect(path, svg_out=None) -> tuple[str, Path]:
    """(text report, SVG path) for a package file or an artifact directory."""
    import json

    from .artifact import write_output_file
    from .package import read_artifact
    from .summary import plan_summary

    header, files = read_artifact(path)
    plan = json.loads(files["tt.plan.json"])
    lines = []
    if header is not None:
        lines.append(f"package {path}: format {header['format_version']}, uuid {header['uuid']}, "
                     f"content {header['content_hash'][:16]}, tilelang-tt {header['tilelang_tt']}, "
                     f"TT-Metalium {header['sdk']}, out_idx {header['out_idx']}")
    lines.append(plan_summary(plan))
    if "mesh" in plan:
        lines += mesh_lines(plan)
    lines.append("files: " + ", ".join(f"{rel} ({len(text)} B)" for rel, text in sorted(files.items())))
    svg_path = Path(svg_out) if svg_out is not None else Path(f"{plan['kernel']}.tt.svg")
    write_output_file(svg_path, render_svg(plan), "--svg")   # never over a file tilelang-tt did not write
    lines.append(f"wrote {svg_path}")
    return "\n".join(lines), svg_path
