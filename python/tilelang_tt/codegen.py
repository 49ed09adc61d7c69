"""Codegen: the lowered PrimFunc -> reader/compute/writer kernels, tt.plan.json, host program, CMakeLists.

``generate`` is the whole codegen for one kernel; ``build_tt_without_compile`` is the device-codegen hook
TileLang calls. Sources are rendered with Jinja2 templates from ``templates/``; the host program is
rendered from the plan alone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import jinja2
import tvm_ffi
from tvm import IRModule, tirx
from tvm.target import Target

from . import attrs, plan as plan_mod
from .artifact import comment_text, safe_name, unique_names, write_artifact
from .device import get_device
from .emit import ComputeEmitter, DataMovementEmitter, Lines, TensorUse
from .errors import TTLoweringError
from .formats import data_format
from .intrinsics import COMPUTE_BASE_HEADERS, DATAFLOW_HEADER
from .program import Loop, Op, build, walk_ops
from .target import TTOptions, options_from_target
from .transform.common import source_of

logger = logging.getLogger(__name__)

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("tilelang_tt", "templates"), undefined=jinja2.StrictUndefined,
                          keep_trailing_newline=True, trim_blocks=False, lstrip_blocks=False)
_ENV.filters["comment"] = comment_text     # anything user-named that lands in a // comment goes through this

KERNEL_FILES = {"reader": "kernels/reader.cpp", "compute": "kernels/compute.cpp", "writer": "kernels/writer.cpp"}


@dataclass
class Artifact:
    name: str
    files: dict[str, str]            # relative path -> text
    plan: dict
    directory: Path | None = None

    def source(self) -> str:
        """All sources, each under a banner with its path."""
        parts = []
        for rel in ("kernels/reader.cpp", "kernels/compute.cpp", "kernels/writer.cpp", "host.cpp", "tt.plan.json",
                    "CMakeLists.txt"):
            parts.append(f"// ===== {rel} =====\n{self.files[rel]}")
        return "\n".join(parts)


def generate(func: tirx.PrimFunc, options: TTOptions) -> Artifact:
    if attrs.LOWERED in func.attrs:
        func = func.attrs[attrs.LOWERED]
    src = source_of(func)
    if attrs.CB not in func.attrs:
        raise TTLoweringError("the function was not lowered by the TT pipeline", construct="codegen", source=src)
    name = safe_name(str(func.attrs["global_symbol"]))
    dev = get_device(options.arch)
    cbs = {str(k): {kk: (list(vv) if not isinstance(vv, (int, str, float, bool)) else vv) for kk, vv in v.items()}
           for k, v in func.attrs[attrs.CB].items()}
    for e in cbs.values():
        e["producer"] = [str(x) for x in e["producer"]]
        e["consumer"] = [str(x) for x in e["consumer"]]
        for key in ("shape_tiles", "subblock"):
            if key in e:
                e[key] = [int(x) for x in e[key]]
        e["index"] = int(e["index"])
        e["block_tiles"] = int(e["block_tiles"])
    cb_unique = unique_names(sorted(cbs, key=lambda n: cbs[n]["index"]))
    cb_names = {e["index"]: f"cb_{cb_unique[n]}" for n, e in cbs.items()}
    schedule = func.attrs[attrs.SCHEDULE]
    rt_names = [str(n) for n in func.attrs[attrs.RUNTIME_ARGS]]
    shape_args = [str(n) for n in func.attrs[attrs.SHAPE_ARGS]] if attrs.SHAPE_ARGS in func.attrs else []
    grid = [_dim(g) for g in func.attrs[attrs.GRID]]
    grid_text = "x".join(str(g) if isinstance(g, int) else f"({g})" for g in grid)
    opts = dict(func.attrs[attrs.OPTIONS]) if attrs.OPTIONS in func.attrs else {}
    fp32_acc = bool(opts.get("fp32_dest_acc", False))
    shards = func.attrs[attrs.SHARDS]
    padding = func.attrs[attrs.PADDING]

    tree = build(func.body, src)
    src = comment_text(src)

    # Tensors, by parameter index.
    tensors = []
    for i, p in enumerate(func.params):
        if p not in func.buffer_map:
            continue
        buf = func.buffer_map[p]
        shape = tuple(_dim(d) for d in buf.shape)   # ints, or C++ expressions of the symbolic dimensions
        tensors.append((i, buf, shape))
    by_param = {i: (buf, shape) for i, buf, shape in tensors}
    tensor_names = unique_names([buf.name for _, buf, _ in tensors])
    reads = sorted({int(op.args[1]) for op in walk_ops(tree) if op.kind == "read_block"})
    writes = sorted({int(op.args[1]) for op in walk_ops(tree) if op.kind == "write_block"})

    def tensor_uses(indices):
        uses = []
        for i in indices:
            buf, shape = by_param[i]
            rows, cols = shape[-2], shape[-1]
            uses.append(TensorUse(tensor_names[buf.name], _tiles(rows), _tiles(cols), _last(rows), _last(cols)))
        return uses

    # Map param index -> position in each kernel's accessor list.
    def remap(indices):
        return {p: k for k, p in enumerate(indices)}

    read_pos, write_pos = remap(reads), remap(writes)

    def dm_tree(kind, pos):
        def rewrite(nodes):
            out = []
            for n in nodes:
                if isinstance(n, Loop):
                    n = dataclasses.replace(n, body=rewrite(n.body))
                elif isinstance(n, Op) and n.kind == kind:
                    args = list(n.args)
                    args[1] = pos[int(args[1])]
                    n = dataclasses.replace(n, args=args)
                out.append(n)
            return out
        return rewrite(tree)

    mixed = len({e["format"] for e in cbs.values() if "compute" in e["producer"] + e["consumer"]}) > 1
    roles = {}
    for role, kind, idx, pos in (("reader", "read_block", reads, read_pos), ("writer", "write_block", writes, write_pos)):
        uses = tensor_uses(idx)
        em = DataMovementEmitter(role, cbs, uses, cb_names)
        lines = Lines(1)
        rtree = dm_tree(kind, pos)
        em.emit_seq(lines, rtree)
        roles[role] = (lines.text(), uses, sorted({int(op.args[0]) for op in walk_ops(tree) if op.kind == kind}))
    cem = ComputeEmitter(cbs, cb_names, dev.dst_capacity(fp32_acc), mixed, src)
    clines = Lines(1)
    cem.prepare(tree)
    cem.emit_seq(clines, tree)
    compute_cbs = sorted({e["index"] for n, e in cbs.items()
                          if "compute" in e["producer"] + e["consumer"] and e.get("residency") != "dst"})

    def cb_decls(indices):
        out = []
        for n, e in sorted(cbs.items(), key=lambda kv: kv[1]["index"]):
            if e["index"] in indices:
                rows, cols = e["shape_tiles"]
                out.append({"var": cb_names[e["index"]], "index": e["index"],
                            "comment": comment_text(f"{n}: {rows}x{cols} tiles {e['dtype']}, {e['role']}, "
                                                    f"depth {e['depth_blocks']} block(s)")})
        return out

    fidelity = options.math_fidelity
    kernels = {}
    for role in ("reader", "writer"):
        text, uses, cbidx = roles[role]
        layout = [{"name": f"{u.name}_addr", "kind": "buffer_address", "buffer": u.name} for u in uses]
        layout += [{"name": n, "kind": "schedule"} for n in rt_names]
        layout += [{"name": n, "kind": "shape"} for n in shape_args]
        kernels[role] = {"file": KERNEL_FILES[role],
                         "processor": "RISCV_1" if role == "reader" else "RISCV_0",
                         "noc": "RISCV_1_default" if role == "reader" else "RISCV_0_default",
                         "compile_args": [{"tensor_accessor": u.name} for u in uses],
                         "runtime_args": {"layout": layout}}
    kernels["compute"] = {"file": KERNEL_FILES["compute"], "math_fidelity": fidelity, "fp32_dest_acc_en": fp32_acc,
                          "compile_args": [],
                          "runtime_args": {"layout": [{"name": n, "kind": "schedule"} for n in rt_names] +
                                                      [{"name": n, "kind": "shape"} for n in shape_args]}}

    buffers = []
    for i, buf, shape in tensors:
        fmt = data_format(buf.dtype, f"tensor {buf.name}", src)
        tr, tc = _tiles(shape[-2]), _tiles(shape[-1])
        num_pages = _mul(tr, tc)
        io = "inout" if i in reads and i in writes else "input" if i in reads else "output" if i in writes else "unused"
        shard = {str(k): (list(map(str, v)) if not isinstance(v, str) else v) if k != "axis" else [int(a) for a in v]
                 for k, v in shards[buf.name].items()}
        buffers.append({"name": tensor_names[buf.name], "param_index": i, "shape": list(shape),
                        "padded_shape": [_dim(x) for x in padding[buf.name]["padded"]], "dtype": str(buf.dtype),
                        "format": fmt.name, "layout": "tiled_32x32_interleaved", "placement": shard["placement"],
                        "page_size": fmt.tile_bytes, "num_pages": num_pages, "bytes": _mul(num_pages, fmt.tile_bytes),
                        "io": io, "shard": shard})
    plan_cbs = []
    for n, e in sorted(cbs.items(), key=lambda kv: kv[1]["index"]):
        if e.get("residency") == "dst":
            continue  # lives in DST: no L1
        entry = {"name": n, "index": e["index"], "format": e["format"], "page_size": int(e["page_size"]),
                 "block_tiles": e["block_tiles"], "depth": int(e["depth_blocks"]), "num_pages": int(e["num_pages"]),
                 "bytes": int(e["bytes"]), "role": e["role"], "producer": e["producer"], "consumer": e["consumer"]}
        if "residency" in e:
            entry["residency"] = e["residency"]
            entry["subblock"] = e["subblock"]
        plan_cbs.append(entry)

    sched = {str(k): v for k, v in schedule.items() if str(k) != "mapping"}
    sched = _plain(sched)
    mapping = _plain(schedule["mapping"])
    plan = {
        "schema_version": plan_mod.SCHEMA_VERSION, "kernel": name, "source": src,
        "device": {"arch": dev.arch, "board": dev.board, "grid": [dev.grid_y, dev.grid_x], "l1_bytes": dev.l1_bytes,
                   "dram_banks": dev.dram_banks, "num_cbs": dev.num_cbs, "dst_tiles": dev.dst_capacity(fp32_acc),
                   "max_cores": options.max_cores},
        "grid": grid, "policy": sched["policy"], "order": sched["order"], "schedule": sched,
        "core_ranges": _plain(func.attrs[attrs.CORE_RANGES]), "runtime_args": rt_names, "shape_args": shape_args,
        "mapping": mapping,
        "buffers": buffers, "cbs": plan_cbs, "kernels": kernels, "math_fidelity": fidelity,
    }
    plan_mod.validate(plan)

    def render_dm(role):
        text, uses, cbidx = roles[role]
        tmap = {tensor_names[by_param[i][0].name]: (by_param[i][1], str(by_param[i][0].dtype))
                for i in (reads if role == "reader" else writes)}
        tens = [{"name": u.name, "tiles_h": u.tiles_h, "tiles_w": u.tiles_w, "last_rows": u.last_rows,
                 "last_cols": u.last_cols, "shape": "x".join(map(str, tmap[u.name][0])), "dtype": tmap[u.name][1],
                 "static": all(isinstance(v, int) for v in (u.tiles_h, u.tiles_w, u.last_rows, u.last_cols))}
                for u in uses]
        layout = [a for a in kernels[role]["runtime_args"]["layout"]]
        used_layout = [dict(a, used=(a["kind"] == "buffer_address" or _mentions(text + tensor_decls(tens), a["name"])))
                       for a in layout]
        return _ENV.get_template("dataflow.cpp.j2").render(
            role=role, name=name, source=src, grid=grid, grid_text=grid_text, kernel=_with_layout(kernels[role], used_layout), tensors=tens,
            cbs=cb_decls(cbidx), body=text, dataflow_header=DATAFLOW_HEADER)

    ctext = clines.text()
    c_layout = [dict(a, used=_mentions(ctext, a["name"])) for a in kernels["compute"]["runtime_args"]["layout"]]
    headers = sorted(set(COMPUTE_BASE_HEADERS) | cem.headers)
    compute_src = _ENV.get_template("compute.cpp.j2").render(
        name=name, source=src, grid=grid, grid_text=grid_text, kernel=_with_layout(kernels["compute"], c_layout),
        headers=headers,
        cbs=cb_decls(compute_cbs), body=ctext, startup=cem.startup or "compute_kernel_hw_startup(0, 0)",
        dst_capacity=dev.dst_capacity(fp32_acc))
    exe = f"{name}_host"
    files = {
        "kernels/reader.cpp": render_dm("reader"),
        "kernels/compute.cpp": compute_src,
        "kernels/writer.cpp": render_dm("writer"),
        "tt.plan.json": plan_mod.dumps(plan),
        "host.cpp": _ENV.get_template("host.cpp.j2").render(plan=plan, exe=exe),
        "CMakeLists.txt": _ENV.get_template("CMakeLists.txt.j2").render(name=name, exe=exe),
    }
    return Artifact(name, files, plan)


def _dim(d):
    """A dimension as an int, or as a C++ expression over the symbolic dimensions (T.dynamic)."""
    from tvm import tirx as _t

    if isinstance(d, int):
        return d
    if isinstance(d, _t.IntImm):
        return int(d.value)
    from .cexpr import cexpr

    return cexpr(d)


def _tiles(n):
    return -(-n // 32) if isinstance(n, int) else f"(({n}) + 31u) / 32u"


def _last(n):
    """Valid elements in the last tile along a dimension of n elements."""
    return n - 32 * (-(-n // 32) - 1) if isinstance(n, int) else f"(({n}) - 32u * ((({n}) + 31u) / 32u - 1u))"


def _mul(a, b):
    return a * b if isinstance(a, int) and isinstance(b, int) else f"({a}) * ({b})"


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", text) is not None


def tensor_decls(tensors) -> str:
    return " ".join(f"{t['tiles_h']} {t['tiles_w']} {t['last_rows']} {t['last_cols']}" for t in tensors)


def _with_layout(kernel: dict, layout: list) -> dict:
    k = dict(kernel)
    k["runtime_args"] = {"layout": layout}
    return k


def _plain(value):
    """tvm containers -> plain JSON values."""
    if isinstance(value, (str, bool)):
        return value
    if isinstance(value, (int,)):
        return int(value)
    if isinstance(value, float):
        return value
    if hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if hasattr(value, "__iter__"):
        return [_plain(v) for v in value]
    if hasattr(value, "value"):
        return _plain(value.value)
    return value


# Artifacts produced by the device codegen, keyed by the hash of the kernel source TileLang stores.
_ARTIFACTS: dict[str, Artifact] = {}


def source_key(kernel_source: str) -> str:
    return hashlib.sha256(kernel_source.encode()).hexdigest()


def lookup_artifact(kernel_source: str) -> Artifact | None:
    return _ARTIFACTS.get(source_key(kernel_source))


def build_tt_without_compile(mod: IRModule, target: Target):
    """DeviceCodegen hook: emit and write the artifact of every kernel; return a source module."""
    options = options_from_target(target)
    artifacts = [generate(func, options) for _, func in mod.functions.items() if isinstance(func, tirx.PrimFunc)]
    if len(artifacts) != 1:
        raise TTLoweringError(f"expected one kernel, found {len(artifacts)}", construct="codegen")
    art = artifacts[0]
    art.directory = write_artifact(art.files, art.name)
    logger.info("tilelang-tt: wrote %s", art.directory)
    source = art.source()
    _ARTIFACTS[source_key(source)] = art
    return tvm_ffi.get_global_func("runtime.SourceModuleCreate")(source, "tt")
