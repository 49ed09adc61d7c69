"""MemorySpaceLowerTT: shared/fragment allocations become L1 circular buffers; T.copy becomes transfers.

In:  a PrimFunc after TilePadTT: the persistent loop around the ``"tilelang_root"`` block, whose
     ``alloc_shared`` (scope ``shared.dyn``) and ``alloc_fragment`` (``local.fragment``) buffers and
     ``tl.tileop.copy`` / ``fill`` / ``gemm`` calls and ``T.Parallel`` nests are the frontend's.
Out: the block is dissolved; every tile buffer has a CB; and
     * ``T.copy(global -> tile buffer)``  -> ``tilelang_tt.read_block`` (reader kernel; a block smaller than a
       tile carries its window in the tile, and its place is tracked per CB: ``tile_offset``),
     * ``T.copy(tile buffer -> global)``  -> ``tilelang_tt.write_block`` (writer kernel), preceded by an
       ``eltwise`` copy into a synthesized output CB when the source is a fragment,
     * ``T.copy(tile buffer -> tile buffer)`` -> ``tilelang_tt.eltwise`` (an identity in DST),
     * a tile-aligned window of a fragment (``T.copy(C_local[i * 128:(i + 1) * 128, ...], C_shared)``, or to a
       tensor; SuperBlockTT's per-block epilogues) -> an ``eltwise`` whose leaf ``BufferLoad(fragment, [row,
       col])`` carries the window's element origin (whole-buffer leaves are at ``[0, 0]``),
     * ``T.Parallel`` nests: see ``parallel_lower.py`` (staging, transposed operands, index tiles),
     * ``T.reduce_*`` -> ``tilelang_tt.reduce``; ``T.gemm(transpose_A=True)`` -> a ``transpose`` of the A block
       into a scratch CB and a plain gemm,
     * a compute write into a buffer the reader fills goes to a fresh CB (``<name>_v``) that later reads use.
     ``fill``/``gemm`` are left for TensorizeTT. ``T.use_swizzle`` (a GPU L2 hint) is dropped:
     the schedule's ``order`` plays that role on TT; so are ``T.sync_threads`` (program order on TT) and
     ``T.no_set_max_nreg``.
Attributes written: ``tt.cb`` = ``{buffer name: {index, role, producer, consumer, dtype, format, page_size,
     block_tiles, shape, shape_tiles, tile_offset, depth_blocks, num_pages, bytes[, constant]}}``. Depth: ``num_stages`` of the enclosing
     ``T.Pipelined`` loop for reader-filled CBs (default 2, double-buffered), 2 blocks for writer-drained
     CBs, 1 block for fragments. Whether they fit L1 is StreamBandsTT's check, once TensorizeTT has placed
     accumulators (in DST or a CB).
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

from .. import attrs, records
from ..device import FORMATS, INDEX_FORMATS, INT_OUTPUT_FORMATS, TILE_FORMATS, DeviceProfile
from ..errors import TTLoweringError, TTUnsupportedError
from ..formats import data_format, tensor_format, tile_format
from ..intrinsics import TTOps, call
from .common import (SCOPE_FRAGMENT, SCOPE_SHARED, TILE, Region, TileOps, decode_region, describe, has_load, is_global,
                     prim_func_pass, source_of, static_shape, tile_op_call, tile_shape_2d, tilelang_text)
from .int_range import check_int_ranges
from .irregular_lower import IrregularLower
from .parallel_lower import INDEX_TILES, ParallelLower, fold_constants

_ROLE_BASE = {"input": 0, "output": 16, "intermediate": 24, "scratch": 24}


# statements with nothing to do on TT (see MemorySpaceLowerTT.lower)
_NO_OPS = (tvm.ir.Op.get("tirx.tvm_storage_sync"), tvm.ir.Op.get("tl.no_set_max_nreg"))


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


class _Lowerer(ParallelLower, IrregularLower):
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
    def tensor_cb_format(self, tensor: tirx.Buffer, cb_name: str, io: str, window, what: str):
        """A CB the reader fills from / the writer drains to a tensor stored in a block-float format (int8
        weights, T.TTShard(format=...)) has that format: the unpacker expands it to BF16, the packer rounds into it.
        An int8 tensor stored as Int8 gives its CB the UInt8 format of its pages."""
        shard = records.shard(self.func, tensor.name)
        annotated = shard.format if shard is not None else None
        fmt = tensor_format(tensor.dtype, str(annotated) if annotated else None, io, f"tensor {tensor.name}", self.src)
        if str(tensor.dtype) in INDEX_FORMATS and not (io == "output" and str(tensor.dtype) in INT_OUTPUT_FORMATS):
            raise TTUnsupportedError(
                f"moves a block of {tensor.dtype} tensor {tensor.name} into a tile buffer", construct=what,
                source=self.src, fix=f"{tensor.dtype} tensors are index tensors: use their elements in T.copy offsets "
                                     "(X[Table[b, j] * 32, 0]); compute has no integer tiles of that width")
        if fmt.kind != "bfp":
            if FORMATS.get(str(tensor.dtype)) is not fmt:   # int8 stored as its bytes in UInt8 pages (format="Int8")
                self._record_cb_format(cb_name, fmt.name, what)
            return
        if any(int(window[2 * k + 1]) != TILE for k in range(2)):
            raise TTUnsupportedError(f"{what}: a block smaller than a tile of {tensor.name}, stored as {fmt.name}",
                                     construct=what, source=self.src,
                                     fix="move whole 32x32 tiles of block-float tensors (the shared exponents cover "
                                         "16-element face rows)")
        pad = records.padding(self.func, tensor.name)
        if pad is not None and not pad.is_whole_tiles:
            raise TTUnsupportedError(
                f"{tensor.name} of shape {[str(d) for d in pad.logical]} is stored as {fmt.name} but is not whole "
                "32x32 tiles", construct=f"tensor {tensor.name}", source=self.src,
                fix="give block-float (and int8) tensors dimensions that are multiples of 32, or store them as bfloat16")
        self._record_cb_format(cb_name, fmt.name, what)

    def converts(self, tensor: tirx.Buffer, buf: tirx.Buffer, io: str, what: str) -> bool:
        """Whether a copy between ``tensor`` and the tile buffer ``buf`` changes the data format: a tensor's pages
        keep the tensor's format and a CB the NoC fills has the format of the pages it receives, so the change
        happens on the compute path (unpack to DST, pack in the other format) through a staging CB. Block-float
        and int8-as-UInt8 storage keep their own path (the unpacker expands them); integer <-> float copies are
        refused (a T.Parallel cast says which conversion is meant)."""
        shard = records.shard(self.func, tensor.name)
        annotated = shard.format if shard is not None else None
        if annotated or str(tensor.dtype) == str(buf.dtype):
            return False
        fmt = tensor_format(tensor.dtype, None, io, f"tensor {tensor.name}", self.src)
        have = data_format(buf.dtype, f"tile buffer {buf.name}", self.src)
        if fmt is have or fmt.kind == "bfp" or FORMATS.get(str(tensor.dtype)) is not fmt:
            return False
        if fmt.kind != "float" or have.kind != "float":
            raise TTUnsupportedError(
                f"{what}: copies {tensor.dtype} tensor {tensor.name} {'into' if io == 'input' else 'from'} "
                f"{buf.dtype} tile buffer {buf.name}", construct=what, source=self.src,
                fix=f"copy into a {tensor.dtype} buffer and convert in a T.Parallel (e.g. "
                    f"dst[i, j] = T.cast(src[i, j], \"{buf.dtype}\"))")
        return True

    def lower_converting_read(self, src, dst, stages: int, what: str, note: str):
        """``T.copy(X[...], x)`` with ``x`` of another float dtype than ``X``: the reader fills a staging CB of
        X's format (``x_in``), and compute copies it into ``x`` (copy_tile unpacks X's format into DST, the
        packer writes x's)."""
        shape = static_shape(dst.buffer, self.src)
        staging = self.staging_buffer(dst.buffer, shape[-2], shape[-1], "in", dtype=src.buffer.dtype)
        region = tirx.BufferRegion(staging, [tvm.ir.Range.from_min_extent(0, e) for e in staging.shape])
        read = self.lower_copy_read(src, region, stages, what, note)
        self.cb(staging).consumer.add("compute")
        target = self.target(dst.buffer)
        self.placements.pop(target.name, None)
        self.inherit(target.name, staging.name)
        return tirx.SeqStmt([read, call(TTOps.eltwise, self.cb_index_placeholder(target),
                                        tirx.BufferLoad(staging, [0, 0]), note=note)])

    def _record_cb_format(self, cb_name: str, fmt: str, what: str) -> None:
        have = self.cb_formats.setdefault(cb_name, fmt)
        if have != fmt:
            raise TTUnsupportedError(f"{what}: {cb_name} moves tiles of {have} and of {fmt}", construct=what,
                                     source=self.src, fix="use one tile buffer per tensor format")

    def tile_coords(self, region, what: str):
        """(tile_row, tile_col, rows, cols, window) of a 2-D tensor window: whole tiles at tile-aligned offsets,
        or a window inside one tile (extent < 32 that cannot straddle: 32 % extent == 0 and offset % extent == 0);
        window = (row_off, nrows, col_off, ncols) within the tile."""
        if len(region.mins) != 2:
            raise TTLoweringError(f"{what} on {len(region.mins)}-D buffer {region.buffer.name} after TilePadTT",
                                  construct=what, source=self.src)
        coords, counts, window = [], [], []
        for value, extent, axis in ((region.mins[0], int(region.extents[0]), "row"),
                                    (region.mins[1], int(region.extents[1]), "column")):
            if extent % TILE == 0:
                if not self.analyzer.can_prove(tirx.floormod(value, TILE) == 0):
                    raise TTUnsupportedError(f"{what}: {axis} offset {value} of {region.buffer.name} is not a multiple "
                                             "of 32", construct=what, source=self.src, fix="copy whole 32x32 tiles")
                counts.append(extent // TILE)
                window += [tirx.IntImm("int32", 0), TILE]
            elif TILE % extent == 0 and self.analyzer.can_prove(tirx.floormod(value, extent) == 0):
                counts.append(1)
                window += [self.plain.simplify(tirx.floormod(value, TILE)), extent]
            else:
                raise TTUnsupportedError(
                    f"{what}: a {axis} extent of {extent} at offset {value} of {region.buffer.name} can straddle two "
                    "32x32 tiles", construct=what, source=self.src,
                    fix="use block extents that are multiples of 32, or that divide 32 at offsets that are multiples "
                        "of the extent (e.g. bx * 16 with 16)")
            coords.append(self.plain.simplify(tirx.floordiv(value, TILE)))
        return coords[0], coords[1], counts[0], counts[1], tuple(window)

    def placement(self, name: str, window, what: str):
        """Record (or check) where in its tiles a sub-tile block lives: every use must agree."""
        sub = tuple(None if int(window[2 * k + 1]) == TILE else window[2 * k] for k in range(2))
        if all(x is None for x in sub):
            return
        have = self.placements.get(name)
        if have is None:
            self.placements[name] = sub
            return
        for x, y in zip(have, sub):
            if (x is None) != (y is None) or x is not None and not self.analyzer.can_prove(x == y):
                raise TTUnsupportedError(
                    f"{what}: {name} holds its block at tile offset {list(have)}, but this transfer needs it at "
                    f"{list(sub)}", construct=what, source=self.src,
                    fix="blocks smaller than a tile stay where they are in their tile: read and write them at the same "
                        "offsets modulo 32")

    def check_whole(self, region, what: str):
        shape = static_shape(region.buffer, self.src)
        if tuple(int(e) for e in region.extents) != shape[-len(region.extents):] or not all(
                self.analyzer.can_prove(m == 0) for m in region.mins):
            raise TTUnsupportedError(f"{what}: only whole tile buffers can be copied ({region.buffer.name} window "
                                     f"{list(region.extents)} of {list(shape)})", construct=what, source=self.src,
                                     fix="copy the whole shared/fragment buffer")

    def fragment_window(self, region, shape_of, what: str):
        """The element origin ``[row, col]`` of a tile-aligned window of a tile buffer compute reads (a SuperBlockTT
        epilogue reading one user block of the fused accumulator, a GQA head's rows of a stacked block), shaped
        like ``shape_of``; None for a whole-buffer copy. Anything else is refused like any partial copy."""
        shape = static_shape(region.buffer, self.src)
        whole = tuple(int(e) for e in region.extents) == shape[-len(region.extents):] and all(
            self.analyzer.can_prove(m == 0) for m in region.mins)
        if whole or len(region.mins) != 2:
            self.check_whole(region, what)
            return None
        extents = [int(e) for e in region.extents]
        if extents != list(shape_of) or any(e % TILE for e in extents) or not all(
                self.analyzer.can_prove(tirx.floormod(m, TILE) == 0) and self.analyzer.can_prove(m >= 0)
                and self.analyzer.can_prove(m + e <= s) for m, e, s in zip(region.mins, extents, shape)):
            self.check_whole(region, what)
        return [self.plain.simplify(m) for m in region.mins]

    def lower_copy(self, stmt, c: tirx.Call, stages: int):
        what = describe(stmt)
        note = tilelang_text(stmt)
        src, dst = decode_region(c.args[0], self.src), decode_region(c.args[1], self.src)
        if is_global(src.buffer) and is_global(dst.buffer):
            raise TTUnsupportedError("a global-to-global T.copy", construct=what, source=self.src,
                                     fix="stage the data through T.alloc_shared")
        if is_global(src.buffer):
            origin = self.copy_window(dst)
            if origin is not None:
                return self.lower_read_into_window(src, dst, origin, stages, what, note)
            self.check_whole(dst, what)
            if self.converts(src.buffer, dst.buffer, "input", what):
                return self.lower_converting_read(src, dst, stages, what, note)
            return self.lower_copy_read(src, dst, stages, what, note)
        return self.lower_copy_local(src, dst, what, note)

    def copy_window(self, region):
        """The tile origin of ``region`` when it is a window of its 2-D tile buffer other than the whole buffer:
        whole tiles at constant offsets that are multiples of 32; else None."""
        shape = static_shape(region.buffer, self.src)
        if len(shape) != 2 or len(region.mins) != 2:
            return None
        extents = [int(e) for e in region.extents]
        mins = [self.plain.simplify(m) for m in region.mins]
        if extents == list(shape) or not all(isinstance(m, tirx.IntImm) for m in mins):
            return None
        if any(e % TILE or int(m) % TILE or int(m) + e > n for m, e, n in zip(mins, extents, shape)):
            return None
        return [int(m) // TILE for m in mins]

    def lower_read_into_window(self, src, dst, origin, stages: int, what: str, note: str):
        """``T.copy(tensor window -> window of a tile buffer)`` (a GQA group's query heads stacked in one block):
        the reader fills a CB of the window's shape, which compute puts in place (``insert_window``; the buffer's
        other tiles pass through)."""
        part = self.staging_buffer(dst.buffer, *[int(e) for e in dst.extents], "in", scope=SCOPE_SHARED)
        whole = Region(part, (tirx.IntImm("int32", 0), tirx.IntImm("int32", 0)), tuple(dst.extents), 2)
        read = (self.lower_converting_read(src, whole, stages, what, note)
                if self.converts(src.buffer, part, "input", what) else
                self.lower_copy_read(src, whole, stages, what, note))
        return tirx.SeqStmt([read, self.insert_into(dst.buffer, self.current(part), origin, note)])

    def lower_copy_read(self, src, dst, stages: int, what: str, note: str):
        """``T.copy(tensor window -> tile buffer)``: a ``read_block`` into the buffer's CB."""
        src = self.index_loads(src, "reader", what)
        target = dst.buffer
        info = self.cb(target)
        info.producer.add("reader")
        info.stages = max(info.stages, stages)
        self.alias.pop(target.name, None)      # the reader refills it: later reads see this block
        self.events.append((target.name, "def"))
        r, c0, rows, cols, window = self.tile_coords(src, what)
        shape = static_shape(target, self.src)
        if shape[1] == 1 and shape[0] > 1 and [int(e) for e in src.extents] == [1, shape[0]]:
            raise TTUnsupportedError(
                f"a row of {src.buffer.name} read into {target.name}, a vector of per-row values (a column "
                "of its tiles): the reader moves rows of tiles, not a row into a column", construct=what,
                source=self.src, fix=f"index {target.name} by the column variable (a per-column vector, as "
                "FlashAttention's backward reads LSE), or store the values as a column of a tensor")
        self._check_block(target, rows, cols, what)
        self.placements.pop(target.name, None)
        self.placement(target.name, window, what)
        self.tensor_cb_format(src.buffer, target.name, "input", window, what)
        return call(TTOps.read_block, self.cb_index_placeholder(target), self.tensor_index(src.buffer), r, c0, rows,
                    cols, *window, note=note)

    def lower_copy_local(self, src, dst, what: str, note: str):
        """``T.copy`` from a tile buffer: to a tensor window (``lower_copy_write``) or to another tile buffer (an
        ``eltwise`` identity in DST)."""
        source = self.current(src.buffer)
        if is_global(dst.buffer):
            return self.lower_copy_write(source, src, dst, what, note)
        self.check_whole(dst, what)
        origin = self.fragment_window(src, static_shape(dst.buffer), what)
        if origin is None and static_shape(src.buffer) != static_shape(dst.buffer):
            raise TTUnsupportedError("copy between tile buffers of different shapes", construct=what, source=self.src)
        self.cb(source).consumer.add("compute")
        target = self.target(dst.buffer)
        self.inherit(target.name, source.name)
        return call(TTOps.eltwise, self.cb_index_placeholder(target), tirx.BufferLoad(source, origin or [0, 0]),
                    note=note)

    def lower_copy_write(self, source, src, dst, what: str, note: str):
        """``T.copy(tile buffer -> tensor window)``: a ``write_block`` of the buffer's CB, through a staging CB of
        the tensor's dtype that compute packs when the buffer is a fragment, compute reads it, the reader fills it
        or its format is not the tensor's."""
        dst = self.index_loads(dst, "writer", what)
        if self.column_to_row(source, dst):
            return self.lower_column_write(source, dst, what, note)
        origin = self.fragment_window(src, [int(e) for e in dst.extents], what)
        r, c0, rows, cols, window = self.tile_coords(dst, what)
        if origin is None:
            self._check_block(source, rows, cols, what)
        self.placement(source.name, window, what)
        info = self.cb(source)
        if (str(source.scope()) == SCOPE_FRAGMENT or "compute" in info.consumer or "reader" in info.producer
                or origin is not None or self.converts(dst.buffer, source, "output", what)):
            # the packer converts to the tensor's format: the staging CB has the tensor's dtype
            shape = static_shape(source) if origin is None else [int(e) for e in src.extents]
            out = self.staging_buffer(source, shape[0], shape[1], "out", dtype=dst.buffer.dtype)
            self.cbs[out.name].producer.add("compute")
            self.cbs[out.name].consumer.add("writer")
            info.consumer.add("compute")
            self.inherit(out.name, source.name)
            self.tensor_cb_format(dst.buffer, out.name, "output", window, what)
            return tirx.SeqStmt([
                call(TTOps.eltwise, self.cb_index_placeholder(out), tirx.BufferLoad(source, origin or [0, 0]),
                     note=note),
                call(TTOps.write_block, self.cb_index_placeholder(out), self.tensor_index(dst.buffer), r, c0, rows,
                     cols, *window, note=note)])
        info.consumer.add("writer")
        self.tensor_cb_format(dst.buffer, source.name, "output", window, what)
        return call(TTOps.write_block, self.cb_index_placeholder(source), self.tensor_index(dst.buffer), r, c0,
                    rows, cols, *window, note=note)

    def column_to_row(self, source, dst) -> bool:
        """A column vector (a 1-D fragment of per-row values: a row reduction's result) stored as one row of a
        tensor (FlashAttention's ``T.copy(logsum, LSE[b, h, s0:s0 + bm])``)."""
        shape = static_shape(source, self.src)
        return (shape[1] == 1 and shape[0] % TILE == 0 and [int(e) for e in dst.extents] == [1, shape[0]]
                and str(source.scope()) == SCOPE_FRAGMENT)

    def lower_column_write(self, source, dst, what: str, note: str):
        """``column_to_row``: compute transposes the vector's tiles (``transpose(source, row)``: the values land
        in row 0), spreads row 0 to the tensor row's place in its tiles (an ``eltwise`` whose one-row operand sits
        at the top of its tile and whose destination at row ``s % 32``: the FPU's row broadcast) in the tensor's
        dtype, and the writer stores that row of each tile."""
        n = static_shape(source, self.src)[0]
        r, c0, rows, cols, window = self.tile_coords(dst, what)
        row, transpose = self.transposed_copy(source, note)
        out = self.staging_buffer(source, 1, n, "out", dtype=dst.buffer.dtype)
        self.cbs[out.name].producer.add("compute")
        self.cbs[out.name].consumer.add("writer")
        self.placement(out.name, window, what)
        self.tensor_cb_format(dst.buffer, out.name, "output", window, what)
        return tirx.SeqStmt([
            transpose, call(TTOps.eltwise, self.cb_index_placeholder(out), tirx.BufferLoad(row, [0, 0]), note=note),
            call(TTOps.write_block, self.cb_index_placeholder(out), self.tensor_index(dst.buffer), r, c0, rows, cols,
                 *window, note=note)])

    # -- in-place updates: a buffer the reader fills and compute rewrites gets a fresh CB (renamed) ---------
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
            return tirx.SeqStmt([self.lower(s, stages) for s in stmt.seq])
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
        body, pre = self.loop_carried(stmt, self.lower(stmt.body, inner_stages), alias_before, first_event)
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

    def transposed_copy(self, source: tirx.Buffer, note: str):
        """(scratch, op): a compute scratch CB that ``transpose(source, scratch)`` fills with ``source``
        transposed, tile by tile (``transpose_tile``); consumed where it is read. A column vector ([n, 1]: its
        values in column 0 of its tiles) becomes a row vector (row 0)."""
        rows, cols = static_shape(source, self.src)
        if rows % TILE or cols % TILE and cols != 1:
            raise TTUnsupportedError(f"a transpose of {source.name} ({rows}x{cols}), a block smaller than whole "
                                     "tiles", construct=note, source=self.src,
                                     fix="transpose blocks whose extents are multiples of 32")
        self.cb(source).consumer.add("compute")
        # The transpose runs through DST; with fp32 accumulation an fp16 CB is packed through bf16 (8 significant
        # bits, TT_KERNEL_PATTERNS 5b), so fp16 blocks are transposed into a Float32 scratch (fp32 holds fp16).
        dtype = "float32" if str(source.dtype) == "float16" else None
        scratch = self.staging_buffer(source, cols, rows, "T", dtype=dtype, scope=SCOPE_FRAGMENT)
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
        if along % TILE:
            raise TTUnsupportedError(
                f"T.reduce_{kind} over {along} elements: a reduction runs over whole 32-element tile rows/columns",
                construct=what, source=self.src, fix="reduce along an extent that is a multiple of 32")
        want = (rows, 1) if dim == 1 else (1, cols)
        if static_shape(dst.buffer, self.src) != want:
            raise TTUnsupportedError(f"reduction output {dst.buffer.name} has shape {list(static_shape(dst.buffer))}, "
                                     f"expected {list(want)}", construct=what, source=self.src)
        self.cb(source).consumer.add("compute")
        note = tilelang_text(stmt)
        pre = []
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
        raise TTUnsupportedError(f"more than {self.device.num_cbs} circular buffers are needed",
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
            rows_e, cols_e = static_shape(buf, self.src)
            rows, cols = tile_shape_2d((rows_e, cols_e))
            block_tiles = rows * cols
            table[name] = {"index": index, "role": role, "producer": sorted(info.producer), "shape": [rows_e, cols_e],
                           "consumer": sorted(info.consumer), "dtype": str(buf.dtype), "format": fmt.name,
                           "tile_offset": self._tile_offset(name),
                           **({"constant": f"index{INDEX_TILES.index(name)}"} if name in INDEX_TILES else {}),
                           "page_size": fmt.tile_bytes, "block_tiles": block_tiles, "shape_tiles": [rows, cols],
                           "depth_blocks": depth, "num_pages": depth * block_tiles,
                           "bytes": depth * block_tiles * fmt.tile_bytes}
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
                    args[i] = tirx.IntImm("int32", table[args[i].value]["index"])
                return tirx.Call(node.dtype, node.op, args)
        return None

    return tirx.stmt_functor.ir_transform(stmt, None, post, ["tirx.Call"])


def memory_space_lower(func: tirx.PrimFunc, device: DeviceProfile) -> tirx.PrimFunc:
    check_int_ranges(func, source_of(func))
    lowerer = _Lowerer(func, device)
    body = lowerer.lower(func.body, 2)
    table = lowerer.cb_table()
    body = _resolve_names(body, table)
    return attrs.put(func.with_body(body), {attrs.CB: table})


def MemorySpaceLowerTT(device: DeviceProfile):
    @prim_func_pass("tt.MemorySpaceLowerTT")
    def transform(func, mod, ctx):
        return memory_space_lower(func, device)

    return transform
