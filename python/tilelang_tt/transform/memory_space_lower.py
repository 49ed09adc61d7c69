"""MemorySpaceLowerTT: shared/fragment allocations become L1 circular buffers; T.copy becomes transfers.

In:  a PrimFunc after TilePadTT: the persistent loop around the ``"tilelang_root"`` block, whose
     ``alloc_shared`` (scope ``shared.dyn``) and ``alloc_fragment`` (``local.fragment``) buffers and
     ``tl.tileop.copy`` / ``fill`` / ``gemm`` calls and ``T.Parallel`` nests are the frontend's.
Out: the block is dissolved; every tile buffer has a CB; and
     * ``T.copy(global -> tile buffer)``  -> ``tilelang_tt.read_block`` (reader kernel),
     * ``T.copy(tile buffer -> global)``  -> ``tilelang_tt.write_block`` (writer kernel), preceded by an
       ``eltwise`` copy into a synthesized output CB when the source is a fragment,
     * ``T.copy(tile buffer -> tile buffer)`` -> ``tilelang_tt.eltwise`` (an identity in DST),
     * global tensors read or written inside a ``T.Parallel`` nest are staged through synthesized CBs with
       ``read_block`` before / ``write_block`` after the nest, whose body then indexes tile buffers only.
     ``fill``/``gemm``/``T.Parallel`` are left for TensorizeTT. ``T.use_swizzle`` (a GPU L2 hint) is dropped:
     the schedule's ``order`` plays that role on TT.
Attributes written: ``tt.cb`` = ``{buffer name: {index, role, producer, consumer, dtype, format, page_size,
     block_tiles, shape_tiles, depth_blocks, num_pages, bytes}}``. Depth: ``num_stages`` of the enclosing
     ``T.Pipelined`` loop for reader-filled CBs (default 2, double-buffered), 2 blocks for writer-drained
     CBs, 1 block for fragments.
Errors (TTLoweringError / TTUnsupportedError): copies whose window is not the whole tile buffer or not
     tile aligned; a buffer filled by the reader and also written by compute, or drained by the writer and
     also read by compute; non-affine indices in a ``T.Parallel`` body; scalar statements outside tile
     operators; control flow the tile program cannot express; more CBs than the device has.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm
from tvm import tirx

from .. import attrs
from ..device import DeviceProfile
from ..errors import TTLoweringError, TTUnsupportedError
from ..formats import data_format
from ..intrinsics import TTOps, call
from .common import (TILE, UnsupportedOps, transform, TileOps, decode_region, describe, tilelang_text, is_global, prim_func_pass, source_of, static_shape,
                     tile_op_call, tile_shape_2d)

SCOPE_SHARED = "shared.dyn"
SCOPE_FRAGMENT = "local.fragment"
_ROLE_BASE = {"input": 0, "output": 16, "intermediate": 24}


@dataclass
class CBInfo:
    buffer: tirx.Buffer
    producer: set = field(default_factory=set)   # {"reader", "compute"}
    consumer: set = field(default_factory=set)   # {"writer", "compute"}
    stages: int = 2


def _affine_offset(index, var, analyzer):
    """``index - var`` when ``index`` is ``offset + var`` with ``offset`` free of ``var``, else None."""
    offset = analyzer.simplify(index - var)
    free = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(offset), lambda n: free.append(n) if isinstance(n, tirx.Var) and n.same_as(var) else None)
    return None if free else offset


class _Lowerer:
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

    def staging_buffer(self, like: tirx.Buffer, rows: int, cols: int, suffix: str, dtype=None) -> tirx.Buffer:
        name = f"{like.name}_{suffix}"
        i = 1
        while name in self.cbs:
            i += 1
            name = f"{like.name}_{suffix}{i}"
        buf = tirx.decl_buffer((rows, cols), dtype if dtype is not None else like.dtype, name, scope=SCOPE_SHARED)
        self.cbs[name] = CBInfo(buf)
        return buf

    # -- copies ----------------------------------------------------------------------------------------
    def tile_coords(self, region, what: str):
        if len(region.mins) != 2:
            raise TTUnsupportedError(f"{what} on {len(region.mins)}-D buffer {region.buffer.name}", construct=what,
                                     source=self.src, fix="use 2-D tensors whose extents are multiples of 32")
        row = region.mins[0]
        col = region.mins[-1]
        for value, axis in ((row, "row"), (col, "column")):
            if not self.analyzer.can_prove(tirx.floormod(value, TILE) == 0):
                raise TTUnsupportedError(f"{what}: {axis} offset {value} of {region.buffer.name} is not a multiple of 32",
                                         construct=what, source=self.src, fix="copy whole 32x32 tiles")
        rows = 1
        for e in region.extents[:-1]:
            rows *= e
        cols = region.extents[-1]
        if rows % TILE or cols % TILE:
            raise TTUnsupportedError(f"{what}: window {list(region.extents)} is not a whole number of tiles",
                                     construct=what, source=self.src, fix="copy blocks whose extents are multiples of 32")
        return (self.plain.simplify(tirx.floordiv(row, TILE)), self.plain.simplify(tirx.floordiv(col, TILE)),
                rows // TILE, cols // TILE)

    def check_whole(self, region, what: str):
        shape = static_shape(region.buffer, self.src)
        if tuple(int(e) for e in region.extents) != shape[-len(region.extents):] or not all(
                self.analyzer.can_prove(m == 0) for m in region.mins):
            raise TTUnsupportedError(f"{what}: only whole tile buffers can be copied ({region.buffer.name} window "
                                     f"{list(region.extents)} of {list(shape)})", construct=what, source=self.src,
                                     fix="copy the whole shared/fragment buffer")

    def lower_copy(self, stmt, c: tirx.Call, stages: int):
        what = describe(stmt)
        note = tilelang_text(stmt)
        src, dst = decode_region(c.args[0], self.src), decode_region(c.args[1], self.src)
        if is_global(src.buffer) and is_global(dst.buffer):
            raise TTUnsupportedError("a global-to-global T.copy", construct=what, source=self.src,
                                     fix="stage the data through T.alloc_shared")
        if is_global(src.buffer):
            self.check_whole(dst, what)
            info = self.cb(dst.buffer)
            info.producer.add("reader")
            info.stages = max(info.stages, stages)
            r, c0, rows, cols = self.tile_coords(src, what)
            self._check_block(dst.buffer, rows, cols, what)
            return call(TTOps.read_block, self.cb_index_placeholder(dst.buffer), self.tensor_index(src.buffer), r, c0, rows, cols, note=note)
        if is_global(dst.buffer):
            self.check_whole(src, what)
            r, c0, rows, cols = self.tile_coords(dst, what)
            self._check_block(src.buffer, rows, cols, what)
            if str(src.buffer.scope()) == SCOPE_FRAGMENT:
                # the packer converts to the tensor's format: the staging CB has the tensor's dtype
                out = self.staging_buffer(src.buffer, rows * TILE, cols * TILE, "out", dtype=dst.buffer.dtype)
                self.cbs[out.name].producer.add("compute")
                self.cbs[out.name].consumer.add("writer")
                self.cb(src.buffer).consumer.add("compute")
                return tirx.SeqStmt([
                    call(TTOps.eltwise, self.cb_index_placeholder(out), tirx.BufferLoad(src.buffer, [0, 0]), note=note),
                    call(TTOps.write_block, self.cb_index_placeholder(out), self.tensor_index(dst.buffer), r, c0, rows, cols, note=note)])
            self.cb(src.buffer).consumer.add("writer")
            return call(TTOps.write_block, self.cb_index_placeholder(src.buffer), self.tensor_index(dst.buffer), r, c0, rows, cols, note=note)
        self.check_whole(src, what)
        self.check_whole(dst, what)
        if static_shape(src.buffer) != static_shape(dst.buffer):
            raise TTUnsupportedError("copy between tile buffers of different shapes", construct=what, source=self.src)
        self.cb(src.buffer).consumer.add("compute")
        self.cb(dst.buffer).producer.add("compute")
        return call(TTOps.eltwise, self.cb_index_placeholder(dst.buffer), tirx.BufferLoad(src.buffer, [0, 0]), note=note)

    def _check_block(self, buf, rows, cols, what):
        if tile_shape_2d(static_shape(buf, self.src)) != (rows, cols):
            raise TTUnsupportedError(f"window of {rows}x{cols} tiles does not match {buf.name}", construct=what,
                                     source=self.src)

    def cb_index_placeholder(self, buf: tirx.Buffer):
        # CB indices are assigned once all roles are known; ops carry a buffer-name string until then.
        return tirx.StringImm(buf.name)

    # -- T.Parallel ------------------------------------------------------------------------------------
    def lower_parallel(self, loop: tirx.For):
        what = describe(loop)
        note = f"T.Parallel: {tilelang_text(loop.body.body if isinstance(loop.body, tirx.For) else loop.body)}"
        loops, body, env = [], loop, {}
        while True:
            if isinstance(body, tirx.For) and body.kind == tirx.ForKind.PARALLEL:
                loops.append(body)
                body = body.body
            elif isinstance(body, tirx.SeqStmt) and all(isinstance(b, tirx.Bind) for b in body.seq[:-1]):
                # `y = by * 32 + i` / `x = A[i, j]` between or inside the loops: inline the local values
                for b in body.seq[:-1]:
                    env[b.var] = tirx.stmt_functor.substitute(b.value, env)
                body = body.seq[-1]
            else:
                break
        if env and isinstance(body, tirx.BufferStore):
            sub = tirx.stmt_functor.substitute
            body = tirx.BufferStore(body.buffer, sub(body.value, env), [sub(ix, env) for ix in body.indices])
        calls = []
        tirx.stmt_functor.post_order_visit(body, lambda n: calls.append(n) if isinstance(n, tirx.Call) else None)
        for c in calls:
            reason = UnsupportedOps.reason(c.op) if isinstance(c.op, tvm.ir.Op) else None
            if reason:
                raise TTUnsupportedError(f"{reason} ({c.op.name}) have no TT lowering: TT cores compute whole "
                                         "tiles without shared atomics or lanes", construct=what, source=self.src,
                                         fix="express the update as a tile operation (e.g. a reduction into a fragment)")
        if not isinstance(body, tirx.BufferStore) or len(loops) not in (1, 2):
            raise TTUnsupportedError("a T.Parallel nest must be 1 or 2 loops around one buffer store",
                                     construct=what, source=self.src, fix="write one elementwise assignment per T.Parallel")
        if len(loops) == 1:
            raise TTUnsupportedError("1-D T.Parallel over a tile", construct=what, source=self.src,
                                     fix="iterate T.Parallel(rows, cols) over a 2-D block")
        vi, vj = loops[0].loop_var, loops[1].loop_var
        R = int(loops[0].extent) if isinstance(loops[0].extent, tirx.IntImm) else None
        C = int(loops[1].extent) if isinstance(loops[1].extent, tirx.IntImm) else None
        if R is None or C is None or R % TILE or C % TILE:
            raise TTUnsupportedError(f"T.Parallel extents ({loops[0].extent}, {loops[1].extent}) are not multiples of 32",
                                     construct=what, source=self.src, fix="use blocks whose extents are multiples of 32")
        before, after = [], []
        staged: dict[str, tirx.Buffer] = {}
        accesses = []
        tirx.stmt_functor.post_order_visit(body, lambda n: accesses.append(n) if isinstance(n, (tirx.BufferLoad, tirx.BufferStore)) else None)
        for acc in accesses:
            for index in acc.indices:
                inner = []
                tirx.stmt_functor.post_order_visit(tirx.Evaluate(index), lambda n: inner.append(n) if isinstance(n, tirx.BufferLoad) else None)
                if inner:
                    raise TTUnsupportedError(
                        f"indirect (data-dependent) indexing of {acc.buffer.name} through {inner[0].buffer.name}",
                        construct=what, source=self.src,
                        fix="TT readers move whole tiles at addresses known per block; gather rows on the host or "
                            "restructure the kernel")

        def operand(buf: tirx.Buffer, indices, is_store: bool):
            if len(indices) != 2:
                raise TTUnsupportedError(f"{buf.name} is indexed with {len(indices)} indices", construct=what,
                                         source=self.src)
            loads = []
            for index in indices:
                tirx.stmt_functor.post_order_visit(tirx.Evaluate(index), lambda n: loads.append(n) if isinstance(n, tirx.BufferLoad) else None)
            if loads:
                raise TTUnsupportedError(f"indirect (data-dependent) indexing of {buf.name} through {loads[0].buffer.name}",
                                         construct=what, source=self.src,
                                         fix="TT readers move whole tiles at addresses known per block; gather rows "
                                             "on the host or restructure the kernel")
            # the user's names where the index is plainly affine; let-bound values (`y = by * 64 + i`) otherwise
            offs = [_affine_offset(ix, v, self.plain) if _affine_offset(ix, v, self.plain) is not None
                    else _affine_offset(ix, v, self.analyzer) for ix, v in ((indices[0], vi), (indices[1], vj))]
            if offs[0] is None or offs[1] is None:
                raise TTUnsupportedError(f"index {list(indices)} of {buf.name} is not (offset + i, offset + j)",
                                         construct=what, source=self.src,
                                         fix="index tiles as X[base_i + i, base_j + j] inside T.Parallel")
            if not is_global(buf):
                if not all(self.analyzer.can_prove(o == 0) for o in offs) or tile_shape_2d(static_shape(buf)) != (R // TILE, C // TILE):
                    raise TTUnsupportedError(f"tile buffer {buf.name} must be indexed [i, j] over its whole shape",
                                             construct=what, source=self.src)
                info = self.cb(buf)
                (info.producer if is_store else info.consumer).add("compute")
                return buf
            key = f"{buf.name}:{offs[0]}:{offs[1]}:{is_store}"
            if key in staged:
                return staged[key]
            region_row, region_col = offs
            for value, axis in ((region_row, "row"), (region_col, "column")):
                if not self.analyzer.can_prove(tirx.floormod(value, TILE) == 0):
                    raise TTUnsupportedError(f"{axis} offset {value} of {buf.name} is not a multiple of 32",
                                             construct=what, source=self.src, fix="align blocks to 32x32 tiles")
            tile = self.staging_buffer(buf, R, C, "out" if is_store else "tile")
            info = self.cbs[tile.name]
            args = (self.tensor_index(buf), self.analyzer.simplify(tirx.floordiv(region_row, TILE)),
                    self.analyzer.simplify(tirx.floordiv(region_col, TILE)), R // TILE, C // TILE)
            if is_store:
                info.producer.add("compute")
                info.consumer.add("writer")
                after.append(call(TTOps.write_block, self.cb_index_placeholder(tile), *args, note=note))
            else:
                info.producer.add("reader")
                info.consumer.add("compute")
                before.append(call(TTOps.read_block, self.cb_index_placeholder(tile), *args, note=note))
            staged[key] = tile
            return tile

        def rewrite(expr):
            def post(node):
                if isinstance(node, tirx.BufferLoad):
                    return tirx.BufferLoad(operand(node.buffer, node.indices, False), [vi, vj])
                return None
            return transform(tirx.Evaluate(expr), post, ["tirx.BufferLoad"]).value

        value = rewrite(body.value)
        dst = operand(body.buffer, body.indices, True)
        store = tirx.BufferStore(dst, value, [vi, vj])
        nest = tirx.For(loops[1].loop_var, loops[1].min, loops[1].extent, tirx.ForKind.PARALLEL, store)
        nest = tirx.For(loops[0].loop_var, loops[0].min, loops[0].extent, tirx.ForKind.PARALLEL, nest)
        stmts = before + [nest] + after
        return stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)

    # -- statements ------------------------------------------------------------------------------------
    def lower(self, stmt, stages: int):
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
            if stmt.kind == tirx.ForKind.PARALLEL:
                return self.lower_parallel(stmt)
            if stmt.thread_binding is not None or stmt.kind not in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED):
                raise TTUnsupportedError(f"loop kind {stmt.kind}", construct=describe(stmt), source=self.src)
            if stmt.step is not None and not (isinstance(stmt.step, tirx.IntImm) and int(stmt.step) == 1):
                raise TTUnsupportedError(f"a loop with step {stmt.step}", construct=describe(stmt), source=self.src,
                                         fix="write the loop with unit step and compute the index from it")
            inner_stages = stages
            if "num_stages" in stmt.annotations:
                inner_stages = max(1, int(stmt.annotations["num_stages"]))
            return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, self.lower(stmt.body, inner_stages),
                            None, stmt.annotations)
        if isinstance(stmt, tirx.Bind):
            # let-bound values (`y = by * 64 + i`) are known to the index analysis from here on
            self.analyzer.bind(stmt.var, stmt.value)
            return stmt
        if isinstance(stmt, tirx.AttrStmt):
            if str(stmt.attr_key) == "threadblock_swizzle_pattern":
                return self.lower(stmt.body, stages)
            raise TTUnsupportedError(f"attribute {stmt.attr_key!r}", construct=describe(stmt), source=self.src)
        c = tile_op_call(stmt)
        if c is not None:
            if c.op.same_as(TileOps.copy):
                return self.lower_copy(stmt, c, stages)
            if c.op.same_as(TileOps.fill):
                self.cb(decode_region(c.args[0], self.src).buffer).producer.add("compute")
                return stmt
            if c.op.same_as(TileOps.gemm):
                for i in (0, 1):
                    self.cb(decode_region(c.args[i], self.src).buffer).consumer.add("compute")
                acc = self.cb(decode_region(c.args[2], self.src).buffer)
                acc.producer.add("compute")
                acc.consumer.add("compute")
                return stmt
            raise TTUnsupportedError(f"tile operator {c.op.name} has no TT lowering", construct=describe(stmt),
                                     source=self.src, fix="use T.copy, T.gemm, T.clear/T.fill and T.Parallel")
        if isinstance(stmt, tirx.IfThenElse):
            loads = []
            tirx.stmt_functor.post_order_visit(tirx.Evaluate(stmt.condition), lambda n: loads.append(n) if isinstance(n, tirx.BufferLoad) else None)
            kind = "data-dependent control flow (an if on tensor values)" if loads else "control flow (if) inside the kernel body"
            raise TTUnsupportedError(kind, construct=describe(stmt), source=self.src,
                                     fix="TT tile programs are straight-line per block; use T.Parallel arithmetic "
                                         "(e.g. T.max) instead of branches")
        if isinstance(stmt, tirx.While):
            raise TTUnsupportedError("a while loop (data-dependent control flow)", construct=describe(stmt),
                                     source=self.src, fix="use loops with compile-time extents")
        if isinstance(stmt, tirx.BufferStore):
            raise TTUnsupportedError("a scalar store outside T.Parallel", construct=describe(stmt), source=self.src,
                                     fix="write element-wise code inside `for i, j in T.Parallel(M, N)`")
        raise TTUnsupportedError(f"statement {type(stmt).__name__}", construct=describe(stmt), source=self.src)

    def _check_block_fields(self, realize):
        """A block is dissolved: fields that would change its meaning are refused, never dropped."""
        block, what = realize.block, describe(realize)
        if not (isinstance(realize.predicate, tirx.IntImm) and int(realize.predicate) == 1):
            raise TTUnsupportedError(f"a block predicate ({realize.predicate})", construct=what, source=self.src,
                                     fix="guard with tile-level arithmetic instead of a block predicate")
        for field, value in (("iteration variables", block.iter_vars), ("match_buffer", block.match_buffers)):
            if len(value):
                raise TTUnsupportedError(f"a block with {field}", construct=what, source=self.src,
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

    def cb_table(self):
        table, used = {}, set()
        for name, info in self.cbs.items():
            buf = info.buffer
            if str(buf.scope()) == SCOPE_FRAGMENT and "reader" in info.producer:
                raise TTUnsupportedError(f"fragment {name} is loaded from global memory",
                                         construct=f"T.copy(..., {name})", source=self.src,
                                         fix="load into T.alloc_shared and copy into the fragment")
            if {"reader", "compute"} <= info.producer:
                raise TTUnsupportedError(f"{name} is filled by the reader and also written by compute",
                                         construct=name, source=self.src, fix="write the result into a separate buffer")
            if {"writer", "compute"} <= info.consumer:
                raise TTUnsupportedError(f"{name} is stored to global memory and also read by compute",
                                         construct=name, source=self.src, fix="store from a separate buffer")
            if not info.producer and not info.consumer:
                continue  # allocated but unused
            if str(buf.scope()) == SCOPE_FRAGMENT or info.producer == {"compute"} and info.consumer <= {"compute"}:
                role, depth = "intermediate", 1
            elif "reader" in info.producer:
                role, depth = "input", info.stages
            else:
                role, depth = "output", 2
            index = self._allocate_index(role, used)
            fmt = data_format(buf.dtype, f"tile buffer {name}", self.src)
            rows, cols = tile_shape_2d(static_shape(buf, self.src))
            block_tiles = rows * cols
            table[name] = {"index": index, "role": role, "producer": sorted(info.producer),
                           "consumer": sorted(info.consumer), "dtype": str(buf.dtype), "format": fmt.name,
                           "page_size": fmt.tile_bytes, "block_tiles": block_tiles, "shape_tiles": [rows, cols],
                           "depth_blocks": depth, "num_pages": depth * block_tiles,
                           "bytes": depth * block_tiles * fmt.tile_bytes}
        total = sum(e["bytes"] for e in table.values())
        if total > self.device.l1_usable_bytes:
            raise TTUnsupportedError(f"circular buffers need {total} bytes of L1 per core, more than the "
                                     f"{self.device.l1_usable_bytes} bytes a kernel can use on {self.device.arch}", construct="tile buffers",
                                     source=self.src, fix="use smaller blocks or fewer pipeline stages")
        return table


def _resolve_names(stmt, table):
    """Replace the buffer-name placeholders in TT ops by CB indices."""
    def post(node):
        if isinstance(node, tirx.Call) and str(getattr(node.op, "name", "")).startswith("tilelang_tt."):
            args = list(node.args)
            if isinstance(args[0], tirx.StringImm):
                args[0] = tirx.IntImm("int32", table[args[0].value]["index"])
                return tirx.Call(node.dtype, node.op, args)
        return None

    return tirx.stmt_functor.ir_transform(stmt, None, post, ["tirx.Call"])


def memory_space_lower(func: tirx.PrimFunc, device: DeviceProfile) -> tirx.PrimFunc:
    lowerer = _Lowerer(func, device)
    body = lowerer.lower(func.body, 2)
    table = lowerer.cb_table()
    body = _resolve_names(body, table)
    return func.with_body(body).with_attr(attrs.CB, table)


def MemorySpaceLowerTT(device: DeviceProfile):
    @prim_func_pass("tt.MemorySpaceLowerTT")
    def transform(func, mod, ctx):
        return memory_space_lower(func, device)

    return transform
