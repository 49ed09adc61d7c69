"""Part of MemorySpaceLowerTT: ``T.copy`` between a tensor and a tile buffer, or between tile buffers.

A read becomes ``tilelang_tt.read_block`` (the reader kernel) into the tile buffer's CB, a write
``tilelang_tt.write_block`` (the writer kernel), preceded by an ``eltwise`` copy into a synthesized output CB when
the source is a fragment; a copy between tile buffers is an ``eltwise`` identity in DST; a tile-aligned window of a
fragment is an ``eltwise`` whose leaf load carries the window's origin. A block smaller than a tile keeps its place
in the tile (``placement``); a tensor read into a tile buffer of another float format converts on the compute path
through a staging CB (``converts``); a per-row vector written into a tensor column is a column write. The mixin
runs on MemorySpaceLowerTT's ``_Lowerer`` state (CBs, placements, aliases, the analyzers).
"""

from __future__ import annotations

import tvm
from tvm import tirx

from .. import records
from ..device import FLOAT8_DTYPES, FORMATS, INDEX_FORMATS, INT_OUTPUT_FORMATS
from ..errors import TTLoweringError, TTUnsupportedError
from ..formats import data_format, tensor_format
from ..intrinsics import TTOps, call
from .common import SCOPE_FRAGMENT, SCOPE_SHARED, TILE, Region, decode_region, describe, is_global, static_shape, tilelang_text


class CopyLower:
    """The ``T.copy`` lowering of MemorySpaceLowerTT (a mixin of its ``_Lowerer``)."""

    def tensor_cb_format(self, tensor: tirx.Buffer, cb_name: str, io: str, window, what: str):
        """A CB the reader fills from / the writer drains to a tensor stored in a block-float format (int8
        weights, T.TTShard(format=...)) has that format: the unpacker expands it to BF16, the packer rounds into it.
        An int8 tensor stored as Int8 gives its CB the UInt8 format of its pages."""
        shard = records.shard(self.func, tensor.name)
        annotated = shard.format if shard is not None else None
        fmt = tensor_format(tensor.dtype, str(annotated) if annotated else None, io, f"tensor {tensor.name}", self.src)
        if str(tensor.dtype) in INDEX_FORMATS and io != "input" and str(tensor.dtype) not in INT_OUTPUT_FORMATS:
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
        stand_in = FORMATS.get(str(tensor.dtype)) is not fmt and str(tensor.dtype) not in FLOAT8_DTYPES
        if fmt is have or fmt.kind == "bfp" or stand_in:
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
                    if axis == "column":     # rows at any offset move row by row; a row's elements cannot
                        raise TTUnsupportedError(
                            f"{what}: column offset {value} of {region.buffer.name} is not a multiple of 32 (a row's "
                            "elements at an unaligned column share 16-byte NoC words with their neighbours, which "
                            "other blocks may write)", construct=what, source=self.src,
                            fix="move blocks at column offsets that are multiples of 32; a per-row vector at a "
                                "varlen offset can be stored as a column of a [N, 1] tensor (rows at any offset are "
                                "moved row by row)")
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
        # an extent under a tile (``acc[:valid_h, :]``, GQA decode's valid heads): the first rows / columns of the
        # tiles at a tile-aligned origin, which is where a buffer of that shape holds them
        if extents != list(shape_of) or any(e % TILE and e > TILE for e in extents) or not all(
                self.analyzer.can_prove(tirx.floormod(m, TILE) == 0) and self.analyzer.can_prove(m >= 0)
                and self.analyzer.can_prove(m + e <= s) for m, e, s in zip(region.mins, extents, shape)):
            self.check_whole(region, what)
        return [self.plain.simplify(m) for m in region.mins]

    def lower_copy(self, stmt, c: tirx.Call, stages: int):
        what = describe(stmt)
        note = tilelang_text(stmt)
        src, dst = decode_region(c.args[0], self.src), decode_region(c.args[1], self.src)
        if is_global(src.buffer) and is_global(dst.buffer):
            return self.lower_global_copy(src, dst, stages, what, note)
        if is_global(src.buffer):
            origin = self.copy_window(dst)
            if origin is not None:
                return self.lower_read_into_window(src, dst, origin, stages, what, note)
            self.check_whole(dst, what)
            shape = static_shape(dst.buffer, self.src)
            if shape[1] == 1 and shape[0] > 1 and [int(e) for e in src.extents] == [1, shape[0]]:
                return self.lower_row_into_column(src, dst, stages, what, note)
            if self.converts(src.buffer, dst.buffer, "input", what):
                return self.lower_converting_read(src, dst, stages, what, note)
            return self.lower_copy_read(src, dst, stages, what, note)
        return self.lower_copy_local(src, dst, what, note)

    def lower_global_copy(self, src, dst, stages: int, what: str, note: str):
        """``T.copy(tensor window -> tensor window)`` (FlashAttention's backward converting its float32 dQ to the
        output dtype): through a tile buffer of the window's shape, as if written ``T.copy(src, shared);
        T.copy(shared, dst)`` (read, then write, converting to the destination's dtype on the way)."""
        extents = [int(e) for e in src.extents]
        if len(extents) != 2 or [int(e) for e in dst.extents] != extents:
            raise TTUnsupportedError(f"a global-to-global T.copy of a {extents} window into a "
                                     f"{[int(e) for e in dst.extents]} one", construct=what, source=self.src,
                                     fix="copy windows of the same 2-D shape, or stage through T.alloc_shared")
        shared = self.staging_buffer(src.buffer, *extents, "copy", scope=SCOPE_SHARED)
        zeros = (tirx.IntImm("int32", 0), tirx.IntImm("int32", 0))
        into = Region(shared, zeros, tuple(src.extents), 2)
        read = (self.lower_converting_read(src, into, stages, what, note)
                if self.converts(src.buffer, shared, "input", what) else
                self.lower_copy_read(src, into, stages, what, note))
        return tirx.SeqStmt([read, self.lower_copy_local(Region(shared, zeros, tuple(src.extents), 1), dst, what,
                                                         note)])

    def lower_row_into_column(self, src, dst, stages: int, what: str, note: str):
        """``T.copy(X[r, c0:c0 + n], v)`` into ``v``, a vector of per-row values (a column of its tiles: it is read
        as ``v[i]`` by the row variable, or a row reduction's peer): the reader moves the row into a row vector,
        compute moves it to the first row of its tiles when it sits lower (``picked_line``) and transposes the tiles
        (``transpose_tile``: row 0 -> column 0) into ``v``."""
        n = static_shape(dst.buffer, self.src)[0]
        row = self.staging_buffer(dst.buffer, 1, n, "row", scope=SCOPE_SHARED)
        whole = Region(row, (tirx.IntImm("int32", 0), tirx.IntImm("int32", 0)), (1, n), 2)
        read = (self.lower_converting_read(src, whole, stages, what, note)
                if self.converts(src.buffer, row, "input", what) else
                self.lower_copy_read(src, whole, stages, what, note))
        ops = [read]
        source = self.current(row)
        if not self.analyzer.can_prove(self.placements.get(source.name, (0, None))[0] == 0):
            source, pick = self.picked_line(source, 0, tirx.IntImm("int32", 0), note)
            ops += pick
        column, transpose = self.transposed_copy(source, note)
        ops.append(transpose)
        zeros = (tirx.IntImm("int32", 0), tirx.IntImm("int32", 0))
        ops.append(self.lower_copy_local(Region(column, zeros, (n, 1), 1), dst, what, note))
        return tirx.SeqStmt(ops)

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
        if self.offset_rows(src):
            return self.lower_offset_rows(src, target, what, note)
        r, c0, rows, cols, window = self.tile_coords(src, what)
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
        shape = static_shape(source, self.src)
        axis = self.line_axis([(None, m) for m in src.mins], [int(e) for e in src.extents], shape) \
            if len(src.mins) == 2 and static_shape(dst.buffer) in ((1, shape[1]), (shape[0], 1)) else None
        if axis is not None and static_shape(dst.buffer)[axis] == 1:   # T.copy(lse[k, :], row): one row picked
            line, ops = self.picked_line(source, axis, src.mins[axis], note)
            target = self.target(dst.buffer)
            self.inherit(target.name, line.name)
            return tirx.SeqStmt(ops + [call(TTOps.eltwise, self.cb_index_placeholder(target),
                                            tirx.BufferLoad(line, [0, 0]), note=note)])
        origin = self.fragment_window(src, static_shape(dst.buffer), what)
        if origin is None and static_shape(src.buffer) != static_shape(dst.buffer):
            raise TTUnsupportedError("copy between tile buffers of different shapes", construct=what, source=self.src)
        self.cb(source).consumer.add("compute")
        target = self.target(dst.buffer)
        self.inherit(target.name, source.name)
        top = self.top_of_tiles(source, src, origin, what)
        if top is not None:
            self.placements[target.name] = top
        return call(TTOps.eltwise, self.cb_index_placeholder(target), tirx.BufferLoad(source, origin or [0, 0]),
                    note=note)

    def lower_copy_write(self, source, src, dst, what: str, note: str, valid_rows=None):
        """``T.copy(tile buffer -> tensor window)``: a ``write_block`` of the buffer's CB, through a staging CB of
        the tensor's dtype that compute packs when the buffer is a fragment, compute reads it, the reader fills it
        or its format is not the tensor's. Rows at a row offset not known to be a multiple of 32 are written row by
        row (``write_rows``), the first ``valid_rows`` of them (a T.Parallel's guard; default: those inside the
        tensor)."""
        dst = self.index_loads(dst, "writer", what)
        if self.offset_rows(dst):
            return self.lower_write_rows(source, src, dst, what, note, valid_rows)
        if self.column_to_row(source, dst):
            return self.lower_column_write(source, dst, what, note)
        origin = self.fragment_window(src, [int(e) for e in dst.extents], what)
        top = self.top_of_tiles(source, src, origin, what)
        if self.top_rows_at_offset(top if origin is not None else self.placements.get(source.name), dst):
            return self.lower_write_rows(source, src, dst, what, note, valid_rows, origin)
        r, c0, rows, cols, window = self.tile_coords(dst, what)
        if origin is None:
            self._check_block(source, rows, cols, what)
        if top is None:     # else the staging CB below holds the window at the top of its tiles
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
            if top is not None:
                self.placements[out.name] = top
                self.placement(out.name, window, what)
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

    def top_of_tiles(self, source, region, origin, what: str):
        """The placement of a window of ``source`` narrower than a tile at a tile-aligned ``origin``
        (``fragment_window``): its rows / columns are the first of their tiles. None for whole tiles."""
        if origin is None or all(int(e) % TILE == 0 for e in region.extents):
            return None
        if any(x is not None for x in self.placements.get(source.name, (None, None))):
            raise TTUnsupportedError(f"{what}: a window of {source.name}, which holds a block smaller than a tile",
                                     construct=what, source=self.src, fix="copy the whole buffer")
        return tuple(tirx.IntImm("int32", 0) if int(e) < TILE else None for e in region.extents)

    def top_rows_at_offset(self, place, dst) -> bool:
        """Whether a block held in the first rows of its tiles (``place``: its placement) and whole tiles of
        columns is stored at a row offset not known to be a multiple of 32 (GQA decode's ``O[b, h * 4:h * 4 + 4]``):
        then it is written row by row (``write_rows``)."""
        if place is None or place[0] is None or place[1] is not None or len(dst.mins) != 2:
            return False
        row, col = dst.mins
        return (self.analyzer.can_prove(place[0] == 0) and int(dst.extents[1]) % TILE == 0
                and not self.analyzer.can_prove(tirx.floormod(row, TILE) == 0)
                and self.analyzer.can_prove(tirx.floormod(col, TILE) == 0))

    def column_to_row(self, source, dst) -> bool:
        """A column vector (a 1-D fragment of per-row values: a row reduction's result) stored as one row of a
        tensor (FlashAttention's ``T.copy(logsum, LSE[b, h, s0:s0 + bm])``)."""
        shape = static_shape(source, self.src)
        return (shape[1] == 1 and (shape[0] % TILE == 0 or TILE % shape[0] == 0)
                and [int(e) for e in dst.extents] == [1, shape[0]] and str(source.scope()) == SCOPE_FRAGMENT)

    def lower_column_write(self, source, dst, what: str, note: str):
        """``column_to_row``: compute transposes the vector's tiles (``transpose(source, row)``: the values land
        in row 0), spreads row 0 to the tensor row's place in its tiles (an ``eltwise`` whose one-row operand sits
        at the top of its tile and whose destination at row ``s % 32``: the FPU's row broadcast) in the tensor's
        dtype, and the writer stores that row of each tile."""
        n = static_shape(source, self.src)[0]
        r, c0, rows, cols, window = self.tile_coords(dst, what)
        if n < TILE:      # a vector shorter than a tile: its rows become the columns of the tensor's row
            held = self.placements.get(source.name, (None, None))[0]
            held = held if held is not None else tirx.IntImm("int32", 0)
            if not self.analyzer.can_prove(window[2] == held):
                raise TTUnsupportedError(
                    f"{what}: {source.name} holds its {n} values at rows {held} of its tile, but this store needs "
                    f"them at columns {window[2]}", construct=what, source=self.src,
                    fix="store the vector at a column offset equal, modulo 32, to the rows it was computed at")
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
