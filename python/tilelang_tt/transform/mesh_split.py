"""MeshSplitTT: one TileLang kernel over a mesh of chips (target option ``-mesh=RxC``).

In:  a TileLang PrimFunc after InlineIndexLetsTT: the frontend's ``T.Kernel`` nest (``For`` loops bound to
     ``blockIdx.x/y/z``) around the ``"tilelang_root"`` block, whose tensor parameters are read and written through
     ``tl.region`` arguments of tile operators, ``BufferLoad`` and ``BufferStore``; optionally the block attribute of
     ``T.annotate_tt_mesh(axis=...)``; the target's mesh ``(rows, cols)`` (``TTOptions.mesh``).
Out: the per-chip function, the same on every chip: the split axis' loop runs over ``extent / chips`` blocks and
     every sharded tensor parameter is its chip's shard (its shape divided by the number of chips along the
     sharded dimension). Index expressions are unchanged: chip ``c`` runs global block ``c * extent / chips + v``
     as its block ``v``, and an index ``v * s + r`` of the sharded dimension then addresses row ``v * s + r`` of the
     chip's shard, which is global row ``c * (extent / chips) * s + v * s + r``. Without a mesh the function is
     returned unchanged (the pipeline does not even run the pass).

     The split axis is the annotated one, else the outermost grid axis (z, y, x) of extent > 1 whose blocks write
     disjoint parts of every written tensor. A tensor is *sharded* along the one dimension its indices take from
     the split axis (``v * s + r`` with ``0 <= r`` and ``r + extent <= s``, the dimension holding exactly
     ``extent * s`` elements; or ``v // g``, query heads sharing a K/V head) and *replicated* when no index depends
     on the split axis (a GEMM split by rows: A and C row-sharded, B replicated).
Attributes written: ``tt.mesh`` = {shape [R, C], chips, axis ("x"/"y"/"z"), grid_extent, per_chip, chip_blocks
     ([first, count] of the split axis per chip, chips row-major over the mesh), tensors: {name: {distribution
     ("sharded"/"replicated"), param_index, dim, global_shape, shard_shape}}}.
Errors (TTUnsupportedError, naming the construct and a fix): a grid extent that does not divide by the number of
     chips; a tensor written by blocks of different chips at the same place (its indices do not depend on the split
     axis) or accumulated across the split axis (T.atomic_add, a read-modify-write: a reduction across chips); a
     tensor indexed by the split axis in two dimensions, not affinely, beyond its block's rows, or in some accesses
     only; a shard that does not hold whole 32x32 tiles; the split axis used other than in the index of a sharded
     tensor (a mask, a loop bound: each chip would see its local block number); symbolic shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm
from tvm import tirx
from tvm.ir import Op

from .. import attrs, records
from ..errors import TTUnsupportedError
from ..target import TTOptions, mesh_text
from .common import TILE, TileOps, _ops_matching, decode_region, describe, is_call_to, shape_vars, source_of, \
    tilelang_text, uses_var, visit, with_grid_extent

AXES = {"blockIdx.x": "x", "blockIdx.y": "y", "blockIdx.z": "z"}
_OUTERMOST_FIRST = ("blockIdx.z", "blockIdx.y", "blockIdx.x")


@dataclass
class Access:
    """One access of a tensor parameter: the indices of its first element, its extent per dimension, and how."""

    buffer: tirx.Buffer
    mins: tuple
    extents: tuple
    kind: str                 # "read" | "write" | "update" (read-modify-write) | "accumulate" (atomic)
    stmt: object = None       # the expression it comes from, for messages


@dataclass
class Kernel:
    grid: dict                # tag -> (loop var, extent)
    accesses: list = field(default_factory=list)
    loops: list = field(default_factory=list)     # (var, min, extent) of every serial/parallel loop
    disjoint: dict = field(default_factory=dict)  # tag -> whether its blocks write disjoint parts of every output


def _collect(func: tirx.PrimFunc) -> Kernel:
    params = {func.buffer_map[p].data for p in func.params if p in func.buffer_map}
    kernel = Kernel({})
    regions, loads, region_loads, atomics = [], [], [], []

    def on_node(node):
        if isinstance(node, tirx.For):
            if node.thread_binding is not None and str(node.thread_binding.thread_tag) in AXES:
                kernel.grid[str(node.thread_binding.thread_tag)] = (node.loop_var, node.extent)
            else:
                kernel.loops.append((node.loop_var, node.min, node.extent))
        elif is_call_to(node, TileOps.region) and any(node.args[0].buffer.data.same_as(d) for d in params):
            r = decode_region(node)
            kind = {1: "read", 2: "write", 3: "update"}.get(r.access, "update")
            regions.append((node, Access(r.buffer, r.mins, r.extents, kind, node)))
            region_loads.append(node.args[0])
        elif isinstance(node, tirx.BufferLoad) and any(node.buffer.data.same_as(d) for d in params):
            loads.append(node)
        elif isinstance(node, tirx.BufferStore) and any(node.buffer.data.same_as(d) for d in params):
            kernel.accesses.append(Access(node.buffer, tuple(node.indices), (1,) * len(node.indices), "write", node))
        elif isinstance(node, tirx.Call) and isinstance(node.op, Op) and any(node.op.same_as(o) for o in
                                                                             _ops_matching("atomic")):
            atomics.append(node)

    visit(func.body, on_node)
    for call, acc in regions:
        atomic = next((at for at in atomics if any(a.same_as(call) for a in at.args)), None)
        if atomic is not None:
            acc.kind, acc.stmt = "accumulate", atomic
        kernel.accesses.append(acc)
    for load in loads:
        if any(load.same_as(r) for r in region_loads):
            continue
        inside_atomic = any(any(a.same_as(load) for a in at.args) for at in atomics)
        kernel.accesses.append(Access(load.buffer, tuple(load.indices), (1,) * len(load.indices),
                                      "accumulate" if inside_atomic else "read", load))
    kernel.disjoint = {tag: _writes_disjoint(kernel, var) for tag, (var, _) in kernel.grid.items()}
    return kernel


@dataclass
class Shard:
    dim: int
    form: str                  # "affine" (v * stride + rest) or "group" (v // stride)
    stride: int


def _index_form(expr, var, extent: int, ana, what: str, src: str) -> Shard | None:
    """How an index of a sharded dimension depends on the split axis: ``var * s + r`` or ``var // g``."""
    if isinstance(expr, tirx.FloorDiv) and expr.a.same_as(var) and isinstance(expr.b, tirx.IntImm):
        return Shard(-1, "group", int(expr.b.value)) if extent == 1 else None
    coeffs = tvm.arith.detect_linear_equation(expr, [var])
    if len(coeffs) != 2 or not isinstance(coeffs[0], tirx.IntImm) or int(coeffs[0].value) <= 0:
        return None
    stride, rest = int(coeffs[0].value), coeffs[1]
    if uses_var(rest, var):
        return None
    bound = ana.const_int_bound(rest)
    if bound.min_value < 0 or bound.max_value + extent > stride:
        raise TTUnsupportedError(f"{what} reaches rows {bound.min_value}..{bound.max_value + extent - 1} of a block "
                                 f"of {stride}: blocks of different chips would share rows", construct=what,
                                 source=src, fix="index the split dimension as block * size + offset with "
                                                 "0 <= offset < size, or split another axis (T.annotate_tt_mesh)")
    return Shard(-1, "affine", stride)


def _mesh_annotation(body) -> str | None:
    found = []
    tirx.stmt_functor.post_order_visit(body, lambda n: found.append(n.annotations[attrs.MESH_ANNOTATION])
                                       if isinstance(n, tirx.SBlock) and attrs.MESH_ANNOTATION in n.annotations
                                       else None)
    return str(found[-1]["axis"]) if found else None


def _writes_disjoint(kernel: Kernel, var) -> bool:
    writes = [a for a in kernel.accesses if a.kind != "read"]
    return bool(writes) and all(any(uses_var(m, var) for m in a.mins) for a in writes)


def _choose_axis(kernel: Kernel, annotated: str | None, src: str) -> str:
    tags = {v: k for k, v in AXES.items()}
    if annotated is not None:
        if tags[annotated] not in kernel.grid:
            raise TTUnsupportedError(f"the grid has no axis {annotated!r} (blockIdx.{annotated})",
                                     construct=f'T.annotate_tt_mesh(axis="{annotated}")', source=src,
                                     fix=f"name one of the grid's axes: {', '.join(AXES[t] for t in kernel.grid)}")
        return tags[annotated]
    candidates = [t for t in _OUTERMOST_FIRST if t in kernel.grid and not (
        isinstance(kernel.grid[t][1], tirx.IntImm) and int(kernel.grid[t][1].value) == 1)]
    for tag in candidates:
        if kernel.disjoint[tag]:
            return tag
    return candidates[0] if candidates else next(t for t in _OUTERMOST_FIRST if t in kernel.grid)


def _refuse_shared_write(name: str, accesses: list, axis: str, others: list, src: str):
    acc = next(a for a in accesses if a.kind != "read")
    reduction = acc.kind in ("accumulate", "update") or any(a.kind == "read" for a in accesses)
    other = " or ".join(f'T.annotate_tt_mesh(axis="{a}")' for a in others) or "T.annotate_tt_mesh(axis=...)"
    if reduction:
        raise TTUnsupportedError(
            f"{name} is accumulated across the split grid axis {axis} (b{axis}): its blocks run on different chips, "
            "so this is a reduction across chips, which a mesh kernel cannot do", construct=tilelang_text(acc.stmt),
            source=src, fix=f"split a grid axis whose blocks write disjoint parts of {name} ({other}), or run the "
                            "reduction on one chip (no -mesh)")
    raise TTUnsupportedError(
        f"{name} is written at the same place by blocks along the split grid axis {axis} (b{axis}), which run on "
        "different chips: their writes would overlap", construct=tilelang_text(acc.stmt), source=src,
        fix=f"index {name} by b{axis} so every chip writes its own part, split another axis ({other}), or run on "
            "one chip (no -mesh)")


def _distribution(buf, accesses, var, extent: int, chips: int, axis: str, others: list, ana,
                  src: str) -> Shard | None:
    """None (replicated) or the Shard of one tensor parameter, from all its accesses."""
    name = buf.name
    dims = sorted({d for a in accesses for d, m in enumerate(a.mins) if uses_var(m, var)})
    if not dims:
        if any(a.kind != "read" for a in accesses):
            _refuse_shared_write(name, accesses, axis, others, src)
        return None
    if len(dims) > 1:
        raise TTUnsupportedError(f"{name} is indexed by the split grid axis b{axis} in dimensions {dims}",
                                 construct=f"tensor {name}", source=src,
                                 fix="index one dimension by the split axis, or split another axis (T.annotate_tt_mesh)")
    d = dims[0]
    shard = None
    for a in accesses:
        what = f"{name}'s dimension {d} in {describe(a.stmt)}"
        if not uses_var(a.mins[d], var):
            raise TTUnsupportedError(f"{name} is indexed by b{axis} in some accesses and not in {describe(a.stmt)}: "
                                     "the chips would need each other's shards", construct=f"tensor {name}",
                                     source=src, fix="split another grid axis (T.annotate_tt_mesh) or run on one chip")
        form = _index_form(a.mins[d], var, int(a.extents[d]), ana, what, src)
        if form is None:
            raise TTUnsupportedError(f"{what} is not b{axis} * size + offset (nor b{axis} // groups)",
                                     construct=f"tensor {name}", source=src,
                                     fix="index the split dimension affinely, or split another axis "
                                         "(T.annotate_tt_mesh)")
        if shard is not None and (form.form, form.stride) != (shard.form, shard.stride):
            raise TTUnsupportedError(f"{name}'s dimension {d} is indexed with blocks of {shard.stride} and of "
                                     f"{form.stride} rows", construct=f"tensor {name}", source=src,
                                     fix="index the split dimension the same way in every access")
        shard = Shard(d, form.form, form.stride)
    size = int(buf.shape[d])
    rows = extent * shard.stride if shard.form == "affine" else extent // shard.stride
    if shard.form == "group" and (extent % shard.stride or (extent // chips) % shard.stride):
        raise TTUnsupportedError(f"{name} is indexed by b{axis} // {shard.stride}, but the {extent // chips} blocks "
                                 f"per chip are not whole groups of {shard.stride}", construct=f"tensor {name}",
                                 source=src, fix="use a mesh whose chip count divides the number of groups")
    if size != rows:
        raise TTUnsupportedError(f"{name}'s dimension {d} has {size} elements, but the {extent} blocks along b{axis} "
                                 f"cover {rows}: the chips' shards would not be equal", construct=f"tensor {name}",
                                 source=src, fix=f"make dimension {d} of {name} a whole number of blocks")
    per_chip = size // chips
    rank = len(buf.shape)
    if d >= rank - 2 and (per_chip % TILE or (rank >= 2 and int(buf.shape[-1 if d == rank - 2 else -2]) % TILE)):
        raise TTUnsupportedError(f"{name}'s shard is {per_chip} elements of dimension {d}: shards must hold whole "
                                 "32x32 tiles", construct=f"tensor {name}", source=src,
                                 fix=f"make each chip's part of dimension {d} (and the other tiled dimension) a "
                                     "multiple of 32, or use fewer chips")
    return shard


def _check_other_uses(func, var, shards: dict, axis: str, src: str) -> None:
    """The split axis may appear only in the sharded dimensions' indices: anywhere else a chip would use its local
    block number where the kernel means the global one. Those indices are rewritten to a stand-in; any use of the
    axis left is refused, naming its statement."""
    stand_in = tirx.Var(f"{var.name}_shard", var.dtype)

    def local(indices, name):
        dim = shards[name].dim
        return [tirx.stmt_functor.substitute(e, {var: stand_in}) if d == dim else e for d, e in enumerate(indices)]

    def post(node):
        if shards.get(node.buffer.name) is None:
            return None
        if isinstance(node, tirx.BufferLoad):
            return tirx.BufferLoad(node.buffer, local(node.indices, node.buffer.name))
        return tirx.BufferStore(node.buffer, node.value, local(node.indices, node.buffer.name))

    body = tirx.stmt_functor.ir_transform(func.body, None, post, ["tirx.BufferLoad", "tirx.BufferStore"])
    culprit = []

    def on_stmt(node):
        exprs = {tirx.Evaluate: lambda n: [n.value], tirx.IfThenElse: lambda n: [n.condition],
                 tirx.For: lambda n: [n.min, n.extent], tirx.Bind: lambda n: [n.value],
                 tirx.BufferStore: lambda n: [n.value, *n.indices]}.get(type(node))
        if not culprit and exprs is not None and any(uses_var(e, var) for e in exprs(node)):
            culprit.append(node)

    tirx.stmt_functor.post_order_visit(body, on_stmt)
    if culprit:
        where = tilelang_text(culprit[0])
        raise TTUnsupportedError(f"the split grid axis b{axis} is used in {where}, not only to index the sharded "
                                 "tensors: each chip runs its blocks with a local block number", construct=where,
                                 source=src, fix="split another grid axis (T.annotate_tt_mesh(axis=...)) or run on "
                                                 "one chip (no -mesh)")


def _sharded_buffer(buf: tirx.Buffer, dim: int, chips: int) -> tirx.Buffer:
    shape = [int(s) for s in buf.shape]
    shape[dim] //= chips
    strides = []
    if len(buf.strides):
        acc = 1
        for s in reversed(shape):
            strides.insert(0, tirx.IntImm("int32", acc))
            acc *= s
    return tirx.decl_buffer(shape, buf.dtype, buf.name, data=buf.data, strides=strides, elem_offset=buf.elem_offset,
                            scope=str(buf.scope()), data_alignment=buf.data_alignment,
                            offset_factor=buf.offset_factor)


def _rewrite(func: tirx.PrimFunc, tag: str, per_chip: int, new_bufs: dict) -> tirx.PrimFunc:
    def post(node):
        if isinstance(node, tirx.BufferLoad) and node.buffer.name in new_bufs and node.buffer.data.same_as(
                new_bufs[node.buffer.name].data):
            return tirx.BufferLoad(new_bufs[node.buffer.name], node.indices)
        if isinstance(node, tirx.BufferStore) and node.buffer.name in new_bufs and node.buffer.data.same_as(
                new_bufs[node.buffer.name].data):
            return tirx.BufferStore(new_bufs[node.buffer.name], node.value, node.indices)
        return None

    body = tirx.stmt_functor.ir_transform(with_grid_extent(func.body, tag, per_chip), None, post,
                                          ["tirx.BufferLoad", "tirx.BufferStore"])
    buffer_map = {p: new_bufs.get(func.buffer_map[p].name, func.buffer_map[p]) for p in func.params
                  if p in func.buffer_map}
    return tirx.PrimFunc(func.params, body, func.ret_type, buffer_map, func.attrs)


def mesh_split(func: tirx.PrimFunc, options: TTOptions) -> tirx.PrimFunc:
    if options.mesh is None:
        return func
    src = source_of(func)
    rows, cols = options.mesh
    chips = rows * cols
    if shape_vars(func):
        raise TTUnsupportedError("a kernel with symbolic shapes (T.dynamic) cannot be split over a mesh yet",
                                 construct=f"target option mesh={mesh_text(options.mesh)}", source=src,
                                 fix="compile with static shapes, or without -mesh")
    kernel = _collect(func)
    if not kernel.grid:
        raise TTUnsupportedError("no T.Kernel grid to split across the chips", construct="T.Kernel", source=src,
                                 fix="write the kernel body inside `with T.Kernel(gx, gy) as (bx, by):`")
    tag = _choose_axis(kernel, _mesh_annotation(func.body), src)
    axis = AXES[tag]
    var, extent = kernel.grid[tag]
    extent = int(extent.value)
    if extent % chips:
        raise TTUnsupportedError(f"the grid's {tag} extent {extent} does not divide evenly over the {chips} chips "
                                 f"of the {mesh_text(options.mesh)} mesh", construct=f"T.Kernel grid (b{axis})",
                                 source=src, fix=f"choose block sizes that make b{axis}'s extent a multiple of {chips}, "
                                                 "split another axis (T.annotate_tt_mesh(axis=...)), or use a smaller mesh")
    ana = tvm.arith.Analyzer()
    for v, lo, ext in kernel.loops:
        if isinstance(lo, tirx.IntImm) and isinstance(ext, tirx.IntImm):
            ana.bind(v, tvm.ir.Range.from_min_extent(lo, ext))
    for t, (v, e) in kernel.grid.items():
        ana.bind(v, tvm.ir.Range.from_min_extent(0, e))
    others = [AXES[t] for t in _OUTERMOST_FIRST if t in kernel.grid and t != tag and kernel.disjoint[t]]
    params = [(i, func.buffer_map[p]) for i, p in enumerate(func.params) if p in func.buffer_map]
    shards, tensors, new_bufs = {}, {}, {}
    for index, buf in params:
        accesses = [a for a in kernel.accesses if a.buffer.data.same_as(buf.data)]
        shard = _distribution(buf, accesses, var, extent, chips, axis, others, ana, src) if accesses else None
        shards[buf.name] = shard
        global_shape = [int(s) for s in buf.shape]
        if shard is None:
            tensors[buf.name] = {"distribution": "replicated", "param_index": index, "global_shape": global_shape,
                                 "shard_shape": global_shape}
            continue
        new_bufs[buf.name] = _sharded_buffer(buf, shard.dim, chips)
        tensors[buf.name] = {"distribution": "sharded", "param_index": index, "dim": shard.dim,
                             "global_shape": global_shape,
                             "shard_shape": [int(s) for s in new_bufs[buf.name].shape]}
    _check_other_uses(func, var, shards, axis, src)
    per_chip = extent // chips
    out = _rewrite(func, tag, per_chip, new_bufs)
    return records.put_mesh(out, records.Mesh(shape=[rows, cols], chips=chips, axis=axis, grid_extent=extent,
                                              per_chip=per_chip, tensors=tensors,
                                              chip_blocks=[[c * per_chip, per_chip] for c in range(chips)]))
