"""TileIntRangeTT: the integers a T.Parallel computes on tiles must be exact in float32.

A GPU evaluates ``O[i, j] = T.Cast("float32", bx * 64 + i)`` or a mask ``i // 8 >= j // 8`` in int32. TT's tile
math is float: loop indices become index tiles, block indices and scalars are added as float32 scalars, and
``//`` / ``%`` by a constant go through ``(a + 0.5) / c`` truncated. float32 holds every integer below 2^24, and
the division is exact below 2^22. So every integer the store's value computes (outside the indices of its loads,
which the RISC-Vs compute in int32) is bounded: loop and block indices by their ranges, let-bound values by their
definitions, constants by their value, elements of int32 tensors below 2^24 (the call checks them), an int32
scalar parameter or a symbolic dimension below 2^22 (the call checks it: ``tt.tile_int_limits``). A value the same
for the whole block is computed by the RISC-Vs in int32 and only its final value is converted. A value with a
bound of 2^24 or more (a dividend of 2^22 or more) is refused; a value this analysis cannot bound (an int32
fragment's, which MemorySpaceLowerTT bounds in int_range.py; a ``T.alloc_var``; a trip count read from a tensor)
is left to the later checks.

In:  one launch's PrimFunc (after GlobalOrderTT: the grid as loops, T.Parallel nests with their stores).
Out: the function, with ``tt.tile_int_limits`` ({"dims": {name: limit}, "params": {position: limit}}) when a
     scalar parameter or symbolic dimension is computed with on tiles.
Attributes written: ``tt.tile_int_limits``.
Errors: TTUnsupportedError naming the expression, its bound and the fix.
"""

from __future__ import annotations

import tvm
from tvm import tirx

from .. import attrs
from ..device import INDEX_FORMATS, INT_AS_FLOAT_LIMIT
from ..errors import TTUnsupportedError
from .common import describe, free_vars, is_global, prim_func_pass, source_of

DIVIDEND_LIMIT = 2 ** 22      # lower_eltwise's floor division: (a + 0.5) / c stays inside (k, k + 1)
SCALAR_LIMIT = 2 ** 22        # an int32 scalar parameter or a symbolic dimension, checked at the call
_DIVISIONS = (tirx.FloorDiv, tirx.FloorMod, tirx.Div, tirx.Mod)


class _Bounds:
    def __init__(self, func: tirx.PrimFunc):
        self.analyzer = tvm.arith.Analyzer()
        self.src = source_of(func)
        self.lanes: list = []      # the enclosing T.Parallel loop variables (values that differ per element)
        self.scalars = []          # (var, key): symbolic dimensions by name, scalar parameters by position
        self.used: dict = {}       # key -> limit, of those a tile computes with
        for k, p in enumerate(func.params):
            if p in func.buffer_map:
                for dim in func.buffer_map[p].shape:
                    for v in free_vars(dim):
                        self.bind_scalar(v, 0, v.name)
            elif str(p.dtype).startswith("int"):
                self.bind_scalar(p, -SCALAR_LIMIT + 1, k)

    def bind_scalar(self, var, low: int, key):
        if not any(var.same_as(v) for v, _ in self.scalars):
            self.scalars.append((var, key))
            self.analyzer.bind(var, tvm.ir.Range.from_min_extent(low, SCALAR_LIMIT - low))

    def stmt(self, s, in_parallel: bool):
        if isinstance(s, tirx.SeqStmt):
            for x in s.seq:
                self.stmt(x, in_parallel)
        elif isinstance(s, tirx.For):
            if not any(free_vars(e) for e in (s.min, s.extent)) or self.bounded(s.min) and self.bounded(s.extent):
                self.analyzer.bind(s.loop_var, tvm.ir.Range.from_min_extent(s.min, s.extent))
            if s.kind == tirx.ForKind.PARALLEL:
                self.lanes.append(s.loop_var)
            self.stmt(s.body, in_parallel or s.kind == tirx.ForKind.PARALLEL)
            if s.kind == tirx.ForKind.PARALLEL:
                self.lanes.pop()
        elif isinstance(s, tirx.Bind):
            if self.bounded(s.value) and str(s.var.dtype).startswith("int"):
                self.analyzer.bind(s.var, s.value)
        elif isinstance(s, tirx.IfThenElse):
            if in_parallel:
                self.value(s.condition, s)
            self.stmt(s.then_case, in_parallel)
            if s.else_case is not None:
                self.stmt(s.else_case, in_parallel)
        elif isinstance(s, tirx.AttrStmt):
            self.stmt(s.body, in_parallel)
        elif isinstance(s, tirx.SBlockRealize):
            self.stmt(s.block.body, in_parallel)
        elif isinstance(s, tirx.BufferStore) and in_parallel:
            self.value(s.value, s)

    def bounded(self, e) -> bool:
        return all(self.known(v) for v in free_vars(e)) and not _has_load(e)

    def known(self, var) -> bool:
        bound = self.analyzer.const_int_bound(var)      # an unbound variable: int32's whole range
        return bound.min_value > -2 ** 31 and bound.max_value < 2 ** 31 - 1

    def value(self, e, stmt):
        """Check every integer ``e`` computes (not inside a load's indices)."""
        self.magnitude(e, stmt)

    def per_element(self, e) -> bool:
        """Whether ``e`` differs per element (reads a T.Parallel index or a tile): computed on tiles. A value the
        same for the whole block is computed by the RISC-Vs in int32 and converted once."""
        found = []
        tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), lambda n: found.append(n) if (
            isinstance(n, tirx.Var) and any(n.same_as(v) for v in self.lanes)
            or isinstance(n, tirx.BufferLoad) and not is_global(n.buffer)) else None)
        return bool(found)

    def magnitude(self, e, stmt) -> int | None:
        """The largest magnitude of integer ``e`` (None: unknown), checking ``e`` and its parts."""
        if isinstance(e, tirx.BufferLoad):
            return self.load_bound(e)
        if not self.per_element(e):       # a block value: exact in int32, converted once
            if not str(e.dtype).startswith(("int", "uint")):
                return None     # made a float where the kernel says so (T.Cast): rounded as a GPU rounds it
            self.note_scalars(e)
            bound = self.bound(e, []) if str(e.dtype).startswith(("int", "uint")) and self.bounded(e) else None
            if bound is not None and bound >= INT_AS_FLOAT_LIMIT:
                self.refuse(e, bound, INT_AS_FLOAT_LIMIT, stmt, "is converted to float32 for the tiles")
            return bound
        parts = [self.magnitude(x, stmt) for x in _operands(e)]
        if not str(e.dtype).startswith(("int", "uint")):
            return None
        if isinstance(e, _DIVISIONS) and parts[0] is not None and parts[0] >= DIVIDEND_LIMIT:
            self.refuse(e.a, parts[0], DIVIDEND_LIMIT, stmt, "is divided on tiles")
        bound = self.bound(e, parts)
        if bound is not None and bound >= INT_AS_FLOAT_LIMIT:
            self.refuse(e, bound, INT_AS_FLOAT_LIMIT, stmt, "is computed on tiles")
        self.note_scalars(e)
        return bound

    def note_scalars(self, e):
        for v in free_vars(e):
            for var, key in self.scalars:
                if v.same_as(var):
                    self.used[key] = SCALAR_LIMIT

    def bound(self, e, parts) -> int | None:
        if isinstance(e, tirx.IntImm):
            return abs(int(e.value))
        if self.bounded(e):
            b = self.analyzer.const_int_bound(e)
            return max(abs(b.min_value), abs(b.max_value))
        if isinstance(e, (tirx.Select,)) or _is_call(e, "tirx.if_then_else"):
            branches = parts[1:]
            return None if None in branches else max(branches)
        if isinstance(e, tirx.Cast) and str(e.value.dtype).startswith(("int", "uint", "bool")):
            return parts[0]
        if None in parts or not parts:
            return None
        if isinstance(e, (tirx.Add, tirx.Sub)):
            return parts[0] + parts[1]
        if isinstance(e, tirx.Mul):
            return parts[0] * parts[1]
        if isinstance(e, (tirx.Min, tirx.Max)):
            return max(parts)
        if isinstance(e, (tirx.FloorDiv, tirx.Div)):
            return parts[0]
        if isinstance(e, (tirx.FloorMod, tirx.Mod)):
            return parts[1]
        return None

    def load_bound(self, e: tirx.BufferLoad) -> int | None:
        """An int32 tensor's element: below 2^24 (the call checks it). An int32 fragment's values are bounded by
        MemorySpaceLowerTT (int_range.py), which checks every store of them: unknown here."""
        if is_global(e.buffer) and str(e.buffer.dtype) in INDEX_FORMATS:
            return INT_AS_FLOAT_LIMIT - 1
        return None

    def refuse(self, e, bound: int, limit: int, stmt, how: str):
        raise TTUnsupportedError(
            f"the integer `{e}` {how} in float32, and may reach {bound} in magnitude: exact only below "
            f"2^{limit.bit_length() - 1}", construct=describe(stmt), source=self.src,
            fix="keep integer values a T.Parallel computes with (indices, offsets, positions) below "
                f"2^{limit.bit_length() - 1}; compute larger ones in a float dtype or per block (outside T.Parallel)")


def _operands(e) -> list:
    if isinstance(e, (tirx.Select,)):
        return [e.condition, e.true_value, e.false_value]
    if isinstance(e, tirx.Call):
        return list(e.args)
    if isinstance(e, tirx.Cast):
        return [e.value]
    if isinstance(e, tirx.Not):
        return [e.a]
    if hasattr(e, "a") and hasattr(e, "b"):
        return [e.a, e.b]
    return []


def _is_call(e, name: str) -> bool:
    return isinstance(e, tirx.Call) and str(getattr(e.op, "name", "")) == name


def _has_load(e) -> bool:
    found = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), lambda n: found.append(n) if isinstance(
        n, (tirx.BufferLoad, tirx.Call)) else None)
    return bool(found)


def tile_int_range(func: tirx.PrimFunc) -> tirx.PrimFunc:
    bounds = _Bounds(func)
    bounds.stmt(func.body, False)
    if not bounds.used:
        return func
    limits = {"dims": {k: v for k, v in bounds.used.items() if isinstance(k, str)},
              "params": {str(k): v for k, v in bounds.used.items() if isinstance(k, int)}}
    return func.with_attr(attrs.TILE_INT_LIMITS, limits)


def TileIntRangeTT():
    @prim_func_pass("tt.TileIntRangeTT")
    def transform(func, mod, ctx):
        return tile_int_range(func)

    return transform
