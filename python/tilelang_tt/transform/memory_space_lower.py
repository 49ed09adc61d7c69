"""MemorySpaceLowerTT: shared/fragment allocations become L1 circular buffers; T.copy becomes transfers.

In:  a PrimFunc after TilePadTT: the persistent loop around the ``"tilelang_root"`` block, whose
     ``alloc_shared`` (scope ``shared.dyn``) and ``alloc_fragment`` (``local.fragment``) buffers and
     ``tl.tileop.copy`` / ``fill`` / ``gemm`` calls and ``T.Parallel`` nests are the frontend's.
Out: the block is dissolved; every tile buffer has a CB; and (T.copy: ``copy_lower.py``)
     * ``T.copy(global -> tile buffer)``  -> ``tilelang_tt.read_block`` (reader kernel; a block smaller than a
       tile carries its window in the tile, and its place is tracked per CB: ``tile_offset``),
     * ``T.copy(tile buffer -> global)``  -> ``tilelang_tt.write_block`` (writer kernel), preceded by an
       ``eltwise`` copy into a synthesized output CB when the source is a fragment,
     * ``T.copy(tile buffer -> tile buffer)`` -> ``tilelang_tt.eltwise`` (an identity in DST),
     * a tile-aligned window of a fragment (``T.copy(C_local[i * 128:(i + 1) * 128, ...], C_shared)``, or to a
       tensor; SuperBlockTT's per-block epilogues) -> an ``eltwise`` whose leaf ``BufferLoad(fragment, [row,
       col])`` carries the window's element origin (whole-buffer leaves are at ``[0, 0]``),
     * one row (column) of a tile buffer of at most 32 rows (columns), ``T.copy(lse[k, :], v)`` or ``lse[k, i]`` in
       a ``T.Parallel`` -> the other rows zeroed (an ``eltwise`` select on the index tile) and a column-sum
       ``reduce`` into a vector (``picked_line``),
     * ``T.Parallel`` nests: see ``parallel_lower.py`` (staging, transposed operands, index tiles),
     * ``T.reduce_*`` -> ``tilelang_tt.reduce`` (over fewer than 32 rows / columns: the block masked to the
       reduction's identity first, ``masked_part``); ``T.gemm(transpose_A=True)`` -> a ``transpose`` of the A block
       into a scratch CB and a plain gemm,
     * a compute write into a buffer the reader fills goes to a fresh CB (``<name>_v``) that later reads use.
     ``fill``/``gemm`` are left for TensorizeTT. ``T.use_swizzle`` (a GPU L2 hint) is dropped:
     the schedule's ``order`` plays that role on TT; so are ``T.sync_threads`` (program order on TT) and
     ``T.no_set_max_nreg``.
Attributes written: ``tt.cb``: a ``records.CircularBuffer`` per tile buffer (index, role, producer, consumer,
     dtype, format, page_size, block_tiles, shape, shape_tiles, tile_offset, depth_blocks, num_pages, bytes[,
     constant]). Depth: ``num_stages`` of the enclosing
     ``T.Pipelined`` loop for reader-filled CBs (default 2, double-buffered), 2 blocks for writer-drained
     CBs, 1 block for fragments. Whether they fit L1 is StreamBandsTT's check, once TensorizeTT has placed
     accumulators (in DST or a CB). Formats the packer cannot give (float16 results of an fp32 DST, float8) are
     ``result_formats.py``'s: ``tt.compute`` ``float16_results`` names the float16 tensors given Float32 pages.
Errors (TTLoweringError / TTUnsupportedError): copies whose window is not the whole tile buffer or not
     tile aligned; a buffer filled by the reader and also written by compute, or drained by the writer and
     also read by compute; blocks straddling tiles or stored at another place in the tile than computed;
     reductions along a partial tile; an in-place update the next loop iteration would read; non-affine
     indices in a ``T.Parallel`` body; scalar statements outside tile operators; control flow the tile
     program cannot express; more CBs than the device has.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm
from tvm import tirx

from .. import records
from ..records import CircularBuffer, put_cbs
from ..device import FLOAT8_DTYPES, FLOAT8_WRITE_FORMAT, TILE_FORMATS, DeviceProfile
from ..errors import TTLoweringError, TTResourceError, TTUnsupportedError
from ..formats import tile_format
from ..intrinsics import TTOps, call
from .common import (SCOPE_FRAGMENT, SCOPE_SHARED, TILE, TileOps, decode_region, describe, has_load, is_global,
                     prim_func_pass, source_of, static_shape, tile_op_call, tile_shape_2d, tilelang_text)
from .copy_lower import CopyLower
from .int_range import check_int_ranges
from .irregular_lower import IrregularLower
from .parallel_lower import INDEX_TILES, ParallelLower, fold_constants
from .result_formats import check_float8, widen_float16

_ROLE_BASE = {"input": 0, "output": 16, "intermediate": 24, "scratch": 24}


# statements with nothing to do on TT (see MemorySpaceLowerTT.lower)
_NO_OPS = (tvm.ir.Op.get("tirx.tvm_storage_sync"), tvm.ir.Op.get("tl.no_set_max_nreg"))


def _without_overwritten_clears(seq: list) -> list:
    """``seq`` without each ``T.clear(x)`` / ``T.fill(x, 0)`` of a tile buffer that the next statement overwrites
    whole with a ``T.copy`` from a tensor (``T.fill(index_k, 0); T.copy(K[s:s + bn, :], index_k)``): the reader
    writes every element of the block, zeros past the tensor's edge as the guarded GPU copy leaves the fill's, so
    the buffer is not also written by compute."""
    out = []
    for stmt, after in zip(seq, seq[1:] + [None]):
        fill, copy = tile_op_call(stmt), tile_op_call(after) if after is not None else None
        if fill is not None and copy is not None and fill.op.same_as(TileOps.fill) and \
                copy.op.same_as(TileOps.copy) and isinstance(fill.args[1], (tirx.IntImm, tirx.FloatImm)) and \
                float(fill.args[1].value) == 0.0:
            cleared, src, dst = (decode_region(a) for a in (fill.args[0], copy.args[0], copy.args[1]))
            if is_global(src.buffer) and not is_global(cleared.buffer) and dst.buffer.same_as(cleared.buffer) and \
                    all(isinstance(m, tirx.IntImm) and int(m) == 0 for m in dst.mins) and \
                    [int(e) for e in dst.extents] == [int(n) for n in static_shape(dst.buffer)]:
                continue
        out.append(stmt)
    return out


@dataclass
class CBInfo:
    buffer: tirx.Buffer
    producer: set = field(default_factory=set)   # {"reader", "compute"}
    consumer: set = field(default_factory=set)   # {"writer", "compute"}
    stages: int = 2


def _rename_reads(body, old: tirx.Buffer, new: tirx.Buffer):
    """``body`` reading ``new`` wherever it read ``old`` (loads, and the CB-name placeholders of tile ops)."""
    def post(node):
        if isinstance(node, tirx.BufferLoad) and node.buffer.same_as(old):
            return tirx.BufferLoad(new, node.indices)
        if isinstance(node, tirx.StringImm) and node.value == old.name:
            return tirx.StringImm(new.name)
        return None

    return tirx.stmt_functor.ir_transform(body, None, post, ["tirx.BufferLoad", "tirx.StringImm"])


class _Lowerer(CopyLower, ParallelLower, IrregularLower):
    def __init__(self, func: tirx.PrimFunc, device: DeviceProfile):
        self.func = func
        self.src = source_of(func)
        self.device = device
        self.analyzer = tvm.arith.Analyzer()   # proofs: knows let-bound values (`y = by * 64 + i`)
        self.plain = tvm.arith.Analyzer()      # output expressions: keeps the user's names
        self.params = {func.buffer_map[p].data: (i, func.buffer_map[p]) for i, p in enumerate(func.params)
                       if p in func.buffer_map}
        self.cbs: dict[str, CBInfo] = {}
        self.allocs: list[tirx.Buffer] = []
        self.alias: dict[str, tirx.Buffer] = {}       # buffer name -> the CB now holding its value
        self.placements: dict[str, tuple] = {}        # CB name -> (row_off | None, col_off | None) in its tiles
        self.events: list[tuple[str, str]] = []       # (buffer, "def" by the reader | "use"), in program order
        self.scalars: dict = {}                       # let-bound float constants
        self.scratch: set[str] = set()                # compute scratch CBs (transposed operands)
        self.cb_formats: dict[str, str] = {}          # CB name -> the tile format of the tensor it moves (Bfp8_b ...)
        self.serial_vars: list = []                   # the variables of the serial loops being lowered

    # -- buffers ---------------------------------------------------------------------------------------
    def tensor_index(self, buf: tirx.Buffer) -> int:
        for var, (i, b) in self.params.items():
            if var.same_as(buf.data):
                return i
        raise TTUnsupportedError(f"{buf.name} is a global buffer that is not a kernel parameter",
                                 construct=buf.name, source=self.src, fix="allocate tile buffers with T.alloc_shared")

    def cb(self, buf: tirx.Buffer) -> CBInfo:
        info = self.cbs.get(buf.name)
        if info is None:
            raise TTLoweringError(f"{buf.name} is not a tile buffer of this kernel", construct=buf.name, source=self.src)
        if not info.buffer.same_as(buf):
            raise TTUnsupportedError(f"two tile buffers are named {buf.name!r}", construct=buf.name, source=self.src,
                                     fix="give every T.alloc_shared / T.alloc_fragment a distinct name")
        return info

    def add_tile_buffer(self, buf: tirx.Buffer):
        scope = str(buf.scope())
        if scope not in (SCOPE_SHARED, SCOPE_FRAGMENT) and not scope.startswith("shared"):
            raise TTUnsupportedError(f"buffer {buf.name} has scope {scope!r}", construct=f"allocation of {buf.name}",
                                     source=self.src, fix="use T.alloc_shared or T.alloc_fragment for tile buffers")
        if buf.name in self.cbs:
            raise TTUnsupportedError(f"two tile buffers are named {buf.name!r}", construct=buf.name, source=self.src,
                                     fix="give every T.alloc_shared / T.alloc_fragment a distinct name")
        self.cbs[buf.name] = CBInfo(buf)

    def add_cb(self, name: str, dtype, *, producer: str, consumer: str, fmt: str | None = None) -> None:
        """A one-page CB of one tile that no TileLang buffer names (index, gather and condition CBs)."""
        buf = tirx.decl_buffer((TILE, TILE), dtype, name, scope=SCOPE_SHARED)
        self.cbs[name] = CBInfo(buf, producer={producer}, consumer={consumer}, stages=1)
        if fmt is not None:
            self.cb_formats[name] = fmt

    def staging_buffer(self, like: tirx.Buffer, rows: int, cols: int, suffix: str, dtype=None,
                       scope: str = SCOPE_SHARED) -> tirx.Buffer:
        name = f"{like.name}_{suffix}"
        i = 1
        while name in self.cbs:
            i += 1
            name = f"{like.name}_{suffix}{i}"
        buf = tirx.decl_buffer((rows, cols), dtype if dtype is not None else like.dtype, name, scope=scope)
        self.cbs[name] = CBInfo(buf)
        return buf

    # -- copies ----------------------------------------------------------------------------------------
    def current(self, buf: tirx.Buffer) -> tirx.Buffer:
        self.events.append((buf.name, "use"))
        return self.alias.get(buf.name, buf)

    def target(self, buf: tirx.Buffer) -> tirx.Buffer:
        """The buffer a compute store into ``buf`` writes: ``buf`` itself, or a fresh CB when the reader fills
        ``buf`` (one CB has one producer)."""
        info = self.cb(buf)
        if "reader" not in info.producer:
            info.producer.add("compute")
            return buf
        shape = static_shape(buf)
        new = self.staging_buffer(buf, shape[0], shape[1], "v", scope=SCOPE_FRAGMENT)
        self.cbs[new.name].producer.add("compute")
        self.alias[buf.name] = new
        return new

    def insert_into(self, buf: tirx.Buffer, part: tirx.Buffer, origin: list, note: str):
        """``insert_window``: ``buf`` (its current CB, or a fresh one when the reader fills it) becomes its previous
        value with the tiles at tile ``origin`` replaced by ``part``'s (a store or a copy into a window)."""
        self.cb(part).consumer.add("compute")
        prev = self.current(buf)
        self.cb(prev).consumer.add("compute")
        dst = self.target(buf)
        return call(TTOps.insert_window, self.cb_index_placeholder(dst), self.cb_index_placeholder(part),
                    self.cb_index_placeholder(prev), *(tirx.IntImm("int32", o) for o in origin), note=note)

    def constant_tile(self, name: str) -> tirx.Buffer:
        """A float32 tile the reader builds once per kernel (an index tile)."""
        if name not in self.cbs:
            buf = tirx.decl_buffer((TILE, TILE), "float32", name, scope=SCOPE_SHARED)
            self.cbs[name] = CBInfo(buf, producer={"reader"}, consumer={"compute"}, stages=1)
        return self.cbs[name].buffer

    def inherit(self, dst: str, src: str):
        if src in self.placements and dst not in self.placements:
            self.placements[dst] = self.placements[src]

    def _check_block(self, buf, rows, cols, what):
        if tile_shape_2d(static_shape(buf, self.src)) != (rows, cols):
            raise TTUnsupportedError(f"window of {rows}x{cols} tiles does not match {buf.name}", construct=what,
                                     source=self.src)

    def cb_index_placeholder(self, buf: tirx.Buffer):
        # CB indices are assigned once all roles are known; ops carry a buffer-name string until then.
        return tirx.StringImm(buf.name)

    # -- statements ------------------------------------------------------------------------------------
    def lower(self, stmt, stages: int):
        """``stmt`` over CBs: tile buffers allocated, tile operators and T.Parallel nests lowered (``stages``: the
        depth of reader-filled CBs in the enclosing loop)."""
        if isinstance(stmt, tirx.SeqStmt):
            return tirx.SeqStmt([self.lower(s, stages) for s in _without_overwritten_clears(list(stmt.seq))])
        if isinstance(stmt, tirx.SBlockRealize):
            block = stmt.block
            self._check_block_fields(stmt)
            for buf in block.alloc_buffers:
                self.add_tile_buffer(buf)
                self.allocs.append(buf)
            return self.lower(block.body, stages)
        if isinstance(stmt, tirx.For):
            return self.lower_parallel(stmt) if stmt.kind == tirx.ForKind.PARALLEL else self.lower_loop(stmt, stages)
        if isinstance(stmt, tirx.Bind):
            return self.lower_bind(stmt)
        if isinstance(stmt, tirx.AttrStmt):
            if str(stmt.attr_key) == "threadblock_swizzle_pattern":
                return self.lower(stmt.body, stages)
            raise TTUnsupportedError(f"attribute {stmt.attr_key!r}", construct=describe(stmt), source=self.src)
        c = tile_op_call(stmt)
        if c is not None:
            return self.lower_tile_op(stmt, c, stages)

        if isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tirx.Call) and any(
                stmt.value.op.same_as(o) for o in _NO_OPS):
            # a block barrier (T.sync_threads) orders threads' shared-memory accesses; the TT program runs the
            # block's tile operations in program order (CBs hand data between the kernels), so it is implied. The
            # register-allocation hint (T.no_set_max_nreg) has nothing to act on.
            return tirx.Evaluate(tirx.IntImm("int32", 0))
        if isinstance(stmt, tirx.IfThenElse):
            return self.lower_if(stmt, stages)
        if isinstance(stmt, tirx.While):
            raise TTUnsupportedError("a while loop (data-dependent control flow)", construct=describe(stmt),
                                     source=self.src, fix="use loops with compile-time extents")
        if isinstance(stmt, tirx.BufferStore) and (is_global(stmt.buffer) or (
                all(int(n) == 1 for n in static_shape(stmt.buffer, self.src)) and
                all(isinstance(i, tirx.IntImm) and int(i) == 0 for i in stmt.indices))):
            # the one element of a 1x1 tile buffer (D_local[0, 0] = D[h]), or one element of a tensor (a block's
            # scale, BlockedKScale[bx] = block_scale): a T.Parallel over that one element
            loop_vars = [tirx.Var(v, "int32") for v in ("i", "j")[:len(stmt.indices)]]
            nest = tirx.BufferStore(stmt.buffer, stmt.value, [i + v for i, v in zip(stmt.indices, loop_vars)])
            for v in reversed(loop_vars):
                nest = tirx.For(v, 0, 1, tirx.ForKind.PARALLEL, nest)
            return self.lower(nest, stages)
        if isinstance(stmt, tirx.BufferStore):
            raise TTUnsupportedError("a scalar store outside T.Parallel", construct=describe(stmt), source=self.src,
                                     fix="write element-wise code inside `for i, j in T.Parallel(M, N)`")
        raise TTUnsupportedError(f"statement {type(stmt).__name__}", construct=describe(stmt), source=self.src)

    def lower_loop(self, stmt: tirx.For, stages: int):
        """A serial (or unrolled) loop: its body lowered with the loop's ``num_stages``, its bounds read from
        tensors when they are loads; preceded by the copies its in-place updates need (``loop_carried``)."""
        if stmt.thread_binding is not None or stmt.kind not in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED):
            raise TTUnsupportedError(f"loop kind {stmt.kind}", construct=describe(stmt), source=self.src)
        if stmt.step is not None and not (isinstance(stmt.step, tirx.IntImm) and int(stmt.step) == 1):
            raise TTUnsupportedError(f"a loop with step {stmt.step}", construct=describe(stmt), source=self.src,
                                     fix="write the loop with unit step and compute the index from it")
        inner_stages = stages
        if "num_stages" in stmt.annotations:
            inner_stages = max(1, int(stmt.annotations["num_stages"]))
        alias_before, first_event = dict(self.alias), len(self.events)
        lo, extent = stmt.min, stmt.extent
        if has_load(lo) or has_load(extent):    # a trip count read from a tensor (varlen, MoE row counts)
            lo, extent = self.loop_bound(stmt, describe(stmt))
        else:   # the loop's range, for the bounds of windows indexed by it (fragment_window)
            self.analyzer.bind(stmt.loop_var, tvm.ir.Range.from_min_extent(stmt.min, stmt.extent))
        self.serial_vars.append(stmt.loop_var)
        try:
            lowered = self.lower(stmt.body, inner_stages)
        finally:
            self.serial_vars.pop()
        body, pre = self.loop_carried(stmt, lowered, alias_before, first_event)
        loop_ = tirx.For(stmt.loop_var, lo, extent, stmt.kind, body, None, stmt.annotations)
        return tirx.SeqStmt(pre + [loop_]) if pre else loop_

    def loop_carried(self, stmt: tirx.For, body, alias_before: dict, first_event: int):
        """(body, pre) for the buffers the lowered loop ``body`` moved to other CBs: one the reader fills before
        the loop and the loop updates in place is copied once into its own CB by ``pre`` and read from there;
        any other in-place update that the next iteration would read is refused."""
        pre = []
        for name in set(self.alias) | set(alias_before):
            if self.alias.get(name) is alias_before.get(name):
                continue
            kinds = [kind for n, kind in self.events[first_event:] if n == name]
            first = kinds[0] if kinds else "use"
            if first != "def" and "def" not in kinds and name not in alias_before and name not in REDUCE_KINDS:
                # the reader fills it before the loop and every iteration updates it in place (a running top-k
                # masking its maxima): compute copies it into its own CB once, before the loop, and the loop
                # reads and updates that copy
                new = self.alias[name]
                body = _rename_reads(body, self.cbs[name].buffer, new)
                self.cb(self.cbs[name].buffer).consumer.add("compute")
                self.cbs[new.name].consumer.add("compute")
                self.inherit(new.name, name)
                pre.append(call(TTOps.eltwise, self.cb_index_placeholder(new),
                                tirx.BufferLoad(self.cbs[name].buffer, [0, 0]), note=tilelang_text(stmt)))
                continue
            if first != "def":
                raise TTUnsupportedError(
                    f"{name} is filled by the reader and updated in place inside the loop over "
                    f"{stmt.loop_var.name}, and the next iteration reads the updated value",
                    construct=describe(stmt), source=self.src,
                    fix="accumulate in a T.alloc_fragment (T.clear it before the loop) instead of the shared "
                        "buffer the reader fills")
        return body, pre

    def lower_bind(self, stmt: tirx.Bind):
        """A let-bound value, unchanged, made known to the index analysis (and a float constant to the nests)."""
        # let-bound values (`y = by * 64 + i`) are known to the index analysis from here on; float
        # constants (`inv_D = 1.0 / D`) are substituted into the element-wise bodies that use them. A value
        # `x % c` (the persistent loop's block column, `(start_id + n) % gx`) is known by its range [0, c):
        # binding the expression costs TVM's analyzer ~15 ms a compile and proves nothing more about windows.
        value = stmt.value
        if isinstance(value, tirx.FloorMod) and isinstance(value.b, tirx.IntImm) and int(value.b) > 0:
            self.analyzer.bind(stmt.var, tvm.ir.Range(0, value.b))
        else:
            self.analyzer.bind(stmt.var, value)
        if stmt.var.dtype.startswith(("float", "bfloat")) and isinstance(fold_constants(stmt.value), tirx.FloatImm):
            self.scalars[stmt.var] = fold_constants(stmt.value)
        return stmt

    def lower_tile_op(self, stmt, c: tirx.Call, stages: int):
        """A tile operator call (``T.copy``, ``T.fill`` / ``T.clear``, ``T.reduce_*``, ``T.gemm``, ``T.im2col``)."""
        if c.op.same_as(TileOps.copy):
            return self.lower_copy(stmt, c, stages)
        if c.op.same_as(TileOps.fill):
            region = decode_region(c.args[0], self.src)
            self.check_whole(region, describe(stmt))
            target = self.target(region.buffer)
            self.placements.pop(target.name, None)
            return tirx.Evaluate(tirx.Call(c.dtype, c.op, [_with_buffer(c.args[0], target), *c.args[1:]]))
        if c.op.same_as(TileOps.reduce):
            return self.lower_reduce(stmt, c)
        if c.op.same_as(TileOps.gemm):
            return self.lower_gemm(stmt, c)
        if c.op.same_as(TileOps.im2col):
            return self.lower_im2col(stmt, c, stages)
        raise TTUnsupportedError(f"tile operator {c.op.name} has no TT lowering", construct=describe(stmt),
                                 source=self.src, fix="use T.copy, T.gemm, T.reduce_*, T.clear/T.fill and "
                                                      "T.Parallel")

    def lower_gemm(self, stmt, c):
        """Operands read through their current CBs; ``transpose_A`` becomes an on-chip transpose of the A block
        into a scratch CB (TT's matmul transposes only in1, B)."""
        args = list(c.args)
        pre = []
        for i in (0, 1):
            buf = self.current(decode_region(c.args[i], self.src).buffer)
            self.cb(buf).consumer.add("compute")
            args[i] = _with_buffer(c.args[i], buf)
        self.gemm_placement(*(decode_region(args[i], self.src).buffer for i in (0, 1)),
                            decode_region(c.args[2], self.src).buffer, bool(c.args[3]), bool(c.args[4]),
                            describe(stmt))
        if bool(c.args[3]):
            a = decode_region(args[0], self.src).buffer
            scratch, op = self.transposed_copy(a, tilelang_text(stmt))
            pre.append(op)
            args[0] = _with_buffer(args[0], scratch, transpose=True)
            args[3] = tirx.IntImm("bool", 0)
        acc = self.cb(decode_region(c.args[2], self.src).buffer)
        acc.producer.add("compute")
        acc.consumer.add("compute")
        gemm = tirx.Evaluate(tirx.Call(c.dtype, c.op, args, c.annotations))
        return tirx.SeqStmt(pre + [gemm]) if pre else gemm

    def gemm_placement(self, a, b, acc, transpose_a: bool, transpose_b: bool, what: str):
        """C += A B of blocks smaller than a tile: C's rows sit where A's rows do and its columns where B's
        columns do (recorded; an accumulator already placed elsewhere is refused). A contraction shorter than a
        tile adds all 32 columns of A's tiles times all 32 rows of B's: exact only where one operand is a block
        the reader filled (zeros around its window) and the other's block sits at the same place (or is uniform
        across its tiles: a fill)."""
        def oriented(buf, transposed):
            place, shape = self.placements.get(buf.name, (None, None)), static_shape(buf, self.src)
            return (place[::-1], shape[::-1]) if transposed else (place, shape)

        (pa, sa), (pb, _) = oriented(a, transpose_a), oriented(b, transpose_b)
        if sa[1] % TILE:
            ka, kb = pa[1], pb[0]
            zero_a, zero_b = ("reader" in self.cb(x).producer and "compute" not in self.cb(x).producer
                              for x in (a, b))
            same = ka is not None and kb is not None and self.analyzer.can_prove(ka == kb) and (zero_a or zero_b)
            if not (same or ka is None and zero_b or kb is None and zero_a):
                raise TTUnsupportedError(
                    f"{what}: the contraction axis ({sa[1]} < 32) of {a.name} and {b.name}: the matmul adds all 32 "
                    f"columns of {a.name}'s tiles times all 32 rows of {b.name}'s, and here "
                    + ("their blocks sit at different places in their tiles" if ka is not None and kb is not None
                       and not self.analyzer.can_prove(ka == kb) else "neither is zero around its block"),
                    construct=what, source=self.src,
                    fix="read one operand straight from a tensor (the reader zero-fills the rest of its tiles) at the "
                        "same offsets modulo 32 as the other, or use a contraction of whole tiles")
        want = (pa[0], pb[1])
        if all(w is None for w in want):
            return
        target = self.current(acc)
        have = self.placements.get(target.name, (None, None))
        for axis, (w, h) in enumerate(zip(want, have)):
            if h is not None and (w is None or not self.analyzer.can_prove(w == h)):
                raise TTUnsupportedError(
                    f"{what}: {target.name} holds its block at {['row', 'column'][axis]} {h} of its tiles but this "
                    f"T.gemm computes it at {w}", construct=what, source=self.src,
                    fix="read the operands at offsets that agree modulo 32 with the accumulator's block")
        self.placements[target.name] = tuple(w if w is not None else h for w, h in zip(want, have))

    def transposed_copy(self, source: tirx.Buffer, note: str):
        """(scratch, op): a compute scratch CB that ``transpose(source, scratch)`` fills with ``source``
        transposed, tile by tile (``transpose_tile``); consumed where it is read. A column vector ([n, 1]: its
        values in column 0 of its tiles) becomes a row vector (row 0), and a row vector a column vector; a block
        smaller than a tile moves to the transposed place in its tile."""
        rows, cols = static_shape(source, self.src)
        if rows % TILE and rows > TILE or cols % TILE and cols > TILE:    # TilePadTT refuses such buffers first
            raise TTUnsupportedError(f"a transpose of {source.name} ({rows}x{cols}), a block smaller than whole "
                                     "tiles", construct=note, source=self.src,
                                     fix="transpose blocks whose extents are multiples of 32")
        self.cb(source).consumer.add("compute")
        # The transpose runs through DST; with fp32 accumulation an fp16 CB is packed through bf16 (8 significant
        # bits, TT_KERNEL_PATTERNS 5b), so fp16 blocks are transposed into a Float32 scratch (fp32 holds fp16).
        dtype = "float32" if str(source.dtype) == "float16" else None
        scratch = self.staging_buffer(source, cols, rows, "T", dtype=dtype, scope=SCOPE_FRAGMENT)
        if source.name in self.placements:      # a block smaller than a tile: transposed in place in its tile
            self.placements[scratch.name] = tuple(reversed(self.placements[source.name]))
        self.cbs[scratch.name].producer.add("compute")
        self.cbs[scratch.name].consumer.add("compute")
        self.scratch.add(scratch.name)
        return scratch, call(TTOps.transpose, self.cb_index_placeholder(source), self.cb_index_placeholder(scratch),
                             note=note)

    def lower_reduce(self, stmt, c):
        """T.reduce_*(src, dst, dim, clear) -> ``reduce(src_cb, dst_cb, kind, dim, clear)``."""
        what = describe(stmt)
        src, dst = decode_region(c.args[0], self.src), decode_region(c.args[1], self.src)
        kind, dim, clear = str(c.args[2].value), int(c.args[3]), bool(c.args[4])
        if kind not in REDUCE_KINDS:
            raise TTUnsupportedError(f"T.reduce_{kind} has no TT lowering", construct=what, source=self.src,
                                     fix=f"TT reduces with {sorted(REDUCE_KINDS)}")
        self.check_whole(src, what)
        self.check_whole(dst, what)
        source = self.current(src.buffer)
        rows, cols = static_shape(source, self.src)
        dim = dim % 2
        along = cols if dim == 1 else rows
        note = tilelang_text(stmt)
        masked = None
        if along % TILE:
            if along > TILE:     # TilePadTT refuses such tile buffers first
                raise TTUnsupportedError(
                    f"T.reduce_{kind} over {along} elements: a reduction runs over whole 32-element tile rows/columns "
                    "or one part of a tile", construct=what, source=self.src,
                    fix="reduce along an extent that is a multiple of 32, or below 32")
            masked = self.masked_part(source, dim, along, kind, note)
        want = (rows, 1) if dim == 1 else (1, cols)
        if static_shape(dst.buffer, self.src) != want:
            raise TTUnsupportedError(f"reduction output {dst.buffer.name} has shape {list(static_shape(dst.buffer))}, "
                                     f"expected {list(want)}", construct=what, source=self.src)
        self.cb(source).consumer.add("compute")
        pre = []
        if masked is not None:
            source, mask_op = masked
            pre.append(mask_op)
        if clear:
            target = self.target(dst.buffer)
        else:
            old = self.current(dst.buffer)
            self.cb(old).consumer.add("compute")
            target = self.target(old)
            if target is not old:      # the reader filled the running value: fold into a compute-owned copy
                self.inherit(target.name, old.name)
                pre.append(call(TTOps.eltwise, self.cb_index_placeholder(target), tirx.BufferLoad(old, [0, 0]),
                                note=note))
        # REDUCE_ROW leaves its results in column 0 of each row, REDUCE_COL in row 0 of each column
        place = self.placements.get(source.name, (None, None))
        result = (place[0], tirx.IntImm("int32", 0)) if dim == 1 else (tirx.IntImm("int32", 0), place[1])
        self.placements[target.name] = tuple(None if n % TILE == 0 else p for p, n in zip(result, want))
        return tirx.SeqStmt(pre + [call(TTOps.reduce, self.cb_index_placeholder(source),
                                        self.cb_index_placeholder(target), tirx.StringImm(kind), dim, clear, -1,
                                        note=note)]) if pre else \
            call(TTOps.reduce, self.cb_index_placeholder(source), self.cb_index_placeholder(target),
                 tirx.StringImm(kind), dim, clear, -1, note=note)
    def masked_part(self, source: tirx.Buffer, axis: int, n: int, kind: str, note: str):
        """(masked, op): a reduction over ``n`` < 32 rows (``axis`` 0) or columns (1) of a block runs over the whole
        32 of its tiles, so the rest of each tile must not count: the block with the rows (columns) outside
        ``[offset, offset + n)`` replaced by the reduction's identity (0 for sums, -inf for max, +inf for min)."""
        lo = self.placements.get(source.name, (None, None))[axis]
        lo = lo if lo is not None else tirx.IntImm("int32", 0)
        identity = {"sum": 0.0, "abssum": 0.0, "absmax": 0.0, "max": float("-inf"), "min": float("inf")}[kind]

        def inside(index):
            return [index < lo + n] + ([] if self.analyzer.can_prove(lo == 0) else [lo <= index])

        return self.masked_copy(source, axis, inside, identity, "part", note)

    def masked_copy(self, source: tirx.Buffer, axis: int, inside, identity: float, suffix: str, note: str):
        """(masked, op): ``eltwise`` copies ``source`` into a compute scratch CB, each element whose row (``axis`` 0)
        or column (1) index in its tile fails one of the conditions ``inside(index)`` replaced by ``identity``
        (selects on the constant index tile of that axis). float16 blocks are masked in float32, as transposes
        are."""
        rows, cols = static_shape(source, self.src)
        dtype = str(source.dtype) if str(source.dtype) in ("float32", "bfloat16") else "float32"
        masked = self.staging_buffer(source, rows, cols, suffix, dtype=dtype, scope=SCOPE_FRAGMENT)
        self.cbs[masked.name].producer.add("compute")
        self.cbs[masked.name].consumer.add("compute")
        self.cb(source).consumer.add("compute")
        self.placements[masked.name] = self.placements.get(source.name, (None, None))
        index = tirx.Cast("int32", tirx.BufferLoad(self.constant_tile(INDEX_TILES[axis]), [0, 0]))
        value = tirx.Cast(dtype, tirx.BufferLoad(source, [0, 0]))
        for condition in inside(index):
            value = tirx.Select(condition, value, tirx.FloatImm(dtype, identity))
        return masked, call(TTOps.eltwise, self.cb_index_placeholder(masked), value, note=note)

    def picked_line(self, source: tirx.Buffer, axis: int, at, note: str):
        """(line, ops): row ``at`` (``axis`` 0) of a block of at most 32 rows as a row vector, or column ``at``
        (``axis`` 1) as a column vector (``lse[k, :]`` of a ``[splits, n]`` fragment in a loop over k): the other
        rows are zeroed (``masked_copy``) and the block summed over the axis (``reduce``, which leaves a column
        sum in row 0 and a row sum in column 0); adding zeros is exact."""
        place = self.placements.get(source.name, (None, None))
        lo = place[axis] if place[axis] is not None else tirx.IntImm("int32", 0)
        masked, mask = self.masked_copy(source, axis, lambda index: [tirx.EQ(index, lo + at)], 0.0, "pick", note)
        rows, cols = static_shape(source, self.src)
        line = self.staging_buffer(source, *((1, cols) if axis == 0 else (rows, 1)), "line", dtype=masked.dtype,
                                   scope=SCOPE_FRAGMENT)
        self.cbs[line.name].producer.add("compute")
        self.cbs[line.name].consumer.add("compute")
        self.placements[line.name] = (tirx.IntImm("int32", 0), place[1]) if axis == 0 else \
            (place[0], tirx.IntImm("int32", 0))
        return line, [mask, call(TTOps.reduce, self.cb_index_placeholder(masked), self.cb_index_placeholder(line),
                                 tirx.StringImm("sum"), axis, True, -1, note=note)]

    def _check_block_fields(self, realize):
        """A block is dissolved: fields that would change its meaning are refused, never dropped."""
        block, what = realize.block, describe(realize)
        if not (isinstance(realize.predicate, tirx.IntImm) and int(realize.predicate) == 1):
            raise TTUnsupportedError(f"a block predicate ({realize.predicate})", construct=what, source=self.src,
                                     fix="guard with tile-level arithmetic instead of a block predicate")
        for what_field, value in (("iteration variables", block.iter_vars), ("match_buffer", block.match_buffers)):
            if len(value):
                raise TTUnsupportedError(f"a block with {what_field}", construct=what, source=self.src,
                                         fix="write the kernel with T.Kernel, tile buffers and tile operators")
        if block.init is not None:
            raise TTUnsupportedError("a block with an init statement", construct=what, source=self.src,
                                     fix="initialise fragments with T.clear / T.fill")

    # -- CB table --------------------------------------------------------------------------------------
    def _allocate_index(self, role: str, used: set) -> int:
        """Conventional ranges first (inputs c_0.., outputs c_16.., intermediates c_24..), then any free index."""
        preferred = range(_ROLE_BASE[role], self.device.num_cbs)
        for index in list(preferred) + list(range(self.device.num_cbs)):
            if index not in used:
                used.add(index)
                return index
        raise TTResourceError(f"more than {self.device.num_cbs} circular buffers are needed",
                                 construct="tile buffers", source=self.src,
                                 fix=f"{self.device.arch} has {self.device.num_cbs} CBs; use fewer tile buffers")

    def _tile_offset(self, name: str) -> list:
        """Where a block smaller than a tile sits in its tiles, per axis: 0 (at the tile's first row / column, or
        the axis is whole tiles) or -1 (at an offset known only per block, e.g. row ``bx % 32``)."""
        place = self.placements.get(name, (None, None))
        return [0 if p is None or self.analyzer.can_prove(p == 0) else -1 for p in place]

    def cb_table(self):
        table, used = {}, set()
        for name, info in self.cbs.items():
            buf = info.buffer
            if {"reader", "compute"} <= info.producer:
                raise TTUnsupportedError(f"{name} is filled by the reader and also written by compute",
                                         construct=name, source=self.src, fix="write the result into a separate buffer")
            if {"writer", "compute"} <= info.consumer:
                raise TTUnsupportedError(f"{name} is stored to global memory and also read by compute",
                                         construct=name, source=self.src, fix="store from a separate buffer")
            if not info.producer and not info.consumer:
                continue  # allocated but unused
            if name in self.scratch:
                role, depth = "scratch", 1
            elif "reader" in info.producer:
                role, depth = "input", info.stages
            elif str(buf.scope()) == SCOPE_FRAGMENT or info.producer == {"compute"} and info.consumer <= {"compute"}:
                role, depth = "intermediate", 1
            else:
                role, depth = "output", 2
            index = self._allocate_index(role, used)
            fmt = TILE_FORMATS[self.cb_formats[name]] if name in self.cb_formats else \
                tile_format(buf.dtype, f"tile buffer {name}", self.src)
            if str(buf.dtype) in FLOAT8_DTYPES and "compute" in info.producer:   # never rounded to float8 on chip
                fmt = TILE_FORMATS[FLOAT8_WRITE_FORMAT]
            rows_e, cols_e = static_shape(buf, self.src)
            rows, cols = tile_shape_2d((rows_e, cols_e))
            block_tiles = rows * cols
            table[name] = CircularBuffer(
                index=index, role=role, producer=sorted(info.producer), consumer=sorted(info.consumer),
                dtype=str(buf.dtype), format=fmt.name, shape=[rows_e, cols_e], shape_tiles=[rows, cols],
                tile_offset=self._tile_offset(name),
                constant=f"index{INDEX_TILES.index(name)}" if name in INDEX_TILES else None,
                page_size=fmt.tile_bytes, block_tiles=block_tiles, depth_blocks=depth, num_pages=depth * block_tiles,
                bytes=depth * block_tiles * fmt.tile_bytes)
        return table


REDUCE_KINDS = {"sum", "max", "min", "abssum", "absmax"}

def _with_buffer(region_call, buf, transpose: bool = False):
    """A ``tl.region`` call over ``buf`` instead of its buffer (same window, or its transpose)."""
    load = region_call.args[0]
    extents = list(region_call.args[2:])
    return tirx.Call(region_call.dtype, region_call.op,
                     [tirx.BufferLoad(buf, load.indices), region_call.args[1], *(extents[::-1] if transpose else extents)])


def _resolve_names(stmt, table):
    """Replace the buffer-name placeholders in TT ops by CB indices."""
    def post(node):
        if isinstance(node, tirx.Call) and str(getattr(node.op, "name", "")).startswith("tilelang_tt."):
            args = list(node.args)
            positions = ((0, 1, 2) if node.op.same_as(TTOps.insert_window) else
                         (0, 1) if node.op.same_as(TTOps.reduce) or node.op.same_as(TTOps.transpose) else (0,))
            if any(isinstance(args[i], tirx.StringImm) for i in positions):
                for i in positions:
                    args[i] = tirx.IntImm("int32", table[args[i].value].index)
                return tirx.Call(node.dtype, node.op, args)
        return None

    return tirx.stmt_functor.ir_transform(stmt, None, post, ["tirx.Call"])


def memory_space_lower(func: tirx.PrimFunc, device: DeviceProfile) -> tirx.PrimFunc:
    check_int_ranges(func, source_of(func))
    lowerer = _Lowerer(func, device)
    body = lowerer.lower(func.body, 2)
    table = lowerer.cb_table()
    check_float8(body, table, source_of(func))
    table, results = widen_float16(func, table, body, {i: b for i, b in lowerer.params.values()},
                                   device.l1_usable_bytes)
    body = _resolve_names(body, table)
    func = put_cbs(func.with_body(body), table)
    if results:
        config = records.compute(func)
        func = records.put_compute(func, config.replace(float16_results=results))
    return func


def MemorySpaceLowerTT(device: DeviceProfile):
    @prim_func_pass("tt.MemorySpaceLowerTT")
    def transform(func, mod, ctx):
        return memory_space_lower(func, device)

    return transform
