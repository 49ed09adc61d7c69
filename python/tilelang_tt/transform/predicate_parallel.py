"""PredicateParallelTT: ``if`` statements inside ``T.Parallel`` become predicated element-wise stores.

A TT core computes whole tiles: there is no per-element branch, but the SFPU selects per lane (``where_tile``).
TileLang kernels branch inside ``T.Parallel`` for two reasons, and each gets its TT form:
  * tail guards (``if by * 32 + i < M: Y[by * 32 + i, j] = ...``): the condition only keeps the store inside the
    tensor. The writer never stores the padding outside a tensor, so the guard is dropped;
  * value predicates (``if x[i, j] > 0: y[i, j] = x[i, j]``, ``else`` branches): the store becomes
    ``y[i, j] = T.if_then_else(cond, value, y[i, j])`` (or the ``else`` branch's value).

In:  the frontend's PrimFunc (after InlineIndexLetsTT: guards read index expressions, not let-bound names).
Out: no ``IfThenElse`` inside a ``T.Parallel`` loop whose branches hold only element-wise stores (and nested ifs);
     any other ``if`` is left for MemorySpaceLowerTT to refuse.
Attributes written: none.
Errors: none.
"""

from __future__ import annotations

import tvm
from tvm import tirx

from .common import prim_func_pass


def _stores(stmt) -> list | None:
    """The BufferStores of a branch made only of stores (SeqStmts of them), else None."""
    if stmt is None:
        return []
    if isinstance(stmt, tirx.BufferStore):
        return [stmt]
    if isinstance(stmt, tirx.SeqStmt):
        out = []
        for s in stmt.seq:
            inner = _stores(s)
            if inner is None:
                return None
            out += inner
        return out
    return None


def _conjuncts(cond) -> list:
    if isinstance(cond, tirx.And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def _is_guard(cond, store: tirx.BufferStore, analyzer) -> bool:
    """Whether ``cond`` only says that ``store``'s indices are inside the buffer (``index < extent``, ``index <=
    extent - 1``, ``index >= 0``, in either operand order)."""
    def same(a, b):
        return analyzer.can_prove(a == b)

    def bound(c) -> bool:
        for index, extent in zip(store.indices, store.buffer.shape):
            if isinstance(c, tirx.LT) and same(c.a, index) and same(c.b, extent):
                return True
            if isinstance(c, tirx.GT) and same(c.b, index) and same(c.a, extent):
                return True
            if isinstance(c, tirx.LE) and same(c.a, index) and same(c.b, extent - 1):
                return True
            if isinstance(c, (tirx.GE, tirx.LE)) and (isinstance(c, tirx.GE) and same(c.a, index) and same(c.b, 0)
                                                       or isinstance(c, tirx.LE) and same(c.b, index) and same(c.a, 0)):
                # the writer clips rows past the tensor's end, not before its start: a lower guard goes only
                # where it always holds (``i - 8 >= 0`` is a shifted store's, and stays)
                return analyzer.can_prove(index >= 0)
        return False

    return all(bound(c) for c in _conjuncts(cond))


def _predicated(node: tirx.IfThenElse, analyzer):
    then, other = _stores(node.then_case), _stores(node.else_case)
    if then is None or other is None:
        return None
    if not other and all(_is_guard(node.condition, s, analyzer) for s in then):
        return then
    out = []
    for s in then:
        match = next((o for o in other if o.buffer.same_as(s.buffer) and all(
            analyzer.can_prove(a == b) for a, b in zip(o.indices, s.indices))), None)
        fallback = match.value if match is not None else tirx.BufferLoad(s.buffer, s.indices)
        out.append(tirx.BufferStore(s.buffer, tirx.Select(node.condition, s.value, fallback), s.indices))
    for o in other:
        if not any(o.buffer.same_as(s.buffer) and all(analyzer.can_prove(a == b) for a, b in zip(o.indices, s.indices))
                   for s in then):
            old = tirx.BufferLoad(o.buffer, o.indices)
            out.append(tirx.BufferStore(o.buffer, tirx.Select(node.condition, old, o.value), o.indices))
    return out


def predicate_parallel(func: tirx.PrimFunc) -> tirx.PrimFunc:
    analyzer = tvm.arith.Analyzer()

    def in_parallel(loop: tirx.For):
        def post(node):
            stores = _predicated(node, analyzer)
            if stores is None:
                return None
            return stores[0] if len(stores) == 1 else tirx.SeqStmt(stores)

        body = tirx.stmt_functor.ir_transform(loop.body, None, post, ["tirx.IfThenElse"])
        return None if body.same_as(loop.body) else tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, body,
                                                              loop.thread_binding, loop.annotations)

    def pre(node):      # every loop's range (grid, serial, parallel), for the guards' bounds
        analyzer.bind(node.loop_var, tvm.ir.Range.from_min_extent(node.min, node.extent))
        return None

    def post(node):
        return in_parallel(node) if node.kind == tirx.ForKind.PARALLEL else None

    body = tirx.stmt_functor.ir_transform(func.body, pre, post, ["tirx.For"])
    return func if body.same_as(func.body) else func.with_body(body)


def PredicateParallelTT():
    @prim_func_pass("tt.PredicateParallelTT")
    def transform(func, mod, ctx):
        return predicate_parallel(func)

    return transform
