"""AtomicPartialsTT: atomic adds into a tensor become per-block partial results, summed by a launch that follows.

TileLang's split-K GEMM and its attention backward passes add each block's contribution to elements other blocks
also add to (``T.atomic_add``: a GPU's L2 atomics). Tensix cores share no atomic memory. Each group of blocks that
would add to the same elements instead stores its contribution in its own slice of a partial tensor, and a second
launch adds the slices to the tensor, as TTNN's split-K GEMM reduces its partial outputs.

In:  an IRModule from the frontend (before SplitKernelsTT).
Out: in each ``T.Kernel`` launch, every ``T.atomic_add(D[...], v)`` into a tensor ``D`` (the element form inside a
     ``T.Parallel``, or the tile form ``T.atomic_add(D[window], fragment)``) becomes a store into ``P[c, ...]``:
     ``P`` is a new ``T.alloc_global`` tensor ``[C, *D.shape]`` of D's dtype (zeroed by the runtime) and ``c``
     numbers the ``C`` blocks that add to the same elements: the grid variables that do not move the window they add
     to (the split index of a split-K GEMM; the K/V block of an attention backward pass). A launch adding
     ``D[...] += sum_c P[c, ...]`` follows it, one window of 32 rows and up to 256 columns of a 2-D view of D at a
     time (``_sum_view``; a 1-D ``D`` of whole 32-column windows: its ``[C, n]`` partials 32 rows at a time,
     ``_sum_launch_vector``), summing in float32. SplitKernelsTT then makes each launch a TT program, run in order. A grid variable moves
     the window when it appears in one index only, as ``g * s + (terms without g)`` with ``s`` at least the window's
     extent there; any other grid variable is a contributor (more partial memory, never a wrong sum).
Attributes written: none.
Errors (TTUnsupportedError): an atomic other than add; a tensor read, or written another way, in the launch that
     adds to it atomically; two atomic adds into one tensor in one launch; an atomic add inside a loop whose variable
     does not move its window (the block would add to one element twice); a tensor whose last dimension is not a
     multiple of 32, whose rows (above one dimension) do not come in blocks of 32 (no 2-D view sums it in whole
     tiles), or whose shape or
     grid is not known at compile time.
"""

from __future__ import annotations

import tvm
from tvm import IRModule, tirx
from tvm.ir import Op

from ..errors import TTUnsupportedError
from .common import (GRID_TAGS, TILE, TileOps, UnsupportedOps, decode_region, describe, region_call, source_of,
                     stmt_children, tile_op_call, uses_var)

ATOMIC_ADD = Op.get("tl.atomic_add_elem_op")    # T.atomic_add(D[i, j], v) inside a T.Parallel
ATOMIC_ADD_TILE = Op.get("tl.tileop.atomicadd")  # T.atomic_add(D[window], fragment)
ACCESS_PTR = Op.get("tl.access_ptr")
SUM_COLUMNS = (256, 128, 64, 32)    # the reduction launch's block width: the widest of these dividing the last dim
PARTIAL_SUFFIX = "_partial"


class _Site:
    """One atomic add: the tensor, its window's mins and extents, the serial loops around it, the statement."""

    def __init__(self, stmt, buffer, mins, extents, loops, value=None, indices=None, src_region=None):
        self.stmt, self.buffer, self.mins, self.extents, self.loops = stmt, buffer, mins, extents, loops
        self.value, self.indices, self.src_region = value, indices, src_region


def _grid_vars(launch) -> list:
    """(var, extent) of the launch's grid loops, outermost first."""
    out, node = [], launch
    while isinstance(node, tirx.For) and node.thread_binding is not None and \
            str(node.thread_binding.thread_tag) in GRID_TAGS:
        out.append((node.loop_var, node.extent))
        node = node.body
    return out


def _sites(launch, src) -> list:
    """The atomic adds of one launch, with the serial loops around each."""
    found = []

    def walk(s, loops, par):
        if isinstance(s, tirx.For):
            if s.kind == tirx.ForKind.PARALLEL:
                walk(s.body, loops, {**par, s.loop_var: s.extent})
            elif s.thread_binding is None:
                walk(s.body, loops + [(s.loop_var, s.extent)], par)
            else:
                walk(s.body, loops, par)
            return
        if isinstance(s, tirx.Evaluate) and isinstance(s.value, tirx.Call) and isinstance(s.value.op, Op):
            call = s.value
            if call.op.same_as(ATOMIC_ADD):
                ptr = call.args[0]
                load = ptr.args[0] if isinstance(ptr, tirx.Call) and ptr.op.same_as(ACCESS_PTR) else ptr
                if not isinstance(load, tirx.BufferLoad):
                    raise TTUnsupportedError("an atomic add whose target is not a tensor element", construct=describe(s),
                                             source=src)
                ana = tvm.arith.Analyzer()
                mins = [ana.simplify(tirx.stmt_functor.substitute(ix, {v: 0 for v in par})) for ix in load.indices]
                extents = [next((int(e) for v, e in par.items() if uses_var(ix, v)), 1) for ix in load.indices]
                found.append(_Site(s, load.buffer, mins, extents, loops, value=call.args[1],
                                   indices=list(load.indices)))
                return
            if call.op.same_as(ATOMIC_ADD_TILE):
                dst = decode_region(call.args[1], src)
                found.append(_Site(s, dst.buffer, list(dst.mins), [int(e) for e in dst.extents], loops,
                                   src_region=call.args[0]))
                return
            reason = UnsupportedOps.reason(call.op)
            if reason == "atomic operations":
                raise TTUnsupportedError(f"{call.op.name}: of the atomic operations only T.atomic_add has a TT "
                                         "lowering (per-block partial results summed by a second launch)",
                                         construct=describe(s), source=src,
                                         fix="write the update as T.atomic_add, or reduce into a fragment")
        for child in stmt_children(s):
            walk(child, loops, par)

    walk(launch, [], {})
    return found


def _moves(var, mins, extents, others) -> bool:
    """Whether distinct values of ``var`` give disjoint windows: it appears in one index only, alone among
    ``others``, stepping by at least the window's extent there."""
    dims = [d for d, m in enumerate(mins) if uses_var(m, var)]
    if len(dims) != 1 or any(uses_var(mins[dims[0]], o) for o in others if not o.same_as(var)):
        return False
    m = mins[dims[0]]
    step = tvm.arith.Analyzer().simplify(tirx.stmt_functor.substitute(m, {var: var + 1}) - m)
    return isinstance(step, tirx.IntImm) and int(step.value) >= extents[dims[0]]


def _sum_view(shape: list[int]):
    """(p, k, width): D summed in windows of 32 rows of dimension p - 1 (every dimension before it 1) by k
    entries of dimension p and the whole of every dimension after it (``width`` elements of D's 2-D view
    ``[prod(shape[:p]), prod(shape[p:])]``, whole tiles), the first split from the last that allows it; None if none
    does. [B, H, S, D] sums [1, 1, 32, w] windows (p = 3); [B, S, H, D] with H < 32 sums [1, 32, k, D] (p = 2)."""
    for p in range(len(shape) - 1, 0, -1):
        inner = 1
        for n in shape[p + 1:]:
            inner *= n
        if shape[p - 1] % TILE:
            continue
        if p == len(shape) - 1:
            width = next((w for w in SUM_COLUMNS if shape[p] % w == 0), None)
            if width is not None:
                return p, width, width
            continue
        if inner % TILE:
            continue
        k = max(d for d in range(1, shape[p] + 1) if shape[p] % d == 0 and (d * inner <= SUM_COLUMNS[0] or d == 1))
        return p, k, k * inner
    return None


def _sum_launch(d: tirx.Buffer, p: tirx.Buffer, count: int, src) -> tirx.Stmt:
    """``D[...] += sum_c P[c, ...]`` as a T.Kernel over D's windows (``_sum_view``), summing in float32."""
    shape = [int(x) for x in d.shape]
    if len(shape) == 1 and any(shape[0] % w == 0 for w in SUM_COLUMNS):
        return _sum_launch_vector(d, p, count)
    view = _sum_view(shape) if len(shape) >= 2 else None
    if view is None:
        raise TTUnsupportedError(
            f"tensor {d.name} {shape} is added to atomically; its partial sums are added up in windows of 32 rows and "
            "whole tiles of columns of a 2-D view, which this shape does not divide into",
            construct=f"T.atomic_add({d.name})", source=src,
            fix="give the tensor a dimension of a multiple of 32 rows and trailing dimensions of whole tiles")
    split, k, width = view
    bx, by, c, i, j = (tirx.Var(n, "int32") for n in ("bx", "by", "c", "i", "j"))
    acc_dtype = "float32" if str(d.dtype) in ("float16", "bfloat16", "float32") else str(d.dtype)
    acc = tirx.decl_buffer((TILE, width), acc_dtype, f"{d.name}_sum", scope="local.fragment")
    part = tirx.decl_buffer((TILE, width), acc_dtype, f"{d.name}_part", scope="local.fragment")
    row, lead = by * TILE, []
    rest = tirx.floordiv(row, shape[split - 1])
    for n in reversed(shape[:split - 1]):     # the row's coordinates in the dimensions before p - 1
        lead.insert(0, tirx.floormod(rest, n))
        rest = tirx.floordiv(rest, n)
    zero = tirx.IntImm("int32", 0)
    mins = lead + [tirx.floormod(row, shape[split - 1]), bx * k] + [zero] * (len(shape) - split - 1)
    ext = [1] * len(lead) + [TILE, k] + shape[split + 1:]

    def copy(src_region, dst_region):
        return tirx.Evaluate(tirx.Call("handle", TileOps.copy, [src_region, dst_region]))

    add = tirx.BufferStore(acc, tirx.BufferLoad(acc, [i, j]) + tirx.BufferLoad(part, [i, j]), [i, j])
    nest = tirx.For(i, 0, TILE, tirx.ForKind.PARALLEL, tirx.For(j, 0, width, tirx.ForKind.PARALLEL, add))
    body = tirx.SeqStmt([
        copy(region_call(d, mins, ext, 1), region_call(acc, [0, 0], [TILE, width], 2)),
        tirx.For(c, 0, count, tirx.ForKind.SERIAL, tirx.SeqStmt([
            copy(region_call(p, [c] + mins, [1] + ext, 1), region_call(part, [0, 0], [TILE, width], 2)), nest])),
        copy(region_call(acc, [0, 0], [TILE, width], 1), region_call(d, mins, ext, 2))])
    block = tirx.SBlock([], [], [], "tilelang_root", body, None, [acc, part], [], {})
    inner = tirx.SBlockRealize([], tirx.IntImm("bool", 1), block)
    rows = 1
    for n in shape[:split]:
        rows *= n
    for var, extent, tag in ((by, rows // TILE, "blockIdx.y"), (bx, shape[split] // k, "blockIdx.x")):
        binding = tirx.IterVar(tvm.ir.Range(0, extent), var, tirx.IterVar.ThreadIndex, tag)
        inner = tirx.For(var, 0, extent, tirx.ForKind.THREAD_BINDING, inner, binding)
    return inner


def _sum_launch_vector(d: tirx.Buffer, p: tirx.Buffer, count: int) -> tirx.Stmt:
    """``D[j] += sum_c P[c, j]`` for a 1-D ``D`` (a LayerNorm backward's ``DGamma``): a T.Kernel over windows of
    ``width`` columns, each summing ``P``'s rows 32 at a time (``T.reduce_sum`` over the rows of a [32, width]
    block; rows past ``count`` read zeros) into a float32 row and adding it to D's window."""
    n = int(d.shape[0])
    width = next(w for w in SUM_COLUMNS if n % w == 0)
    bx, cc, j = (tirx.Var(name, "int32") for name in ("bx", "cc", "j"))
    acc_dtype = "float32" if str(d.dtype) in ("float16", "bfloat16", "float32") else str(d.dtype)
    acc = tirx.decl_buffer((width,), acc_dtype, f"{d.name}_sum", scope="local.fragment")
    rows = tirx.decl_buffer((TILE, width), acc_dtype, f"{d.name}_rows", scope="local.fragment")
    part = tirx.decl_buffer((width,), acc_dtype, f"{d.name}_part", scope="local.fragment")

    def copy(src_region, dst_region):
        return tirx.Evaluate(tirx.Call("handle", TileOps.copy, [src_region, dst_region]))

    reduce = tirx.Evaluate(tirx.Call("handle", TileOps.reduce, [
        region_call(rows, [0, 0], [TILE, width], 1), region_call(part, [0], [width], 2), tirx.StringImm("sum"),
        tirx.IntImm("int32", 0), tirx.IntImm("bool", 1)]))
    add = tirx.For(j, 0, width, tirx.ForKind.PARALLEL,
                   tirx.BufferStore(acc, tirx.BufferLoad(acc, [j]) + tirx.BufferLoad(part, [j]), [j]))
    body = tirx.SeqStmt([
        copy(region_call(d, [bx * width], [width], 1), region_call(acc, [0], [width], 2)),
        tirx.For(cc, 0, -(-count // TILE), tirx.ForKind.SERIAL, tirx.SeqStmt([
            copy(region_call(p, [cc * TILE, bx * width], [TILE, width], 1),
                 region_call(rows, [0, 0], [TILE, width], 2)),
            reduce, add])),
        copy(region_call(acc, [0], [width], 1), region_call(d, [bx * width], [width], 2))])
    block = tirx.SBlock([], [], [], "tilelang_root", body, None, [acc, rows, part], [], {})
    binding = tirx.IterVar(tvm.ir.Range(0, n // width), bx, tirx.IterVar.ThreadIndex, "blockIdx.x")
    return tirx.For(bx, 0, n // width, tirx.ForKind.THREAD_BINDING,
                    tirx.SBlockRealize([], tirx.IntImm("bool", 1), block), binding)


def _rewrite_launch(launch, src, partials: list):
    """The launch with its atomic adds stored into partial tensors (appended to ``partials`` as (D, P, C)), or
    None when it has none."""
    sites = _sites(launch, src)
    if not sites:
        return None
    grid = _grid_vars(launch)
    by_tensor = {}
    for site in sites:
        if site.buffer.data in by_tensor:
            raise TTUnsupportedError(f"two atomic adds into {site.buffer.name} in one launch",
                                     construct=describe(site.stmt), source=src,
                                     fix="add into a fragment and add it to the tensor once")
        by_tensor[site.buffer.data] = site
    _check_only_atomic(launch, by_tensor, src)
    replace = {}
    for site in sites:
        what = describe(site.stmt)
        for var, _ in site.loops:
            if not _moves(var, site.mins, site.extents, [var]):
                raise TTUnsupportedError(
                    f"T.atomic_add into {site.buffer.name} inside the loop over {var.name}, which does not move the "
                    "window it adds to: this block would add to the same elements more than once", construct=what,
                    source=src, fix="accumulate the loop's contributions in a fragment and add it once after the loop")
        contributors = [(v, e) for v, e in grid if not _moves(v, site.mins, site.extents, [g for g, _ in grid])]
        if any(not isinstance(e, tirx.IntImm) for _, e in contributors) or \
                any(not isinstance(x, tirx.IntImm) for x in site.buffer.shape):
            raise TTUnsupportedError(f"T.atomic_add into {site.buffer.name}: its shape and the grid of the blocks "
                                     "adding to it must be known at compile time", construct=what, source=src)
        count, c = 1, tirx.IntImm("int32", 0)
        for v, e in contributors:
            c, count = c * int(e) + v, count * int(e)
        p = tirx.decl_buffer((count, *[int(x) for x in site.buffer.shape]), site.buffer.dtype,
                             f"{site.buffer.name}{PARTIAL_SUFFIX}", scope="global")
        partials.append((site.buffer, p, count))
        if site.value is not None:
            idx = [c] + site.indices
            value = site.value if str(site.value.dtype) == str(p.dtype) else tirx.Cast(p.dtype, site.value)
            replace[site.stmt] = tirx.BufferStore(p, value, idx)
        else:
            replace[site.stmt] = tirx.Evaluate(tirx.Call("handle", TileOps.copy, [
                site.src_region, region_call(p, [c] + list(site.mins), [1] + site.extents, 2)]))

    def post(node):
        for old, new in replace.items():
            if node.same_as(old):
                return new
        return None

    return tirx.stmt_functor.ir_transform(launch, None, post, ["tirx.Evaluate"])


def _check_only_atomic(launch, by_tensor, src):
    """A tensor added to atomically is not read, nor written another way, in the same launch."""
    def visit(node):
        buf = None
        if isinstance(node, (tirx.BufferLoad, tirx.BufferStore)) and node.buffer.data in by_tensor:
            buf = node.buffer
        call = tile_op_call(node) if isinstance(node, tirx.Evaluate) else None
        if call is not None and not call.op.same_as(ATOMIC_ADD_TILE):
            for arg in call.args:
                if isinstance(arg, tirx.Call) and arg.op.same_as(TileOps.region) and \
                        arg.args[0].buffer.data in by_tensor:
                    buf = arg.args[0].buffer
        if buf is not None:
            found.append((buf, node))

    def strip_sites(node):     # the atomic calls' own targets are not reads; the values they add are
        if isinstance(node, tirx.Evaluate) and isinstance(node.value, tirx.Call) and isinstance(node.value.op, Op) \
                and (node.value.op.same_as(ATOMIC_ADD) or node.value.op.same_as(ATOMIC_ADD_TILE)):
            added = node.value.args[1] if node.value.op.same_as(ATOMIC_ADD) else node.value.args[0]
            return tirx.Evaluate(added)
        return None

    found = []      # raised after the walk: an exception inside TVM's visitor would lose its class
    stripped = tirx.stmt_functor.ir_transform(launch, None, strip_sites, ["tirx.Evaluate"])
    tirx.stmt_functor.post_order_visit(stripped, visit)
    if found:
        buf, node = found[0]
        raise TTUnsupportedError(f"{buf.name} is added to atomically and also read or written another way in the "
                                 "same launch", construct=describe(node), source=src,
                                 fix="read the tensor in a separate T.Kernel after the one that adds to it")


def atomic_partials_func(func: tirx.PrimFunc) -> tirx.PrimFunc:
    if not isinstance(func, tirx.PrimFunc):
        return func
    body, allocs, root = func.body, [], None
    if isinstance(body, tirx.SBlockRealize):
        root, allocs, body = body, list(body.block.alloc_buffers), body.block.body
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    src = source_of(func)
    out, partials = [], []
    for s in stmts:
        if not (isinstance(s, tirx.For) and s.thread_binding is not None and
                str(s.thread_binding.thread_tag) in GRID_TAGS):
            out.append(s)
            continue
        before = len(partials)
        rewritten = _rewrite_launch(s, src, partials)
        out.append(rewritten if rewritten is not None else s)
        out += [_sum_launch(d, p, count, src) for d, p, count in partials[before:]]
    if not partials:
        return func
    new_body = tirx.SeqStmt(out)
    allocs += [p for _, p, _ in partials]
    block = root.block if root is not None else None
    realize = tirx.SBlockRealize([], tirx.IntImm("bool", 1), tirx.SBlock(
        [], [], [], block.name_hint if block is not None else "root", new_body, None, allocs, [],
        block.annotations if block is not None else {}))
    return tirx.PrimFunc(func.params, realize, func.ret_type, func.buffer_map, func.attrs)


def atomic_partials(mod: IRModule) -> IRModule:
    """Every function with atomic adds rewritten (module docstring)."""
    return IRModule({gv: atomic_partials_func(f) if isinstance(f, tirx.PrimFunc) else f
                     for gv, f in mod.functions.items()})
