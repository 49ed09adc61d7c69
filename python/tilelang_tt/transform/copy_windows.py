"""CopyWindowsTT: copies of one row or column of a tile buffer, and of a 1-D tensor window at any element offset,
spelled as the T.Parallel nests they mean.

TileLang's decode kernels keep one statistic per loop step in a column of a shared buffer and read per-head
parameters as a window of a 1-D tensor (GQA decode with attention pooling)::

    T.copy(scores_max, S_shared[:, k])                          # k: the K/V loop's step
    T.copy(s_aux[h * G:h * G + block_H], s_aux_shared)         # G heads of a group, block_H >= G

A TT core computes whole tiles, and a reader moves whole tiles (or whole face rows) of a tensor's 2-D view; neither
copy is a tile block. As T.Parallel nests they are the per-lane selects and element reads the lowering already
places: the column copy selects its column against the column index, and the window reads its elements (rows of
a gather) with TileLang's bounds rule for T.copy (elements past the tensor read zero)::

    for i, j in T.Parallel(R, C):
        S_shared[i, j] = T.if_then_else(j == k, scores_max[i], S_shared[i, j])
    for i in T.Parallel(block_H):
        s_aux_shared[i] = T.if_then_else(h * G + i < H, s_aux[h * G + i], 0)

A buffer the column copy is the first to touch (in program order) starts as zeros: a GPU leaves the other columns
as whatever shared memory held, and the select must read something defined.

In:  the frontend's PrimFunc (after InlineIndexLetsTT: indices read expressions, not let-bound names).
Out: ``T.copy(v, B[:, k])`` / ``T.copy(v, B[k, :])`` (v a whole 1-D tile buffer, B a 2-D tile buffer) and
     ``T.copy(X[o:o + n], v)`` (X a 1-D tensor, ``o`` not known to be a multiple of 32, v a 1-D tile buffer of n
     elements) as above; ``T.fill(B, 0)`` first in the kernel block for a B no statement writes before its first
     column copy.
Attributes written: none.
Errors: none (any other copy is left for the lowering to place or refuse).
"""

from __future__ import annotations

import tvm
from tvm import tirx

from ..device import TILE
from .common import (ParallelNestRewriter, TileOps, decode_region, is_global, prim_func_pass, region_call,
                     tile_op_call)


def _line_copy(c: tirx.Call, analyzer):
    """``T.copy(v, B[:, k])`` / ``T.copy(v, B[k, :])``: (v, B, axis of k, k), else None."""
    src, dst = decode_region(c.args[0]), decode_region(c.args[1])
    if is_global(src.buffer) or is_global(dst.buffer) or len(src.buffer.shape) != 1 or len(dst.buffer.shape) != 2:
        return None
    n = src.buffer.shape[0]
    if not (isinstance(n, tirx.IntImm) and [int(e) for e in src.extents] == [int(n)]
            and analyzer.can_prove(src.mins[0] == 0)):
        return None
    extents = [int(e) for e in dst.extents]
    for axis in (0, 1):
        other = 1 - axis
        if (extents[axis] == 1 and extents[other] == int(n) and int(dst.buffer.shape[other]) == int(n)
                and analyzer.can_prove(dst.mins[other] == 0) and int(dst.buffer.shape[axis]) > 1):
            return src.buffer, dst.buffer, axis, dst.mins[axis]
    return None


def _line_nest(vec: tirx.Buffer, buf: tirx.Buffer, axis: int, at) -> tirx.Stmt:
    i, j = tirx.Var("i", "int32"), tirx.Var("j", "int32")
    here = (i, j)[axis]
    value = tirx.Select(here == at, tirx.BufferLoad(vec, [(j, i)[axis]]), tirx.BufferLoad(buf, [i, j]))
    rows, cols = (int(e) for e in buf.shape)
    return tirx.For(i, 0, rows, tirx.ForKind.PARALLEL,
                    tirx.For(j, 0, cols, tirx.ForKind.PARALLEL, tirx.BufferStore(buf, value, [i, j])))


def _window_copy(c: tirx.Call, analyzer):
    """``T.copy(X[o:o + n], v)`` of a 1-D tensor at an offset not known to be tile-aligned: a T.Parallel over v's
    elements (those past X's end read zero), else None."""
    src, dst = decode_region(c.args[0]), decode_region(c.args[1])
    if not (is_global(src.buffer) and len(src.buffer.shape) == 1 and not is_global(dst.buffer)
            and len(dst.buffer.shape) == 1 and isinstance(dst.buffer.shape[0], tirx.IntImm)):
        return None
    n = int(dst.buffer.shape[0])
    if [int(e) for e in src.extents] != [n] or [int(e) for e in dst.extents] != [n] or not analyzer.can_prove(
            dst.mins[0] == 0):
        return None
    if analyzer.can_prove(tirx.floormod(src.mins[0], TILE) == 0) or TILE % n == 0 and analyzer.can_prove(
            tirx.floormod(src.mins[0], n) == 0):
        return None     # whole tiles, or a block that divides a tile at a multiple of its size: the reader's
    i = tirx.Var("i", "int32")
    at = src.mins[0] + i
    value = tirx.BufferLoad(src.buffer, [at])
    length = src.buffer.shape[0]
    if not analyzer.can_prove(src.mins[0] + n <= length):
        value = tirx.Select(at < length, value, tirx.const(0, src.buffer.dtype))
    if src.buffer.dtype != dst.buffer.dtype:
        value = tirx.Cast(dst.buffer.dtype, value)
    return tirx.For(i, 0, n, tirx.ForKind.PARALLEL, tirx.BufferStore(dst.buffer, value, [i]))


def _writes(stmt) -> set:
    """The tile buffers ``stmt`` writes (T.copy / T.fill / T.gemm / T.reduce destinations, element stores)."""
    out: set = set()

    def visit(node):
        if isinstance(node, tirx.BufferStore):
            out.add(node.buffer.name)
        c = tile_op_call(node) if isinstance(node, tirx.Evaluate) else None
        if c is None:
            return
        if c.op.same_as(TileOps.copy) or c.op.same_as(TileOps.reduce):
            out.add(decode_region(c.args[1]).buffer.name)
        elif c.op.same_as(TileOps.fill):
            out.add(decode_region(c.args[0]).buffer.name)
        elif c.op.same_as(TileOps.gemm):
            out.add(decode_region(c.args[2]).buffer.name)

    tirx.stmt_functor.post_order_visit(stmt, visit)
    return out


class _Rewriter(ParallelNestRewriter):
    def __init__(self):
        super().__init__()
        self.analyzer = tvm.arith.Analyzer()
        self.written: set = set()
        self.zeroed: list[tirx.Buffer] = []

    def nest(self, loop: tirx.For):
        self.written |= _writes(loop)
        return loop

    def stmt(self, s):
        if isinstance(s, (tirx.SeqStmt, tirx.For, tirx.AttrStmt, tirx.IfThenElse)):
            return super().stmt(s)
        c = tile_op_call(s)
        if c is not None and c.op.same_as(TileOps.copy):
            line = _line_copy(c, self.analyzer)
            if line is not None:
                vec, buf, axis, at = line
                if buf.name not in self.written and all(not b.same_as(buf) for b in self.zeroed):
                    self.zeroed.append(buf)
                self.written.add(buf.name)
                return _line_nest(vec, buf, axis, at)
            window = _window_copy(c, self.analyzer)
            if window is not None:
                self.written.add(decode_region(c.args[1]).buffer.name)
                return window
        self.written |= _writes(s)
        return s


def _zero(buf: tirx.Buffer) -> tirx.Stmt:
    shape = [int(e) for e in buf.shape]
    return tirx.Evaluate(tirx.Call("handle", TileOps.fill, [region_call(buf, [0] * len(shape), shape, 2),
                                                             tirx.const(0, buf.dtype)]))


def copy_windows(func: tirx.PrimFunc) -> tirx.PrimFunc:
    def post(node: tirx.SBlock):
        if not node.alloc_buffers:
            return None
        rewriter = _Rewriter()
        body = rewriter.stmt(node.body)
        if rewriter.zeroed:
            body = tirx.SeqStmt([*(_zero(b) for b in rewriter.zeroed), body])
        if tvm.ir.structural_equal(body, node.body):
            return None
        return tirx.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint, body, node.init,
                           node.alloc_buffers, node.match_buffers, node.annotations)

    body = tirx.stmt_functor.ir_transform(func.body, None, post, ["tirx.SBlock"])
    return func if body.same_as(func.body) else func.with_body(body)


def CopyWindowsTT():
    @prim_func_pass("tt.CopyWindowsTT")
    def transform(func, mod, ctx):
        return copy_windows(func)

    return transform
