"""Part of MemorySpaceLowerTT: the irregular accesses -- offsets read from int32 tensors (block tables, expert
offsets), block-level ``if`` statements and ``T.im2col`` row gathers.

* an element of an int32 tensor in a copy's offsets (``X[Table[b, j] * 32, 0]``) becomes ``index_load(tensor,
  row, col, cb)``: the kernel that moves the block reads the element from L1 through its index CB
  (``<tensor>_idx``, ``<tensor>_idx_w`` for the writer; Int32, one page);
* ``if cond:`` in the kernel body becomes a loop of ``cond ? 1 : 0`` trips annotated ``tt.guard`` (the TileLang
  text), which all three kernels run; elements of int32 tensors in ``cond`` are read by the reader into
  ``<tensor>_cidx`` and handed to compute;
* ``T.im2col`` becomes ``im2col_rows``, a row gather through the reader's ``<tensor>_gather`` scratch CB.
The mixin runs on MemorySpaceLowerTT's ``_Lowerer`` state (CBs, aliases, events, the analyzer).
"""

from __future__ import annotations

import tvm
from tvm import tirx

from .. import attrs, records
from ..device import INDEX_FORMATS, index_format
from ..errors import TTLoweringError, TTUnsupportedError
from ..intrinsics import TTOps, call
from .common import (TILE, Region, TileOps, decode_region, describe, is_global, static_shape, tile_op_call,
                     tilelang_text, transform)


class IrregularLower:
    def index_loads(self, region, role: str, what: str):
        """``region`` with every element of a tensor in its offsets (``X[Table[b, j] * 32, 0]``) replaced by
        ``index_load(tensor, row, col, cb)``: the ``role`` kernel reads it from L1 through an index CB of its own
        (``<tensor>_idx``, Int32, one page), which is registered here."""
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

        mins = tuple(transform(tirx.Evaluate(m), post, ["tirx.BufferLoad"]).value for m in region.mins)
        return Region(region.buffer, mins, region.extents, region.access)

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
        stores = []
        tirx.stmt_functor.post_order_visit(body, lambda n: stores.append(n) if (
            (c := tile_op_call(n)) is not None and c.op.same_as(TileOps.copy)
            and is_global(decode_region(c.args[1], self.src).buffer)) else None)

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
