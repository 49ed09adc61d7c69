"""EliminateDeadValuesTT: tile ops whose results nothing reads are removed, with the CBs only they used.

A TileLang kernel may compute a value it never uses (a fragment filled by a ``T.Parallel`` and then forgotten, a
debugging reduction, an epilogue left behind). On TT every computed block is pushed into a CB, and a CB that is
pushed but never popped breaks the CB protocol; so a dead value is dropped here, before the TT program is built.

In:  a PrimFunc after TensorizeTT: the tile program (``read_block``, ``write_block``, ``fill``, ``matmul``,
     ``eltwise``, ``transpose``, ``reduce``) and ``tt.cb``.
Out: an op is live when it is a ``write_block`` or writes a CB another live op reads (liveness over the whole
     body, so a value read by the next iteration of a loop stays live); every other op is removed, so is a reader's
     ``read_block`` whose block only dead ops read. ``tt.cb`` keeps the CBs a remaining op names; a CB's
     ``consumer`` roles are recomputed from the remaining ops.
Attributes written: ``tt.cb`` (entries removed, ``consumer`` updated).
Errors: none.
"""

from __future__ import annotations

from tvm import tirx

from .. import records
from ..intrinsics import TTOps, tt_op_of
from .common import prim_func_pass

# (op, CB-index arguments it reads, CB-index arguments it writes); eltwise also reads its BufferLoad leaves
CB_EFFECTS = ((TTOps.read_block, (), (0,)), (TTOps.write_block, (0,), ()), (TTOps.fill, (), (0,)),
            (TTOps.matmul, (0, 1, 2), (2,)), (TTOps.eltwise, (), (0,)), (TTOps.transpose, (0,), (1,)),
            (TTOps.insert_window, (0, 1, 2), (0,)),
            (TTOps.reduce, (0, 1), (1, 5)), (TTOps.gather_rows, (), (0,)), (TTOps.im2col_rows, (), (0,)),
            (TTOps.offset_rows, (), (0,)), (TTOps.write_rows, (0,), ()))     # reduce's argument 5: its scratch CB, or -1
_ROLE = {TTOps.read_block: "reader", TTOps.write_block: "writer", TTOps.write_rows: "writer"}


def _effects(stmt, index_of: dict):
    """(op, CB indices read, CB indices written) of a TT tile op statement, or None for any other statement."""
    found = tt_op_of(stmt)
    if found is None:
        return None
    op, c = found
    for known, reads, writes in CB_EFFECTS:
        if op.same_as(known):
            read = {int(c.args[i]) for i in reads}
            if known.same_as(TTOps.eltwise):
                loads = []
                tirx.stmt_functor.post_order_visit(
                    tirx.Evaluate(c.args[1]), lambda n: loads.append(n.buffer.name) if isinstance(n, tirx.BufferLoad)
                    else None)
                read |= {index_of[n] for n in loads if n in index_of}
            return known, read, {int(c.args[i]) for i in writes} - {-1}
    return None


def _live_ops(ops: list) -> set:
    """Indices (into ``ops``) of the live ops: write_blocks (and write_rows), and the writers of every CB a live op reads."""
    live = {i for i, (op, _, _) in enumerate(ops) if op.same_as(TTOps.write_block) or op.same_as(TTOps.write_rows)}
    needed = set().union(*(ops[i][1] for i in live)) if live else set()
    grew = True
    while grew:
        grew = False
        for i, (_, reads, writes) in enumerate(ops):
            if i not in live and writes & needed:
                live.add(i)
                needed |= reads
                grew = True
    return live


def _consumers(ops: list, keep: set) -> dict:
    """CB index -> the roles whose remaining ops read it."""
    out: dict = {}
    for i in keep:
        op, reads, _ = ops[i]
        role = _ROLE.get(next((k for k in _ROLE if op.same_as(k)), None), "compute")
        for cb in reads:
            out.setdefault(cb, set()).add(role)
    return out


def eliminate_dead_values(func: tirx.PrimFunc) -> tirx.PrimFunc:
    table = records.cbs(func)
    if not table:
        return func
    index_of = {n: int(e.index) for n, e in table.items()}
    stmts, ops = [], []

    def collect(node):
        effects = _effects(node, index_of)
        if effects is not None:
            stmts.append(node)
            ops.append(effects)

    tirx.stmt_functor.post_order_visit(func.body, collect)
    keep = _live_ops(ops)
    if len(keep) == len(ops):
        return func
    dead = [stmts[i] for i in range(len(ops)) if i not in keep]

    def drop(node):     # post-order: a dead op becomes a no-op first, then its sequence leaves it out
        if isinstance(node, tirx.Evaluate) and any(node.same_as(d) for d in dead):
            return tirx.Evaluate(0)
        if isinstance(node, tirx.SeqStmt):
            rest = [s for s in node.seq if not _is_noop(s)]
            return tirx.SeqStmt(rest) if len(rest) > 1 else (rest[0] if rest else tirx.Evaluate(0))
        return None

    body = tirx.stmt_functor.ir_transform(func.body, None, drop, ["tirx.SeqStmt", "tirx.Evaluate"])
    return records.put_cbs(func.with_body(body), _table_without(table, ops, keep))


def _is_noop(stmt) -> bool:
    return isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tirx.IntImm)


def _table_without(table: dict, ops: list, keep: set) -> dict:
    """``tt.cb`` without the CBs only dead ops named; the consumers of the CBs dead ops read, recomputed."""
    def named(which):
        return set().union(set(), *(ops[i][1] | ops[i][2] for i in which))

    dead = set(range(len(ops))) - keep
    gone, touched = named(dead) - named(keep), named(dead)
    consumers = _consumers(ops, keep)
    out = {}
    for name, e in table.items():
        index = int(e.index)
        if index in gone:
            continue
        out[name] = e.replace(consumer=sorted(consumers.get(index, set()))) if index in touched else e
    return out


def EliminateDeadValuesTT():
    @prim_func_pass("tt.EliminateDeadValuesTT")
    def transform(func, mod, ctx):
        return eliminate_dead_values(func)

    return transform
