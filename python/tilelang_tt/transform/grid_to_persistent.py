"""GridToPersistentTT: turn the ``T.Kernel`` launch grid into a per-core persistent loop.

In:  a TileLang PrimFunc whose body is the frontend's ``T.Kernel`` nest: ``For`` loops bound to
     ``blockIdx.x`` / ``blockIdx.y`` (``For.thread_binding.thread_tag``), the ``tl.launch_thread_idx``
     placeholders, and the ``"tilelang_root"`` block. An optional ``T.annotate_tt_schedule`` block
     attribute selects the schedule; the defaults are ``contiguous`` + ``row_major``.
Out: the same function with new int32 parameters (the per-core runtime args of the policy) and body::

         for n in range(count):                       # annotated tt.persistent_loop
             by = <schedule order>(n, runtime args)   # flat Bind statements
             bx = ...
             <tilelang_root block, unchanged>

Attributes written: ``tt.grid`` = [grid_y, grid_x]; ``tt.schedule`` = a ``records.Schedule`` (policy, order,
     rect?, stride?, chunk knobs, num_cores, mapping (per core), common args); ``tt.runtime_args`` = the new parameters'
     names, in order. The contiguous split keeps the granule ``tt.sdpa`` (``records.Sdpa``) asks for (SDPAFusionTT's pairs).
     A 3-D grid ``T.Kernel(nx, ny, nz)`` is scheduled as the 2-D grid ``(ny * nz, nx)``: the schedule's row
     ``row`` binds ``bz = row // ny`` and ``by = row % ny``.
Errors (TTLoweringError / TTScheduleError / TTUnsupportedError): no blockIdx grid;
     a nest that is not the frontend's shape; non-positive or symbolic extents; a body that reads
     threadIdx (``tx``/``ty``/``tz``) or contains other thread-bound loops; a schedule that misses or
     repeats a block.
"""

from __future__ import annotations

from tvm import tirx

from .. import attrs, records
from ..errors import TTLoweringError, TTScheduleError, TTUnsupportedError
from ..schedule import ScheduleSpec, build_schedule, make_schedule_spec
from ..target import TTOptions
from .common import GRID_TAGS as _GRID_TAGS
from .common import visit, TileOps, describe, free_vars, grid_loops, is_call_to, prim_func_pass, shape_vars, source_of


def _find_schedule_annotation(stmt) -> ScheduleSpec:
    found = []

    def visit(node):
        if isinstance(node, tirx.SBlock) and attrs.SCHEDULE_ANNOTATION in node.annotations:
            found.append(node.annotations[attrs.SCHEDULE_ANNOTATION])

    tirx.stmt_functor.post_order_visit(stmt, visit)
    if not found:
        return ScheduleSpec()
    ann = found[-1]

    def get(key):
        if key not in ann:
            return None
        value = ann[key]
        if not isinstance(value, str) and hasattr(value, "__len__"):
            return tuple(int(v) for v in value)
        if isinstance(value, (bool, tirx.IntImm)) and key == "multicast":
            return bool(value)
        if isinstance(value, (int, tirx.IntImm)):
            return int(value)
        return str(value)

    return make_schedule_spec(get("policy") or "contiguous", get("order") or "row_major", get("rect"),
                              get("stride"), get("chunk_k_tiles"), get("qk_chunk_tiles"), get("multicast"))


def _uses_any(stmt, variables) -> bool:
    targets = {v for v in variables}
    hit = []

    def visit(node):
        if isinstance(node, tirx.Var) and any(node.same_as(v) for v in targets):
            hit.append(node)

    tirx.stmt_functor.post_order_visit(stmt, visit)
    return bool(hit)


def _debug_print(stmt) -> bool:
    """Whether ``stmt`` holds T.print's expansion (``call_extern("debug_print_...")``, guarded by ``tx == 0``)."""
    hit = []

    def visit(node):
        if (isinstance(node, tirx.Call) and node.args and isinstance(node.args[0], tirx.StringImm)
                and str(node.args[0].value).startswith("debug_print")):
            hit.append(node)

    tirx.stmt_functor.post_order_visit(stmt, visit)
    return bool(hit)


def _refuse_thread_code(body, thread_vars, src):
    """The refusal of a kernel body that reads threadIdx, naming the statement (T.print is one: TileLang expands it
    into a loop guarded by ``tx == 0``)."""
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    while len(stmts) == 1 and isinstance(stmts[0], (tirx.SBlockRealize, tirx.SBlock)):
        inner = stmts[0].block.body if isinstance(stmts[0], tirx.SBlockRealize) else stmts[0].body
        stmts = list(inner.seq) if isinstance(inner, tirx.SeqStmt) else [inner]
    culprit = next((s for s in stmts if _uses_any(s, thread_vars)), body)
    if _debug_print(culprit):
        raise TTUnsupportedError("T.print has no TT lowering (it prints per GPU thread)", construct="T.print",
                                 source=src, fix="remove the T.print; to look at a buffer, T.copy it to an extra "
                                                 "output tensor and print that tensor on the host")
    raise TTUnsupportedError("the kernel body reads threadIdx (tx/ty/tz); TT kernels compute whole tiles, so "
                             "per-thread code has no meaning", construct=describe(culprit), source=src,
                             fix="express the body with tile operators (T.copy, T.gemm, T.Parallel)")


def _order_exprs(bid, grid_y: int, grid_x: int, k: int | None):
    """TIR twin of ``schedule.order_to_coord``: (binds, by, bx) for block id ``bid``.

    The intermediate values are flat ``Bind``s so that the kernels name them."""
    if k is None:
        return [], tirx.floordiv(bid, grid_x), tirx.floormod(bid, grid_x)
    names = {}

    def bind(name, value):
        names[name] = (tirx.Var(name, "int32"), value)
        return names[name][0]

    block_id = bind("block_id", bid)
    band = bind("band", tirx.floordiv(block_id, k * grid_x))                       # k rows of blocks
    band_h = bind("band_h", tirx.min(tirx.IntImm("int32", k), grid_y - band * k))  # clipped at the bottom
    in_band = bind("in_band", tirx.floormod(block_id, k * grid_x))
    group = bind("group", tirx.floordiv(in_band, band_h * k))                      # k x k group in the band
    group_w = bind("group_w", tirx.min(tirx.IntImm("int32", k), grid_x - group * k))
    in_group = bind("in_group", in_band - group * band_h * k)
    binds = [tirx.Bind(v, e) for v, e in names.values()]
    return binds, band * k + tirx.floordiv(in_group, group_w), group * k + tirx.floormod(in_group, group_w)


def _launches(stmt) -> list:
    """The outermost grid loops under ``stmt`` (one per ``T.Kernel``), wherever blocks or attributes wrap them."""
    found = []

    def visit(node):
        if isinstance(node, tirx.For) and node.thread_binding is not None and \
                str(node.thread_binding.thread_tag) in _GRID_TAGS:
            found.append(node)
            return node          # stop: the loops inside belong to this launch
        return None

    tirx.stmt_functor.ir_transform(stmt, visit, None, ["tirx.For"])
    return found


def _grid_of(loops, symbolic, src) -> dict:
    """{blockIdx tag: (loop var, extent)} of the T.Kernel grid loops: a positive int, or an expression of the
    tensors' symbolic dimensions and integer scalar parameters (``symbolic``: both, known at launch)."""
    grid: dict[str, tuple[tirx.Var, object]] = {}
    for loop in loops:
        tag = str(loop.thread_binding.thread_tag)
        if tag not in _GRID_TAGS:
            raise TTUnsupportedError(f"loop bound to {tag} outside the T.Kernel body", construct="T.Kernel",
                                     source=src, fix="TT kernels are launched over a blockIdx grid only")
        if not isinstance(loop.extent, tirx.IntImm):
            unknown = [v for v in free_vars(loop.extent) if not any(v.same_as(s) for s in symbolic)]
            if unknown:
                raise TTUnsupportedError(f"grid extent {loop.extent} of {tag} depends on {unknown[0]}, which is neither "
                                         "a tensor dimension nor an integer scalar parameter", construct="T.Kernel grid",
                                         source=src, fix="derive the grid from the tensors' (possibly T.dynamic) "
                                                         "shapes or from int32 scalar parameters")
            grid[tag] = (loop.loop_var, loop.extent)
            continue
        extent = int(loop.extent.value)
        if extent <= 0:
            raise TTScheduleError(f"grid extent of {tag} is {extent}", construct="T.Kernel grid", source=src,
                                  fix="every grid dimension needs at least one block")
        grid[tag] = (loop.loop_var, extent)
    return grid


def _kernel_body(body, src):
    """The T.Kernel body without its thread-index placeholders; refused if it still reads threadIdx or holds
    thread-bound loops."""
    # Drop the thread-index placeholders; a body that still needs them cannot be expressed per tile.
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    thread_vars, kept = [], []
    for s in stmts:
        if isinstance(s, tirx.Bind) and is_call_to(s.value, TileOps.launch_thread_idx):
            thread_vars.append(s.var)
        else:
            kept.append(s)
    inner = kept[0] if len(kept) == 1 else tirx.SeqStmt(kept)
    if thread_vars and _uses_any(inner, thread_vars):
        _refuse_thread_code(inner, thread_vars, src)

    def reject_thread_loops(node):
        if isinstance(node, tirx.For) and node.thread_binding is not None:
            raise TTUnsupportedError(f"loop bound to {node.thread_binding.thread_tag} inside the kernel body",
                                     construct=describe(node), source=src,
                                     fix="use T.Parallel / tile operators instead of explicit thread loops")

    visit(inner, reject_thread_loops)
    return inner


def _schedule_spec(inner, options: TTOptions) -> ScheduleSpec:
    """The body's schedule annotation (or the defaults), with the target's multicast= when it does not say."""
    spec = _find_schedule_annotation(inner)
    if spec.multicast is None and options.multicast is not None:   # the target's multicast= for unannotated kernels
        spec = make_schedule_spec(spec.policy, spec.order, spec.rect, spec.stride, spec.chunk_k_tiles,
                                  spec.qk_chunk_tiles, options.multicast)
    return spec


def _make_schedule(func, spec: ScheduleSpec, grid_y, grid_x, dynamic: bool, options: TTOptions, symbolic, src):
    """The split of the (grid_y, grid_x) blocks over the cores: at compile time, or at launch for a symbolic grid."""
    dev = options.device
    if dynamic:
        if spec.policy != "contiguous":
            raise TTScheduleError(f"policy {spec.policy!r} needs a grid known at compile time; this grid depends on "
                                  f"symbolic shapes ({', '.join(v.name for v in symbolic)})",
                                  construct="T.annotate_tt_schedule(policy=...)", source=src,
                                  fix='use policy="contiguous" (split at launch) or static shapes')
        return _DynamicSchedule(spec, options.core_limit(), dev.grid_x)
    sdpa = records.sdpa(func)
    granule = sdpa.granule if sdpa is not None else 1
    return build_schedule(spec, grid_y, grid_x, dev.grid_y, dev.grid_x, options.core_limit(), src, granule)


def _block_binds(spec: ScheduleSpec, sched, grid: dict, rows_y, grid_y, grid_x, n, arg_vars: dict) -> list:
    """The ``Bind``s of the grid's block variables (bz, by, bx) for iteration ``n`` of a core's persistent loop."""
    k = spec.block_linear_k
    binds = []
    if spec.policy == "contiguous":
        binds, by_e, bx_e = _order_exprs(arg_vars["start_id"] + n, grid_y, grid_x, k)
    elif spec.policy == "strided":
        binds, by_e, bx_e = _order_exprs(arg_vars["first_id"] + n * sched.common_args["step"], grid_y, grid_x, k)
    else:
        rw = arg_vars["rect_w"]
        by_e = arg_vars["rect_y"] + tirx.floordiv(n, rw)
        bx_e = arg_vars["rect_x"] + tirx.floormod(n, rw)

    if "blockIdx.z" in grid:
        row = tirx.Var("row", "int32")
        binds.append(tirx.Bind(row, by_e))
        by_e = tirx.floormod(row, rows_y)
        binds.append(tirx.Bind(grid["blockIdx.z"][0], tirx.floordiv(row, rows_y)))
    if "blockIdx.y" in grid:
        binds.append(tirx.Bind(grid["blockIdx.y"][0], by_e))
    if "blockIdx.x" in grid:
        binds.append(tirx.Bind(grid["blockIdx.x"][0], bx_e))
    return binds


def grid_to_persistent(func: tirx.PrimFunc, options: TTOptions) -> tirx.PrimFunc:
    """The function with its T.Kernel grid replaced by a per-core persistent loop over the blocks it schedules."""
    src = source_of(func)
    loops, body = grid_loops(func)
    symbolic = shape_vars(func)
    scalars = [p for p in func.params if p not in func.buffer_map and p.dtype in ("int32", "uint32")]
    grid = _grid_of(loops, symbolic + scalars, src)
    launches = _launches(body) if not grid else []
    if len(launches) > 1:
        raise TTUnsupportedError(
            f"{len(launches)} T.Kernel launches in one function: a TT program runs one kernel grid",
            construct="T.Kernel", source=src,
            fix="write each T.Kernel as its own @T.prim_func, compile each, and call them in order (a tensor one "
                "writes is an input of the next)")
    if not grid:
        raise TTLoweringError("no T.Kernel grid (no loop bound to blockIdx.x/y) found", construct="T.Kernel",
                              source=src, fix="write the kernel body inside `with T.Kernel(gx, gy) as (bx, by):`")
    grid_z = grid.get("blockIdx.z", (None, 1))[1]
    inner = _kernel_body(body, src)
    spec = _schedule_spec(inner, options)
    grid_x = grid.get("blockIdx.x", (None, 1))[1]
    rows_y = grid.get("blockIdx.y", (None, 1))[1]
    # a 3-D grid (nx, ny, nz) is scheduled as the 2-D grid (ny * nz, nx): row r is block (r % ny, r // ny)
    grid_y = rows_y * grid_z if isinstance(rows_y, int) and isinstance(grid_z, int) else rows_y * grid_z
    dynamic = not (isinstance(grid_x, int) and isinstance(grid_y, int))
    sched = _make_schedule(func, spec, grid_y, grid_x, dynamic, options, symbolic, src)

    arg_vars = {name: tirx.Var(name, "int32") for name in sched.runtime_arg_names}
    n = tirx.Var("n", "int32")
    binds = _block_binds(spec, sched, grid, rows_y, grid_y, grid_x, n, arg_vars)
    loop = tirx.For(n, tirx.IntImm("int32", 0), arg_vars["count"], tirx.ForKind.SERIAL,
                    tirx.SeqStmt([*binds, inner]), None, {attrs.PERSISTENT_LOOP: 1})

    new_params = list(func.params) + [arg_vars[name] for name in sched.runtime_arg_names]
    out = tirx.PrimFunc(new_params, loop, func.ret_type, func.buffer_map, func.attrs, func.span)
    record = records.Schedule(**spec.as_dict(), num_cores=len(sched.cores), common_args=dict(sched.common_args),
                              mapping=sched.mapping_json(), dynamic=dynamic)
    return records.put_schedule(out, record, [grid_y, grid_x], list(sched.runtime_arg_names),
                                [v.name for v in symbolic])


class _DynamicSchedule:
    """A contiguous schedule whose split is computed at launch (by the host program) from the actual shapes:
    every usable core gets a runtime (start_id, count); cores beyond the block count get count 0."""

    runtime_arg_names = ("start_id", "count")

    def __init__(self, spec, num_cores: int, device_cols: int):
        self.spec = spec
        self.cores = [(i // device_cols, i % device_cols) for i in range(num_cores)]
        self.common_args = {}

    def mapping_json(self):
        return []


def GridToPersistentTT(options: TTOptions):
    @prim_func_pass("tt.GridToPersistentTT")
    def transform(func, mod, ctx):
        return grid_to_persistent(func, options)

    return transform
