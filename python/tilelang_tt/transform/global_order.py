"""GlobalOrderTT: a launch that reads back what it wrote to a tensor is refused.

On a GPU the threads of a block see their own global stores (after ``T.sync_threads()``): ``T.copy(a, W)`` then
``T.copy(W, b)`` reads the new W. On TT the reader and the writer of a core are separate RISC-V cores that meet
only through circular buffers: the reader fetches W's tiles while (or before) the writer stores them, and gets the
old data. So within one launch a read of a tensor region that a write earlier in program order may have touched --
a statement before it, or an earlier iteration of a loop around both -- is refused; a region written and then
read only by other blocks is the GPU's race too and is left alone.

In:  one launch's PrimFunc (after SplitKernelsTT and InlineIndexLetsTT: T.copy regions and element accesses of
     global tensors, indices as expressions).
Out: the function unchanged.
Attributes written: none.
Errors: TTUnsupportedError naming the read, the write before it and the fix (keep the value in a tile buffer, or
     read it in a second T.Kernel).
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import tirx

from ..errors import TTUnsupportedError
from .common import TileOps, decode_region, describe, is_global, prim_func_pass, source_of, tile_op_call


@dataclass
class _Access:
    tensor: str
    write: bool
    pos: int
    loops: tuple          # the serial loops around it, outermost first
    lo: list              # per axis, the first index it may touch
    hi: list              # per axis, the last
    what: str


class _Collector:
    def __init__(self):
        self.accesses: list[_Access] = []
        self.loops: list[tirx.For] = []
        self.parallel: dict = {}
        self.pos = 0
        self.analyzer = tvm.arith.Analyzer()

    def bounds(self, indices) -> tuple[list, list]:
        dom = {v: tvm.arith.IntervalSet(r[0], r[1]) for v, r in self.parallel.items()}
        lo, hi = [], []
        for ix in indices:
            s = self.analyzer.int_set(ix, dom) if dom else None
            lo.append(s.min_value if s is not None else ix)
            hi.append(s.max_value if s is not None else ix)
        return lo, hi

    def add(self, buf, write: bool, lo, hi, what: str):
        self.accesses.append(_Access(buf.name, write, self.pos, tuple(self.loops), lo, hi, what))

    def stmt(self, s):
        if isinstance(s, tirx.SeqStmt):
            for x in s.seq:
                self.stmt(x)
            return
        if isinstance(s, tirx.For) and s.kind == tirx.ForKind.PARALLEL:
            self.parallel[s.loop_var] = (s.min, s.min + s.extent - 1)
            self.stmt(s.body)
            del self.parallel[s.loop_var]
            return
        if isinstance(s, tirx.For) and s.kind in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED):
            self.loops.append(s)
            self.stmt(s.body)
            self.loops.pop()
            return
        if isinstance(s, tirx.For):     # the grid's blocks (a write one block makes and another reads: a GPU race too)
            self.stmt(s.body)
            return
        if isinstance(s, tirx.AttrStmt):
            self.stmt(s.body)
            return
        if isinstance(s, tirx.IfThenElse):
            self.stmt(s.then_case)
            if s.else_case is not None:
                self.stmt(s.else_case)
            return
        if isinstance(s, tirx.SBlockRealize):
            self.stmt(s.block.body)
            return
        self.pos += 1
        what = describe(s)
        c = tile_op_call(s)
        if c is not None and c.op.same_as(TileOps.copy):
            for arg, write in ((c.args[0], False), (c.args[1], True)):
                r = decode_region(arg)
                if is_global(r.buffer):
                    lo, hi = self.bounds(r.mins)
                    hi = [h + int(e) - 1 for h, e in zip(hi, r.extents)]
                    self.add(r.buffer, write, lo, hi, what)
            return
        if c is not None:
            return          # gemm / reduce / fill read and write tile buffers only

        def visit(node):
            if isinstance(node, tirx.BufferLoad) and is_global(node.buffer):
                self.add(node.buffer, False, *self.bounds(node.indices), what)

        tirx.stmt_functor.post_order_visit(s, visit)
        if isinstance(s, tirx.BufferStore) and is_global(s.buffer):
            self.add(s.buffer, True, *self.bounds(s.indices), what)


def _overlap(analyzer, a: _Access, b: _Access, shift=None) -> bool:
    """Whether ``a`` and ``b`` may touch a common element (``shift``: (loop var, later): ``b`` in a later iteration
    of that loop than ``a``)."""
    if len(a.lo) != len(b.lo):
        return True
    blo, bhi = b.lo, b.hi
    if shift is not None:
        var, later = shift
        blo = [tirx.stmt_functor.substitute(x, {var: later}) for x in blo]
        bhi = [tirx.stmt_functor.substitute(x, {var: later}) for x in bhi]
    return not any(analyzer.can_prove(ah < bl) or analyzer.can_prove(bh < al)
                   for al, ah, bl, bh in zip(a.lo, a.hi, blo, bhi))


def check_global_order(func: tirx.PrimFunc) -> None:
    col = _Collector()
    col.stmt(func.body)
    src = source_of(func)
    written = {x.tensor for x in col.accesses if x.write}
    for read in (x for x in col.accesses if not x.write and x.tensor in written):
        for write in (x for x in col.accesses if x.write and x.tensor == read.tensor):
            analyzer = tvm.arith.Analyzer()
            hazard = write.pos < read.pos and _overlap(analyzer, write, read)
            common = [lp for lp in read.loops if any(lp.loop_var.same_as(w.loop_var) for w in write.loops)]
            for lp in common if not hazard else ():
                later = tirx.Var(f"{lp.loop_var.name}_later", lp.loop_var.dtype)
                analyzer.bind(later, tvm.ir.Range.from_min_extent(lp.min, lp.extent))
                analyzer.bind(lp.loop_var, tvm.ir.Range.from_min_extent(lp.min, lp.extent))
                with analyzer.constraint_scope(later > lp.loop_var):
                    hazard = _overlap(analyzer, write, read, (lp.loop_var, later))
                if hazard:
                    break
            if hazard:
                raise TTUnsupportedError(
                    f"{read.what} reads {read.tensor}, which `{write.what}` writes earlier in this launch: a TT core's "
                    "reader and writer are separate RISC-V cores, so the reader would fetch the old data",
                    construct=read.what, source=src,
                    fix=f"keep the value in a tile buffer (copy it to a shared buffer instead of reading "
                        f"{read.tensor} back), or read it in a second T.Kernel of the function (launches run in order)")


def global_order(func: tirx.PrimFunc) -> tirx.PrimFunc:
    check_global_order(func)
    return func


def GlobalOrderTT():
    @prim_func_pass("tt.GlobalOrderTT")
    def transform(func, mod, ctx):
        return global_order(func)

    return transform
