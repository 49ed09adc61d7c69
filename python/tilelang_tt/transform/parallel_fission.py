"""ParallelFissionTT: a serial loop inside ``T.Parallel`` becomes a serial loop of ``T.Parallel`` nests.

TileLang kernels accumulate per element inside a parallel loop (DeepSeek's mHC post-mix)::

    for i, j in T.Parallel(hc, h_blk):
        x[i, j] = c[i] * d[j]
        for k in T.serial(hc):
            x[i, j] += a[k, i] * b[k, j]

A TT core computes whole tiles, one tile operation after another, so each statement must be a ``T.Parallel`` nest
of its own. When every iteration of the nest owns the elements it writes (each store's indices take distinct
values for distinct iterations) and reads only its own elements of what the nest writes, the iterations are
independent and the nest distributes over the statements and interchanges with the serial loops::

    for i, j in T.Parallel(hc, h_blk):
        x[i, j] = c[i] * d[j]
    for k in T.serial(hc):
        for i, j in T.Parallel(hc, h_blk):
            x[i, j] += a[k, i] * b[k, j]

In:  the frontend's PrimFunc after PredicateParallelTT (no element-wise ``if`` left in T.Parallel).
Out: no serial ``For`` inside a ``T.Parallel`` nest whose iterations are independent; each copy of the nest gets
     fresh loop variables. A nest whose iterations may share an element, or whose body holds anything but stores,
     sequences and serial loops, is left for MemorySpaceLowerTT to refuse.
Attributes written: none.
Errors: none.
"""

from __future__ import annotations

import tvm
from tvm import tirx

from .common import prim_func_pass, uses_var


def _nest(loop: tirx.For) -> tuple[list, tirx.Stmt]:
    """The perfectly nested T.Parallel loops from ``loop`` down, and their body."""
    loops = []
    node = loop
    while isinstance(node, tirx.For) and node.kind == tirx.ForKind.PARALLEL:
        loops.append(node)
        node = node.body
    return loops, node


def _walk(stmt, stores: list, serial: list) -> bool:
    """Collect the body's stores and serial loops; False when it holds any other statement."""
    if isinstance(stmt, tirx.BufferStore):
        stores.append(stmt)
        return True
    if isinstance(stmt, tirx.SeqStmt):
        return all(_walk(s, stores, serial) for s in stmt.seq)
    if isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.SERIAL and stmt.thread_binding is None:
        serial.append(stmt)
        return _walk(stmt.body, stores, serial)
    return False


def _owns(store: tirx.BufferStore, pvars: list) -> bool:
    """Distinct iterations of the nest write distinct elements: each nest variable is, alone among them, one of the
    store's indices plus an offset free of every nest variable."""
    analyzer = tvm.arith.Analyzer()
    for v in pvars:
        ok = False
        for index in store.indices:
            rest = analyzer.simplify(index - v)
            if not any(uses_var(rest, p) for p in pvars):
                ok = True
                break
        if not ok:
            return False
    return True


def _independent(body, pvars: list, stores: list) -> bool:
    """Every iteration owns what it stores and reads, of the buffers the nest stores, only its own elements."""
    if not all(_owns(s, pvars) for s in stores):
        return False
    written: dict = {}
    for s in stores:
        written.setdefault(s.buffer.data, []).append(list(s.indices))
    analyzer = tvm.arith.Analyzer()
    ok = [True]

    def visit(n):
        if isinstance(n, tirx.BufferLoad) and n.buffer.data in written:
            for indices in written[n.buffer.data]:
                if len(indices) != len(n.indices) or not all(analyzer.can_prove(a == b)
                                                             for a, b in zip(indices, n.indices)):
                    ok[0] = False

    tirx.stmt_functor.post_order_visit(body, visit)
    return ok[0]


def _wrap(loops: list, body: tirx.Stmt) -> tirx.Stmt:
    """``body`` inside a copy of the nest ``loops`` with fresh loop variables."""
    fresh = {lp.loop_var: tirx.Var(lp.loop_var.name, lp.loop_var.dtype) for lp in loops}
    body = tirx.stmt_functor.substitute(body, fresh)
    for lp in reversed(loops):
        body = tirx.For(fresh[lp.loop_var], lp.min, lp.extent, lp.kind, body, lp.thread_binding, lp.annotations)
    return body


def _distribute(stmt, loops: list) -> list:
    """``stmt`` (the nest's body, or part of it) as a list of nests and serial loops of nests, in order."""
    if isinstance(stmt, tirx.For):       # a serial loop: the nest moves inside it
        inner = _distribute(stmt.body, loops)
        body = inner[0] if len(inner) == 1 else tirx.SeqStmt(inner)
        return [tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body, stmt.thread_binding,
                         stmt.annotations)]
    out, run = [], []        # consecutive stores stay in one nest
    for s in (stmt.seq if isinstance(stmt, tirx.SeqStmt) else [stmt]):
        if isinstance(s, tirx.BufferStore):
            run.append(s)
            continue
        if run:
            out.append(_wrap(loops, run[0] if len(run) == 1 else tirx.SeqStmt(run)))
            run = []
        out += _distribute(s, loops)
    if run:
        out.append(_wrap(loops, run[0] if len(run) == 1 else tirx.SeqStmt(run)))
    return out


def parallel_fission(func: tirx.PrimFunc) -> tirx.PrimFunc:
    def pre(node):
        if node.kind != tirx.ForKind.PARALLEL:
            return None
        loops, body = _nest(node)
        stores, serial = [], []
        if not _walk(body, stores, serial) or not serial:
            return None
        if not _independent(body, [lp.loop_var for lp in loops], stores):
            return None
        out = _distribute(body, loops)
        return out[0] if len(out) == 1 else tirx.SeqStmt(out)

    body = tirx.stmt_functor.ir_transform(func.body, pre, None, ["tirx.For"])
    return func if body.same_as(func.body) else func.with_body(body)


def ParallelFissionTT():
    @prim_func_pass("tt.ParallelFissionTT")
    def transform(func, mod, ctx):
        return parallel_fission(func)

    return transform
