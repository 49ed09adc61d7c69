#!/usr/bin/env python3
"""The import graph of python/tilelang_tt: drawn, and checked for circles and upward imports.

Every ``import`` and ``from ... import`` of a package module counts, at module level or inside a function (an
import deferred to a call is still a dependency). The modules are sorted into LAYERS, bottom first; a module may
import modules of its own layer or of a lower one, and no module may reach itself again through its imports.

    scripts/import_graph.py             check, then write docs/import_graph.dot and docs/import_graph.svg
    scripts/import_graph.py --check     check only (exit status 1 on a circle or an upward import)

The picture is drawn here: a band per layer, top layer first, a module above the modules of its layer it imports,
each edge of the graph's transitive reduction as a curve (an edge left out is implied by a path). The same graph is
written for Graphviz (``dot -Tsvg docs/import_graph.dot``), whose cluster layout puts the layers side by side,
which hides what the picture is for. pydeps needs Graphviz to draw and the check must run wherever the tests run,
so the graph is computed with ``ast``, without dependencies. tests/tt/test_hygiene.py runs ``problems()``.
"""

from __future__ import annotations

import ast
import sys
from fnmatch import fnmatch
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "python" / "tilelang_tt"
NAME = PKG.name

# Bottom first. The data flow runs func -> passes -> TT program -> {printers, plan, model, verifier} -> artifact ->
# runner; imports run the other way: whoever uses a thing imports it, and nothing imports its user.
LAYERS = [
    ("core: hardware table, IR records, names, errors", [
        "errors", "attrs", "records", "intrinsics", "hardware", "device", "formats", "cexpr", "artifact", "names", "schedule",
        "target", "compute_config", "ttir", "ttir_json", "blockfloat", "plan", "mesh_plan", "summary", "_tilelang_hooks",
        "version", "progress", "dims", "sequence"]),
    ("passes: TIR passes, TT program passes, verifier", ["transform", "transform.*"]),
    ("compile: pass order, TT program build, printers, plan", ["kernel_context", "program_interface", "pipeline",
                                                              "printer", "coverage", "codegen"]),
    ("run and check: emulator, model, real headers, cache, runtime", [
        "emulator", "run_artifact", "work_counts", "mesh_model", "perf_model", "trace", "ttnn_reference", "realcheck", "realcheck.*", "profiler",
        "cache", "package", "torch_ops", "runtime"]),
    ("entry points", ["annotations", "language", "backend", "inspect_view", "", "cli"]),
]


def module_name(path: Path) -> str:
    parts = path.relative_to(PKG).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Module name relative to the package ("" is the package itself) -> file."""
    return {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _imported(node, here: str, is_pkg: bool, known: dict) -> list[str]:
    """The package modules one import statement names."""
    if isinstance(node, ast.Import):
        return [n.name[len(NAME) + 1:] if n.name != NAME else "" for n in node.names
                if (n.name == NAME or n.name.startswith(NAME + ".")) and
                (n.name[len(NAME) + 1:] if n.name != NAME else "") in known]
    if node.level:
        base = here.split(".") if here else []
        base = base if is_pkg else base[:-1]
        base = base[:len(base) - (node.level - 1)] + (node.module.split(".") if node.module else [])
    elif node.module == NAME or (node.module or "").startswith(NAME + "."):
        base = node.module.split(".")[1:]
    else:
        return []
    target = ".".join(base)
    out = []
    for alias in node.names:   # `from . import x` names module x; `from .m import f` names module m
        sub = f"{target}.{alias.name}" if target else alias.name
        out.append(sub if sub in known else target)
    return [m for m in out if m in known]


def graph() -> dict[str, dict[str, int]]:
    """module -> {imported module: line of its first import}."""
    known = modules()
    edges: dict[str, dict[str, int]] = {}
    for name, path in known.items():
        out: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _imported(node, name, path.name == "__init__.py", known):
                    if target != name:
                        out.setdefault(target, node.lineno)
        edges[name] = out
    return edges


def layer_of(name: str) -> int | None:
    for i, (_, patterns) in enumerate(LAYERS):
        if any(name == p or (p.endswith("*") and fnmatch(name, p)) for p in patterns):
            return i
    return None


def cycles(edges: dict) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def _label(name: str) -> str:
    return f"{NAME}.{name}" if name else NAME


def problems(edges: dict | None = None) -> list[str]:
    """Every circle, module without a layer and import that runs up a layer, as readable lines."""
    edges = graph() if edges is None else edges
    out = [f"import circle: {' <-> '.join(_label(m) for m in comp)}" for comp in cycles(edges)]
    out += [f"{_label(m)} has no layer in scripts/import_graph.py LAYERS" for m in sorted(edges) if layer_of(m) is None]
    for m in sorted(edges):
        for t, line in sorted(edges[m].items()):
            lm, lt = layer_of(m), layer_of(t)
            if lm is not None and lt is not None and lt > lm:
                out.append(f"{modules()[m].relative_to(ROOT)}:{line}: {_label(m)} (layer {LAYERS[lm][0].split(':')[0]})"
                           f" imports {_label(t)} (layer {LAYERS[lt][0].split(':')[0]}), a layer above it")
    return out


def reduction(edges: dict) -> dict[str, list[str]]:
    """The transitive reduction of an acyclic graph: an edge a -> b is left out when a reaches b another way."""
    reach: dict[str, set] = {}

    def reachable(v: str) -> set:
        if v not in reach:
            reach[v] = set()
            for w in edges[v]:
                reach[v] |= {w} | reachable(w)
        return reach[v]

    return {a: sorted(b for b in edges[a] if not any(b in reachable(c) for c in edges[a] if c != b))
            for a in edges}


def dot(edges: dict) -> str:
    """Graphviz input: a cluster per layer, stacked top layer first (invisible edges between layer anchors), the
    transitive reduction's edges."""
    lines = [f"digraph {NAME} {{", "  rankdir=TB; newrank=true; nodesep=0.15; ranksep=0.35;",
             "  node [shape=box, style=rounded, fontname=Helvetica, fontsize=10, height=0.25];",
             "  edge [color=\"#7a869a\", arrowsize=0.5];"]
    for i, (title, _) in reversed(list(enumerate(LAYERS))):
        members = sorted(m for m in edges if layer_of(m) == i)
        lines.append(f"  subgraph cluster_{i} {{ label=\"{title}\"; labeljust=l; style=rounded; color=\"#b8c0cc\";"
                     f" bgcolor=\"#f4f6fa\"; fontname=Helvetica; fontsize=11;")
        lines.append(f"    layer_{i} [style=invis, shape=point, width=0];")
        lines += [f"    \"{m or NAME}\";" for m in members]
        lines.append("  }")
    lines += [f"  layer_{i + 1} -> layer_{i} [style=invis, weight=100];" for i in range(len(LAYERS) - 1)]
    for a, targets in sorted(reduction(edges).items()):
        lines += [f"  \"{a or NAME}\" -> \"{b or NAME}\";" for b in targets]
    return "\n".join(lines + ["}"]) + "\n"


def _rows(edges: dict, width: int) -> list[list[list[str]]]:
    """Per layer (top first), its modules in rows of at most ``width``: a module above every module of its layer
    that it imports (rows by the longest chain of same-layer imports below it), so every edge points down."""
    out = []
    for i in reversed(range(len(LAYERS))):
        members = sorted(m for m in edges if layer_of(m) == i)
        depth: dict[str, int] = {}

        def chain(m: str) -> int:
            if m not in depth:
                depth[m] = 1 + max([chain(t) for t in edges[m] if layer_of(t) == i] or [-1])
            return depth[m]

        rows = []
        for d in sorted({chain(m) for m in members}, reverse=True):
            level = [m for m in members if depth[m] == d]
            rows += [level[k:k + width] for k in range(0, len(level), width)]
        out.append(rows or [[]])
    return out


def svg(edges: dict, width: int = 8) -> str:
    """A layered drawing without Graphviz: a band per layer, a box per module, the reduction's edges as curves."""
    box_w, box_h, gap_x, gap_y, band_pad, title_h = 150, 22, 14, 30, 10, 18
    total_w = width * (box_w + gap_x) + gap_x
    pos, bands, y = {}, [], 10
    for i, rows in zip(reversed(range(len(LAYERS))), _rows(edges, width)):
        top = y
        y += title_h
        for row in rows:
            x0 = gap_x + (total_w - gap_x - len(row) * (box_w + gap_x)) // 2
            for k, m in enumerate(row):
                pos[m] = (x0 + k * (box_w + gap_x), y)
            y += box_h + gap_y
        bands.append((LAYERS[i][0], top, y - gap_y + band_pad))
        y += band_pad + 6
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w}" height="{y}" font-family="Helvetica" '
           f'font-size="10">', '<rect width="100%" height="100%" fill="white"/>']
    for title, top, bottom in bands:
        out.append(f'<rect x="4" y="{top}" width="{total_w - 8}" height="{bottom - top}" rx="8" fill="#f4f6fa" '
                   f'stroke="#b8c0cc"/><text x="12" y="{top + 13}" font-weight="bold">{escape(title)}</text>')
    for a, targets in sorted(reduction(edges).items()):
        for b in targets:
            (xa, ya), (xb, yb) = pos[a], pos[b]
            x1, y1, x2, y2 = xa + box_w / 2, ya + box_h, xb + box_w / 2, yb
            if yb <= ya:    # same row: leave from the side
                y1, y2 = ya + box_h / 2, yb + box_h / 2
            out.append(f'<path d="M{x1},{y1} C{x1},{y1 + 40} {x2},{y2 - 40} {x2},{y2}" fill="none" '
                       f'stroke="#7a869a" stroke-opacity="0.55" marker-end="url(#a)"/>')
    for m, (x, yy) in pos.items():
        out.append(f'<rect x="{x}" y="{yy}" width="{box_w}" height="{box_h}" rx="3" fill="white" stroke="#334"/>'
                   f'<text x="{x + box_w / 2}" y="{yy + 15}" text-anchor="middle">{escape(m or NAME)}</text>')
    out.insert(2, '<defs><marker id="a" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="6" markerHeight="6" '
                  'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#7a869a"/></marker></defs>')
    return "\n".join(out + ["</svg>"]) + "\n"


def main(argv: list[str]) -> int:
    edges = graph()
    found = problems(edges)
    for line in found:
        print(line)
    if "--check" in argv or found:
        print(f"{len(edges)} modules, {sum(map(len, edges.values()))} imports: "
              + ("no circle, every import downward" if not found else f"{len(found)} problem(s)"))
        return 1 if found else 0
    docs = ROOT / "docs"
    (docs / "import_graph.dot").write_text(dot(edges))
    picture = docs / "import_graph.svg"
    picture.write_text(svg(edges))
    print(f"{len(edges)} modules, {sum(map(len, edges.values()))} imports, no circle; wrote {picture.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
