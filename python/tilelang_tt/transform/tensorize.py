"""TensorizeTT: tile operators and T.Parallel bodies become TT tile intrinsics.

In:  a PrimFunc after MemorySpaceLowerTT (``tt.cb`` present; remaining ``tl.tileop.fill`` / ``gemm`` calls
     (``transpose_A`` already an on-chip ``transpose``), ``reduce`` ops and ``T.Parallel`` nests over tile
     buffers).
Out: ``T.clear``/``T.fill`` -> ``tilelang_tt.fill``; ``T.gemm`` -> ``tilelang_tt.matmul`` (blocks of any
     multiple of 32; ``transpose_B`` via the in1 transpose of ``matmul_init``); each ``T.Parallel`` nest ->
     ``tilelang_tt.eltwise(dst_cb, expr)`` whose leaves are ``BufferLoad(tile buffer, [0, 0])`` and scalars (an
     expression needing more DST slots than the device has first computes its largest part that fits into a
     compute-owned ``<dst>_spillN`` CB, Float32 with a 32-bit DST, by an eltwise of its own: ``spill``);
     ``reduce`` gets the reduce scaler CB and, for min / abs kinds, a compute scratch CB, unless it takes the exact
     fp32 SFPU path (``compute_config.exact_reduce``: Float32 data, fp32 DST, ``allow_tf32`` off), which needs neither.
Attributes written: ``tt.tensorized`` = True; in ``tt.cb``, each fragment gets ``residency`` ("dst": the
     accumulator stays in DST across the K loop, as tt-metal's bmm does; "cb": it lives in its
     intermediate CB and is processed in ``subblock`` = [h, w] pieces that fit DST, re-packed for every K
     step, as tt-metal's reuse matmul does); for every matmul accumulator
     ``accumulate``: "dst" (DST resident), "packer_l1" (CB resident, the packer adds each K step's subblock to
     its tile in L1: tt-metal's PACKER_L1_ACC; ``tt.compute``'s packer_l1_acc allows it) or "reload" (CB
     resident, copied back into DST every K step); ``tt.compute``'s fp32_dest_acc.
Integer tiles (``device.CB_INT_FORMATS``, uint8): DST must be 32-bit (``fp32_dest_acc`` forced on; refused when
     the user turned it off); a T.Parallel reads a uint8 tile only directly under a cast to a float dtype and writes
     one only as ``T.Cast("uint8", float expression)`` (LowerToTTProgram emits the ``typecast_tile`` pair).
Errors (TTUnsupportedError): gemm shapes that do not agree; ``clear_accum`` on a
     fragment that is not DST resident; elementwise operators with no TT intrinsic; no CB left for a spill;
     a uint8 tile read other than under a float cast, written other than as
     a cast of a float value, or used by T.gemm / a reduction; uint8 with ``fp32_dest_acc=False``.
"""

from __future__ import annotations

from tvm import tirx
from tvm.ir import Op

from .. import attrs, records
from ..device import CB_INT_FORMATS, TILE_INT_AS_FLOAT, DeviceProfile
from ..errors import TTResourceError, TTUnsupportedError
from ..compute_config import dst_holds_fp32, exact_reduce
from ..formats import data_format
from ..intrinsics import UNARY_TIR_OPS, TTOps, call, tt_op_of
from .common import SCALER, is_scalar, strip_cast, visit as walk, TileOps, const_value, decode_region, describe, tilelang_text, prim_func_pass, source_of, tile_op_call, tile_shape_2d, static_shape

_COMPARISONS = (tirx.EQ, tirx.NE, tirx.LT, tirx.LE, tirx.GT, tirx.GE)


def _int_loads(expr, is_int) -> list:
    found = []
    walk(tirx.Evaluate(expr), lambda n: found.append(n) if is_int(n) else None)
    return found


def index_division(e) -> bool:
    """``a // c`` of integers by a positive integer constant (``i // 8``: the block of a row in a mask)."""
    return str(e.dtype).startswith("int") and isinstance(e.b, tirx.IntImm) and int(e.b.value) > 0


def expand_floormod(expr):
    """``a % c`` of integers by a positive constant as ``a - (a // c) * c``, which the SFPU computes exactly."""
    def post(node):
        if isinstance(node, tirx.FloorMod) and index_division(node):
            return node.a - tirx.FloorDiv(node.a, node.b) * node.b
        return None

    return tirx.stmt_functor.ir_transform(tirx.Evaluate(expr), None, post, ["tirx.FloorMod"]).value


def dst_slots(expr) -> int:
    """DST slots an expression needs when evaluated tile by tile (Sethi-Ullman: an upper bound of what
    AllocateDST assigns)."""
    e = strip_cast(expr)
    if isinstance(e, tirx.BufferLoad):
        return 1
    if is_scalar(e):
        return 0
    # operands are evaluated left to right, each earlier value staying live (a scalar operand of a select
    # is filled into a slot of its own)
    select = isinstance(e, tirx.Select) or isinstance(e, tirx.Call) and str(getattr(e.op, "name", "")) == \
        "tirx.if_then_else"
    operands = [x for x in _operands(e) if select or not is_scalar(x)]
    if isinstance(e, tirx.FloorDiv):     # the quotient is computed twice (LowerEltwise.floor_div)
        return dst_slots(e.a) + 1
    if isinstance(e, tirx.Call) and str(getattr(e.op, "name", "")) in ("tirx.pow", "tl.clamp"):
        operands = operands[:1]
    if not operands:
        return 1
    return max(1, max(max(dst_slots(x), 1 if select else 0) + i for i, x in enumerate(operands)))


def _operands(e):
    if isinstance(e, tirx.Call):
        return list(e.args)
    if isinstance(e, tirx.Select):
        return [e.condition, e.true_value, e.false_value]
    if isinstance(e, tirx.Not):
        return [e.a]
    return [e.a, e.b]


class _Tensorizer:
    def __init__(self, func: tirx.PrimFunc, device: DeviceProfile):
        self.func = func
        self.src = source_of(func)
        self.device = device
        self.cb = records.cbs(func)
        self.spill_cbs: list[str] = []       # spill CBs made so far, reused by later statements (``spill``)
        self.spilled_now: set[str] = set()   # those the statement being lowered uses
        config = records.compute(func)
        chosen = config.fp32_dest_acc if config is not None else None
        self.fp32_acc = dst_holds_fp32(self.cb.values(), func.body, config)
        # an integer tile reaches DST as 32-bit integers: the LLK asserts fp32_dest_acc_en when the unpacker or
        # math is configured for Int8/UInt8/Int32 (llk_unpack_common.h, llk_math_common.h in 0.81.1)
        ints = sorted(k for k, v in self.cb.items() if self.is_int(k) and "compute" in
                      list(v.producer) + list(v.consumer))
        if ints and chosen is False:
            raise TTUnsupportedError(
                f"fp32_dest_acc=False with the integer tile buffer {ints[0]} ({self.cb[ints[0]].format}) in "
                f"compute: TT moves integer tiles through DST as 32-bit values, which needs fp32 DST accumulation",
                construct="T.annotate_tt_compute(fp32_dest_acc=False)", source=self.src,
                fix="drop fp32_dest_acc=False, or cast the data to a float dtype before the kernel")
        # float32 reductions on the FPU (TF32 operands) only when allowed (compute_config.exact_reduce)
        self.allow_tf32 = bool(config.allow_tf32) if config is not None else False
        self.cap = device.dst_capacity(self.fp32_acc)
        self.ops: list[tuple] = []      # (kind, frag name or None, loop path, extra) in program order

    def index(self, buf):
        if buf.name not in self.cb:
            raise TTUnsupportedError(f"{buf.name} is not a tile buffer", construct=buf.name, source=self.src)
        return self.cb[buf.name].index

    def is_int(self, name: str) -> bool:
        return name in self.cb and self.cb[name].format in CB_INT_FORMATS

    def check_int_tiles(self, dst: str, expr, what):
        """uint8 tiles in a T.Parallel: read only as ``T.Cast(float, x[i, j])`` (typecast_tile<UInt8, Float32> after
        the copy into DST), written only as ``T.Cast("uint8", float value)`` (typecast_tile<Float32, UInt8>) or
        copied whole from a tile of the same format."""
        def int_load(e):
            return isinstance(e, tirx.BufferLoad) and self.is_int(e.buffer.name)

        if int_load(expr) and self.is_int(dst) and self.cb[expr.buffer.name].format == self.cb[dst].format:
            return      # a copy (T.copy out of a fragment): the integers go through DST unchanged

        dtypes = sorted({self.cb[n.buffer.name].dtype for n in _int_loads(expr, int_load)})
        fix_read = (f"cast the {'/'.join(dtypes) or 'integer'} value to a float dtype where it is read "
                    "(T.Cast(\"float32\", A_s[i, j]) or A_s[i, j].astype(\"bfloat16\")) and do the arithmetic in "
                    "that dtype" + ("; compare an int32 tensor's value directly (Idx[i] <= q)" if "int32" in dtypes
                                    else ""))

        casts, loads = [], []     # uint8 loads under a cast (or compared: int32 tensor values), every uint8 load
        walk(tirx.Evaluate(expr), lambda n: casts.append(n) if isinstance(n, tirx.Cast) and int_load(n.value)
             else casts.extend(self.compared_indices(n)) if isinstance(n, _COMPARISONS)
             else casts.append(tirx.Cast("float32", n)) if self.tensor_int(n) and str(n.dtype) == "bool"
             else loads.append(n) if int_load(n) else None)
        if int_load(expr) and self.cb[expr.buffer.name].dtype in TILE_INT_AS_FLOAT and \
                self.cb[dst].dtype in TILE_INT_AS_FLOAT:
            return      # an int32 tensor's values (below 2^24, checked at the call) into an int32 / bool fragment
        compared = []       # `Mask[i, j] != 0`: TileLang widens the uint8 to int32 to compare; exact as a float
        walk(tirx.Evaluate(expr), lambda n: compared.extend(
            x for x in (n.a, n.b) if isinstance(x, tirx.Cast) and int_load(x.value)) if isinstance(n, _COMPARISONS)
            else None)
        for c in casts:
            if any(c.same_as(x) for x in compared):
                continue
            if not str(c.dtype).startswith(("float", "bfloat")):
                raise TTUnsupportedError(
                    f"{c.value.buffer.name} ({c.value.buffer.dtype}) is cast to {c.dtype}: TT converts integer "
                    f"tiles to and from floats only (typecast_tile)", construct=what, source=self.src, fix=fix_read)
        for n in loads:
            if not any(c.value.same_as(n) for c in casts):
                raise TTUnsupportedError(
                    f"{n.buffer.name} ({n.buffer.dtype}) is read in integer arithmetic: TT's tile math is float; an "
                    f"integer tile is read only as a cast to a float dtype (or, an int32 tensor's, compared)",
                    construct=what, source=self.src,
                    fix=fix_read + "; packed sub-byte weights are unpacked on the host when written in TileLang's "
                    "(B_shared[i, j // 2] >> (4 * (j % 2))) & 15 form")

        if self.is_int(dst) and self.cb[dst].dtype in TILE_INT_AS_FLOAT:
            return      # an int32 tensor's values, computed in Float32 (bounded below 2^24: int_range.py)
        if self.is_int(dst):
            if not (isinstance(expr, tirx.Cast) and str(expr.dtype) == self.cb[dst].dtype
                    and str(expr.value.dtype).startswith(("float", "bfloat"))):
                raise TTUnsupportedError(
                    f"{dst} ({self.cb[dst].dtype}) is written with `{expr}`: a uint8 tile is written only as the "
                    f"cast of a float value (typecast_tile<Float32, UInt8>: truncation toward zero, modulo 256)",
                    construct=what, source=self.src,
                    fix=f"write {dst}[i, j] = T.Cast(\"{self.cb[dst].dtype}\", <float expression>); copy uint8 "
                        f"data unchanged with T.copy")

    def compared_indices(self, cmp) -> list:
        """The operands of comparison ``cmp`` that are int32 tensor values (an Int32 CB: TT reads them into DST and
        makes them floats, exact because the call checks they are below 2^24), as the casts that stand for them;
        a comparison of exact integers in float32 is exact."""
        return [tirx.Cast("float32", x) for x in (cmp.a, cmp.b) if self.tensor_int(x)]

    def tensor_int(self, e) -> bool:
        """A load of an int32 / bool tensor's tile (an Int32 CB compute reads as floats)."""
        return isinstance(e, tirx.BufferLoad) and self.is_int(e.buffer.name) and \
            self.cb[e.buffer.name].dtype in TILE_INT_AS_FLOAT

    def check_expr(self, expr, what, dst: str | None = None):
        if dst is not None:
            self.check_int_tiles(dst, expr, what)

        def visit(node):
            if isinstance(node, tirx.Call):
                name = str(node.op.name) if isinstance(node.op, Op) else ""
                if name == "tirx.if_then_else" or is_scalar(node):    # is_scalar: a tensor element (index_load)
                    return
                if name == "tl.clamp":
                    if not (is_scalar(node.args[1]) and is_scalar(node.args[2])):
                        raise TTUnsupportedError("T.clamp with bounds that are not constants", construct=what,
                                                 source=self.src, fix="use T.max(T.min(x, hi), lo)")
                    return
                if name == "tirx.pow":
                    if not is_scalar(node.args[1]):
                        raise TTUnsupportedError("a power whose exponent is not a constant", construct=what,
                                                 source=self.src, fix="use a constant exponent, or T.exp2(y * T.log2(x))")
                    return
                if name not in UNARY_TIR_OPS and name != "tirx.log2":
                    raise TTUnsupportedError(f"elementwise function {name or node.op} has no TT tile intrinsic",
                                             construct=what, source=self.src,
                                             fix=f"supported: + - * /, min/max/clamp, comparisons, T.if_then_else, "
                                                 f"constant powers, {sorted(UNARY_TIR_OPS) + ['tirx.log2']}")
            elif isinstance(node, tirx.FloorDiv) and not is_scalar(node) and index_division(node) and self.fp32_acc:
                return      # LowerEltwise.floor_div: typecast_tile to Int32 and back needs a 32-bit DST, which the
                # index tiles' Float32 CBs turn on (with DST 16-bit, the refusal below)
            elif isinstance(node, (tirx.FloorDiv, tirx.FloorMod, tirx.Mod)) and not is_scalar(node):
                # integer division of block values (by % 32) is a run-time scalar; of tile values, no TT op
                raise TTUnsupportedError(f"operator {type(node).__name__} in an elementwise body", construct=what,
                                         source=self.src, fix="TT tiles compute with float arithmetic, comparisons "
                                                              "and selects")
            elif isinstance(node, tirx.Var) and node.dtype.startswith(("float", "bfloat")) and \
                    not any(node.same_as(p) for p in self.func.params):
                raise TTUnsupportedError(f"{node.name}, a float value the kernel body computes at block level, is "
                                         "used in an elementwise body: the compute kernel has no float registers for "
                                         "block values", construct=what, source=self.src,
                                         fix="read it in the T.Parallel from a tensor element or from a tile-buffer "
                                             "element at a constant place, or compute it into a fragment (T.Parallel, "
                                             "T.reduce) and index that fragment in the nest")

        walk(tirx.Evaluate(expr), visit)
        need = dst_slots(expr)
        if need > self.cap:
            raise TTUnsupportedError(f"the expression needs {need} DST tiles, more than the {self.cap} available",
                                     construct=what, source=self.src, fix="split the expression over two T.Parallel loops")

    def run(self, stmt, path=()):
        if isinstance(stmt, tirx.SeqStmt):
            return tirx.SeqStmt([self.run(s, path) for s in stmt.seq])
        if isinstance(stmt, tirx.For):
            if stmt.kind == tirx.ForKind.PARALLEL:
                return self.parallel(stmt, path)
            return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, self.run(stmt.body, path + (stmt,)),
                            None, stmt.annotations)
        c = tile_op_call(stmt)
        if c is not None and c.op.same_as(TileOps.fill):
            dst = decode_region(c.args[0], self.src)
            self.ops.append(("fill", dst.buffer.name, path, None))
            value = const_value(c.args[1])
            if value is None:
                self._bad(stmt, "T.fill with a non-constant value")
            return call(TTOps.fill, self.index(dst.buffer), tirx.FloatImm("float32", value), note=tilelang_text(stmt))
        if c is not None and c.op.same_as(TileOps.gemm):
            return self.gemm(stmt, c, path)
        found = tt_op_of(stmt)
        if found is not None and (found[0].same_as(TTOps.transpose) or found[0].same_as(TTOps.insert_window)):
            self.ops.append(("transpose", None, path, None))   # it acquires DST: no accumulator may span it
            return stmt
        if found is not None and found[0].same_as(TTOps.reduce):
            return self.reduce(stmt, found[1], path)
        if found is not None and found[0].same_as(TTOps.eltwise):
            dst_name = next(k for k, v in self.cb.items() if v.index == int(found[1].args[0]))
            self.check_expr(found[1].args[1], describe(stmt), dst_name)
            self.ops.append(("eltwise", dst_name, path, found[1].args[1]))
        return stmt

    def _bad(self, stmt, what):
        raise TTUnsupportedError(what, construct=describe(stmt), source=self.src)

    def gemm(self, stmt, c, path):
        what = describe(stmt)
        a, b, cc = (decode_region(c.args[i], self.src) for i in range(3))
        trans_b = bool(c.args[4])      # transpose_A was made an on-chip transpose by MemorySpaceLowerTT
        if len(c.args) > 10 and not (isinstance(c.args[10], tirx.IntImm) and int(c.args[10]) == 0):
            raise TTUnsupportedError("T.gemm(mbar=...): asynchronous (barrier-tracked) gemm has no TT lowering",
                                     construct=what, source=self.src, fix="drop mbar=; TT matmuls are synchronous")
        if c.annotations and len(c.annotations) > 0:
            raise TTUnsupportedError(f"T.gemm annotations {sorted(str(k) for k in c.annotations)} are not supported "
                                     "on TT", construct=what, source=self.src, fix="drop annotations=")
        for x in (a, b):
            if self.is_int(x.buffer.name):
                raise TTUnsupportedError(
                    f"T.gemm reads {x.buffer.name} ({x.buffer.dtype}): the TT matmul multiplies float tiles",
                    construct=what, source=self.src,
                    fix=f"dequantize first: a T.Parallel writing a float tile buffer with "
                        f"T.Cast(\"bfloat16\", {x.buffer.name}[i, j]) (minus zero point, times scale), then T.gemm on it")
        am, ak = tile_shape_2d(static_shape(a.buffer))
        bk, bn = tile_shape_2d(static_shape(b.buffer))
        if trans_b:
            bk, bn = bn, bk
        cm, cn = tile_shape_2d(static_shape(cc.buffer))
        if ak != bk or am != cm or bn != cn:
            raise TTUnsupportedError(f"gemm shapes disagree: A {am}x{ak}, B {bk}x{bn}, C {cm}x{cn} tiles",
                                     construct=what, source=self.src)
        clear = len(c.args) > 9 and bool(c.args[9])
        if self.cb[cc.buffer.name].role != "intermediate":
            raise TTUnsupportedError(f"gemm accumulates into {cc.buffer.name}, which is not a fragment",
                                     construct=what, source=self.src, fix="accumulate into T.alloc_fragment")
        note = f"T.gemm({a.buffer.name}, {b.buffer.name}, {cc.buffer.name}{', transpose_B=True' if trans_b else ''}" \
               f"{', clear_accum=True' if clear else ''})"
        out = [call(TTOps.matmul, self.index(a.buffer), self.index(b.buffer), self.index(cc.buffer), False, trans_b,
                    note=note)]
        if clear:
            self.ops.append(("fill", cc.buffer.name, path, None))
            out.insert(0, call(TTOps.fill, self.index(cc.buffer), tirx.FloatImm("float32", 0.0), note=note))
        self.ops.append(("matmul", cc.buffer.name, path, None))
        return out[0] if len(out) == 1 else tirx.SeqStmt(out)

    def reduce(self, stmt, c, path):
        """``reduce(src, dst, kind, dim, clear)``: abs / min reductions get a compute scratch CB holding |src|
        or -src (``reduce`` then runs a SUM or MAX over it and negates the result for min)."""
        src = next(k for k, v in self.cb.items() if v.index == int(c.args[0]))
        dst = next(k for k, v in self.cb.items() if v.index == int(c.args[1]))
        kind = str(c.args[2].value)
        if self.is_int(src) or self.is_int(dst):
            self._bad(stmt, f"a reduction of {src} into {dst} with a {self.cb[src].dtype if self.is_int(src) else self.cb[dst].dtype} "
                            f"tile: the TT reduce works on float tiles (cast in a T.Parallel first)")
        self.ops.append(("reduce", dst, path, src))
        if exact_reduce(self.cb[src].format, self.fp32_acc, self.allow_tf32):
            return stmt     # the SFPU path: no scaler; -x and |x| are computed in DST (LowerToTTProgram)
        self.scaler_cb()
        if kind in ("sum", "max"):
            return stmt
        scratch = self.scratch(f"{src}_{'neg' if kind == 'min' else 'abs'}", src)
        self.ops.append(("scratch", f"{src}_{'neg' if kind == 'min' else 'abs'}", path, src))
        return tirx.Evaluate(tirx.Call(c.dtype, c.op, [*c.args[:5], tirx.IntImm("int32", scratch), c.args[-1]]))

    def scaler_cb(self):
        """The reduce scaler: one bf16 tile the reader builds once (1.0 in row 0 of every face)."""
        if SCALER in self.cb:
            return
        used = {int(e.index) for e in self.cb.values()}
        index = next(i for i in list(range(self.device.num_cbs)) if i not in used)
        fmt = data_format("bfloat16", "the reduce scaler", self.src)
        self.cb[SCALER] = records.CircularBuffer(
            index=index, role="input", producer=["reader"], consumer=["compute"], dtype="bfloat16", format=fmt.name,
            shape=[32, 32], shape_tiles=[1, 1], tile_offset=[0, 0], page_size=fmt.tile_bytes, block_tiles=1,
            depth_blocks=1, num_pages=1, bytes=fmt.tile_bytes)

    def free_cb_index(self, name: str, construct: str, why: str = "") -> int:
        """A CB index no entry uses, the intermediates' range (24..) first, for the new CB ``name``."""
        used = {int(e.index) for e in self.cb.values()}
        free = [i for i in list(range(24, self.device.num_cbs)) + list(range(self.device.num_cbs)) if i not in used]
        if not free:
            raise TTResourceError(f"no circular buffer left for {name}{why}: every one of the {self.device.num_cbs} "
                                  "CBs is taken", construct=construct, source=self.src,
                                  fix="use fewer tile buffers" + (", or split the expression over two T.Parallel "
                                                                  "loops" if why else ""))
        return free[0]

    def scratch(self, name: str, like: str) -> int:
        """A compute-owned CB shaped like ``like`` (same format; Float32 for a Float16 one with an fp32 DST, whose
        pack would keep only bf16's 8 significant bits: TT_KERNEL_PATTERNS 5b); returns its index."""
        if name in self.cb:
            return self.cb[name].index
        index = self.free_cb_index(name, name)
        src = self.cb[like]
        if src.format == "Float16" and self.fp32_acc:
            src = src.replace(format="Float32", dtype="float32", page_size=data_format("float32").tile_bytes)
        self.cb[name] = src.replace(index=index, role="scratch", producer=["compute"], consumer=["compute"],
                                    depth_blocks=1, num_pages=src.block_tiles,
                                    bytes=src.block_tiles * int(src.page_size))
        return index

    def parallel(self, loop, path):
        what = describe(loop)
        store = loop.body
        while isinstance(store, tirx.For):
            store = store.body

        def post(node):
            if isinstance(node, tirx.BufferLoad):
                return tirx.BufferLoad(node.buffer, [tirx.IntImm("int32", 0), tirx.IntImm("int32", 0)])
            return None

        expr = tirx.stmt_functor.ir_transform(tirx.Evaluate(store.value), None, post, ["tirx.BufferLoad"]).value
        expr = expand_floormod(expr)
        note = f"T.Parallel: {tilelang_text(store)}"
        spills, self.spilled_now = [], set()
        while dst_slots(expr) > self.cap:      # DST pressure: a subexpression goes to a CB first
            expr, piece = self.spill(expr, store.buffer.name, what, note, path)
            spills.append(piece)
        self.check_expr(expr, what, store.buffer.name)
        self.ops.append(("eltwise", store.buffer.name, path, expr))
        op = call(TTOps.eltwise, self.index(store.buffer), expr, note=note)
        return tirx.SeqStmt(spills + [op]) if spills else op

    def spill(self, expr, dest: str, what: str, note: str, path):
        """``expr`` needs more DST slots than there are: its largest subexpression that fits (the most slots, the
        first in evaluation order) is computed into a compute-owned CB shaped like ``dest`` (Float32 when DST is
        32-bit, else the destination's format) by an eltwise of its own, and read back as a tile. Returns the
        rewritten expression and that eltwise."""
        subs = []

        def visit(n):
            if isinstance(n, tirx.PrimExpr) and not isinstance(n, tirx.BufferLoad) and not is_scalar(n) and \
                    dst_slots(n) <= self.cap:     # (a condition spills as its 0 / 1 tile)
                subs.append(n)

        tirx.stmt_functor.post_order_visit(tirx.Evaluate(expr), visit)
        if not subs:
            raise TTUnsupportedError(f"the expression needs {dst_slots(expr)} DST tiles, more than the {self.cap} "
                                     "available, and no part of it fits", construct=what, source=self.src,
                                     fix="split the expression over two T.Parallel loops")
        best = max(subs, key=dst_slots)
        like = self.cb[dest]
        dtype = "float32" if self.fp32_acc else like.dtype
        fmt = data_format(dtype, f"a spill of {dest}", self.src)
        # a spill CB is dead once its statement's eltwise has read it: a later statement reuses one of the same
        # block, place and format instead of taking another of the device's CBs
        name = next((n for n in self.spill_cbs if n not in self.spilled_now and self.cb[n].format == fmt.name and
                     all(getattr(self.cb[n], f) == getattr(like, f) for f in ("shape", "shape_tiles", "tile_offset",
                                                                    "block_tiles"))), None)
        if name is None:
            k = sum(1 for n in self.cb if n.startswith(f"{dest}_spill"))
            name = f"{dest}_spill{k}"
            index = self.free_cb_index(name, what, f" (the expression needs more DST tiles than the {self.cap} free)")
            self.cb[name] = like.replace(index=index, role="intermediate", producer=["compute"],
                                         consumer=["compute"], dtype=dtype, format=fmt.name,
                                         page_size=fmt.tile_bytes, depth_blocks=1, num_pages=like.block_tiles,
                                         bytes=like.block_tiles * fmt.tile_bytes, subblock=None, residency=None)
            self.spill_cbs.append(name)
        self.spilled_now.add(name)
        buf = tirx.decl_buffer(like.shape, dtype, name, scope="local.fragment")
        self.check_expr(best, what, None)
        self.ops.append(("eltwise", name, path, best))
        piece = call(TTOps.eltwise, self.cb[name].index, best, note=f"{note} (a part of it, through {name})")
        load = tirx.BufferLoad(buf, [tirx.IntImm("int32", 0), tirx.IntImm("int32", 0)])
        rewritten = tirx.stmt_functor.ir_transform(
            # (an integer index expression spilled comes back as the float tile it is on TT, cast to its type)
            tirx.Evaluate(expr), None,
            lambda n: (load if str(n.dtype) == dtype else tirx.Cast(n.dtype, load)) if n.same_as(best) else None,
            ["tirx.Add", "tirx.Sub", "tirx.Mul", "tirx.Div", "tirx.Call", "tirx.Select", "tirx.Max", "tirx.Min",
             "tirx.Cast", "tirx.GT", "tirx.GE", "tirx.LT", "tirx.LE", "tirx.EQ", "tirx.NE"]).value
        return rewritten, piece

    def choose_residency(self, packer_l1_acc: bool = True):
        """DST residency for the (single) accumulator whose life is fill -> matmul* -> one copy-out; how every
        matmul accumulator accumulates (``accumulate``)."""
        candidates = []
        for name, entry in self.cb.items():
            if entry.role != "intermediate":
                continue
            touching = [op for op in self.ops if op[1] == name or (op[0] == "eltwise" and _reads(op[3], name))]
            kinds = [op[0] if op[1] == name else "read" for op in touching]
            rows, cols = entry.shape_tiles
            entry.residency = "cb"
            entry.subblock = list(_subblock(rows, cols, self.cap)) if "matmul" in kinds else [1, 1]
            if "matmul" in kinds:
                entry.accumulate = accumulate_mode(entry, packer_l1_acc)
            if (rows * cols <= self.cap and len(kinds) >= 3 and kinds[0] == "fill" and kinds[-1] == "read"
                    and all(k == "matmul" for k in kinds[1:-1]) and touching[0][2] == touching[-1][2]
                    and _unary_of(touching[-1][3], name)
                    and self.cb[touching[-1][1]].role != "intermediate"):
                first = self.ops.index(touching[0])
                last = self.ops.index(touching[-1])
                if all(op in touching for op in self.ops[first:last + 1]):
                    candidates.append(name)
        if candidates:
            self.cb[candidates[0]].residency = "dst"
            self.cb[candidates[0]].subblock = list(self.cb[candidates[0]].shape_tiles)
            self.cb[candidates[0]].accumulate = "dst"


# Formats the packer's L1 accumulation adds in (tt-isa-documentation WormholeB0/TensixTile/L1.md: near-memory
# accumulate of FP32 / INT32 / FP16 / BF16); ttnn's partials CB is Float32 or Float16_b with packer_l1_acc.
L1_ACC_FORMATS = ("Float32", "Float16_b")


def accumulate_mode(entry: records.CircularBuffer, packer_l1_acc: bool) -> str:
    """How a CB-resident matmul accumulator adds each K step's products to its partial sums: "packer_l1" (the
    packer adds DST to the tile in L1, ``pack_reconfig_l1_acc(1)``) when allowed, the CB's format is one the
    packer accumulates in and the CB holds exactly one block (the pack after popping a subblock lands on the
    pages it popped); else "reload" (copy_tile the partials into DST before the matmuls, re-pack)."""
    if packer_l1_acc and entry.format in L1_ACC_FORMATS and int(entry.num_pages) == int(entry.block_tiles):
        return "packer_l1"
    return "reload"


def _reads(expr, name) -> bool:
    hit = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(expr), lambda n: hit.append(n) if isinstance(n, tirx.BufferLoad) and n.buffer.name == name else None)
    return bool(hit)


def _unary_of(expr, name) -> bool:
    """True when expr is a chain of unary/scalar ops over exactly the buffer ``name``."""
    loads = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(expr), lambda n: loads.append(n.buffer.name) if isinstance(n, tirx.BufferLoad) else None)
    return loads == [name]


def _subblock(rows: int, cols: int, cap: int) -> tuple[int, int]:
    best = (1, 1)
    for h in range(1, rows + 1):
        for w in range(1, cols + 1):
            if rows % h or cols % w or h * w > cap:
                continue
            if (h * w, w) > (best[0] * best[1], best[1]):
                best = (h, w)
    return best


def tensorize(func: tirx.PrimFunc, device: DeviceProfile) -> tirx.PrimFunc:
    t = _Tensorizer(func, device)
    body = t.run(func.body)
    config = records.compute(func)
    t.choose_residency(config.packer_l1_acc if config is not None else True)
    out = attrs.put(records.put_cbs(func.with_body(body), t.cb), {attrs.TENSORIZED: True})
    if config is None:
        return out
    config.fp32_dest_acc = t.fp32_acc
    return records.put_compute(out, config)


def TensorizeTT(device: DeviceProfile):
    @prim_func_pass("tt.TensorizeTT")
    def transform(func, mod, ctx):
        return tensorize(func, device)

    return transform
