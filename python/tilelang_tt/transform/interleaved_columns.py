"""InterleavedColumnsTT: stride-2 columns (interleaved RoPE's ``x[i, 2 * j]``, ``x[i, 2 * j + 1]``) through
selection matmuls on the FPU.

TT moves and computes whole 32x32 tiles, and a tile's even columns are no block of it. tt-metal's rotary embedding
(``rotary_embedding_llama``) moves columns with a matmul by a constant 0/1 matrix (its ``trans_mat``); so does this
pass. In a ``T.Parallel`` nest over ``(i, j)``, ``j`` in ``[0, E)``, a read ``X[..., r0 + i, 2 * j + p]`` (``p`` 0 or 1,
the rows of X ``2 E`` wide; X a tensor or a tile buffer) becomes ``X_p[i, j]``, with before the nest

    X_s = T.alloc_shared((R, 2E), X.dtype); T.copy(X[..., r0:r0 + R, 0:2E], X_s)     # a tensor: its row block
    S_p = T.alloc_fragment((2E, E), X.dtype)
    for k, j in T.Parallel(2E, E): S_p[k, j] = T.if_then_else(k == 2 * j + p, 1, 0)
    X_p = T.alloc_fragment((R, E), "float32"); T.clear(X_p); T.gemm(X_s, S_p, X_p)

and a store ``Y[..., r0 + i, 2 * j + p] = v`` becomes ``Y_p[i, j] = v`` (``Y_p`` of Y's dtype), interleaved after it:

    T_p = T.alloc_fragment((E, 2E), Y.dtype)
    for j, k in T.Parallel(E, 2E): T_p[j, k] = T.if_then_else(k == 2 * j + p, 1, 0)
    Y_acc = T.alloc_fragment((R, 2E), "float32"); T.clear(Y_acc)
    T.gemm(Y_0, T_0, Y_acc); T.gemm(Y_1, T_1, Y_acc); T.copy(Y_acc, Y[..., r0:r0 + R, 0:2E])

Every element of a product is one product by 1.0 plus zeros, so the columns move exactly when the FPU multiplies
every bit of the data (in0, SrcB): bfloat16 and float16 data at HiFi4 (TT_KERNEL_PATTERNS.md 5b), which is the
fidelity of a kernel without a ``T.gemm`` of its own. ``Y_p`` holds the stored value rounded once to Y's dtype, as
the store would.

In:  the frontend's PrimFunc (after InlineIndexLetsTT), its compute configuration (``tt.compute``).
Out: such nests rewritten as above (fragments and shared buffers added to the kernel block); any other access is
     left to TilePadTT.
Attributes written: none.
Errors (TTUnsupportedError, naming the access and the TileLang line): stride-2 columns of float32 data (the FPU
     multiplies 19 of its bits), of a kernel computing at another fidelity than HiFi4, or of rows whose half is not
     whole tiles; a row index that is not ``r0 + i`` for a loop variable of the nest.
"""

from __future__ import annotations

import tvm
from tvm import tirx

from .. import records
from ..device import TILE
from ..errors import TTUnsupportedError
from .common import (SCOPE_FRAGMENT, SCOPE_SHARED, ParallelNestRewriter, TileOps, describe, is_global, prim_func_pass,
                     region_call, source_of, tile_buffer_names, uses_var)

_EXACT_DTYPES = ("bfloat16", "float16")


class _Access:
    """``X[*lead, row, 2 * j + p]`` in a nest: the buffer, its leading indices, the row origin, the parity."""

    def __init__(self, buf, lead, row0, parity: int):
        self.buf, self.lead, self.row0, self.parity = buf, lead, row0, parity

    def key(self) -> tuple:
        return (self.buf, self.parity)


def _parity(col, j) -> int | None:
    """``p`` when ``col`` is ``2 * j + p`` (p = 0, 1), else None."""
    analyzer = tvm.arith.Analyzer()
    rest = analyzer.simplify(col - 2 * j)
    if uses_var(rest, j) or not isinstance(rest, tirx.IntImm) or int(rest) not in (0, 1):
        return None
    return int(rest)


class _Nest:
    """One ``T.Parallel(R, E)`` nest (rows ``i``, pairs ``j``) with stride-2 column accesses."""

    def __init__(self, loop: tirx.For, src: str):
        self.loop, self.src = loop, src
        self.i, self.rows = loop.loop_var, loop.extent
        inner = loop.body
        self.j, self.pairs = inner.loop_var, inner.extent

    def access(self, indices, buf) -> _Access | None:
        if len(indices) < 2 or len(buf.shape) < 2:
            return None
        *lead, row, col = indices
        parity = _parity(col, self.j)
        if parity is None or any(uses_var(x, v) for x in lead for v in (self.i, self.j)) or uses_var(row, self.j):
            return None
        what = describe(self.loop)
        row0 = tvm.arith.Analyzer().simplify(row - self.i)
        if uses_var(row0, self.i):
            raise TTUnsupportedError(f"{buf.name}[{', '.join(map(str, indices))}]: stride-2 columns of rows indexed "
                                     f"{row}, not r0 + {self.i.name}", construct=what, source=self.src,
                                     fix=f"index the rows as base + {self.i.name}")
        self.check(buf, what)
        return _Access(buf, list(lead), row0, parity)

    def check(self, buf, what: str) -> None:
        width, pairs = buf.shape[-1], self.pairs
        if not (isinstance(width, tirx.IntImm) and isinstance(pairs, tirx.IntImm) and int(width) == 2 * int(pairs)):
            raise TTUnsupportedError(f"{buf.name}: stride-2 columns over {pairs} pairs of rows {width} wide",
                                     construct=what, source=self.src,
                                     fix="run j over half of the rows (T.Parallel(R, D // 2) for rows D wide)")
        if int(pairs) % TILE:
            raise TTUnsupportedError(f"{buf.name}: stride-2 columns of rows {width} wide: each parity's {pairs} "
                                     f"columns are not whole {TILE}-column tiles", construct=what, source=self.src,
                                     fix=f"use rows that are a multiple of {2 * TILE} wide")
        if str(buf.dtype) not in _EXACT_DTYPES:
            raise TTUnsupportedError(
                f"{buf.name} ({buf.dtype}): stride-2 columns move through a selection matmul, and the FPU multiplies "
                f"19 bits of float32 data (TF32)", construct=what, source=self.src,
                fix="keep the data in bfloat16 or float16, or rotate the two halves of the row (NeoX RoPE: "
                    "x[i, j] and x[i, j + D // 2])")


def _selection(buf: tirx.Buffer, parity: int, transposed: bool) -> tirx.Stmt:
    """The nest filling a 0/1 fragment: ``S[k, j] = (k == 2 j + parity)`` ([2E, E]) or its transpose ([E, 2E])."""
    shape, dtype = buf.shape, buf.dtype
    a, b = tirx.Var("a", "int32"), tirx.Var("b", "int32")
    k, j = (b, a) if transposed else (a, b)
    value = tirx.Select(k == 2 * j + parity, tirx.const(1, dtype), tirx.const(0, dtype))
    nest = tirx.For(a, 0, shape[0], tirx.ForKind.PARALLEL,
                    tirx.For(b, 0, shape[1], tirx.ForKind.PARALLEL, tirx.BufferStore(buf, value, [a, b])))
    return nest


def _gemm(a, b, c, m, n, k) -> tirx.Stmt:
    false = tirx.IntImm("bool", 0)
    m, n, k = (tirx.IntImm("int32", int(x)) for x in (m, n, k))
    return tirx.Evaluate(tirx.Call("handle", TileOps.gemm, [
        region_call(a, [0, 0], [m, k], 1), region_call(b, [0, 0], [k, n], 1), region_call(c, [0, 0], [m, n], 3),
        false, false, m, n, k, 0, false, 0, 0, 0]))


def _fill_zero(buf, shape) -> tirx.Stmt:
    return tirx.Evaluate(tirx.Call("handle", TileOps.fill, [region_call(buf, [0, 0], list(shape), 2),
                                                            tirx.const(0, buf.dtype)]))


def _copy(src, src_mins, dst, dst_mins, extents_src, extents_dst) -> tirx.Stmt:
    return tirx.Evaluate(tirx.Call("handle", TileOps.copy, [region_call(src, src_mins, extents_src, 1),
                                                            region_call(dst, dst_mins, extents_dst, 2)]))


class _Rewriter(ParallelNestRewriter):
    def __init__(self, src: str, taken: set[str]):
        super().__init__(taken)     # tile buffer names: every new one is distinct
        self.src = src

    def buffer(self, shape, dtype, name: str, scope: str = SCOPE_FRAGMENT) -> tirx.Buffer:
        return self.new_buffer(shape, dtype, name, scope)

    def nest(self, loop: tirx.For):
        if not (isinstance(loop.body, tirx.For) and loop.body.kind == tirx.ForKind.PARALLEL):
            return loop
        nest = _Nest(loop, self.src)
        reads: dict = {}
        writes: dict = {}
        before: list = []
        staged: dict = {}       # tensor -> its row block in a shared buffer (read once for both parities)

        errors: list[TTUnsupportedError] = []     # raised after the transform: TVM's FFI would drop their class

        def access(node):
            try:
                return nest.access(node.indices, node.buffer)
            except TTUnsupportedError as err:
                errors.append(err)
                return None

        def load(node):
            acc = access(node)
            if acc is None:
                return None
            if acc.key() not in reads:
                try:
                    reads[acc.key()] = self.split(acc, nest, before, staged)
                except TTUnsupportedError as err:
                    errors.append(err)
                    return None
            # the float32 fragment holds the element exactly: back in its own dtype, the expression is unchanged
            return tirx.Cast(node.dtype, tirx.BufferLoad(reads[acc.key()], [nest.i, nest.j]))

        def store(node):
            acc = access(node)
            if acc is None:
                return None
            if acc.key() not in writes:
                writes[acc.key()] = (acc, self.buffer((nest.rows, nest.pairs), acc.buf.dtype,
                                                      f"{acc.buf.name}_p{acc.parity}"))
            return tirx.BufferStore(writes[acc.key()][1], node.value, [nest.i, nest.j])

        body = tirx.stmt_functor.ir_transform(loop, None, load, ["tirx.BufferLoad"])
        body = tirx.stmt_functor.ir_transform(body, None, store, ["tirx.BufferStore"])
        if errors:
            raise errors[0]
        if body.same_as(loop):
            return loop
        after = []
        for buf in list(dict.fromkeys(a.buf for a, _ in writes.values())):
            halves = sorted((w for w in writes.values() if w[0].buf.same_as(buf)), key=lambda w: w[0].parity)
            if len(halves) != 2:
                raise TTUnsupportedError(f"{buf.name}: the nest stores its columns 2 * j + {halves[0][0].parity} "
                                         "only, and the other parity's columns would be overwritten",
                                         construct=describe(loop), source=self.src,
                                         fix=f"store both {buf.name}[..., 2 * j] and {buf.name}[..., 2 * j + 1]")
            after += self.interleave(buf, halves, nest)
        return tirx.SeqStmt(before + [body] + after)

    def split(self, acc: _Access, nest: _Nest, before: list, staged: dict) -> tirx.Buffer:
        """The fragment ``X_p[i, j] = X[r0 + i, 2 j + p]``, computed by the statements appended to ``before``."""
        rows, pairs, width = nest.rows, nest.pairs, 2 * int(nest.pairs)
        src = acc.buf
        if is_global(src):     # the row block, staged once per nest and tensor
            if src not in staged:
                staged[src] = self.buffer((rows, width), src.dtype, f"{src.name}_rows", SCOPE_SHARED)
                lead = [1] * len(acc.lead)
                before.append(_copy(src, [*acc.lead, acc.row0, 0], staged[src], [0, 0], [*lead, rows, width],
                                    [rows, width]))
            src = staged[src]
        elif not (isinstance(acc.row0, tirx.IntImm) and int(acc.row0) == 0 and not acc.lead
                  and int(src.shape[0]) == int(rows)):
            raise TTUnsupportedError(f"{acc.buf.name}: stride-2 columns of a window of a tile buffer",
                                     construct=describe(nest.loop), source=self.src,
                                     fix=f"read {acc.buf.name} whole (rows i, columns 2 * j + p)")
        sel = self.buffer((width, pairs), src.dtype, f"{acc.buf.name}_sel{acc.parity}")
        half = self.buffer((rows, pairs), "float32", f"{acc.buf.name}_p{acc.parity}")
        before += [_selection(sel, acc.parity, False), _fill_zero(half, (rows, pairs)),
                   _gemm(src, sel, half, rows, pairs, width)]
        return half

    def interleave(self, buf, halves: list, nest: _Nest) -> list:
        """Y's row block from its parity fragments: a sum of selection matmuls, then the copy out."""
        rows, pairs, width = nest.rows, nest.pairs, 2 * int(nest.pairs)
        acc = halves[0][0]
        out = self.buffer((rows, width), "float32", f"{buf.name}_rows")
        stmts = [_fill_zero(out, (rows, width))]
        for a, half in halves:
            sel = self.buffer((pairs, width), half.dtype, f"{buf.name}_spread{a.parity}")
            stmts += [_selection(sel, a.parity, True), _gemm(half, sel, out, rows, width, pairs)]
        if is_global(buf):
            lead = [1] * len(acc.lead)
            stmts.append(_copy(out, [0, 0], buf, [*acc.lead, acc.row0, 0], [rows, width], [*lead, rows, width]))
        else:
            stmts.append(_copy(out, [0, 0], buf, [0, 0], [rows, width], [rows, width]))
        return stmts


def interleaved_columns(func: tirx.PrimFunc) -> tirx.PrimFunc:
    src = source_of(func)
    config = records.compute(func)
    rewriters: list[_Rewriter] = []
    errors: list[TTUnsupportedError] = []     # raised after the transform: TVM's FFI would drop their class

    def post(node: tirx.SBlock):
        try:
            return rewrite(node)
        except TTUnsupportedError as err:
            errors.append(err)
            return None

    def rewrite(node: tirx.SBlock):     # the new buffers join the block holding the nest (the kernel's)
        rewriter = _Rewriter(src, tile_buffer_names(node.body) | {b.name for b in node.alloc_buffers})
        body = rewriter.stmt(node.body)
        if not rewriter.allocs:
            return None
        rewriters.append(rewriter)
        return tirx.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint, body, node.init,
                           list(node.alloc_buffers) + rewriter.allocs, node.match_buffers, node.annotations)

    body = tirx.stmt_functor.ir_transform(func.body, None, post, ["tirx.SBlock"])
    if errors:
        raise errors[0]
    if body.same_as(func.body):
        return func
    if config is not None and config.math_fidelity != "HiFi4":
        raise TTUnsupportedError(
            f"stride-2 columns move through selection matmuls, exact only when the FPU multiplies every bit of the "
            f"data, at HiFi4; this kernel computes at {config.math_fidelity} ({config.math_fidelity_source})",
            construct="stride-2 column access (x[i, 2 * j + p])", source=src,
            fix='T.annotate_tt_compute(math_fidelity="HiFi4")')
    return func.with_body(body)


def InterleavedColumnsTT():
    @prim_func_pass("tt.InterleavedColumnsTT")
    def transform(func, mod, ctx):
        return interleaved_columns(func)

    return transform
