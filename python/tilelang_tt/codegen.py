"""Codegen: the lowered PrimFunc -> reader/compute/writer kernels, tt.plan.json, host program, CMakeLists.

``generate`` is the whole codegen for one kernel; ``build_tt_without_compile`` is the device-codegen hook
TileLang calls. Sources are rendered with Jinja2 templates from ``templates/``; the host program is
rendered from the plan alone.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import jinja2
import tvm_ffi
from tvm import IRModule, tirx
from tvm.target import Target

from . import attrs, compute_config, coverage, plan as plan_mod, records, ttir_json
from .artifact import comment_text, write_artifact
from .device import FACE, INT_AS_FLOAT_LIMIT, NARROW_INDEX_DTYPES, TILE, TILE_FORMATS
from .errors import TTLoweringError
from .formats import tensor_format
from .intrinsics import COMPUTE_BASE_HEADERS, DATAFLOW_HEADER
from .kernel_context import KernelContext, dim as _dim
from .mesh_plan import globalize_buffers, mesh_entry
from .pipeline import build_program
from .program_interface import MCAST_ARGS, kernel_tensors, tiles
from .sequence import SequenceArtifact
from .printer import call_text, half_widenings, headers, print_body, uses_runtime_scalars
from .target import TTOptions, options_from_target
from .transform.common import source_of
from .transform.prune_program import kernel_reads
from .ttir import CB, Call, Tensor, calls, dump, walk

logger = logging.getLogger(__name__)

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("tilelang_tt", "templates"), undefined=jinja2.StrictUndefined,
                          keep_trailing_newline=True, trim_blocks=False, lstrip_blocks=False)
_ENV.filters["comment"] = comment_text     # anything user-named that lands in a // comment goes through this

KERNEL_FILES = {"reader": "kernels/reader.cpp", "compute": "kernels/compute.cpp", "writer": "kernels/writer.cpp"}
HELPERS_FILE = "kernels/dataflow_helpers.h"   # the data-movement helpers reader.cpp and writer.cpp include


@dataclass
class Artifact:
    name: str
    files: dict[str, str]            # relative path -> text
    plan: dict
    directory: Path | None = None

    def source(self) -> str:
        """All sources, each under a banner with its path."""
        parts = []
        for rel in ("kernels/reader.cpp", "kernels/compute.cpp", "kernels/writer.cpp", HELPERS_FILE, "host.cpp",
                    "tt.plan.json", "CMakeLists.txt"):
            parts.append(f"// ===== {rel} =====\n{self.files[rel]}")
        return "\n".join(parts)


def generate(func: tirx.PrimFunc, options: TTOptions) -> Artifact:
    """The whole codegen of one kernel: the explicit TT program, then the plan and the printed files."""
    if attrs.LOWERED in func.attrs:
        func = func.attrs[attrs.LOWERED]
    src = source_of(func)
    if not records.cbs(func):
        raise TTLoweringError("the function was not lowered by the TT pipeline", construct="codegen", source=src)
    ctx = KernelContext(func, options)
    program = build_program(func, ctx, options)
    plan = _plan(ctx, program)
    return Artifact(ctx.name, _render(ctx, program, plan), plan)


def _written_tensors(ctx: KernelContext, program) -> list[int]:
    """The tensors the writer stores to (an index tensor the writer reads is an input)."""
    used = {c.args[1].name for c in calls(program.kernels["writer"].body) if c.op.startswith("write_tiles")}
    used |= {c.args[2].name for c in calls(program.kernels["writer"].body) if c.op == "scatter_row"}
    return [i for i, _ in ctx.tensors if ctx.tensor_names[i] in used]


def _guarded_writes(ctx: KernelContext, program) -> set[int]:
    """The tensors the writer stores to under a block-level ``if`` or row by row (``scatter_row``: the rows of a
    sequence, those a guard keeps): what the skipped blocks and rows leave is the caller's data, so the host uploads
    the tensor before the launch (``io`` "inout")."""
    used = {n.args[1].name for n, loops in walk(program.kernels["writer"].body)
            if isinstance(n, Call) and n.op.startswith("write_tiles") and any(f.guard is not None for f in loops)}
    used |= {c.args[2].name for c in calls(program.kernels["writer"].body) if c.op == "scatter_row"}
    return {i for i, _ in ctx.tensors if ctx.tensor_names[i] in used}


def _kernel_specs(ctx: KernelContext, program) -> dict:
    """The plan's kernels, from the program's interface (``program_interface.py``): files, processors, each data
    movement kernel's tensor accessors and every kernel's runtime-argument layout."""
    args, kernels = program.interface["runtime_args"], {}
    for role in ("reader", "writer"):
        names = [t["name"] for t in program.interface["tensors"] if role in t["roles"]]
        kernels[role] = {"file": KERNEL_FILES[role], "processor": "RISCV_1" if role == "reader" else "RISCV_0",
                         "noc": "RISCV_1_default" if role == "reader" else "RISCV_0_default",
                         "compile_args": [{"tensor_accessor": t} for t in names],
                         "runtime_args": {"layout": list(args[role])}}
    kernels["compute"] = {"file": KERNEL_FILES["compute"], "math_fidelity": ctx.math_fidelity,
                          "fp32_dest_acc_en": ctx.fp32_acc, "compile_args": [],
                          "runtime_args": {"layout": list(args["compute"])}}
    unpack_to_dest = compute_config.unpack_to_dest_cbs(program, ctx.fp32_acc)
    if unpack_to_dest:   # Float32 CBs compute only copies into DST: UnpackToDestFp32 in the ComputeConfig
        kernels["compute"]["unpack_to_dest"] = unpack_to_dest
    return kernels


def _compute_integer_tensors(program) -> set[str]:
    """The integer tensors whose tiles the reader hands to compute (``mask[i] = Indices[b, i] <= q``): compute
    makes their words floats in DST (typecast_tile<Int32, Float32>), exact only below 2^24, which the call checks."""
    out = set()
    for c in calls(program.kernels["reader"].body):
        cbs = [program.cbs[a.name] for a in c.args if isinstance(a, CB) and a.name in program.cbs]
        if any(cb.fmt == "Int32" and "compute" in cb.consumer for cb in cbs):
            out |= {a.name for a in c.args if isinstance(a, Tensor)}
    return out


def _index_only_tensors(program) -> set[str]:
    """The tensors every data-movement call reads only an element of (``read_index``: offsets, conditions)."""
    elementwise, other = set(), set()
    for role in ("reader", "writer"):
        for c in calls(program.kernels[role].body):
            for a in c.args:
                if isinstance(a, Tensor):
                    (elementwise if c.op == "read_index" else other).add(a.name)
    return elementwise - other


def _buffers(ctx: KernelContext, program) -> list:
    writes = _written_tensors(ctx, program)
    guarded = _guarded_writes(ctx, program)
    reader = kernel_tensors(ctx, program, "reader")
    reads = [i for i in {*reader, *kernel_tensors(ctx, program, "writer")} if i not in writes or i in reader]
    index_only = _index_only_tensors(program)
    computed_ints = _compute_integer_tensors(program)
    config = records.compute(ctx.func)
    fp32_pages = set(config.float16_results or ()) if config is not None else set()
    out = []
    for i, buf in ctx.tensors:
        shape = ctx.shape(buf)     # the 2-D view TilePadTT tiles the tensor as
        pad, stored = records.padding(ctx.func, buf.name), records.shard(ctx.func, buf.name)
        logical = ctx.dims(pad.logical)
        num_pages = _mul(tiles(shape[-2]), tiles(shape[-1]))
        io = "inout" if i in writes and (i in reads or i in guarded) else "input" if i in reads \
            else "output" if i in writes else "unused"
        fmt = tensor_format(buf.dtype, stored.format, "input" if io == "unused" else io,
                            f"tensor {buf.name}", ctx.src)
        if str(buf.dtype) in NARROW_INDEX_DTYPES and io == "input" and ctx.tensor_names[i] in index_only:
            fmt = TILE_FORMATS["Int32"]     # an int8 block mask read only as elements: Int32 words, as bool masks
        if buf.name in fp32_pages:           # float16 results of an fp32 DST: Float32 pages the host rounds to float16
            fmt = TILE_FORMATS["Float32"]
        shard = {k: (list(map(str, v)) if not isinstance(v, str) else v) if k != "axis" else [int(a) for a in v]
                 for k, v in stored.as_dict().items()}
        out.append({"name": ctx.tensor_names[i], "param_index": i, "shape": list(logical), "view": list(shape),
                    "padded_shape": [_dim(x) for x in pad.padded], "dtype": str(buf.dtype),
                    "format": fmt.name, "layout": "tiled_32x32_interleaved", "placement": shard["placement"],
                    "page_size": fmt.tile_bytes, "num_pages": num_pages, "bytes": _mul(num_pages, fmt.tile_bytes),
                    "io": io, "shard": shard})
        if pad.row_pad is not None:     # a symbolic count of matrices (T.dynamic batch) as its C++ expression
            out[-1]["row_pad"] = {**pad.row_pad, "outer": ctx.dims([pad.row_pad["outer"]])[0]}
        if pad.col_pad is not None:
            out[-1]["col_pad"] = pad.col_pad
        if ctx.tensor_names[i] in computed_ints:
            out[-1]["value_limit"] = INT_AS_FLOAT_LIMIT     # |value| below it, checked at the call
        unpack = records.host_unpack(ctx.func, buf.name)
        if unpack is not None:   # packed weights: the host unpacks them
            out[-1]["host_unpack"] = unpack.as_dict()
    return out


def _plan_cbs(program) -> list:
    """The plan's CB table, from the TT program's CB records (DST-resident accumulators take no L1 and have none)."""
    out = []
    for cb in sorted(program.cbs.values(), key=lambda c: c.index):
        entry = {"name": cb.name, "index": cb.index, "format": cb.fmt, "page_size": cb.page_size,
                 "block_tiles": cb.block_tiles, "depth": cb.depth, "num_pages": cb.num_pages, "bytes": cb.bytes,
                 "role": cb.role, "producer": list(cb.producer), "consumer": list(cb.consumer)}
        if cb.residency is not None:
            entry["residency"] = cb.residency
            entry["subblock"] = list(cb.subblock)
        if cb.accumulate is not None:
            entry["accumulate"] = cb.accumulate
        if cb.band is not None:
            entry["band"] = dict(cb.band)
        out.append(entry)
    return out


def _plan(ctx: KernelContext, program) -> dict:
    schedule = records.schedule(ctx.func)
    sched = {k: v for k, v in schedule.as_dict().items() if k != "mapping"}
    dev = ctx.dev
    plan = {
        "schema_version": plan_mod.SCHEMA_VERSION, "kernel": ctx.name, "source": comment_text(ctx.src),
        "device": {"arch": dev.arch, "board": dev.board, "grid": [dev.grid_y, dev.grid_x], "l1_bytes": dev.l1_bytes,
                   "dram_banks": dev.dram_banks, "num_cbs": dev.num_cbs, "dst_tiles": program.dst_capacity,
                   "max_cores": ctx.options.max_cores},
        "grid": ctx.grid, "policy": sched["policy"], "order": sched["order"], "schedule": sched,
        "core_ranges": records.plain(ctx.func.attrs[attrs.CORE_RANGES]), "runtime_args": ctx.rt_names,
        "shape_args": [v.name for v in ctx.shape_vars], "mapping": schedule.mapping,
        "scalar_args": [{"name": v.name, "param_index": i, "dtype": d} for i, v, d in ctx.scalars],
        "buffers": _buffers(ctx, program), "cbs": _plan_cbs(program), "kernels": _kernel_specs(ctx, program),
        "math_fidelity": ctx.math_fidelity,
        "precision": compute_config.precision(program, ctx.fp32_acc, ctx.compute),
    }
    if attrs.TILE_INT_LIMITS in ctx.func.attrs:     # scalar parameters by position -> their plan names
        limits = ctx.func.attrs[attrs.TILE_INT_LIMITS]
        by_index = {i: v.name for i, v, _ in ctx.scalars}
        plan["tile_int_limits"] = {**{str(k): int(v) for k, v in limits["dims"].items()},
                                   **{by_index[int(k)]: int(v) for k, v in limits["params"].items()}}
    # an output the writer does not store whole keeps the caller's elements: the host uploads it first
    partial = coverage.partially_written({role: k.body for role, k in program.kernels.items()}, plan)
    for buf in plan["buffers"]:
        if buf["name"] in partial:
            buf["io"] = "inout"
    for key, record in (("sdpa", records.sdpa(ctx.func)), ("super_block", records.super_block(ctx.func)),
                        ("row_stream", records.row_stream(ctx.func))):
        if record is not None:
            plan[key] = record.as_dict()
    if program.multicast:
        plan["multicast"] = program.multicast
    split = records.mesh(ctx.func)
    if split is not None:     # MeshSplitTT: the host's buffers are global, each sharded or replicated
        mesh = split.as_dict()
        plan["mesh"] = mesh_entry(mesh)
        plan["buffers"] = globalize_buffers(plan["buffers"], mesh, ctx.src)
    plan_mod.check_invariants(plan)     # the schema: at every trust boundary and in the tests (plan.py)
    return plan


def _cb_decls(ctx: KernelContext, program, body) -> list:
    used = {a.name for c in calls(body) for a in c.args if isinstance(a, CB)}
    return [{"var": ctx.cb_vars[cb.name], "index": cb.index,
             "comment": comment_text(f"{cb.name}: {cb.shape_tiles[0]}x{cb.shape_tiles[1]} tiles {cb.dtype}, {cb.role}, "
                                     + (f"streamed in {cb.band['depth']} bands of {cb.band['pages']} tiles"
                                        if cb.band is not None else f"depth {cb.depth} block(s)"))}
            for cb in sorted(program.cbs.values(), key=lambda c: c.index) if cb.name in used]


def _layout_used(kernel: dict, names: set) -> dict:
    layout = [dict(a, used=a["kind"] in ("buffer_address", "multicast") or a["name"] in names)
              for a in kernel["runtime_args"]["layout"]]
    return _with_layout(kernel, layout)


def _render_dataflow(ctx: KernelContext, program, plan, role: str) -> str:
    body = program.kernels[role].body
    tensors = [t for t in program.interface["tensors"] if role in t["roles"]]
    needed = kernel_reads(body).union(*(t["shape_vars"] for t in tensors))
    return _ENV.get_template("dataflow.cpp.j2").render(
        role=role, name=ctx.name, source=comment_text(ctx.src), grid=ctx.grid, grid_text=ctx.grid_text,
        kernel=_layout_used(plan["kernels"][role], needed), tensors=tensors, cbs=_cb_decls(ctx, program, body),
        body=print_body(body, ctx.cb_vars), helpers_header=Path(HELPERS_FILE).name,
        mcast_groups=(program.multicast or {}).get("groups", []) if role == "reader" else [], mcast_args=MCAST_ARGS)


def _render_compute(ctx: KernelContext, program, plan) -> str:
    k = program.kernels["compute"]
    startup = call_text(k.startup, ctx.cb_vars).rstrip(";")
    return _ENV.get_template("compute.cpp.j2").render(
        name=ctx.name, source=comment_text(ctx.src), grid=ctx.grid, grid_text=ctx.grid_text,
        kernel=_layout_used(plan["kernels"]["compute"], kernel_reads(k.body)),
        headers=sorted(set(COMPUTE_BASE_HEADERS) | headers(k.body) | headers([k.startup])),
        cbs=_cb_decls(ctx, program, k.body + [k.startup]), body=print_body(k.body, ctx.cb_vars), startup=startup,
        dst_capacity=program.dst_capacity, float_bits=uses_runtime_scalars(k.body),
        half_widenings=half_widenings(k.body))


def _render(ctx: KernelContext, program, plan) -> dict[str, str]:
    exe = f"{ctx.name}_host"
    return {
        "kernels/reader.cpp": _render_dataflow(ctx, program, plan, "reader"),
        "kernels/compute.cpp": _render_compute(ctx, program, plan),
        "kernels/writer.cpp": _render_dataflow(ctx, program, plan, "writer"),
        HELPERS_FILE: _ENV.get_template("dataflow_helpers.h.j2").render(
            dataflow_header=DATAFLOW_HEADER,
            geom={"tile": TILE, "face": FACE, "mcast_flush": ctx.dev.mcast_flush_before_flag,
                  "dram_alignment": ctx.dev.dram_alignment}),
        "tt.plan.json": plan_mod.dumps(plan),
        "tt.program.txt": dump(program),
        "tt.program.json": ttir_json.dumps(program),
        "host.cpp": _ENV.get_template("host.cpp.j2").render(plan=plan, exe=exe),
        "CMakeLists.txt": _ENV.get_template("CMakeLists.txt.j2").render(name=ctx.name, exe=exe),
    }


def _mul(a, b):
    return a * b if isinstance(a, int) and isinstance(b, int) else f"({a}) * ({b})"


def _with_layout(kernel: dict, layout: list) -> dict:
    k = dict(kernel)
    k["runtime_args"] = {"layout": layout}
    return k


# Artifacts produced by the device codegen, keyed by the hash of the kernel source TileLang stores, until the
# kernel that TileLang builds around that source picks its artifact up (right after codegen, in the same compile;
# an autotuner's parallel compiles have a few in flight): the newest _KEEP_ARTIFACTS are kept, older ones dropped.
_ARTIFACTS: OrderedDict[str, Artifact | SequenceArtifact] = OrderedDict()
_KEEP_ARTIFACTS = 64


def source_key(kernel_source: str) -> str:
    return hashlib.sha256(kernel_source.encode()).hexdigest()


def lookup_artifact(kernel_source: str) -> Artifact | SequenceArtifact | None:
    return _ARTIFACTS.get(source_key(kernel_source))


def _record_artifact(source: str, art: Artifact | SequenceArtifact) -> None:
    _ARTIFACTS[source_key(source)] = art
    _ARTIFACTS.move_to_end(source_key(source))
    while len(_ARTIFACTS) > _KEEP_ARTIFACTS:
        _ARTIFACTS.popitem(last=False)


def module_artifact(mod: IRModule, options: TTOptions) -> Artifact | SequenceArtifact:
    """The artifact of a lowered module: its one kernel's, or, for SplitKernelsTT's stages of one function, a
    sequence artifact of one artifact per launch, in launch order (sequence.py)."""
    funcs = [f.attrs[attrs.LOWERED] if attrs.LOWERED in f.attrs else f
             for _, f in mod.functions.items() if isinstance(f, tirx.PrimFunc)]
    stages = [records.sequence(f) for f in funcs]
    if len(funcs) == 1 and stages[0] is None:
        return generate(funcs[0], options)
    if funcs and all(r is not None and r.kernel == stages[0].kernel and r.stages == len(funcs) for r in stages):
        order = sorted(range(len(funcs)), key=lambda i: stages[i].stage)
        return SequenceArtifact.from_stages(stages[0].kernel, stages[order[0]],
                                            [generate(funcs[i], options) for i in order])
    raise TTLoweringError(f"expected one kernel, found {len(funcs)}", construct="codegen")


def build_tt_without_compile(mod: IRModule, target: Target):
    """DeviceCodegen hook: emit and write the artifact of every kernel; return a source module."""
    art = module_artifact(mod, options_from_target(target))
    art.directory = write_artifact(art.files, art.name)
    logger.info("tilelang-tt: wrote %s", art.directory)
    source = art.source()
    _record_artifact(source, art)
    return tvm_ffi.get_global_func("runtime.SourceModuleCreate")(source, "tt")
