"""Grouped-query attention: the query heads of a K/V group in one block, so K and V are read once per group.

A helper of SDPAFusionTT (not a pass of its own). In a GQA kernel written the way TileLang's examples write it,
the block of query head ``h`` reads K/V head ``h // G``; G consecutive blocks read the same K/V chunks, each from
DRAM. ``group_heads`` rewrites the block so that one block computes ``n`` query heads of a group (``n`` divides
G): the head axis of the grid shrinks by ``n``, the K/V loads of each loop iteration are issued once at the top of
the iteration, and the rest of the block is repeated for the ``n`` heads (``h`` -> ``h * n + g``).

A tile buffer whose value one head's statements leave for later (Q, the output accumulator, the running max and
sum) gets one copy per head; a buffer every run of statements overwrites before it reads it (the scores, the
probabilities, the output staging) is shared by the heads, so L1 and the CB count grow only by the carried state.

In:  the block body of the attention kernel (SDPAFusionTT's match), the grid, the head variable and G.
Out: (body, alloc_buffers) of the grouped block; the caller shrinks the grid axis.
Errors: none; ``None`` when the structure is not one this rewrite can prove equivalent (a binding or loop bound
     that depends on the head, a K/V buffer written anywhere but its load), and the kernel stays per head.
"""

from __future__ import annotations

import tvm
from tvm import tirx

from .common import TileOps, decode_region, is_global, renew_vars, tile_op_call, uses_var, with_buffers


def kv_group(body, grid, k_s, v_s):
    """(tag, head variable, G) when the loads of ``k_s`` / ``v_s`` index their tensor's head with ``h // G`` of a
    grid variable ``h`` (G > 1), else None."""
    found = set()

    def visit(node):
        c = tile_op_call(node)
        if c is None or not c.op.same_as(TileOps.copy):
            return
        src, dst = decode_region(c.args[0]), decode_region(c.args[1])
        if not (is_global(src.buffer) and (dst.buffer.same_as(k_s) or dst.buffer.same_as(v_s))):
            return
        for index in src.mins:
            if isinstance(index, tirx.FloorDiv) and isinstance(index.b, tirx.IntImm) and int(index.b) > 1:
                for tag, (var, _) in grid.items():
                    if index.a.same_as(var):
                        found.add((tag, var, int(index.b)))

    tirx.stmt_functor.post_order_visit(body, visit)
    return next(iter(found)) if len(found) == 1 else None


def _flatten(stmt) -> list:
    if isinstance(stmt, tirx.SeqStmt):
        return [s for x in stmt.seq for s in _flatten(x)]
    return [stmt]


def _touched(stmt) -> dict:
    """buffer -> (written, read) of the tile buffers ``stmt`` touches (regions of tile operators, loads and stores
    of T.Parallel bodies)."""
    out: dict = {}

    def mark(buf, written, read):
        w, r = out.get(buf, (False, False))
        out[buf] = (w or written, r or read)

    def visit(node):
        c = tile_op_call(node)
        if c is not None:
            for a in c.args:
                if isinstance(a, tirx.Call) and a.op.same_as(TileOps.region):
                    access = int(a.args[1])
                    mark(a.args[0].buffer, bool(access & 2), bool(access & 1))
            return
        if isinstance(node, tirx.BufferStore):
            mark(node.buffer, True, False)
        elif isinstance(node, tirx.BufferLoad):
            mark(node.buffer, False, True)

    tirx.stmt_functor.post_order_visit(stmt, visit)
    return {b: wr for b, wr in out.items() if not is_global(b)}


def _overwrites(stmt, buf) -> bool:
    """Whether ``stmt`` writes every element of ``buf`` without reading it first."""
    c = tile_op_call(stmt)
    whole = lambda r: r.buffer.same_as(buf) and tuple(int(e) for e in r.extents) == tuple(  # noqa: E731
        int(d) for d in buf.shape) and all(isinstance(m, tirx.IntImm) and int(m) == 0 for m in r.mins)
    if c is not None:
        regions = [decode_region(a) for a in c.args if isinstance(a, tirx.Call) and a.op.same_as(TileOps.region)]
        if any(r.buffer.same_as(buf) and r.access & 1 for r in regions):
            return False
        if c.op.same_as(TileOps.copy):
            return whole(decode_region(c.args[1]))
        if c.op.same_as(TileOps.fill):
            return whole(decode_region(c.args[0]))
        if c.op.same_as(TileOps.reduce):
            return bool(c.args[4]) and whole(decode_region(c.args[1]))
        return False
    # a T.Parallel nest whose only statement stores buf[i, j] (over the whole buffer) from values not of buf
    loops, node = [], stmt
    while isinstance(node, tirx.For) and node.kind == tirx.ForKind.PARALLEL:
        loops.append(node)
        node = node.body
    if not loops or not isinstance(node, tirx.BufferStore) or not node.buffer.same_as(buf):
        return False
    if _touched(tirx.Evaluate(node.value)).get(buf, (False, False))[1]:
        return False
    return (len(loops) == len(buf.shape) and all(
        idx.same_as(lp.loop_var) and isinstance(lp.min, tirx.IntImm) and int(lp.min) == 0
        and int(lp.extent) == int(d) for idx, lp, d in zip(node.indices, loops, buf.shape)))


def _private(runs: list, shared_loads: set) -> set:
    """The tile buffers each head needs its own copy of: touched in some run whose first statement touching them
    does not overwrite them whole."""
    out = set()
    for run in runs:
        seen = set()
        for stmt in run:
            for buf in _touched(stmt):
                if buf in seen or buf in shared_loads:
                    continue
                seen.add(buf)
                if not _overwrites(stmt, buf):
                    out.add(buf)
    return out


def _is_kv_load(stmt, shared_loads) -> bool:
    c = tile_op_call(stmt)
    if c is None or not c.op.same_as(TileOps.copy):
        return False
    src, dst = decode_region(c.args[0]), decode_region(c.args[1])
    return is_global(src.buffer) and dst.buffer in shared_loads


def _kv_loads_shared(body, head, G: int, n: int, shared_loads: set) -> bool:
    """Whether the K/V loads of ``body`` are the same for the ``n`` heads of a block (``h = head * n + g``, n
    divides G) and nothing else writes their buffers."""
    ana = tvm.arith.Analyzer()
    loads = []
    tirx.stmt_functor.post_order_visit(body, lambda x: loads.append(x) if _is_kv_load(x, shared_loads)
                                       else None)
    for stmt in loads:
        src = decode_region(tile_op_call(stmt).args[0])
        for index in src.mins:
            first = tirx.stmt_functor.substitute(index, {head: head * n})
            last = tirx.stmt_functor.substitute(index, {head: head * n + (n - 1)})
            if G % n or not ana.can_prove(first == last):
                return False
    for buf in shared_loads:
        writers = []
        tirx.stmt_functor.post_order_visit(body, lambda x, b=buf: writers.append(x) if isinstance(x, tirx.Stmt)
                                           and tile_op_call(x) is not None and _touched(x).get(b, (0, 0))[0]
                                           else None)
        if any(w not in loads for w in writers):
            return False
    return True


def _plan(items: list, head, shared_loads: set):
    """(plan, runs) of the block's statements: ``("once", bind)``, ``("run", stmts)`` repeated per head, ``("loop",
    loop, top, rest)`` for the K/V loop (its loads and bindings at the top, once; the rest per head); runs: the
    statement lists repeated per head. None when a binding or the K/V loop's bounds depend on the head."""
    plan, runs, run = [], [], []

    def close():
        if run:
            plan.append(("run", list(run)))
            runs.append(list(run))
            run.clear()

    for stmt in items:
        if isinstance(stmt, tirx.Bind):
            if uses_var(stmt.value, head):
                return None
            close()
            plan.append(("once", stmt))
        elif isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.SERIAL and any(
                _is_kv_load(s, shared_loads) for s in _flatten(stmt.body)):
            close()
            if uses_var(stmt.min, head) or uses_var(stmt.extent, head):
                return None
            inner = _flatten(stmt.body)
            top = [s for s in inner if _is_kv_load(s, shared_loads) or isinstance(s, tirx.Bind)]
            rest = [s for s in inner if not any(s.same_as(t) for t in top)]
            if any(isinstance(s, tirx.Bind) and uses_var(s.value, head) for s in top):
                return None
            plan.append(("loop", stmt, top, rest))
            runs.append(rest)
        else:
            run.append(stmt)
    close()
    return plan, runs


def _emit(plan: list, copies: list, head, n: int) -> list:
    """The grouped block's statements: each run once per head ``g`` (on that head's buffer copies, ``head`` ->
    ``head * n + g``), the K/V loop's loads once at its top."""
    def per_head(stmts, g):
        out = []
        for s in stmts:
            s = tirx.stmt_functor.substitute(with_buffers(s, copies[g]), {head: head * n + g})
            out.append(renew_vars(s) if g else s)
        return out

    new = []
    for p in plan:
        if p[0] == "once":
            new.append(p[1])
        elif p[0] == "run":
            new += [s for g in range(n) for s in per_head(p[1], g)]
        else:
            _, loop, top, rest = p
            top = [tirx.stmt_functor.substitute(s, {head: head * n}) for s in top]
            inner = tirx.SeqStmt(top + [s for g in range(n) for s in per_head(rest, g)])
            new.append(tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, inner, loop.thread_binding,
                                loop.annotations))
    return new


def group_heads(body, allocs, head, G: int, n: int, k_s, v_s):
    """(body, allocs) of the block computing ``n`` query heads of a group (head variable ``head`` now counts
    blocks of ``n`` heads), or None when the rewrite does not apply."""
    shared_loads = {k_s, v_s}
    # the K/V loads: g-invariant once h = head * n + g (n divides G), their buffers written nowhere else
    if not _kv_loads_shared(body, head, G, n, shared_loads):
        return None
    # runs of statements repeated per head; bindings stay once; the K/V loop's loads move to its top
    planned = _plan(_flatten(body), head, shared_loads)
    if planned is None:
        return None
    plan, runs = planned
    if not any(p[0] == "loop" for p in plan):
        return None

    private = _private(runs, shared_loads)
    copies = [{}] + [{b: tirx.decl_buffer(b.shape, b.dtype, f"{b.name}_h{g}", scope=b.scope()) for b in private}
                     for g in range(1, n)]
    new = _emit(plan, copies, head, n)
    allocs = list(allocs) + [copies[g][b] for g in range(1, n) for b in allocs if b in private]
    return tirx.SeqStmt(new), allocs
