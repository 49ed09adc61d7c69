"""MergeBranchesTT: a block-level ``if`` / ``else`` whose branches do the same kind of work becomes straight-line code.

TT's reader, compute and writer kernels run a block-level ``if`` as a loop of 0 or 1 trips each (MemorySpaceLowerTT);
an ``else`` would make a circular buffer filled in either branch full or empty by the branch taken. TileLang kernels
branch so to choose *which* block to load, or *how* to fill a fragment (TileLang's block-causal attention)::

    if is_noisy != 0:                              ->  T.copy(K[bz, T.if_then_else(is_noisy != 0, bx * 64,
        T.copy(K[bz, bx * 64:.., by, :], K_s)                 half + s * 64):.., by, :], K_s)
    else:
        T.copy(K[bz, half + s * 64:.., by, :], K_s)

    if needs_mask != 0:                            ->  for i, j in T.Parallel(64, 64):
        for i, j in T.Parallel(64, 64):                    acc[i, j] = T.if_then_else(needs_mask != 0, mask(i, j),
            acc[i, j] = mask(i, j)                                                     acc[i, j])
    else:                                              for i, j in T.Parallel(64, 64):
        T.clear(acc)                                       acc[i, j] = T.if_then_else(needs_mask != 0, acc[i, j], 0)

* **Copies**: both branches are the same number of ``T.copy`` calls, pairwise into the same destination window
  from windows of the same extents of the same source: one copy each, from the window the condition selects.
* **Element-wise work**: both branches are ``T.Parallel`` nests and ``T.fill`` / ``T.clear`` (a fill is a
  ``T.Parallel`` store of its value). Two nests defining the same elements become one that stores the value the
  condition selects; otherwise each store keeps its old value where its branch is not taken, and the predicated
  nests run one after the other (a nest writes only under its own branch's condition).

In:  the frontend's PrimFunc after InlineIndexLetsTT.
Out: no ``IfThenElse`` with an ``else`` of one of these forms outside ``T.Parallel``; the condition must read no
     buffer the branches write (it is evaluated once per branch statement). Any other ``if`` / ``else`` is left for
     MemorySpaceLowerTT to refuse.
Attributes written: none.
Errors: none.
"""

from __future__ import annotations

import tvm
from tvm import tirx

from .common import TileOps, buffer_loads, decode_region, prim_func_pass, tile_op_call


def _statements(stmt) -> list:
    return list(stmt.seq) if isinstance(stmt, tirx.SeqStmt) else [stmt]


def _same(a, b) -> bool:
    return tvm.ir.structural_equal(a, b, map_free_vars=False)


def _merged_copies(cond, then: list, other: list) -> list | None:
    """One ``T.copy`` per pair of copies into the same window, from the window ``cond`` selects; None if the
    branches are not pairwise such copies."""
    if len(then) != len(other):
        return None
    out = []
    for a, b in zip(then, other):
        ca, cb = tile_op_call(a), tile_op_call(b)
        if ca is None or cb is None or not ca.op.same_as(TileOps.copy) or not cb.op.same_as(TileOps.copy):
            return None
        if len(ca.args) != len(cb.args) or not all(_same(x, y) for x, y in zip(ca.args[1:], cb.args[1:])):
            return None
        sa, sb = decode_region(ca.args[0]), decode_region(cb.args[0])
        if not sa.buffer.same_as(sb.buffer) or sa.extents != sb.extents or sa.access != sb.access:
            return None
        mins = [m if _same(m, n) else tirx.Select(cond, m, n) for m, n in zip(sa.mins, sb.mins)]
        # the region keeps the frontend's extents (its leading unit dimensions implicit)
        region = ca.args[0]
        src = tirx.Call(region.dtype, region.op, [tirx.BufferLoad(sa.buffer, mins), *region.args[1:]])
        out.append(tirx.Evaluate(tirx.Call(ca.dtype, ca.op, [src, *ca.args[1:]], ca.span)))
    return out


def _as_nest(stmt):
    """A ``T.Parallel`` nest as it is; a ``T.fill`` / ``T.clear`` as a ``T.Parallel`` store of its value over its
    window; None for anything else."""
    if isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.PARALLEL:
        return stmt
    call = tile_op_call(stmt)
    if call is None or not call.op.same_as(TileOps.fill):
        return None
    region = decode_region(call.args[0])
    loops = [tirx.Var(f"i{k}", "int32") for k in range(len(region.extents))]
    value = call.args[1]
    if str(value.dtype) != str(region.buffer.dtype):      # T.clear fills with an int32 0
        value = tirx.Cast(str(region.buffer.dtype), value)
    body = tirx.BufferStore(region.buffer, value, [m + v for m, v in zip(region.mins, loops)])
    for v, extent in reversed(list(zip(loops, region.extents))):
        body = tirx.For(v, tirx.IntImm("int32", 0), tirx.IntImm("int32", extent), tirx.ForKind.PARALLEL, body)
    return body


def _predicated(nest, cond, taken: bool):
    """``nest`` with every store keeping the element's old value where its branch is not taken."""
    def post(node):
        if isinstance(node, tirx.BufferStore):
            old = tirx.BufferLoad(node.buffer, node.indices)
            value = tirx.Select(cond, node.value, old) if taken else tirx.Select(cond, old, node.value)
            return tirx.BufferStore(node.buffer, value, node.indices)
        return None

    return tirx.stmt_functor.ir_transform(nest, None, post, ["tirx.BufferStore"])


def _one_store(nest):
    """(loops, store) of a nest whose body is one store, else None."""
    loops = []
    while isinstance(nest, tirx.For) and nest.kind == tirx.ForKind.PARALLEL:
        loops.append(nest)
        nest = nest.body
    return (loops, nest) if isinstance(nest, tirx.BufferStore) else None


def _selected(cond, a, b):
    """One nest storing ``cond ? a's value : b's value``, when both nests store one element of the same buffer at
    the same place over the same loops (the branches define it whole: no old value is read); else None."""
    pa, pb = _one_store(a), _one_store(b)
    if pa is None or pb is None or len(pa[0]) != len(pb[0]) or not pa[1].buffer.same_as(pb[1].buffer):
        return None
    (la, sa), (lb, sb) = pa, pb
    if any(not _same(x.extent, y.extent) or not _same(x.min, y.min) for x, y in zip(la, lb)):
        return None
    rename = {y.loop_var: x.loop_var for x, y in zip(la, lb)}
    indices = [tirx.stmt_functor.substitute(i, rename) for i in sb.indices]
    analyzer = tvm.arith.Analyzer()
    if not all(analyzer.can_prove(x == y) for x, y in zip(sa.indices, indices)):
        return None
    value = tirx.Select(cond, sa.value, tirx.stmt_functor.substitute(sb.value, rename))
    body = tirx.BufferStore(sa.buffer, value, sa.indices)
    for lp in reversed(la):
        body = tirx.For(lp.loop_var, lp.min, lp.extent, lp.kind, body, lp.thread_binding, lp.annotations)
    return body


def _merged_nests(cond, then: list, other: list) -> list | None:
    nests = [(_as_nest(s), True) for s in then] + [(_as_nest(s), False) for s in other]
    if any(n is None for n, _ in nests):
        return None
    if len(then) == len(other) == 1:
        one = _selected(cond, nests[0][0], nests[1][0])
        if one is not None:
            return [one]
    return [_predicated(n, cond, taken) for n, taken in nests]


def _written(stmts: list) -> set:
    """The names of the buffers ``stmts`` store to, copy into or fill."""
    out = set()

    def visit(n):
        if isinstance(n, tirx.BufferStore):
            out.add(n.buffer.name)
        call = tile_op_call(n) if isinstance(n, tirx.Evaluate) else None
        if call is not None and call.op.same_as(TileOps.copy):
            out.add(decode_region(call.args[1]).buffer.name)
        elif call is not None and call.op.same_as(TileOps.fill):
            out.add(decode_region(call.args[0]).buffer.name)

    for s in stmts:
        tirx.stmt_functor.post_order_visit(s, visit)
    return out


def merge_branches(func: tirx.PrimFunc) -> tirx.PrimFunc:
    def post(node):
        if node.else_case is None:
            return None
        then, other = _statements(node.then_case), _statements(node.else_case)
        if set(buffer_loads(node.condition)) & _written(then + other):
            return None
        merged = _merged_copies(node.condition, then, other) or _merged_nests(node.condition, then, other)
        if merged is None:
            return None
        return merged[0] if len(merged) == 1 else tirx.SeqStmt(merged)

    def pre(node):      # an element-wise if inside T.Parallel is PredicateParallelTT's: not visited
        return node if isinstance(node, tirx.For) and node.kind == tirx.ForKind.PARALLEL else None

    def visit(node):
        return post(node) if isinstance(node, tirx.IfThenElse) else None

    body = tirx.stmt_functor.ir_transform(func.body, pre, visit, ["tirx.For", "tirx.IfThenElse"])
    return func if body.same_as(func.body) else func.with_body(body)


def MergeBranchesTT():
    @prim_func_pass("tt.MergeBranchesTT")
    def transform(func, mod, ctx):
        return merge_branches(func)

    return transform
