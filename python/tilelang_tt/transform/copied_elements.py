"""CopiedElementsTT: a tile buffer that only copies part of a tensor row to read its elements in block-level
conditions reads the tensor's elements instead.

TileLang's block-sparse attention (seer_attention) loads a row of its block mask into a fragment and branches on
its elements::

    T.copy(BlockSparseMask[bz, by, bx, :], block_mask)
    for k in T.Pipelined(n):
        if block_mask[k] != 0:
            ...

A GPU keeps the row in registers; on TT, control flow runs on the RISC-V cores, which read a tensor's elements
from L1 (MemorySpaceLowerTT's ``index_load``), not a tile buffer. So ``block_mask[k]`` becomes
``BlockSparseMask[bz, by, bx, k]`` and the copy goes away.

In:  the frontend's PrimFunc (after InlineIndexLetsTT).
Out: for each 1-D tile buffer written only by one ``T.copy`` of a window of a tensor the kernel only reads, that
     window's extent long along one axis, and read only in the conditions of block-level ``if`` statements and in
     loop bounds: its reads are the tensor's elements, the copy and the buffer's allocation are gone.
Attributes written: none.
Errors: none (any other use keeps the buffer as written).
"""

from __future__ import annotations

from tvm import tirx

from .common import TileOps, decode_region, is_call_to, is_global, prim_func_pass, tile_op_call


def _candidates(func: tirx.PrimFunc) -> dict:
    """{buffer data var: (copy statement, source region)} of 1-D tile buffers a whole-buffer T.copy from a tensor
    window fills."""
    out, seen = {}, {}

    def visit(node):
        c = tile_op_call(node)
        if c is None or not c.op.same_as(TileOps.copy):
            return
        if not (is_call_to(c.args[0], TileOps.region) and is_call_to(c.args[1], TileOps.region)):
            return
        src, dst = decode_region(c.args[0]), decode_region(c.args[1])
        buf = dst.buffer
        seen[buf.data] = seen.get(buf.data, 0) + 1
        if not is_global(src.buffer) or is_global(buf) or len(buf.shape) != 1:
            return
        n = int(buf.shape[0]) if isinstance(buf.shape[0], tirx.IntImm) else None
        extents = [int(e) if isinstance(e, (int, tirx.IntImm)) else None for e in src.extents]
        if n is None or n == 1 or None in extents or sorted(extents) != sorted([n] + [1] * (len(extents) - 1)):
            return
        if not (isinstance(dst.mins[0], (int, tirx.IntImm)) and int(dst.mins[0]) == 0):
            return
        out[buf.data] = (node, src)

    tirx.stmt_functor.post_order_visit(func.body, visit)
    return {k: v for k, v in out.items() if seen[k] == 1}


def _written_tensors(func: tirx.PrimFunc) -> set:
    written = set()

    def visit(n):
        if isinstance(n, tirx.BufferStore):
            written.add(n.buffer.data)
        elif is_call_to(n, TileOps.region) and int(n.args[1]) != 1:
            written.add(n.args[0].buffer.data)

    tirx.stmt_functor.post_order_visit(func.body, visit)
    return written


def _condition_reads(func: tirx.PrimFunc, bufs: set, copies: list) -> tuple[set, set]:
    """(buffers read in block-level conditions and loop bounds, buffers read anywhere else but their ``copies``)."""
    allowed, elsewhere = set(), set()

    def loads_in(expr, into):
        tirx.stmt_functor.post_order_visit(
            tirx.Evaluate(expr), lambda n: into.add(n.buffer.data)
            if isinstance(n, tirx.BufferLoad) and n.buffer.data in bufs else None)

    def walk(stmt, in_parallel):
        if isinstance(stmt, tirx.IfThenElse) and not in_parallel:
            loads_in(stmt.condition, allowed)
            walk(stmt.then_case, in_parallel)
            if stmt.else_case is not None:
                walk(stmt.else_case, in_parallel)
        elif isinstance(stmt, tirx.For):
            loads_in(stmt.min, allowed if not in_parallel else elsewhere)
            loads_in(stmt.extent, allowed if not in_parallel else elsewhere)
            walk(stmt.body, in_parallel or stmt.kind == tirx.ForKind.PARALLEL)
        elif isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                walk(s, in_parallel)
        elif isinstance(stmt, tirx.SBlockRealize):
            walk(stmt.block.body, in_parallel)
        elif isinstance(stmt, tirx.AttrStmt):
            walk(stmt.body, in_parallel)
        elif not any(stmt.same_as(c) for c in copies):
            tirx.stmt_functor.post_order_visit(stmt, lambda n: elsewhere.add(n.buffer.data)
                                               if isinstance(n, tirx.BufferLoad) and n.buffer.data in bufs else None)

    walk(func.body, False)
    return allowed, elsewhere


def copied_elements(func: tirx.PrimFunc) -> tirx.PrimFunc:
    found = _candidates(func)
    if not found:
        return func
    written = _written_tensors(func)
    found = {k: v for k, v in found.items() if v[1].buffer.data not in written}
    allowed, elsewhere = _condition_reads(func, set(found), [stmt for stmt, _ in found.values()])
    found = {k: v for k, v in found.items() if k in allowed and k not in elsewhere}
    if not found:
        return func
    copies = [stmt for stmt, _ in found.values()]

    def element(load: tirx.BufferLoad):
        src = found[load.buffer.data][1]
        axis = next(a for a, e in enumerate(src.extents) if int(e) != 1)
        indices = list(src.mins)
        indices[axis] = src.mins[axis] + load.indices[0]
        return tirx.BufferLoad(src.buffer, indices)

    def drop_copy(node):
        return tirx.Evaluate(0) if any(node.same_as(c) for c in copies) else None

    def post(node):
        if isinstance(node, tirx.BufferLoad) and node.buffer.data in found:
            return element(node)
        if isinstance(node, tirx.SBlock) and any(b.data in found for b in node.alloc_buffers):
            return tirx.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint, node.body, node.init,
                               [b for b in node.alloc_buffers if b.data not in found], node.match_buffers,
                               node.annotations)
        return None

    body = tirx.stmt_functor.ir_transform(func.body, drop_copy, None, ["tirx.Evaluate"])
    body = tirx.stmt_functor.ir_transform(body, None, post, ["tirx.BufferLoad", "tirx.SBlock"])
    return func.with_body(body)


def CopiedElementsTT():
    @prim_func_pass("tt.CopiedElementsTT")
    def transform(func, mod, ctx):
        return copied_elements(func)

    return transform
