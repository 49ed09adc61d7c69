"""ColumnReadsTT: a column of a tensor read as a per-row vector becomes whole tile columns and a masked row sum.

Linear-attention kernels (GDN, Mamba, RetNet) keep one value per token and head in ``[B, S, H]`` tensors (gates,
betas) and read one head's values for a block of tokens, as a copy, ``T.copy(G[b, s0:s0 + R, h], G_shared)``, or
element by element in a ``T.Parallel`` over the tokens, ``G[b, s0 + i, h]``. A TT reader moves whole tile rows of a
tensor's 2-D view ``[B * S, H]``; the wanted element sits at column ``h % 32`` of its tile, and a per-row vector lives
in its tiles' first column. So the tile columns holding the column are read whole, every other column is selected
away against the column index, and the rows are summed - one non-zero term per row, exact in every format:

    X_col = T.alloc_fragment((R, 32), X.dtype)
    T.copy(X[..., s0:s0 + R, c0:c0 + 32], X_col)           # c0 = h - h % 32
    for i, j in T.Parallel(R, 32):
        X_col[i, j] = T.if_then_else(j == h - c0, X_col[i, j], 0)
    T.reduce_sum(X_col, V, dim=1)                          # V: the copy's destination, or a new fragment V[i]

In:  the frontend's PrimFunc (after InlineIndexLetsTT: indices read expressions, not let-bound names).
Out: such copies as above; such element reads of a ``T.Parallel`` nest through a fragment staged just before the
     nest. The tensor's last axis is whole tiles (H a multiple of 32). Any other access is left for TilePadTT to
     place or refuse.
Attributes written: none.
Errors: none (a column read this pass cannot rewrite keeps TilePadTT's refusal).
"""

from __future__ import annotations

import tvm
from tvm import tirx

from ..device import TILE
from .common import (SCOPE_FRAGMENT, ParallelNestRewriter, TileOps, decode_region, is_global, prim_func_pass,
                     region_call, rewrite_kernel_blocks, uses_var)


class _Column:
    """One column read: tensor X at leading indices ``lead``, rows [row0, row0 + rows) of column ``col``."""

    def __init__(self, buf: tirx.Buffer, lead: list, row0, rows: int, col):
        self.buf, self.lead, self.row0, self.rows, self.col = buf, lead, row0, rows, col
        self.col0 = tirx.floordiv(col, TILE) * TILE     # the first column of its tile

    def same(self, other: "_Column") -> bool:
        return self.buf.same_as(other.buf) and self.rows == other.rows and all(
            tvm.ir.structural_equal(a, b) for a, b in zip([*self.lead, self.row0, self.col],
                                                          [*other.lead, other.row0, other.col]))

    def statements(self, dst: tirx.Buffer) -> tuple[tirx.Buffer, list]:
        """(the tile-column fragment, the copy, mask and row sum that leave the column in ``dst``)."""
        cols = tirx.decl_buffer((self.rows, TILE), self.buf.dtype, f"{self.buf.name}_cols", scope=SCOPE_FRAGMENT)
        mins = [*self.lead, self.row0, self.col0]
        extents = [1] * len(self.lead) + [self.rows, TILE]
        copy = tirx.Call("handle", TileOps.copy, [region_call(self.buf, mins, extents, 1),
                                                   region_call(cols, [0, 0], [self.rows, TILE], 2)])
        i, j = tirx.Var("i", "int32"), tirx.Var("j", "int32")
        zero = tirx.const(0, self.buf.dtype)
        keep = tirx.Select(j == self.col - self.col0, tirx.BufferLoad(cols, [i, j]), zero)
        mask = tirx.For(i, 0, self.rows, tirx.ForKind.PARALLEL, tirx.For(
            j, 0, TILE, tirx.ForKind.PARALLEL, tirx.BufferStore(cols, keep, [i, j])))
        total = tirx.Call("handle", TileOps.reduce, [region_call(cols, [0, 0], [self.rows, TILE], 1),
                                                      region_call(dst, [0], [self.rows], 2), tirx.StringImm("sum"),
                                                      tirx.IntImm("int32", 1), tirx.IntImm("bool", 1)])
        return cols, [tirx.Evaluate(copy), mask, tirx.Evaluate(total)]


def _fits(buf: tirx.Buffer) -> bool:
    """A global tensor of 2+ axes whose last axis is static whole tiles (a narrower one would need its column
    index as a value in a block smaller than a tile)."""
    if not is_global(buf) or len(buf.shape) < 2 or not isinstance(buf.shape[-1], tirx.IntImm):
        return False
    return int(buf.shape[-1]) % TILE == 0


def _copy_column(call: tirx.Call) -> tuple[_Column, tirx.Buffer] | None:
    """``T.copy(X[..., r0:r0 + R, c], V)`` into a 1-D tile buffer V of R elements: (the column, V)."""
    if not call.op.same_as(TileOps.copy):
        return None
    src, dst = decode_region(call.args[0]), decode_region(call.args[1])
    if not _fits(src.buffer) or is_global(dst.buffer) or len(dst.buffer.shape) != 1:
        return None
    extents = [int(e) if isinstance(e, (int, tirx.IntImm)) else None for e in src.extents]
    rows = extents[-2]
    if rows is None or rows < 2 or extents[-1] != 1 or any(e != 1 for e in extents[:-2]):
        return None
    if [int(e) for e in dst.extents] != [rows] or int(dst.buffer.shape[0]) != rows:
        return None
    return _Column(src.buffer, list(src.mins[:-2]), src.mins[-2], rows, src.mins[-1]), dst.buffer


def _element_column(load: tirx.BufferLoad, nest: dict) -> tuple[_Column, tirx.Var] | None:
    """``X[..., e + i, c]`` in a T.Parallel nest (``nest``: loop var -> extent) whose row index moves with one loop
    variable ``i`` and nothing else does: (the column it reads over i's extent, i)."""
    if not _fits(load.buffer):
        return None
    *lead, row, col = load.indices
    if any(uses_var(x, v) for x in [*lead, col] for v in nest):
        return None
    moving = [v for v in nest if uses_var(row, v)]
    if len(moving) != 1:
        return None
    var = moving[0]
    analyzer = tvm.arith.Analyzer()
    row0 = analyzer.simplify(row - var)
    if uses_var(row0, var):
        return None
    return _Column(load.buffer, list(lead), row0, nest[var], col), var


def _nest_vars(loop: tirx.For) -> dict:
    """Loop var -> extent of a T.Parallel nest (the loop and the parallel loops directly inside it)."""
    out = {}
    while isinstance(loop, tirx.For) and loop.kind == tirx.ForKind.PARALLEL and isinstance(loop.extent, tirx.IntImm):
        out[loop.loop_var] = int(loop.extent)
        loop = loop.body
    return out


class _Rewriter(ParallelNestRewriter):
    """Rewrites one kernel body; ``allocs``: the fragments it adds to the kernel block."""

    def stmt(self, s):
        if isinstance(s, tirx.Evaluate) and isinstance(s.value, tirx.Call):
            found = _copy_column(s.value)
            if found is None:
                return s
            cols, stmts = found[0].statements(found[1])
            self.allocs.append(cols)
            return tirx.SeqStmt(stmts)
        return super().stmt(s)

    def nest(self, loop: tirx.For):
        """A T.Parallel nest whose column element reads are staged before it, each into a vector V[i]."""
        nest = _nest_vars(loop)
        staged: list[tuple[_Column, tirx.Buffer]] = []
        before = []

        def post(node):
            found = _element_column(node, nest)
            if found is None:
                return None
            column, var = found
            vec = next((v for c, v in staged if c.same(column)), None)
            if vec is None:
                vec = tirx.decl_buffer((column.rows,), column.buf.dtype, f"{column.buf.name}_col",
                                       scope=SCOPE_FRAGMENT)
                cols, stmts = column.statements(vec)
                staged.append((column, vec))
                self.allocs += [cols, vec]
                before.extend(stmts)
            return tirx.BufferLoad(vec, [var])

        body = tirx.stmt_functor.ir_transform(loop, None, post, ["tirx.BufferLoad"])
        return tirx.SeqStmt(before + [body]) if before else loop


def column_reads(func: tirx.PrimFunc) -> tirx.PrimFunc:
    return rewrite_kernel_blocks(func, _Rewriter)     # the kernel's block holds its tile buffers; the new ones join


def ColumnReadsTT():
    @prim_func_pass("tt.ColumnReadsTT")
    def transform(func, mod, ctx):
        return column_reads(func)

    return transform
