"""InlineIndexLetsTT: integer let bindings are substituted into the statements that follow them.

TileLang users name index arithmetic (``t = by * bt + i`` inside a ``T.Parallel``, ``row = by * bm`` before a
``T.copy``); every later analysis (TilePadTT's views, MemorySpaceLowerTT's windows, ParallelLower's
``offset + i`` split) must see the expression, not a variable that hides the loop index it depends on.

In:  the frontend's PrimFunc.
Out: region extents that simplify to constants are those constants (``H1 - H0`` with ``H1 = H0 + 16``); every
     ``Bind(var, value)`` of an integer ``var`` whose ``value`` is index arithmetic -- of variables, and of
     elements of integer tensors the kernel only reads (``e = expert_ids[by]``) -- is removed and ``var`` is
     replaced by ``value`` in the statements after it in its sequence; so is a float ``var`` bound to arithmetic of
     elements of tensors the kernel only reads (``slope = Slopes[by]``: a scalar operand where it is used), and
     one bound to arithmetic of tile-buffer elements at constant indices that no later statement of its sequence
     writes (GDN's ``G_last = G_shared[block_S - 1]``: an element broadcast where it is used).
     Float bindings of constants (``inv_D = 1.0 / D``) and other values read from buffers the kernel writes are
     kept.
Attributes written: none.
Errors: none.
"""

from __future__ import annotations

from tvm import arith, tirx

from .common import TileOps, has_load, is_call_to, prim_func_pass

_ANALYZER = arith.Analyzer()


def _pure_call(c: tirx.Call) -> bool:
    """Integer arithmetic TVM spells as calls (floordiv, shifts, min/max, ceildiv) is pure."""
    return str(getattr(c.op, "name", "")).startswith(("tirx.shift", "tirx.bitwise", "tirx.floor", "tirx.trunc",
                                                      "tirx.if_then_else", "tirx.ceil"))


def _index_arithmetic(expr, index_tensors: set) -> bool:
    """Arithmetic of variables, pure calls and elements of integer tensors the kernel only reads (``BlockTable[b,
    j]``): moved into an offset, such an element is read where the offset needs it (MemorySpaceLowerTT's
    ``index_load``)."""
    bad = []

    def visit(n):
        if isinstance(n, tirx.BufferLoad) and n.buffer.data not in index_tensors:
            bad.append(n)
        elif isinstance(n, tirx.Call) and not _pure_call(n):
            bad.append(n)

    tirx.stmt_functor.post_order_visit(tirx.Evaluate(expr), visit)
    return not bad


def _written(stmts) -> set:
    """The data vars of the buffers ``stmts`` store to or write through a tile-op region."""
    out: set = set()

    def visit(n):
        if isinstance(n, tirx.BufferStore):
            out.add(n.buffer.data)
        elif is_call_to(n, TileOps.region) and int(n.args[1]) != 1:     # access: 1 = read, 2 = write, 3 = both
            out.add(n.args[0].buffer.data)

    for s in stmts:
        tirx.stmt_functor.post_order_visit(s, visit)
    return out


def _read_only_tensors(func: tirx.PrimFunc) -> set:
    """The data vars of tensor parameters nothing writes: no BufferStore, no tile-op region with write access."""
    stored = _written([func.body])
    return {b.data for b in func.buffer_map.values() if b.data not in stored}


def _tile_elements(expr, read_only: set, later: list) -> bool:
    """Arithmetic of elements of tile buffers at constant indices (and of read-only tensors) that ``later`` does not
    write: the value is the same wherever in ``later`` it is read."""
    tiles, bad = [], []

    def visit(n):
        if isinstance(n, tirx.BufferLoad) and n.buffer.data not in read_only:
            (tiles if all(isinstance(i, tirx.IntImm) for i in n.indices) else bad).append(n.buffer.data)

    tirx.stmt_functor.post_order_visit(tirx.Evaluate(expr), visit)
    return bool(tiles) and not bad and not (set(tiles) & _written(later))


def inline_index_lets(func: tirx.PrimFunc) -> tirx.PrimFunc:
    read_only = _read_only_tensors(func)
    index_tensors = read_only & {b.data for b in func.buffer_map.values() if str(b.dtype).startswith(("int", "uint"))}

    def inlinable(stmt, later) -> bool:
        if not isinstance(stmt, tirx.Bind):
            return False
        if stmt.var.dtype.startswith(("int", "uint")):
            return _index_arithmetic(stmt.value, index_tensors)
        # a block scalar read from a tensor (slope = Slopes[by]): where it is used it becomes a scalar operand
        if has_load(stmt.value) and _index_arithmetic(stmt.value, read_only):
            return True
        return _tile_elements(stmt.value, read_only, later)

    def post(node):
        seq = list(node.seq)
        if not any(inlinable(s, seq[i + 1:]) for i, s in enumerate(seq)):
            return None
        out, vmap = [], {}
        for i, s in enumerate(seq):
            s = tirx.stmt_functor.substitute(s, vmap) if vmap else s
            if inlinable(s, seq[i + 1:]):
                vmap[s.var] = s.value
                continue
            out.append(s)
        if not out:
            return tirx.Evaluate(0)
        return out[0] if len(out) == 1 else tirx.SeqStmt(out)

    body = tirx.stmt_functor.ir_transform(func.body, None, post, ["tirx.SeqStmt"])
    body = tirx.stmt_functor.ir_transform(body, None, _constant_extents, ["tirx.Call"])
    return func if body.same_as(func.body) else func.with_body(body)


def _constant_extents(node):
    """A ``tl.region`` whose extents simplify to constants (``Q[s, H0:H1, :]`` with ``H1 = H0 + 16``: extent
    ``H1 - H0``) with those constants."""
    if not is_call_to(node, TileOps.region):
        return None
    extents = [_ANALYZER.simplify(e) for e in node.args[2:]]
    if all(e.same_as(old) for e, old in zip(extents, node.args[2:])):
        return None
    return tirx.Call(node.dtype, node.op, [*node.args[:2], *extents], node.annotations)


def InlineIndexLetsTT():
    @prim_func_pass("tt.InlineIndexLetsTT")
    def transform(func, mod, ctx):
        return inline_index_lets(func)

    return transform
