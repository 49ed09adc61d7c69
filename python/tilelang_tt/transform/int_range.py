"""Part of MemorySpaceLowerTT: int32 tile buffers compute as Float32, so every integer they hold must be exact.

An int32 fragment (TileLang's top-k keeps candidate positions in one) lives in a Float32 CB
(``device.TILE_INT_AS_FLOAT``): the SFPU compares, selects and reduces it as floats, and only the store to an int32
tensor converts (``typecast_tile<Float32, Int32>``). Float32 holds every integer of magnitude below 2^24 exactly,
so ``check_int_ranges`` bounds what the kernel stores: each int32 tile buffer's bound is the largest magnitude any
store into it can produce (constants, loop indices and block indices by their ranges, selects and extrema, sums and
products of bounded values), iterated to a fixed point over the kernel (a loop that grows a value without bound
never reaches one); stores into int32 tensors are bounded the same way. A value read from an int32 (or bool)
tensor is bounded by 2^24 - 1, which the call checks (the plan's ``value_limit``); a float converted to int32 has
no bound and is refused, as is a bound of 2^24 or more.
"""

from __future__ import annotations

import tvm
from tvm import arith, tirx

from .. import attrs
from ..device import INDEX_FORMATS, INT_AS_FLOAT_LIMIT, TILE_INT_AS_FLOAT
from ..errors import TTUnsupportedError
from .common import TileOps, decode_region, describe, is_global, stmt_children, tile_op_call


class _Unbounded(Exception):
    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


def check_int_ranges(func: tirx.PrimFunc, src: str) -> None:
    stores = []      # (buffer data var, value expression, loop ranges around it, statement)
    ranges: dict = {}

    def walk(stmt, loops):
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                walk(s, loops)
        elif isinstance(stmt, tirx.For) and attrs.PERSISTENT_LOOP in stmt.annotations:
            walk(stmt.body, loops)      # a core's blocks: each block's values are its own
        elif isinstance(stmt, tirx.For):
            walk(stmt.body, {**loops, stmt.loop_var: (stmt.min, stmt.extent)})
        elif isinstance(stmt, tirx.BufferStore):
            # an int32 tensor written from other tensors is refused later with its own message (no integer tiles)
            if str(stmt.buffer.dtype) in TILE_INT_AS_FLOAT and not (is_global(stmt.buffer) and _reads_tensor(stmt)):
                stores.append((stmt.buffer, stmt.value, loops, stmt))
        elif isinstance(stmt, tirx.Bind):
            ranges[stmt.var] = stmt.value
        elif isinstance(stmt, tirx.Evaluate):
            call = tile_op_call(stmt)
            if call is not None:
                stores.extend(_tile_op_stores(call, stmt, loops, src))
        else:
            for child in stmt_children(stmt):
                walk(child, loops)

    walk(func.body, {})
    if not stores:
        return
    bound: dict = {}
    for _ in range(64):
        changed = False
        for buf, value, loops, stmt in stores:
            b = _bound(value, loops, ranges, bound, stmt, src)
            if b >= INT_AS_FLOAT_LIMIT:
                raise TTUnsupportedError(
                    f"int32 tile buffer {buf.name} may hold values up to {b} in magnitude: int32 tiles compute in "
                    f"Float32, exact only below 2^24", construct=describe(stmt), source=src,
                    fix="keep integer tile values below 2^24 (indices, counts), or compute in float32")
            if b > bound.get(buf.data, -1):
                bound[buf.data] = b
                changed = True
        if not changed:
            return
    raise TTUnsupportedError(f"the values of int32 tile buffer {stores[0][0].name} grow with every iteration",
                             construct=describe(stores[0][3]), source=src,
                             fix="int32 tiles compute in Float32, exact only below 2^24: keep them bounded")


def _tile_op_stores(call, stmt, loops, src) -> list:
    """The (buffer, value, loops, statement) a tile operator stores into an int32 tile buffer."""
    if call.op.same_as(TileOps.fill):
        dst = decode_region(call.args[0], src).buffer
        return [(dst, call.args[1], loops, stmt)] if str(dst.dtype) in TILE_INT_AS_FLOAT else []
    if call.op.same_as(TileOps.gemm):
        c = decode_region(call.args[2], src).buffer
        if str(c.dtype) not in TILE_INT_AS_FLOAT:
            return []
        return [(c, tirx.IntImm("int64", _gemm_bound(call, loops, stmt, src)), loops, stmt)]
    if not (call.op.same_as(TileOps.reduce) or call.op.same_as(TileOps.copy)):
        return []
    a, b = (decode_region(x, src).buffer for x in call.args[:2])
    if str(b.dtype) not in TILE_INT_AS_FLOAT:
        return []
    if call.op.same_as(TileOps.reduce) and str(call.args[2].value) not in ("max", "min", "absmax"):
        raise TTUnsupportedError(
            f"T.reduce_{call.args[2].value} into int32 tile buffer {b.name}: int32 tiles compute in "
            f"Float32, exact only below 2^24, and a sum has no bound", construct=describe(stmt),
            source=src, fix="reduce a float32 copy of the values (T.reduce_sum keeps float32 "
                            "precision) and convert where it is stored")
    return [(b, tirx.BufferLoad(a, [0] * len(a.shape)), loops, stmt)]


# The largest magnitude of an integer operand dtype a T.gemm multiplies (-128: an int8 tensor stored as Int8)
_GEMM_OPERAND_MAX = {"int8": 128, "uint8": 255}


def _gemm_bound(call, loops, stmt, src) -> int:
    """The largest magnitude an integer T.gemm's int32 accumulator reaches: K products per call, of operands at most
    their dtype's magnitude, accumulated over every iteration of the loops around it (trip counts known); the FPU
    accumulates in float32, exact below 2^24."""
    a, b = (decode_region(x, src).buffer for x in call.args[:2])
    what = describe(stmt)
    if not all(str(x.dtype) in _GEMM_OPERAND_MAX for x in (a, b)):
        raise TTUnsupportedError(f"an int32 T.gemm accumulator of {a.dtype} x {b.dtype} operands", construct=what,
                                 source=src, fix="multiply int8 / uint8 operands into int32, or float operands into "
                                                 "float32")
    total = int(call.args[7]) * _GEMM_OPERAND_MAX[str(a.dtype)] * _GEMM_OPERAND_MAX[str(b.dtype)]
    for var, (_, extent) in loops.items():
        if not isinstance(extent, tirx.IntImm):
            raise TTUnsupportedError(
                f"an int32 T.gemm accumulator inside the loop over {var.name}, whose trip count is not a constant: "
                "int32 accumulators add up in float32, exact only below 2^24", construct=what, source=src,
                fix="give the loop a constant trip count, or accumulate in float32")
        total *= int(extent)
    if total >= INT_AS_FLOAT_LIMIT:
        raise TTUnsupportedError(
            f"T.gemm of {a.dtype} x {b.dtype} into int32 may add up to {total} in magnitude: TT accumulates in "
            "float32, exact only below 2^24", construct=what, source=src,
            fix="split K so each int32 accumulator sums fewer products (K x 128 x 128 below 2^24 for int8: K below "
                "1024), and add the partial results as float32 or in a second kernel")
    return total


def _reads_tensor(stmt) -> bool:
    found = []
    tirx.stmt_functor.post_order_visit(stmt.value, lambda n: found.append(n) if isinstance(
        n, tirx.BufferLoad) and is_global(n.buffer) else None)
    return bool(found)


def _bound(value, loops, lets, bound, stmt, src) -> int:
    """The largest magnitude ``value`` takes, given the loops' ranges and each int32 tile buffer's bound."""
    analyzer = arith.Analyzer()
    for var, (lo, ext) in loops.items():
        if isinstance(ext, tirx.IntImm):
            analyzer.bind(var, tvm.ir.Range.from_min_extent(lo, ext))
    try:
        return _magnitude(value, analyzer, lets, bound)
    except _Unbounded as e:
        raise TTUnsupportedError(
            f"the int32 value `{e.what}` has no known bound: int32 tiles compute in Float32, exact only below 2^24",
            construct=describe(stmt), source=src,
            fix="store indices, counts and their extrema (values below 2^24); convert other values in float32") \
            from None


def _magnitude(e, analyzer, lets, bound) -> int:
    if isinstance(e, tirx.IntImm):
        return abs(int(e.value))
    if isinstance(e, tirx.FloatImm) and float(e.value).is_integer():
        return abs(int(e.value))
    if isinstance(e, tirx.BufferLoad):
        if is_global(e.buffer) and str(e.buffer.dtype) in INDEX_FORMATS:
            return INT_AS_FLOAT_LIMIT - 1     # an integer tensor compute reads: the call checks its values
        if is_global(e.buffer) or e.buffer.data not in bound and str(e.buffer.dtype) not in TILE_INT_AS_FLOAT:
            raise _Unbounded(str(e))
        return bound.get(e.buffer.data, 0)
    if isinstance(e, tirx.Cast):
        if not str(e.value.dtype).startswith(("int", "uint")):
            raise _Unbounded(str(e))
        return _magnitude(e.value, analyzer, lets, bound)
    if str(e.dtype) == "bool":
        return 1      # a truth value (a comparison, and / or / not, & | ^ of truth values): 1.0 or 0.0
    if isinstance(e, tirx.Select):
        return max(_magnitude(e.true_value, analyzer, lets, bound), _magnitude(e.false_value, analyzer, lets, bound))
    if isinstance(e, tirx.Call) and str(getattr(e.op, "name", "")) == "tirx.if_then_else":
        return max(_magnitude(e.args[1], analyzer, lets, bound), _magnitude(e.args[2], analyzer, lets, bound))
    if isinstance(e, (tirx.Max, tirx.Min)):
        return max(_magnitude(e.a, analyzer, lets, bound), _magnitude(e.b, analyzer, lets, bound))
    loads = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), lambda n: loads.append(n) if isinstance(
        n, (tirx.BufferLoad, tirx.Call)) else None)
    if isinstance(e, (tirx.Add, tirx.Sub)) and loads:
        return _magnitude(e.a, analyzer, lets, bound) + _magnitude(e.b, analyzer, lets, bound)
    if isinstance(e, tirx.Mul) and loads:
        return _magnitude(e.a, analyzer, lets, bound) * _magnitude(e.b, analyzer, lets, bound)
    if loads:
        raise _Unbounded(str(e))
    # index arithmetic of loop and block variables: the analyzer's bound over their ranges
    e = tirx.stmt_functor.substitute(e, lets) if lets else e
    b = analyzer.const_int_bound(e)
    if b.min_value <= -(2 ** 62) or b.max_value >= 2 ** 62:
        raise _Unbounded(str(e))
    return max(abs(int(b.min_value)), abs(int(b.max_value)))
