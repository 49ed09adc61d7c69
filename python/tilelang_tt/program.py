"""The tile program: the lowered TIR body as a small tree the kernel emitters project per role.

After TensorizeTT the body is: the persistent loop, flat ``Bind``s of ``(by, bx)``, serial loops, and TT ops
(``read_block``, ``write_block``, ``fill``, ``matmul``, ``eltwise``). The reader keeps the loops and its
reads, the writer its writes, the compute kernel everything else; this module just gives that body a
shape that is easy to walk.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import tirx

from .errors import TTLoweringError, TTUnsupportedError
from .intrinsics import TTOps, tt_op_of
from .transform.common import TileOps, describe, tile_op_call


@dataclass
class Loop:
    var: tirx.Var
    extent: object          # PrimExpr
    body: list
    persistent: bool = False


@dataclass
class Bind:
    var: tirx.Var
    value: object


@dataclass
class Op:
    kind: str               # read_block | write_block | fill | matmul | eltwise | transpose
    args: list
    text: str               # the TIR statement, for comments


def build(stmt, source: str | None = None) -> list:
    out: list = []
    _build(stmt, out, source)
    return out


def _build(stmt, out, source):
    if isinstance(stmt, tirx.SeqStmt):
        for s in stmt.seq:
            _build(s, out, source)
        return
    if isinstance(stmt, tirx.For):
        if stmt.kind != tirx.ForKind.SERIAL and stmt.kind != tirx.ForKind.UNROLLED:
            raise TTUnsupportedError(f"loop kind {stmt.kind} after lowering", construct=describe(stmt), source=source,
                                     fix="T.Parallel bodies must be tensorizable (see TensorizeTT)")
        body: list = []
        _build(stmt.body, body, source)
        persistent = any(str(k).endswith("persistent_loop") for k in stmt.annotations.keys())
        out.append(Loop(stmt.loop_var, stmt.extent, body, persistent))
        return
    if isinstance(stmt, tirx.Bind):
        out.append(Bind(stmt.var, stmt.value))
        return
    found = tt_op_of(stmt)
    if found is not None:
        op, c = found
        for kind in ("read_block", "write_block", "fill", "matmul", "eltwise", "transpose"):
            if op.same_as(getattr(TTOps, kind)):
                note = c.args[-1].value if isinstance(c.args[-1], tirx.StringImm) else describe(stmt)
                out.append(Op(kind, list(c.args[:-1]), note))
                return
    c = tile_op_call(stmt)
    if c is not None and (c.op.same_as(TileOps.gemm) or c.op.same_as(TileOps.fill)):
        raise TTUnsupportedError(f"{c.op.name} was not tensorized (tensorize=False) and the TT backend has no scalar "
                                 "fallback for it",
                                 construct=describe(stmt), source=source,
                                 fix="compile with tensorize enabled (the default)")
    raise TTLoweringError(f"unexpected statement {type(stmt).__name__} after lowering", construct=describe(stmt),
                          source=source)


def walk_ops(tree):
    for node in tree:
        if isinstance(node, Loop):
            yield from walk_ops(node.body)
        elif isinstance(node, Op):
            yield node
