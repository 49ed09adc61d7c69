"""InlineIndexLetsTT: integer let bindings are substituted into the statements that follow them.

TileLang users name index arithmetic (``t = by * bt + i`` inside a ``T.Parallel``, ``row = by * bm`` before a
``T.copy``); every later analysis (TilePadTT's views, MemorySpaceLowerTT's windows, ParallelLower's
``offset + i`` split) must see the expression, not a variable that hides the loop index it depends on.

In:  the frontend's PrimFunc.
Out: every ``Bind(var, value)`` of an integer ``var`` whose ``value`` reads no buffer is removed and ``var`` is
     replaced by ``value`` in the statements after it in its sequence. Float bindings (``inv_D = 1.0 / D``) and
     values loaded from tensors (``e = expert_ids[by]``) are kept.
Attributes written: none.
Errors: none.
"""

from __future__ import annotations

from tvm import tirx

from .common import prim_func_pass


def _reads_buffer(expr) -> bool:
    hit = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(expr), lambda n: hit.append(n) if isinstance(
        n, (tirx.BufferLoad, tirx.Call)) and not (isinstance(n, tirx.Call) and _pure_call(n)) else None)
    return bool(hit)


def _pure_call(c: tirx.Call) -> bool:
    """Integer arithmetic TVM spells as calls (floordiv, shifts, min/max, ceildiv) is pure."""
    return str(getattr(c.op, "name", "")).startswith(("tir.shift", "tir.bitwise", "tir.floor", "tir.trunc",
                                                      "tir.if_then_else", "tir.ceil"))


def _inlinable(stmt) -> bool:
    return (isinstance(stmt, tirx.Bind) and stmt.var.dtype.startswith(("int", "uint"))
            and not _reads_buffer(stmt.value))


def inline_index_lets(func: tirx.PrimFunc) -> tirx.PrimFunc:
    def post(node):
        if not any(_inlinable(s) for s in node.seq):
            return None
        out, vmap = [], {}
        for s in node.seq:
            s = tirx.stmt_functor.substitute(s, vmap) if vmap else s
            if _inlinable(s):
                vmap[s.var] = s.value
                continue
            out.append(s)
        if not out:
            return tirx.Evaluate(0)
        return out[0] if len(out) == 1 else tirx.SeqStmt(out)

    body = tirx.stmt_functor.ir_transform(func.body, None, post, ["tirx.SeqStmt"])
    return func if body.same_as(func.body) else func.with_body(body)


InlineIndexLetsTT = prim_func_pass("InlineIndexLetsTT")(lambda f, _mod, _ctx: inline_index_lets(f))
