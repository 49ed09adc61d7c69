"""Part of MemorySpaceLowerTT: the irregular accesses -- offsets read from int32 tensors (block tables, expert
offsets), block-level ``if`` statements and ``T.im2col`` row gathers.

* an element of an int32 tensor in a copy's offsets (``X[Table[b, j] * 32, 0]``) becomes ``index_load(tensor,
  row, col, cb)``: the kernel that moves the block reads the element from L1 through its index CB
  (``<tensor>_idx``, ``<tensor>_idx_w`` for the writer; Int32, one page);
* ``if cond:`` in the kernel body becomes a loop of ``cond ? 1 : 0`` trips annotated ``tt.guard`` (the TileLang
  text), which all three kernels run; elements of int32 tensors in ``cond`` are read by the reader into
  ``<tensor>_cidx`` and handed to compute;
* ``T.im2col`` becomes ``im2col_rows``, a row gather through the reader's ``<tensor>_gather`` scratch CB;
* a block of rows at a row offset not known to be a multiple of 32 (a varlen sequence's rows from ``cu_seqlens``,
  an MoE expert's from its group offset) is read row by row (``offset_rows``) and stored row by row
  (``write_rows``), only the rows a T.Parallel's guard keeps (``row_store``).
The mixin runs on MemorySpaceLowerTT's ``_Lowerer`` state (CBs, aliases, events, the analyzer).
"""

from __future__ import annotations

import tvm
from tvm import tirx

from .. import attrs, records
from ..device import INDEX_FORMATS, index_format
from ..errors import TTLoweringError, TTUnsupportedError
from ..intrinsics import TTOps, call
from .common import (SCOPE_FRAGMENT, TILE, affine_offset, free_vars, has_index_load, Region, TileOps, decode_region, describe, is_global, static_shape, tile_op_call,
                     tilelang_text, transform)


class IrregularLower:
    def index_loads(self, region, role: str, what: str):
        """``region`` with every element of a tensor in its offsets (``X[Table[b, j] * 32, 0]``) replaced by
        ``index_load(tensor, row, col, cb)``: the ``role`` kernel reads it from L1 through an index CB of its own
        (``<tensor>_idx``, Int32, one page), which is registered here."""
        mins = tuple(self.index_expr(m, role, what) for m in region.mins)
        return Region(region.buffer, mins, region.extents, region.access)

    def index_expr(self, expr, role: str, what: str):
        """``expr`` (or each of a list of them) with every tensor element in it as ``index_load`` (``index_loads``)."""
        if isinstance(expr, (list, tuple)):
            return [self.index_expr(e, role, what) for e in expr]

        def post(node):
            if not (isinstance(node, tirx.BufferLoad) and is_global(node.buffer)):
                return None
            tensor = node.buffer
            if index_format(tensor.dtype) is None:
                raise TTUnsupportedError(
                    f"an offset reads {tensor.dtype} tensor {tensor.name}", construct=what, source=self.src,
                    fix=f"index tensors are {sorted(INDEX_FORMATS)} (block tables, offsets): store the indices as "
                        "int32")
            if len(node.indices) != 2:
                raise TTLoweringError(f"index tensor {tensor.name} has {len(node.indices)} indices after "
                                      "TilePadTT", construct=what, source=self.src)
            name = self.index_cb(tensor, role)
            return tirx.Call("int32", TTOps.index_load, [tirx.IntImm("int32", self.tensor_index(tensor)),
                                                         *node.indices, tirx.StringImm(name)])

        if not isinstance(expr, tirx.PrimExpr):
            return expr
        return transform(tirx.Evaluate(expr), post, ["tirx.BufferLoad"]).value

    def index_cb(self, tensor: tirx.Buffer, role: str) -> str:
        """The ``role`` kernel's index CB for int32 tensor ``tensor`` (Int32, one page; registered once)."""
        name = f"{tensor.name}_idx" + ("" if role == "reader" else "_w")
        if name not in self.cbs:
            self.add_cb(name, "int32", producer=role, consumer=role, fmt=index_format(tensor.dtype))
        return name

    def gather_scratch_cb(self, tensor: tirx.Buffer) -> str:
        """The reader's scratch CB for row gathers of ``tensor`` (one tile of the tensor's format): aligned chunks
        land there before they move to their rows."""
        name = f"{tensor.name}_gather"
        if name not in self.cbs:
            self.add_cb(name, tensor.dtype, producer="reader", consumer="reader")
        return name

    def lower_if(self, stmt: tirx.IfThenElse, stages: int):
        """A block-level ``if``: a loop of ``cond ? 1 : 0`` trips marked ``tt.guard``, which the reader, compute
        and writer all run, so the CB protocol inside it balances on its own (VerifyTTProgram checks the pages
        pushed and popped under the same condition). The condition reads block indices, loop variables, scalar
        parameters, shapes and elements of int32 tensors (``guard_condition``); ``else`` branches are refused."""
        what = describe(stmt)
        condition = self.guard_condition(stmt, what)
        if stmt.else_case is not None:
            raise TTUnsupportedError("an if with an else branch in the kernel body", construct=what,
                                     source=self.src, fix="write the else branch as a second if with the negated "
                                                          "condition")
        alias_before, first_event = dict(self.alias), len(self.events)
        guard = tirx.Var("guard", "int32")
        self.analyzer.bind(guard, tvm.ir.Range(0, 1))
        body = self.lower(stmt.then_case, stages)
        for name in set(self.alias) | set(alias_before):
            # a buffer the if redefines (T.copy into it, then an in-place update) is fine; one it updates in place
            # from a value before the if would differ after it by whether the if ran
            if self.alias.get(name) is not alias_before.get(name) and \
                    next((kind for n, kind in self.events[first_event:] if n == name), "use") != "def":
                raise TTUnsupportedError(f"{name} is filled by the reader before the if and updated in place inside "
                                         "it", construct=what, source=self.src,
                                         fix="copy it into a T.alloc_fragment inside the if and update that")
        trips = tirx.Select(condition, tirx.IntImm("int32", 1), tirx.IntImm("int32", 0))
        text = what[:-1] if what.endswith(":") else what     # the TileLang line, for comments
        return tirx.For(guard, tirx.IntImm("int32", 0), trips, tirx.ForKind.SERIAL, body, None,
                        {attrs.GUARD: tirx.StringImm(text)})

    def loop_bound(self, stmt: tirx.For, what: str):
        """(min, extent) of a loop whose trip count reads elements of int32 tensors (``for k in
        T.serial(T.ceildiv(Lens[b], 32))``, a varlen or MoE row count), each element read as in a block-level
        ``if`` (``element_reads``), so the reader, compute and writer all run the same trips."""
        return (self.element_reads(stmt.min, stmt.body, what, "a loop bound"),
                self.element_reads(stmt.extent, stmt.body, what, "a loop bound"))

    def guard_condition(self, stmt: tirx.IfThenElse, what: str):
        """The condition of a block-level ``if`` (``if BlockMask[by, k] > 0``), its elements read as
        ``element_reads`` says."""
        return self.element_reads(stmt.condition, stmt.then_case, what, "an if")

    def element_reads(self, expr, body, what: str, kind: str):
        """``expr`` (an ``if``'s condition, a loop's bound) with each element of an int32 tensor it reads replaced by
        ``index_load(tensor, row, col, cb)``: the reader reads the element into ``<tensor>_cidx`` (Int32, one page)
        and hands it to compute, which reads it from L1 (``read_tile_value``); a writer with stores in ``body``
        reads it through its own index CB."""
        stores = []     # the body's writes to tensors (a T.copy out, or a T.Parallel store) make the writer branch too
        tirx.stmt_functor.post_order_visit(body, lambda n: stores.append(n) if (
            (c := tile_op_call(n)) is not None and c.op.same_as(TileOps.copy)
            and is_global(decode_region(c.args[1], self.src).buffer)
            or isinstance(n, tirx.BufferStore) and is_global(n.buffer)) else None)

        def post(node):
            if not isinstance(node, tirx.BufferLoad):
                return None
            tensor = node.buffer
            if not is_global(tensor) or index_format(tensor.dtype) is None or len(node.indices) != 2:
                raise TTUnsupportedError(
                    f"{kind} on the values of {tensor.name} ({tensor.dtype}, "
                    f"{'tensor' if is_global(tensor) else 'tile buffer'})",
                    construct=what, source=self.src,
                    fix="branch on elements of int32 tensors (block masks, lengths, offsets), block indices or "
                        "scalar parameters (loop bounds too); compute on tile values with T.Parallel arithmetic "
                        "(T.if_then_else)")
            name = f"{tensor.name}_cidx"
            if name not in self.cbs:
                self.add_cb(name, "int32", producer="reader", consumer="compute",
                            fmt=index_format(tensor.dtype))
            if stores:
                self.index_cb(tensor, "writer")
            value = tirx.Call("int32", TTOps.index_load, [tirx.IntImm("int32", self.tensor_index(tensor)),
                                                          *node.indices, tirx.StringImm(name)])
            if str(node.dtype) == "bool":          # a mask element: its 32-bit word is 0 or 1
                return tirx.NE(value, tirx.IntImm("int32", 0))
            return value if str(node.dtype) == "int32" else tirx.Cast(node.dtype, value)

        return transform(tirx.Evaluate(expr), post, ["tirx.BufferLoad"]).value

    def lower_im2col(self, stmt, c, stages: int):
        """``T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)`` of an NHWC tensor (TilePadTT views
        it as [N*H*W, C]) into a tile buffer: the reader fills the buffer's CB row by row, each row the channels of
        one kernel tap of one output pixel (``gather_row``; padding taps and pixels past N*OH*OW read zeros).
        A column block must stay within one tap: its width divides C and is a multiple of 32."""
        what, note = describe(stmt), tilelang_text(stmt)
        img, col = decode_region(c.args[0], self.src).buffer, decode_region(c.args[1], self.src).buffer
        pad_info = records.padding(self.func, img.name)
        logical = list(pad_info.logical) if pad_info is not None else list(img.shape)
        if len(logical) != 4 or not all(isinstance(d, (int, tirx.IntImm)) for d in logical):
            raise TTUnsupportedError(f"T.im2col of {img.name} with shape {logical}", construct=what, source=self.src,
                                     fix="T.im2col reads an NHWC tensor of static shape [N, H, W, C]")
        N, H, W, C = (int(d) for d in logical)
        rows, cols = static_shape(col, self.src)
        if rows % TILE or cols % TILE or C % cols:
            raise TTUnsupportedError(
                f"T.im2col into a {rows}x{cols} block from {C} channels: a column block must cover whole 32-column "
                f"tiles of one kernel tap", construct=what, source=self.src,
                fix=f"use a block_K that divides C={C} and is a multiple of 32, and a block_M that is a multiple of 32")
        info = self.cb(col)
        info.producer.add("reader")
        info.stages = max(info.stages, stages)
        self.alias.pop(col.name, None)
        self.events.append((col.name, "def"))
        self.placements.pop(col.name, None)
        self.tensor_cb_format(img, col.name, "input", (0, TILE, 0, TILE), what)
        if self.cb_formats.get(col.name) in ("Bfp8_b", "Bfp4_b"):
            raise TTUnsupportedError(f"T.im2col of block-float tensor {img.name}", construct=what, source=self.src,
                                     fix="store the image as bfloat16, float16 or float32")
        ints = [int(a) for a in c.args[4:8]]
        return call(TTOps.im2col_rows, self.cb_index_placeholder(col), self.tensor_index(img), c.args[2], c.args[3],
                    N, H, W, C, *ints, rows, cols // TILE, tirx.StringImm(self.gather_scratch_cb(img)), note=note)

    # -- varlen rows: blocks at row offsets not known to be multiples of 32 ---------------------------------
    def offset_rows(self, region, column_window: bool = False) -> bool:
        """Whether a 2-D tensor window is whole tiles of rows at a row offset not known to be a multiple of 32 (a
        varlen sequence's rows from ``cu_seqlens``) and whole tiles of columns at a tile-aligned column
        (``column_window``: or fewer columns than a tile, a divisor of 32 at a multiple of it: a column vector)."""
        if len(region.mins) != 2 or int(region.extents[0]) % TILE:
            return False
        row, col = region.mins
        cols = int(region.extents[1])
        step = TILE if cols % TILE == 0 else cols if column_window and TILE % cols == 0 else None
        return (step is not None and not self.analyzer.can_prove(tirx.floormod(row, TILE) == 0)
                and self.analyzer.can_prove(tirx.floormod(col, step) == 0))

    def rows_at_data_offset(self, region) -> bool:
        """Whether a 2-D tensor window of fewer rows than a tile sits at a row offset read from a tensor (a token's
        row ``Offsets[b] + s``): its place in the tile would be known only to the reader, so the reader moves its
        rows to the top of the block (``offset_rows``), where compute finds them."""
        if len(region.mins) != 2 or int(region.extents[0]) >= TILE:
            return False
        cols = int(region.extents[1])
        step = TILE if cols % TILE == 0 else cols if TILE % cols == 0 else None
        return step is not None and has_index_load(region.mins[0]) and \
            self.analyzer.can_prove(tirx.floormod(region.mins[1], step) == 0)

    def _refuse_block_float_rows(self, cb_name: str, region, what: str):
        """Rows at a row offset move face-row segments: a block-float tensor's rows share exponents per face row."""
        if self.cb_formats.get(cb_name) in ("Bfp8_b", "Bfp4_b"):
            raise TTUnsupportedError(f"{what}: rows of block-float tensor {region.buffer.name} at row offset "
                                     f"{region.mins[0]}, which is not a multiple of 32", construct=what,
                                     source=self.src, fix="move block-float tensors in whole 32x32 tiles")

    def offset_rows_read(self, region, target: tirx.Buffer, what: str, note: str):
        """The ``offset_rows`` op filling ``target``'s CB with ``region``'s rows (its format the tensor's): rows at
        or past the view's row count (a T.dynamic count is the kernels' runtime argument) read zeros."""
        self.tensor_cb_format(region.buffer, target.name, "input", (0, TILE, 0, TILE), what)
        self._refuse_block_float_rows(target.name, region, what)
        rows, cols = (int(e) for e in region.extents)
        return call(TTOps.offset_rows, self.cb_index_placeholder(target), self.tensor_index(region.buffer),
                    region.mins[0], rows, self.plain.simplify(tirx.floordiv(region.mins[1], TILE)),
                    max(1, cols // TILE), region.buffer.shape[0],
                    tirx.StringImm(self.gather_scratch_cb(region.buffer)), note=note)

    def lower_offset_rows(self, src, target: tirx.Buffer, what: str, note: str):
        """``T.copy(X[r0:r0 + bm, c0:c0 + bn], x)`` with ``r0`` not a multiple of 32: the rows straddle tile rows
        of X, so the reader moves each row's face-row segments into its row of the block (``offset_rows``, through
        the gather scratch CB as a row gather does); rows past X's last read zeros."""
        rows, cols = (int(e) for e in src.extents)
        self._check_block(target, rows // TILE, cols // TILE, what)
        self.placements.pop(target.name, None)
        return self.offset_rows_read(src, target, what, note)

    def lower_write_rows(self, source, src, dst, what: str, note: str, valid_rows, origin=None):
        """The rows of a tile buffer stored at an element row offset: compute packs them into a staging CB of the
        tensor's dtype, the writer scatters its rows (``write_rows``). Fewer rows than a tile are the first rows of
        their tiles: a buffer of that shape, or a window of a fragment at a tile-aligned ``origin``
        (``fragment_window``)."""
        rows, cols = (int(e) for e in dst.extents)
        place = self.placements.get(source.name, (None, None))
        if origin is None:
            self.check_whole(src, what)
            self._check_block(source, -(-rows // TILE), cols // TILE, what)
            if place[1] is not None or place[0] is not None and not (
                    rows < TILE and self.analyzer.can_prove(place[0] == 0)):
                raise TTUnsupportedError(f"{what}: {source.name} holds a block smaller than a tile", construct=what,
                                         source=self.src, fix="store whole 32x32 tiles at a row offset")
        shape = static_shape(source) if origin is None else [rows, cols]
        out = self.staging_buffer(source, shape[0], shape[1], "out", dtype=dst.buffer.dtype)
        self.cbs[out.name].producer.add("compute")
        self.cbs[out.name].consumer.add("writer")
        self.cb(source).consumer.add("compute")
        self.inherit(out.name, source.name)
        self.tensor_cb_format(dst.buffer, out.name, "output", (0, TILE, 0, TILE), what)
        self._refuse_block_float_rows(out.name, dst, what)
        count = dst.buffer.shape[0]
        if valid_rows is None:
            bound = tirx.IntImm("int32", rows)
        else:   # the guard's bound may read int32 tensors too (a sequence length from cu_seqlens)
            bound = self.index_loads(Region(dst.buffer, (valid_rows,), (1,), 2), "writer", what).mins[0]
        return tirx.SeqStmt([
            call(TTOps.eltwise, self.cb_index_placeholder(out), tirx.BufferLoad(source, origin or [0, 0]), note=note),
            call(TTOps.write_rows, self.cb_index_placeholder(out), self.tensor_index(dst.buffer), dst.mins[0], rows,
                 self.plain.simplify(tirx.floordiv(dst.mins[1], TILE)), cols // TILE, count,
                 self.plain.simplify(bound), note=note)])

    def row_store(self, loops, store: tirx.BufferStore, what: str, note: str):
        """``Y[r0 + i, c0 + j] = x[i, j]`` over the whole of tile buffer ``x`` with ``r0`` not known to be a multiple
        of 32 (a varlen sequence's rows), optionally guarded ``if e + i < n`` (PredicateParallelTT's ``Select``
        keeping Y's element): the T.copy it spells, whose first ``n - e`` rows are written (``write_rows``); a
        computed value (``acc[i, j] * W[r0 + i]``) is computed into a fragment first. None for any other store
        (never a read-modify-write of rows another block may own)."""
        if len(loops) != 2 or not is_global(store.buffer) or len(store.indices) != 2:
            return None
        i, j = (lp.loop_var for lp in loops)
        value, valid = store.value, None
        if isinstance(value, tirx.Select):
            keep = value.false_value
            if not (isinstance(keep, tirx.BufferLoad) and keep.buffer.same_as(store.buffer) and all(
                    self.analyzer.can_prove(a == b) for a, b in zip(keep.indices, store.indices))):
                return None
            valid = _leading_rows(value.condition, i, j, self.analyzer)
            if valid is None:
                return None
            value = value.true_value
        if isinstance(value, tirx.Cast) and value.dtype == store.buffer.dtype:   # the packer converts
            value = value.value
        computed = not (isinstance(value, tirx.BufferLoad) and not is_global(value.buffer) and len(value.indices) == 2
                        and value.indices[0].same_as(i) and value.indices[1].same_as(j))
        offsets = []
        for ix, var, other in ((store.indices[0], i, j), (store.indices[1], j, i)):
            off = affine_offset(ix, var, self.analyzer)
            if off is None or any(v.same_as(other) for v in free_vars(off)):
                return None
            offsets.append(off)
        extents = tuple(tirx.IntImm("int32", int(lp.extent)) for lp in loops)
        if not computed and tuple(int(e) for e in extents) != tuple(static_shape(value.buffer)):
            return None
        dst = Region(store.buffer, tuple(offsets), extents, 2)
        if not self.offset_rows(dst):
            return None
        ops = []
        if computed:    # the rows are computed into a fragment first (Y[r0 + i, j] = acc[i, j] * W[r0 + i])
            rows = self.staging_buffer(store.buffer, *(int(e) for e in extents), "rows", dtype=value.dtype,
                                       scope=SCOPE_FRAGMENT)
            ops += self.lower_store(loops, tirx.BufferStore(rows, value, [i, j]), what)
            value = tirx.BufferLoad(rows, [i, j])
        src = Region(value.buffer, (tirx.IntImm("int32", 0), tirx.IntImm("int32", 0)), extents, 1)
        ops.append(self.lower_copy_write(self.current(value.buffer), src, dst, what, note, valid_rows=valid))
        return ops[0] if len(ops) == 1 else tirx.SeqStmt(ops)

    def stage_offset_rows(self, region, note, before, what) -> tirx.Buffer:
        """A block of a tensor at a row offset not known to be a multiple of 32 (``W[m_start + i]``, a per-row
        weight of an MoE expert's rows): the reader moves each row into its row of the CB (``offset_rows``); a
        block narrower than a tile keeps its columns where they are in the tile."""
        rows, cols = (int(e) for e in region.extents)
        tile = self.staging_buffer(region.buffer, rows, cols, "tile")
        info = self.cbs[tile.name]
        info.producer.add("reader")
        info.consumer.add("compute")
        if cols % TILE or rows < TILE:
            col = self.plain.simplify(tirx.floormod(region.mins[1], TILE)) if cols % TILE else 0
            self.placement(tile.name, (0, min(rows, TILE), col, min(cols, TILE)), what)
        before.append(self.offset_rows_read(region, tile, what, note))
        return tile


def _leading_rows(cond, i, j, analyzer):
    """``n`` when ``cond`` says ``i < n`` (``e + i < b``, ``i <= b``, ``b > i``, ... with ``n`` free of ``i`` and
    ``j``): the guard keeps the first ``n`` rows; else None."""
    if isinstance(cond, (tirx.GT, tirx.GE)):
        cond = (tirx.LT if isinstance(cond, tirx.GT) else tirx.LE)(cond.b, cond.a)
    if not isinstance(cond, (tirx.LT, tirx.LE)):
        return None
    diff = cond.a - cond.b              # cond: diff < 0 (LT) or diff <= 0 (LE)
    rest = analyzer.simplify(diff - i)
    if any(v.same_as(i) or v.same_as(j) for v in free_vars(rest)):
        return None
    bound = analyzer.simplify(0 - rest)  # i < -rest
    return bound if isinstance(cond, tirx.LT) else analyzer.simplify(bound + 1)
