"""Part of LowerToTTProgram: an ``eltwise(dst_cb, expr)`` tile op becomes TT calls over virtual DST registers.

Per destination tile ``(r, c)``: leaves are unpacked (``copy_tile``) or combined straight from two CBs by
the FPU (``add_tiles``...), unary math runs in place on the SFPU, binary ops between two computed values
use the SFPU binary ops, scalars ``binop_with_scalar``; the value is packed into the destination. An integer (UInt8)
leaf is copied into DST and made a float there (``typecast_tile<UInt8, Float32>``); an integer destination gets
``typecast_tile<Float32, UInt8>`` before the pack (TensorizeTT checked the casts). Every
value is a fresh ``VReg``; AllocateDST assigns the physical slots. The DST-resident accumulator is packed
in place after its (unary) epilogue.
"""

from __future__ import annotations

import math

from tvm import tirx
from tvm.ir import Op as TVMOp

from ..device import CB_INT_FORMATS, TILE, TYPECAST_INT_FORMATS
from ..errors import TTUnsupportedError
from ..intrinsics import CALLS, UNARY_TIR_OPS
from ..ttir import CB, Call, Dst, Lit, Scalar, vreg
from .common import BINARY, buffer_loads, const_value, float_bits, float_lit, is_scalar, loop, strip_cast


_COMPARE = {tirx.GT: "gt", tirx.LT: "lt", tirx.GE: "ge", tirx.LE: "le", tirx.EQ: "eq", tirx.NE: "ne"}
_FLIP = {"gt": "lt", "lt": "gt", "ge": "le", "le": "ge", "eq": "eq", "ne": "ne"}


def _int_format(lw, name: str) -> str | None:
    """The typecast_tile format of the integers in CB ``name`` (UInt8; Int8 for an int8 tile, whose two's-complement
    bytes sit in a UInt8 CB: ``device.TYPECAST_INT_FORMATS``), or None for a float CB."""
    e = lw.cbs[name]
    return TYPECAST_INT_FORMATS[str(e.dtype)] if e.format in CB_INT_FORMATS else None


def _typecast(lw, out: list, v, src: str, dst: str, note: str) -> None:
    """DST[v] converted from format ``src`` to ``dst`` (tt::DataFormat names) in place."""
    args = tuple(Lit(f"static_cast<uint32_t>(DataFormat::{f})") for f in (src, dst))
    out += [Call("typecast_tile_init", args, note), Call("typecast_tile", (*args, v), note)]


def _dtype_bits(dtype: str) -> int:
    return int("".join(ch for ch in dtype.split("_")[0] if ch.isdigit()) or 32)


def rounding_cast(e) -> str | None:
    """How a ``T.Cast`` inside an expression changes its value, which a GPU applies where it stands: "bf16" (rounded
    to nearest even), "trunc" (a float made an int32 / int64: truncated toward zero, saturated), "refused" (float8,
    or a narrower integer: no TT rounding of a value in DST), None (a widening, exact on TT: DST holds float32; and
    float16, which 0.81 cannot round in DST: the value stays unrounded, within float32)."""
    if not isinstance(e, tirx.Cast):
        return None
    dst, src = str(e.dtype), str(e.value.dtype)
    if dst == src or dst in ("float32", "float64", "bool") or src == "bool":
        return None
    src_float = src.startswith(("float", "bfloat"))
    if src in ("int8", "uint8", "int4", "uint4") and dst.startswith(("float", "bfloat")) and _dtype_bits(dst) >= 16:
        return None                  # every 8-bit integer is a bfloat16 / float16
    if dst == "bfloat16":
        return "bf16"
    if dst == "float16":             # no in-DST float16 rounding in 0.81: kept unrounded, more exact (documented)
        return None
    if dst.startswith("float"):      # float8: a quantization, refused rather than skipped
        return "refused"
    if src_float:                    # float -> integer
        return "trunc" if dst in ("int32", "int64") else "refused"
    return None                      # between integer types: integers held in floats stay the same


def _strip_exact(e):
    """``e`` without the casts around it that leave its value unchanged on TT (``rounding_cast`` None)."""
    while isinstance(e, tirx.Cast) and rounding_cast(e) is None:
        e = e.value
    return e


def _exact_const(cast: tirx.Cast) -> bool:
    """Whether the constant under ``cast`` is unchanged by it (``T.bfloat16(1.0)``, ``T.int32(3.0)``):
    ``const_value`` folds a cast with its rounding."""
    value = const_value(cast.value)
    return value is not None and const_value(cast) == value


def _float_format(lw) -> str:
    """The format of a float value in DST: Float32 with fp32 accumulation (always on with integer tiles)."""
    return lw.dst_format().removeprefix("DataFormat::")


def lower_eltwise(lw, d_name: str, expr, note: str) -> list:
    d = lw.cbs[d_name]
    loads = buffer_loads(expr)
    if lw.dst_frag is not None and lw.dst_frag in loads:
        return _copy_out_of_dst(lw, d_name, expr, note)
    rows, cols = d.shape_tiles
    cb_d = CB(d_name)
    reads_dest = d_name in loads
    out = []
    for src in sorted(set(loads) - {d_name}):
        if src in lw.full:
            if not lw.full[src]:
                raise TTUnsupportedError(f"{src} is read before it is written", construct=note, source=lw.src)
            out.append(Call("cb_wait_front", (CB(src), lw.cbs[src].block_tiles), note))
    # A compute-owned fragment rotates tile by tile; a CB bound for the writer (or another consumer) is
    # reserved as a whole block and pushed once.
    frag = d_name in lw.full
    if reads_dest and (not frag or not lw.full[d_name]):
        raise TTUnsupportedError(f"{d_name} is read before it is written", construct=note, source=lw.src)
    first = CB(loads[0]) if loads else cb_d
    second = CB(loads[1]) if len(loads) > 1 else first
    lw.note_startup(Call("hw_startup", (first, second, cb_d)), 1)
    if not frag:
        out.append(Call("cb_reserve_back", (cb_d, rows * cols), note))

    windows = _windows(lw, expr, note, d_name)

    def tile(r, c):
        ev = _Eval(lw, d_name, r, c, reads_dest, note, windows)
        body = [Call("tile_regs_acquire", (), note)]
        value = ev.eval_top(expr, body)
        if _int_format(lw, d_name) and not ev.int_copy:
            _typecast(lw, body, value, _float_format(lw), _int_format(lw, d_name), note)
        body.append(Call("tile_regs_commit", (), note))
        if frag:
            if lw.full[d_name]:
                if not reads_dest:
                    body.append(Call("cb_wait_front", (cb_d, 1), note))
                body.append(Call("cb_pop_front", (cb_d, 1), note))
            return body + lw.pack(cb_d, 1, note, slot=value)
        return body + [Call("tile_regs_wait", (), note), Call("pack_reconfig_data_format", (cb_d,), note),
                       Call("pack_tile", (value, cb_d), note), Call("tile_regs_release", (), note)]

    sh, sw = (d.subblock or (1, 1)) if frag else (1, 1)
    if (sh, sw) in ((1, 1), (1, cols)) or (sh, sw) == (rows, cols):
        out += loop("r", rows, lambda r: loop("c", cols, lambda c: tile(r, c)))
    else:   # a subblocked matmul accumulator rotates in subblock order: visit its tiles in that order
        out += loop("sm", rows // sh, lambda sm: loop("sn", cols // sw, lambda sn: loop(
            "h", sh, lambda h: loop("w", sw, lambda w: tile(sm * sh + h, sn * sw + w)))))
    if not frag:
        out.append(Call("cb_push_back", (cb_d, rows * cols), note))
    else:
        lw.full[d_name] = True
    return out


def _windows(lw, expr, note: str, dest: str) -> dict:
    """Leaves read at a tile-aligned window of a larger fragment (``BufferLoad(frag, [row, col])``, from
    MemorySpaceLowerTT: an origin other than [0, 0], or [0, 0] in a buffer larger than the destination):
    name -> the window's first tile (row, col)."""
    found: dict = {}
    want = lw.cbs[dest].shape

    def visit(n):
        if not isinstance(n, tirx.BufferLoad) or len(n.indices) != 2:
            return
        if all(isinstance(i, tirx.IntImm) and int(i.value) == 0 for i in n.indices):
            have = lw.cbs[n.buffer.name].shape if n.buffer.name in lw.cbs else want
            if all(h >= w for h, w in zip(have, want)) and list(have) != list(want):
                found[n.buffer.name] = (0, 0)
            return
        origin = tuple(lw.expr(tirx.floordiv(i, TILE)) for i in n.indices)
        if n.buffer.name in found and any(not tirx.analysis.expr_deep_equal(a, b)
                                          for a, b in zip(found[n.buffer.name], origin)):
            raise TTUnsupportedError(f"{n.buffer.name} is read at two windows in one expression", construct=note,
                                     source=lw.src)
        found[n.buffer.name] = origin

    tirx.stmt_functor.post_order_visit(tirx.Evaluate(expr), visit)
    return found


class _Eval:
    """Lowers one expression for one tile, appending calls; returns the Dst holding the value."""

    def __init__(self, lw, dest: str, r, c, reads_dest: bool, note: str, windows: dict | None = None,
                 resident: tuple | None = None):
        self.lw, self.dest, self.r, self.c, self.reads_dest, self.note = lw, dest, r, c, reads_dest, note
        self.windows = windows or {}
        self.resident = resident    # (name, Dst): a buffer whose current tile already sits in that DST slot
        self.int_copy = False       # set by eval: the whole expression copies an integer tile (no typecast)

    def eval_top(self, e, out) -> Dst:
        """The value of the whole expression; an integer tile copied into an integer destination stays integer.
        The expression's own conversion to the destination's dtype is the pack's (or the integer typecast's)."""
        dtype = str(self.lw.cbs[self.dest].dtype) if self.dest in self.lw.cbs else None
        while isinstance(e, tirx.Cast) and (rounding_cast(e) is None or str(e.dtype) == dtype):
            e = e.value
        self.int_copy = isinstance(e, tirx.BufferLoad) and bool(_int_format(self.lw, e.buffer.name)) and \
            bool(_int_format(self.lw, self.dest))
        return self.eval(e, out)

    def cast(self, e: tirx.Cast, kind: str, out) -> Dst:
        """A cast inside the expression rounds as a GPU's does where it stands: to bfloat16 with
        ``typecast_tile<Float32, Float16_b>`` (round to nearest even in DST), to an integer by truncation
        (``typecast_tile`` to Int32 and back: toward zero, saturated as a GPU's conversion is)."""
        if kind == "refused" or _float_format(self.lw) != "Float32":
            raise TTUnsupportedError(
                f"`{e}` inside an expression: TT computes the expression in float32 DST and rounds only where it packs "
                f"the result, and has no in-DST conversion to {e.dtype}" + (
                    "" if kind == "refused" else " without fp32 accumulation"),
                construct=self.note, source=self.lw.src,
                fix=f"store the value into a {e.dtype} tile buffer (the pack rounds it) and compute with that buffer")
        v = self.eval(e.value, out)
        if kind == "bf16":
            _typecast(self.lw, out, v, "Float32", "Float16_b", self.note)
        else:
            _typecast(self.lw, out, v, "Float32", "Int32", self.note)
            _typecast(self.lw, out, v, "Int32", "Float32", self.note)
        return v

    def check_scalar_casts(self, s) -> None:
        """A run-time scalar is computed by the RISC-V cores without the casts a GPU rounds at: refused where one
        would change the value (a constant that a cast leaves unchanged, ``T.bfloat16(1.0)``, is fine)."""
        found = []

        def visit(n):
            if rounding_cast(n) is not None and (const_value(n.value) is None or not _exact_const(n)):
                found.append(n)

        tirx.stmt_functor.post_order_visit(tirx.Evaluate(s), visit)
        if found:
            raise TTUnsupportedError(
                f"`{found[0]}` in a scalar operand: TT computes scalars in float32 on the RISC-V cores and would not "
                "round it", construct=self.note, source=self.lw.src,
                fix=f"round the value before the kernel (pass it as {found[0].dtype} of the rounded value, or as "
                    "float32)")

    def index(self, name: str):
        if name == self.dest and self.reads_dest:
            return 0      # the destination's current tile is at its CB front
        if name in self.windows:   # a window of a larger fragment: tile (r, c) of the window
            row, col = self.windows[name]
            return self.lw.queue_pos(name, row + self.r, col + self.c)
        return self.lw.queue_pos(name, self.r, self.c)

    def call(self, out, op, *args):
        out.append(Call(op, args, self.note))

    def unary(self, out, op: str, v, *extra):
        self.call(out, CALLS[op].init)
        self.call(out, op, v, *extra)

    def bcast(self, name: str):
        """How the leaf ``name`` broadcasts over the destination: None (same shape), "rows", "cols", "scalar".

        A one-row (one-column) block sits at some row (column) of its tiles (``tile_offset``: 0, or -1 for a place
        known only per block, as row ``bx % 32``); the FPU broadcasts a tile's first row, first column or first
        element, so a leaf reaches a destination placed elsewhere only from there: a 1x1 leaf over a one-row
        destination at row ``bx % 32`` is a scalar broadcast unless it sits in that row (its column broadcast would
        fill row 0 alone)."""
        R, C = self.lw.cbs[self.dest].shape
        r, c = self.lw.cbs[name].shape
        if name in self.windows:   # a dest-shaped window of a larger fragment (MemorySpaceLowerTT checked it)
            return None
        at = self.lw.cbs[name].tile_offset
        want = self.lw.cbs[self.dest].tile_offset
        if (r, c) == (R, C):
            # a one-row (one-column) block at the top (left) of its tile against one elsewhere in its tile
            # (gamma[j] against the row bx % 32 of x): the FPU broadcasts its first row (column)
            rows = r == 1 and at[0] != want[0]
            cols = c == 1 and at[1] != want[1]
            kind = "scalar" if rows and cols else "rows" if rows else "cols" if cols else None
        elif r == 1 and c == 1:
            # over a one-row destination the leaf's column broadcast fills the leaf's own row: right when that is
            # the destination's row (a row statistic of the same block row), else the value goes to every row
            if R == 1:
                kind = "cols" if at[0] == want[0] else "scalar"
            elif C == 1:
                kind = "rows" if at[1] == want[1] else "scalar"
            else:
                kind = "scalar"
        elif c == 1 and r == R:
            kind = "cols"
        elif r == 1 and c == C:
            kind = "rows"
        else:
            raise TTUnsupportedError(f"{name} of shape {[r, c]} cannot broadcast to {self.dest} of shape {[R, C]}",
                                     construct=self.note, source=self.lw.src)
        if kind in ("rows", "scalar") and at[0] != 0 or kind in ("cols", "scalar") and at[1] != 0:
            raise TTUnsupportedError(
                f"{name} ({r}x{c}) sits at a row or column of its tiles known only per block, and is broadcast over "
                f"{self.dest} ({R}x{C}): TT broadcasts a tile's first row, column or element", construct=self.note,
                source=self.lw.src, fix=f"compute {name} at the top of its block (index it from 0) before combining it")
        return kind

    def leaf_index(self, name: str):
        kind = self.bcast(name)
        if kind is None:
            return self.index(name)
        r = 0 if kind in ("rows", "scalar") else self.r
        c = 0 if kind in ("cols", "scalar") else self.c
        return self.lw.queue_pos(name, r, c)

    def fill(self, out, s) -> Dst:
        self.check_scalar_casts(s)
        v = vreg()
        value = const_value(s)
        if value is None and self.float_param(s):
            self.unary(out, "fill_tile_bitcast", v, Scalar(self.lw.expr(strip_cast(s)), raw=True))
            return v
        self.unary(out, "fill_tile", v, float_lit(value) if value is not None else Scalar(self.runtime(s), bits=False))
        return v

    @staticmethod
    def float_param(s) -> bool:
        """A float variable: a float kernel parameter or a float tensor element read as a scalar, which arrive as
        the bits of their float32 value."""
        s = strip_cast(s)
        return isinstance(s, tirx.Var) and str(s.dtype) in ("float16", "bfloat16", "float32")

    def runtime(self, s):
        """A run-time scalar as an integer expression of the kernel's (renamed) variables."""
        return self.lw.expr(strip_cast(s))

    def bits(self, s):
        """A scalar operand of an SFPU op: its fp32 bits, written out or computed at run time."""
        self.check_scalar_casts(s)
        value = const_value(s)
        if value is None and self.float_param(s):     # a float32 kernel parameter arrives as its bits
            return Scalar(self.lw.expr(strip_cast(s)), raw=True)
        return float_bits(value) if value is not None else Scalar(self.runtime(s))

    def eval(self, e, out) -> Dst:
        """The DST slot holding the value of ``e`` for this tile, computed by the calls appended to ``out``."""
        kind = rounding_cast(e)
        if kind == "trunc" and isinstance(e.value, tirx.BufferLoad) and str(
                self.lw.cbs[e.value.buffer.name].constant or "").startswith("index"):
            return self.eval(e.value, out)      # an index tile holds integers
        if kind == "refused" and isinstance(_strip_exact(e.value), tirx.BufferLoad):
            return self.eval(e.value, out)      # a tile value converted to float8 on the spot: unrounded
        if kind is not None and not is_scalar(e):
            return self.cast(e, kind, out)
        if isinstance(e, tirx.Cast) and not is_scalar(e):
            return self.eval(e.value, out)      # a cast that keeps the value (its operand may round)
        if self.resident is not None and isinstance(e, tirx.BufferLoad) and e.buffer.name == self.resident[0]:
            return self.resident[1]
        if is_scalar(e):
            if self.resident is not None:   # a constant tile needs a DST slot the resident block holds
                raise TTUnsupportedError(f"the constant `{e}` is used as a tile in an epilogue on {self.resident[0]}",
                                         construct=self.note, source=self.lw.src,
                                         fix=f"copy {self.resident[0]} to a fragment first and apply this in a "
                                             f"separate T.Parallel")
            return self.fill(out, e)
        if isinstance(e, tirx.BufferLoad) and str(self.lw.cbs[e.buffer.name].constant or "").startswith("index"):
            return self.index_value(e, out)
        if isinstance(e, tirx.BufferLoad):
            return self.load(e, out)
        if isinstance(e, tirx.Call) and isinstance(e.op, TVMOp):
            v = self.math_call(e, out)
            if v is not None:
                return v
        if isinstance(e, tirx.Select):
            return self.select(e.condition, e.true_value, e.false_value, out)
        if isinstance(e, (tirx.Max, tirx.Min)):
            return self.minmax(e, out)
        if isinstance(e, tuple(_COMPARE)):
            return self.compare(e, out)
        if isinstance(e, tuple(BINARY)):
            return self.binary(e, out)
        if isinstance(e, tirx.FloorDiv):
            return self.floor_div(e, out)
        raise TTUnsupportedError(f"cannot evaluate {type(e).__name__} `{e}` on TT tiles", construct=str(e),
                                 source=self.lw.src)

    def floor_div(self, e: tirx.FloorDiv, out) -> Dst:
        """``a // c`` of integers by a positive constant (TensorizeTT checked it): with a = k c + r, 0 <= r < c,
        y = (a + 0.5) / c lies strictly inside (k, k + 1), so rounding cannot carry it across an integer (|a| <
        2^22). t = trunc(y) (typecast_tile to Int32 and back, exact) is k for y > 0 and k + 1 for y < 0: the result
        is t - (y < t)."""
        def quotient():
            v = self.eval(e.a, out)
            self.unary(out, "add_unary_tile", v, float_bits(0.5))
            self.unary(out, "mul_unary_tile", v, float_bits(1.0 / int(e.b.value)))
            return v

        y, t = quotient(), quotient()
        _typecast(self.lw, out, t, "Float32", "Int32", self.note)
        _typecast(self.lw, out, t, "Int32", "Float32", self.note)
        self.call(out, "sub_binary_tile_init")
        self.call(out, "sub_binary_tile", y, t)        # y - t < 0 exactly when y < t
        self.unary(out, "unary_lt_tile", y, float_bits(0.0))
        self.call(out, "sub_binary_tile_init")
        self.call(out, "sub_binary_tile", t, y)
        return t

    def index_value(self, e: tirx.BufferLoad, out) -> Dst:
        """A loop variable as a value: the index tile plus this tile's offset (32 per tile row / column)."""
        axis = int(self.lw.cbs[e.buffer.name].constant[-1])
        cb, v = CB(e.buffer.name), vreg()
        self.call(out, "reconfig_data_format_srca", cb)
        self.call(out, "copy_init", cb)
        self.call(out, "copy_tile", cb, 0, v)
        offset = (self.r, self.c)[axis]
        if not (isinstance(offset, (int, tirx.IntImm)) and int(offset) == 0):
            self.unary(out, "add_unary_tile", v, Scalar(offset * 32))
        return v

    def load(self, e: tirx.BufferLoad, out) -> Dst:
        """A leaf tile copied into DST: broadcast from a vector tile, or copied (an integer tile made a float)."""
        name = e.buffer.name
        cb = CB(name)
        if name == self.dest and self.reads_dest:
            self.call(out, "cb_wait_front", cb, 1)
        v = vreg()
        kind = self.bcast(name)
        if kind is not None and _int_format(self.lw, name):
            raise TTUnsupportedError(f"{name} ({self.lw.cbs[name].dtype}) is broadcast over "
                                     f"{self.dest}: integer tiles are not broadcast on TT", construct=self.note,
                                     source=self.lw.src, fix=f"cast {name} to a float dtype in a T.Parallel of "
                                     "its own shape first, then broadcast that buffer")
        if kind is not None:      # a vector tile spread over the whole tile (unpacked through SrcB)
            self.call(out, "reconfig_data_format", cb, cb)
            self.call(out, f"unary_bcast_init_{kind}", cb)
            self.call(out, f"unary_bcast_{kind}", cb, self.leaf_index(name), v)
            self.call(out, f"unary_bcast_uninit_{kind}", cb)
            return v
        self.call(out, "reconfig_data_format_srca", cb)
        self.call(out, "copy_init", cb)
        self.call(out, "copy_tile", cb, self.index(name), v)
        if _int_format(self.lw, name) and not self.int_copy:   # DST holds the integers: make them floats
            _typecast(self.lw, out, v, _int_format(self.lw, name), _float_format(self.lw), self.note)
        return v

    def math_call(self, e: tirx.Call, out) -> Dst | None:
        """A math call (the unary TIR ops, ``log2``, ``pow``, ``if_then_else``, ``T.clamp``), or None for another op."""
        name = str(e.op.name)
        if name in UNARY_TIR_OPS:
            v = self.eval(e.args[0], out)
            self.unary(out, UNARY_TIR_OPS[name], v)
            return v
        if name == "tirx.log2":
            v = self.eval(e.args[0], out)
            self.unary(out, "log_tile", v)
            self.unary(out, "mul_unary_tile", v, float_bits(1.0 / math.log(2.0)))
            return v
        if name == "tirx.pow":
            return self.power(e.args[0], float(strip_cast(e.args[1]).value), out)
        if name == "tirx.if_then_else":
            return self.select(e.args[0], e.args[1], e.args[2], out)
        if name == "tl.clamp":
            v = self.eval(e.args[0], out)
            lo, hi = (float(strip_cast(a).value) for a in e.args[1:3])
            self.unary(out, "clamp_tile", v, float_bits(lo), float_bits(hi))
            return v
        return None

    def exact_fp32(self, a, b) -> bool:
        """An op between two Float32 CBs (either one Float32) with fp32 DST: the FPU would see the operands as TF32
        (SrcA/SrcB are 19 bits wide), the SFPU binary op on copies unpacked to DST computes in fp32 (compute_config
        gives those CBs UnpackToDestFp32). ``allow_tf32`` opts out: the FPU ops, faster, with TF32 operands."""
        if not self.lw.fp32_acc or self.lw.allow_tf32:   # allow_tf32: the FPU, operands as TF32 (opt-in)
            return False
        return any(isinstance(x, tirx.BufferLoad) and self.lw.cbs[x.buffer.name].format == "Float32"
                   for x in (a, b))

    def power(self, x, p: float, out) -> Dst:
        v = self.eval(x, out)
        if p == int(p) and p >= 0:
            self.unary(out, "power_tile", v, float_bits(p))
        elif p == 0.5:
            self.unary(out, "sqrt_tile", v)
        elif p == -0.5:
            self.unary(out, "rsqrt_tile", v)
        elif p == int(p):
            self.unary(out, "power_tile", v, float_bits(-p))
            self.unary(out, "recip_tile", v)
        else:                                   # x ** p = exp(p * log(x))
            self.unary(out, "log_tile", v)
            self.unary(out, "mul_unary_tile", v, float_bits(p))
            self.unary(out, "exp_tile", v)
        return v

    def select(self, cond, t, f, out) -> Dst:
        vc = self.eval(cond, out)
        vt = self.eval(t, out)
        vf = self.eval(f, out)
        self.call(out, "where_tile_init")
        self.call(out, "where_tile", vc, vt, vf, Lit(self.lw.dst_format()))
        return vt

    def minmax(self, e, out) -> Dst:
        a, b = _strip_exact(e.a), _strip_exact(e.b)
        op = "max" if isinstance(e, tirx.Max) else "min"
        if is_scalar(a) or is_scalar(b):
            x, s = (b, a) if is_scalar(a) else (a, b)
            v = self.eval(x, out)
            if op == "max" and const_value(s) == 0.0:
                self.unary(out, "relu_tile", v)
            else:
                self.unary(out, f"unary_{op}_tile", v, self.bits(s))
            return v
        va, vb = self.eval(a, out), self.eval(b, out)
        self.call(out, f"binary_{op}_tile_init")
        self.call(out, f"binary_{op}_tile", va, vb)
        return va

    def compare(self, e, out) -> Dst:
        a, b = _strip_exact(e.a), _strip_exact(e.b)
        cmp = _COMPARE[type(e)]
        if is_scalar(a) and is_scalar(b) and const_value(a) is not None and const_value(b) is not None:
            raise TTUnsupportedError(f"a comparison of two constants `{e}`", construct=self.note, source=self.lw.src)
        if is_scalar(a) and is_scalar(b):     # run-time scalars (a tensor element against 0): the first fills a tile
            v = self.fill(out, a) if const_value(a) is None else self.fill(out, b)
            if const_value(a) is not None:
                cmp = _FLIP[cmp]
            self.unary(out, f"unary_{cmp}_tile", v, self.bits(b if const_value(a) is None else a))
            return v
        if is_scalar(a) or is_scalar(b):
            if is_scalar(a):        # s < x  <=>  x > s
                a, b, cmp = b, a, _FLIP[cmp]
            v = self.eval(a, out)
            self.unary(out, f"unary_{cmp}_tile", v, self.bits(b))
            return v
        va, vb = self.eval(a, out), self.eval(b, out)
        self.call(out, f"{cmp}_binary_tile_init")
        self.call(out, f"{cmp}_binary_tile", va, vb)
        return va

    def binary(self, e, out) -> Dst:
        a, b = _strip_exact(e.a), _strip_exact(e.b)
        kind = BINARY[type(e)]
        if is_scalar(a) or is_scalar(b):
            scalar_first = is_scalar(a)
            x, s = (b, a) if scalar_first else (a, b)
            if is_scalar(x):    # two run-time scalars (tensor elements): the first fills a tile, the second operates
                v = self.fill(out, a)
                self.unary(out, f"{kind}_unary_tile", v, self.bits(b))
                return v
            v = self.eval(x, out)
            if scalar_first and kind == "sub":
                self.unary(out, "rsub_unary_tile", v, self.bits(s))
            elif scalar_first and kind == "div":      # s / x = recip(x) * s
                self.unary(out, "recip_tile", v)
                if const_value(s) != 1.0:
                    self.unary(out, "mul_unary_tile", v, self.bits(s))
            else:
                self.unary(out, f"{kind}_unary_tile", v, self.bits(s))
            return v
        dest_read = self.dest in (getattr(a, "buffer", None) and a.buffer.name,
                                  getattr(b, "buffer", None) and b.buffer.name) and self.reads_dest
        if self.exact_fp32(a, b):
            dest_read = True   # not through the FPU: copy_tile both (unpack-to-DEST) and the SFPU binary below
        if any(isinstance(x, tirx.BufferLoad) and _int_format(self.lw, x.buffer.name) for x in (a, b)):
            dest_read = True   # an integer tile becomes a float in DST (typecast), never an FPU operand
        if isinstance(a, tirx.BufferLoad) and isinstance(b, tirx.BufferLoad) and kind != "div" and not dest_read:
            ka, kb = self.bcast(a.buffer.name), self.bcast(b.buffer.name)
            if ka is not None and kb is None and kind in ("add", "mul"):
                a, b, ka, kb = b, a, kb, ka
            if ka is None and kb is not None:     # x op vector: the FPU broadcasts operand B
                ca, cb = CB(a.buffer.name), CB(b.buffer.name)
                v = vreg()
                self.call(out, "reconfig_data_format", ca, cb)
                self.call(out, f"{kind}_bcast_{kb}_init", ca, cb)
                self.call(out, f"{kind}_tiles_bcast_{kb}", ca, cb, self.index(a.buffer.name),
                          self.leaf_index(b.buffer.name), v)
                return v
        if isinstance(a, tirx.BufferLoad) and isinstance(b, tirx.BufferLoad) and kind != "div" and not dest_read \
                and self.bcast(a.buffer.name) is None and self.bcast(b.buffer.name) is None:
            ca, cb = CB(a.buffer.name), CB(b.buffer.name)
            v = vreg()
            self.call(out, "reconfig_data_format", ca, cb)
            self.call(out, f"{kind}_init", ca, cb)
            self.call(out, f"{kind}_tiles", ca, cb, self.index(a.buffer.name), self.index(b.buffer.name), v)
            return v
        va = self.eval(a, out)
        vb = self.eval(b, out)
        self.call(out, f"{kind}_binary_tile_init")
        self.call(out, f"{kind}_binary_tile", va, vb)
        return va



def _copy_out_of_dst(lw, d_name: str, expr, note: str) -> list:
    """The DST-resident accumulator is packed (after an optional epilogue of unary and scalar ops) into ``d_name``.

    The accumulator's tiles occupy DST[0..n): the epilogue runs in place on each, reading the accumulator once
    and no other tile."""
    n = lw.cbs[lw.dst_frag].block_tiles
    # TensorizeTT keeps an accumulator in DST only when its copy-out reads it alone (tensorize._unary_of); an
    # epilogue needing a filled constant tile is refused by _Eval, which has no free slot to fill it in
    chain = not isinstance(strip_cast(expr), tirx.BufferLoad)

    def epilogue(i):
        out = []
        _Eval(lw, d_name, 0, 0, False, note, resident=(lw.dst_frag, Dst(i))).eval(strip_cast(expr), out)
        return out

    if _int_format(lw, d_name):
        def typecast(i):
            out = epilogue(i)
            _typecast(lw, out, Dst(i), _float_format(lw), _int_format(lw, d_name), note)
            return out
        body = loop("i", n, typecast)
    else:
        body = loop("i", n, epilogue) if chain else []
    return body + [Call("tile_regs_commit", (), note)] + lw.pack(CB(d_name), n, note)
