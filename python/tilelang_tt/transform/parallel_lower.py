"""Part of MemorySpaceLowerTT: ``T.Parallel`` nests become element-wise stores over tile buffers.

Each store of a nest (1 or 2 loops; let-bound values inlined; several stores become several nests) is rewritten
to index tile buffers only: tensors it reads are staged through CBs the reader fills before the nest, tensors it
writes through CBs the writer drains after it; operands indexed transposed are transposed on chip into a scratch
CB; vectors keep their broadcast indices (``[i, 0]``, ``[0, j]``); loop variables used as values read the
constant index tiles; let-bound float constants are folded; an element of a float32 / int32 tensor the same for
the whole nest (``Slopes[by]``) is a scalar compute reads from L1 (``scalar_elements``). Operands smaller than a tile must share their place
in the tile (``check_aligned``). The mixin runs on MemorySpaceLowerTT's ``_Lowerer`` state (CBs, placements,
aliases, the analyzers); a ``_Nest`` holds one store's state (its loops, the blocks staged around it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm
from tvm import tirx

from ..device import INT_OUTPUT_FORMATS, SCALAR_ELEMENT_FORMATS, TILE_FORMATS
from ..errors import TTLoweringError, TTUnsupportedError
from ..intrinsics import TTOps, call
from .common import (SCOPE_FRAGMENT, affine_offset, free_vars, TILE, Region, UnsupportedOps, const_value, describe, has_load, is_global, static_shape,
                     tilelang_text, transform, uses_var)

INDEX_TILES = ("tt_row_index", "tt_col_index")     # constant float32 tiles: element (r, c) holds r / c


def _loads_in(expr) -> list:
    found = []
    tirx.stmt_functor.post_order_visit(expr, lambda n: found.append(n) if isinstance(n, tirx.BufferLoad) else None)
    return found


def logical_as_selects(expr):
    """``a and b``, ``a or b``, ``not a`` (a sliding window's mask: ``i >= j and j > i - W``) as selects of their
    0 / 1 tiles (``where_tile``): ``a ? b : false``, ``a ? true : b``, ``a ? false : true``; ``&``, ``|`` and ``^``
    of truth values (``(Idx[i] <= q) & (Idx[i] != -1)``) alike."""
    false, true = tirx.IntImm("bool", 0), tirx.IntImm("bool", 1)

    def post(node):
        if isinstance(node, tirx.Call) and str(node.dtype) == "bool" and node.op.same_as(_BITWISE["and"]):
            return tirx.Select(node.args[0], node.args[1], false)
        if isinstance(node, tirx.Call) and str(node.dtype) == "bool" and node.op.same_as(_BITWISE["or"]):
            return tirx.Select(node.args[0], true, node.args[1])
        if isinstance(node, tirx.Call) and str(node.dtype) == "bool" and node.op.same_as(_BITWISE["xor"]):
            return tirx.Select(node.args[0], tirx.Select(node.args[1], false, true), node.args[1])
        if isinstance(node, tirx.And):
            return tirx.Select(node.a, node.b, false)
        if isinstance(node, tirx.Or):
            return tirx.Select(node.a, true, node.b)
        if isinstance(node, tirx.Not):
            return tirx.Select(node.a, false, true)
        return None

    return tirx.stmt_functor.ir_transform(tirx.Evaluate(expr), None, post,
                                          ["tirx.And", "tirx.Or", "tirx.Not", "tirx.Call"]).value


_BITWISE = {k: tvm.ir.Op.get(f"tirx.bitwise_{k}") for k in ("and", "or", "xor")}


def truncating_divisions(expr):
    """Integer ``T.truncdiv(a, c)`` / ``T.truncmod(a, c)`` (C's ``/`` and ``%``) by a positive constant ``c`` as floor
    divisions, which the tiles compute exactly: ``a >= 0 ? a // c : -((-a) // c)`` and ``a - c * truncdiv(a, c)``.
    Other integer divisions are left for TensorizeTT to refuse."""
    def divisor(node) -> bool:
        return node.dtype.startswith("int") and isinstance(node.b, tirx.IntImm) and int(node.b.value) > 0

    def trunc(a, b):
        return tirx.Select(a >= 0, tirx.FloorDiv(a, b), tirx.FloorDiv(-a, b) * -1)

    def post(node):
        if isinstance(node, tirx.Div) and divisor(node):
            return trunc(node.a, node.b)
        if isinstance(node, tirx.Mod) and divisor(node):
            return node.a - trunc(node.a, node.b) * node.b
        return None

    return tirx.stmt_functor.ir_transform(tirx.Evaluate(expr), None, post, ["tirx.Div", "tirx.Mod"]).value


def fold_constants(expr):
    """Float arithmetic between constants (``T.float32(1.0) / T.Cast("float32", D)``, ``-T.infinity("float")``)
    as one constant."""
    def post(node):
        if node.dtype.startswith(("float", "bfloat")):
            value = const_value(node)
            if value is not None:
                return tirx.FloatImm(node.dtype, value)
        return None

    return tirx.stmt_functor.ir_transform(tirx.Evaluate(expr), None, post,
                                          ["tirx.Cast", "tirx.Add", "tirx.Sub", "tirx.Mul", "tirx.Div",
                                           "tirx.Call"]).value




def _without_single_trip(loops: list, stores: list) -> tuple[list, list]:
    """(loops, stores) of a 2-D nest with a loop of one iteration (``for i, j in T.Parallel(1, D)`` over a one-row
    block) replaced by its variable's minimum: ``dgamma[j] += dy[i, j] * x_hat[i, j]`` updates a row vector
    element-wise."""
    if len(loops) != 2 or all(int(lp.extent) != 1 for lp in loops):
        return loops, stores
    one = next(lp for lp in loops if int(lp.extent) == 1)
    return ([lp for lp in loops if lp is not one],
            [tirx.stmt_functor.substitute(st, {one.loop_var: one.min}) for st in stores])

class GatherRows:
    """The row offset of a gathered operand ``X[Idx[pos0 + i * step] * scale + base, j]``: row ``i`` of the block is
    the tensor row ``v * scale + base``, ``v`` the element ``pos0 + i * step`` of the int32 index tensor ``index``
    (its 2-D view); ``scale`` and ``base`` come from the tensor's own dimensions (``KV[b, Idx[b, s, k], g, d]`` of a
    ``[B, S, G, D]`` tensor is row ``(b * S + Idx) * G + g`` of its 2-D view)."""

    def __init__(self, index: tirx.Buffer, pos0: tuple, step: tuple, scale=1, base=0):
        self.index, self.pos0, self.step, self.scale, self.base = index, pos0, step, scale, base

    def __str__(self):
        return f"gather({self.index.name}, {self.pos0}, {self.step}, {self.scale}, {self.base})"


@dataclass
class _Nest:
    """One store being lowered to its own nest: what it is, its loops, and the blocks staged around it."""
    store: tirx.BufferStore
    what: str
    note: str
    vars_: list
    extent: dict                                        # loop var -> its extent
    dst_dims: list = field(default_factory=list)        # the store's (loop var or None, offset) per dimension
    before: list = field(default_factory=list)          # reads / copies ahead of the nest
    after: list = field(default_factory=list)           # writes / window inserts after it
    staged: dict = field(default_factory=dict)          # staging key -> the CB that holds that block


class ParallelLower:
    """T.Parallel lowering for ``memory_space_lower._Lowerer``."""

    def gather_index(self, buf, ix, indices, vars_, what):
        """``(i, GatherRows)`` when the row index ``ix`` of tensor ``buf`` is an element of an int32 index tensor at
        a position ``offset + i`` along one axis (``Idx[base + i]``), and its column index is plain; else None."""
        from ..device import INDEX_FORMATS

        varying = [ld for ld in _loads_in(tirx.Evaluate(ix)) if any(
            n.same_as(v) for x in ld.indices for n in free_vars(x) for v in vars_)]
        if len(varying) != 1 or not is_global(buf):
            return None
        load = varying[0]
        if not (is_global(load.buffer) and str(load.buffer.dtype) in INDEX_FORMATS and len(load.indices) == 2):
            return None
        affine = self.affine_in_load(ix, load, vars_)
        if affine is None:
            return None
        col_vars = [v for v in vars_ if any(n.same_as(v) for n in free_vars(indices[1]))]
        pos0, step, row_var = [], [], None
        for k in load.indices:
            used = [v for v in vars_ if any(n.same_as(v) for n in free_vars(k))]
            if not used:
                pos0.append(k)
                step.append(0)
                continue
            off = affine_offset(k, used[0], self.analyzer)
            if len(used) > 1 or off is None or row_var is not None or used[0] in col_vars:
                return None
            row_var = used[0]
            pos0.append(off)
            step.append(1)
        if row_var is None:
            return None
        return row_var, GatherRows(load.buffer, tuple(pos0), tuple(step), *affine)

    def affine_in_load(self, ix, load, vars_):
        """``(scale, base)`` with ``ix == load * scale + base``, ``scale`` a positive constant and ``base`` free of
        the nest's loop variables and of ``load``; else None."""
        v = tirx.Var("tt_gathered", "int32")
        body = tirx.stmt_functor.ir_transform(
            tirx.Evaluate(ix), None, lambda n: tirx.Cast(str(n.dtype), v) if n.same_as(load) else None,
            ["tirx.BufferLoad"]).value
        body = tirx.Cast("int32", body) if str(body.dtype) != "int32" else body
        base = self.analyzer.simplify(tirx.stmt_functor.substitute(body, {v: tirx.IntImm("int32", 0)}))
        scale = self.analyzer.simplify(tirx.stmt_functor.substitute(body, {v: tirx.IntImm("int32", 1)}) - base)
        if not isinstance(scale, tirx.IntImm) or int(scale) <= 0 or any(uses_var(base, x) for x in vars_) or \
                not self.analyzer.can_prove(body - (v * scale + base) == 0):
            return None
        return int(scale), base

    def stage_gather(self, buf, dims, window, is_store, note, before, what):
        """A gathered block: the reader copies each row its index tensor names (``gather_rows``) into a CB."""
        gather = dims[0][1]
        if is_store:
            raise TTUnsupportedError(f"a store to {buf.name} at rows read from {gather.index.name} (a scatter)",
                                     construct=what, source=self.src,
                                     fix="scatter whole blocks through a T.copy offset (Y[Idx[b] * 32, 0])")
        cols = window[1]
        col = dims[1][1]
        if cols % TILE or not self.analyzer.can_prove(tirx.floormod(col, TILE) == 0):
            raise TTUnsupportedError(f"a gather of {buf.name} rows over {cols} columns at column {col}",
                                     construct=what, source=self.src,
                                     fix="gather rows over whole 32-column tiles (a column offset and extent that "
                                         "are multiples of 32)")
        tile = self.staging_buffer(buf, window[0], cols, "rows")
        info = self.cbs[tile.name]
        info.producer.add("reader")
        info.consumer.add("compute")
        self.tensor_cb_format(buf, tile.name, "input", (0, TILE, 0, TILE), what)
        if self.cb_formats.get(tile.name) in ("Bfp8_b", "Bfp4_b"):
            raise TTUnsupportedError(f"a gather of rows of block-float tensor {buf.name}", construct=what,
                                     source=self.src, fix="gather rows of bfloat16 / float16 / float32 tensors")
        idx_cb = self.index_cb(gather.index, "reader")
        count = self.logical_count(gather)
        pos0, base = (self.index_expr(e, "reader", what) for e in (list(gather.pos0), gather.base))
        before.append(call(TTOps.gather_rows, self.cb_index_placeholder(tile), self.tensor_index(buf),
                           self.tensor_index(gather.index), *pos0, *gather.step, gather.scale, base, window[0],
                           self.plain.simplify(tirx.floordiv(col, TILE)), cols // TILE, count, buf.shape[0],
                           tirx.StringImm(idx_cb), tirx.StringImm(self.gather_scratch_cb(buf)), note=note))
        return tile

    def logical_count(self, gather):
        """How many elements the index tensor holds along the gathered axis (positions past it read no row)."""
        from .. import records

        pad = records.padding(self.func, gather.index.name)
        view = list(pad.view if pad is not None else gather.index.shape)
        count = view[0] if gather.step[0] else view[1]
        return int(count) if isinstance(count, (int, tirx.IntImm)) else count

    def lower_parallel(self, loop: tirx.For):
        """A T.Parallel nest of 1 or 2 loops around element-wise stores (and ``Bind``s, inlined): each store
        becomes its own nest over tile buffers; global tensors are staged through CBs."""
        what = describe(loop)
        loops, body = [], loop
        while isinstance(body, tirx.For) and body.kind == tirx.ForKind.PARALLEL:
            loops.append(body)
            body = body.body
        stores, env = [], {}

        def collect(stmt):
            if isinstance(stmt, tirx.SeqStmt):
                for x in stmt.seq:
                    collect(x)
            elif isinstance(stmt, tirx.Bind):
                env[stmt.var] = tirx.stmt_functor.substitute(stmt.value, env)
            elif isinstance(stmt, tirx.BufferStore):
                sub = tirx.stmt_functor.substitute
                stores.append(tirx.BufferStore(stmt.buffer, sub(stmt.value, env), [sub(ix, env) for ix in stmt.indices]))
            elif isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.PARALLEL and not stores and not env:
                loops.append(stmt)
                collect(stmt.body)
            else:
                found = []
                tirx.stmt_functor.post_order_visit(stmt, lambda n: found.append(n) if isinstance(n, tirx.Call) else None)
                for c in found:
                    reason = UnsupportedOps.reason(c.op) if isinstance(c.op, tvm.ir.Op) else None
                    if reason:
                        raise TTUnsupportedError(f"{reason} ({c.op.name}) have no TT lowering: TT cores compute "
                                                 "whole tiles without shared atomics or lanes", construct=what,
                                                 source=self.src, fix="express the update as a tile operation (e.g. "
                                                                      "a reduction into a fragment)")
                raise TTUnsupportedError(f"{type(stmt).__name__} inside T.Parallel", construct=what, source=self.src,
                                         fix="write element-wise assignments (and let-bound values) inside T.Parallel")

        collect(body)
        calls = []
        for st in stores:
            tirx.stmt_functor.post_order_visit(st, lambda n: calls.append(n) if isinstance(n, tirx.Call) else None)
        for c in calls:
            reason = UnsupportedOps.reason(c.op) if isinstance(c.op, tvm.ir.Op) else None
            if reason:
                raise TTUnsupportedError(f"{reason} ({c.op.name}) have no TT lowering: TT cores compute whole "
                                         "tiles without shared atomics or lanes", construct=what, source=self.src,
                                         fix="express the update as a tile operation (e.g. a reduction into a fragment)")
        if not stores or len(loops) not in (1, 2):
            raise TTUnsupportedError("a T.Parallel nest must be 1 or 2 loops around element-wise stores",
                                     construct=what, source=self.src, fix="write one element-wise nest per T.Parallel")
        for lp in loops:
            if not isinstance(lp.extent, tirx.IntImm):
                raise TTUnsupportedError(f"T.Parallel extent {lp.extent} is not a constant", construct=what,
                                         source=self.src, fix="use constant block sizes")
        loops, stores = _without_single_trip(loops, stores)
        out = []
        for st in stores:
            out += self.lower_store(loops, st, what)
        return out[0] if len(out) == 1 else tirx.SeqStmt(out)

    def scalar_elements(self, store: tirx.BufferStore, vars_, what: str) -> tirx.BufferStore:
        """``store`` with each element of a float32 / bfloat16 / float16 / int32 tensor that is the same for the
        whole nest (``x * Slopes[by]``, no loop variable in its indices) and does not start a tile replaced by
        ``index_load(tensor, row, col, cb)``: the reader reads the element into ``<tensor>_scalar`` (one page) and compute reads it from
        L1 as a scalar operand (LowerToTTProgram). An element at a tile's origin stays a broadcast tile; an element
        in the indices of another tensor access (``W[Start[bx] + i]``) is read by the kernel that moves the block."""
        def candidate(node) -> bool:
            ids = [v for ix in node.indices for v in free_vars(ix)]
            return is_global(node.buffer) and len(node.indices) == 2 and not any(
                v.same_as(lv) for v in ids for lv in vars_) and not any(has_load(ix) for ix in node.indices)

        def pre(node):      # the elements in another access's indices are read by the kernel that moves it
            return node if isinstance(node, tirx.BufferLoad) and not candidate(node) else None

        def post(node):
            if not (isinstance(node, tirx.BufferLoad) and candidate(node)):
                return None
            integer = TILE_FORMATS[SCALAR_ELEMENT_FORMATS.get(str(node.buffer.dtype), "Float32")].kind == "int"
            if not integer and all(
                    self.analyzer.can_prove(tirx.floormod(ix, TILE) == 0) for ix in node.indices):
                return None     # a float element at a tile's origin: a broadcast tile (an integer one has no tile)
            if str(node.buffer.dtype) not in SCALAR_ELEMENT_FORMATS:
                raise TTUnsupportedError(
                    f"{node.buffer.name}[{', '.join(map(str, node.indices))}] ({node.buffer.dtype}) is one element "
                    f"used as a scalar of the whole block: elements become scalars only of "
                    f"{', '.join(SCALAR_ELEMENT_FORMATS)} tensors",
                    construct=what, source=self.src,
                    fix=f"pass {node.buffer.name} as a float32 tensor ({node.buffer.name}.float())")
            name = f"{node.buffer.name}_scalar"
            if name not in self.cbs:
                self.add_cb(name, str(node.buffer.dtype), producer="reader", consumer="compute",
                            fmt=SCALAR_ELEMENT_FORMATS[str(node.buffer.dtype)])
            return tirx.Call(str(node.buffer.dtype), TTOps.index_load,
                             [tirx.IntImm("int32", self.tensor_index(node.buffer)), *node.indices,
                              tirx.StringImm(name)])

        value = transform(tirx.Evaluate(store.value), post, ["tirx.BufferLoad"], pre).value
        return store if value.same_as(store.value) else tirx.BufferStore(store.buffer, value, store.indices)

    def lower_store(self, loops, store: tirx.BufferStore, what: str) -> list:
        """One store of a T.Parallel nest as its own nest over tile buffers, with the blocks it reads staged
        before it and the blocks it writes drained after it."""
        note = f"T.Parallel: {tilelang_text(store)}"
        vars_ = [lp.loop_var for lp in loops]
        rows = self.row_store(loops, store, what, note)
        if rows is not None:
            return [rows]
        store = self.scalar_elements(store, vars_, what)
        nest = _Nest(store, what, note, vars_, {lp.loop_var: int(lp.extent) for lp in loops})
        value, loaded = self.read_operands(nest, self.check_indices(nest))
        value = self.index_values(value, nest.dst_dims, vars_, what)
        value = logical_as_selects(truncating_divisions(
            fold_constants(tirx.stmt_functor.substitute(value, self.scalars))))
        dst = self.nest_operand(nest, store.buffer, store.indices, True)
        self.inherit_place(store, dst, loaded, what)
        value, loaded = self.realign_broadcasts(nest, value, loaded, dst)
        self.check_aligned(dst.name, loaded, what)
        shape = tuple(nest.extent[v] if v is not None else 1 for v, _ in nest.dst_dims)
        if static_shape(dst) != shape:
            raise TTLoweringError(f"store shape {list(shape)} does not match {dst.name}", construct=what,
                                  source=self.src)
        idx = [v if v is not None else tirx.IntImm("int32", 0) for v, _ in nest.dst_dims]
        body = tirx.BufferStore(dst, value, idx)
        for lp in reversed(loops):
            body = tirx.For(lp.loop_var, lp.min, lp.extent, tirx.ForKind.PARALLEL, body)
        return nest.before + [body] + nest.after

    def inherit_place(self, store: tirx.BufferStore, dst: tirx.Buffer, loaded: list, what: str):
        """The destination sits where its same-shaped operands sit (a broadcast operand says nothing about it),
        except where an operand's place changes with a serial loop and the destination is updated in place: its
        value stays where it is (an accumulator cleared before the loop, at its tile's first row) and a one-row
        (one-column) operand is moved to it (``realign_broadcasts``); a larger block is refused."""
        updated = {store.buffer.name, self.current(store.buffer).name} & set(loaded)
        for name in loaded:
            buf = self.cbs[name].buffer
            if static_shape(buf) != static_shape(dst):
                continue
            place = self.placements.get(name, (None, None))
            moving = [axis for axis, p in enumerate(place) if p is not None and any(
                v.same_as(lv) for v in free_vars(p) for lv in self.serial_vars)]
            if not (updated and moving):
                self.inherit(dst.name, name)
            elif any(static_shape(buf)[axis] != 1 for axis in moving):
                raise TTUnsupportedError(
                    f"{name} sits at {['row', 'column'][moving[0]]} {place[moving[0]]} of its tiles, which changes "
                    f"every iteration of a loop, and updates {store.buffer.name} in place", construct=what,
                    source=self.src, fix="read the block at the same offset modulo 32 in every iteration")

    def split_indices(self, nest: _Nest, buf, indices) -> list:
        """Per dimension: (loop var or None, offset) with index = offset + var (offset free of loop vars)."""
        what = nest.what
        if len(indices) != 2:
            raise TTLoweringError(f"{buf.name} is indexed with {len(indices)} indices after TilePadTT",
                                  construct=what, source=self.src)
        dims = []
        for ix in indices:
            loads = []
            tirx.stmt_functor.post_order_visit(tirx.Evaluate(ix), lambda n: loads.append(n)
                                               if isinstance(n, tirx.BufferLoad) else None)
            block_constant = is_global(buf) and not any(
                v.same_as(lv) for ld in loads for x in ld.indices for v in free_vars(x) for lv in nest.vars_)
            if loads and not block_constant:     # an element per row: a gather; one per block is an offset
                gather = self.gather_index(buf, ix, indices, nest.vars_, what) if not dims else None
                if gather is None:
                    raise TTUnsupportedError(
                        f"indirect (data-dependent) indexing of {buf.name} through {loads[0].buffer.name}",
                        construct=what, source=self.src,
                        fix="gather whole rows: X[Idx[base + i], base_j + j] with an int32 index tensor Idx "
                            "(the reader reads each row Idx names), or move the indirection into a T.copy "
                            "offset (X[Idx[b] * 32, 0])")
                dims.append(gather)
                continue
            used = [v for v in nest.vars_ if any(n.same_as(v) for n in free_vars(ix))]
            if not used:
                dims.append((None, ix))
                continue
            v = used[0]
            off = affine_offset(ix, v, self.plain)
            if off is None:
                off = affine_offset(ix, v, self.analyzer)
            if len(used) > 1 or off is None:
                raise TTUnsupportedError(f"index {list(indices)} of {buf.name} is not (offset + i, offset + j)",
                                         construct=what, source=self.src,
                                         fix="index blocks as X[base_i + i, base_j + j] inside T.Parallel")
            dims.append((v, off))
        return dims

    def check_indices(self, nest: _Nest) -> list:
        """The loads of the store's value, once every access is split (indirect indexing is refused before anything
        is rewritten) and the store is known to depend on every loop variable; sets ``nest.dst_dims``."""
        store = nest.store
        accesses = [store]
        tirx.stmt_functor.post_order_visit(store.value, lambda n: accesses.append(n) if isinstance(n, tirx.BufferLoad) else None)
        for acc in accesses:    # indirect indexing is refused before anything is rewritten
            self.split_indices(nest, acc.buffer, acc.indices)
        nest.dst_dims = self.split_indices(nest, store.buffer, store.indices)
        self._store_target = self.current(store.buffer).name if not is_global(store.buffer) else ""
        for v in nest.vars_:
            if nest.extent[v] > 1 and not any(d is v for d, _ in nest.dst_dims):
                raise TTUnsupportedError(f"the store to {store.buffer.name} does not depend on loop variable {v.name}: "
                                         "every iteration writes the same element", construct=nest.what,
                                         source=self.src,
                                         fix="reduce with T.reduce_sum / T.reduce_max into a 1-D fragment instead")
        return accesses[1:]

    def read_operands(self, nest: _Nest, loads: list) -> tuple:
        """(value, loaded): the store's value reading each operand's tile buffer in the store's order, and the
        names of those buffers."""
        loaded = []
        gather_indices = []      # the index-tensor loads inside gathered row indices: read by the reader, not staged
        for acc in loads:
            if isinstance(self.split_indices(nest, acc.buffer, acc.indices)[0][1], GatherRows):
                gather_indices += _loads_in(acc.indices[0])     # the index element and those in its base
            elif is_global(acc.buffer):      # elements in a block's offset (W[Start[bx] + i]): the reader's
                gather_indices += [x for ix in acc.indices for x in _loads_in(ix)]

        def post(node):
            if isinstance(node, tirx.BufferLoad) and any(node.same_as(g) for g in gather_indices):
                return None
            if isinstance(node, tirx.BufferLoad):
                buf = self.nest_operand(nest, node.buffer, node.indices, False)
                loaded.append(buf.name)
                idx = [v if v is not None else tirx.IntImm("int32", 0)
                       for v, _ in self.split_indices(nest, node.buffer, node.indices)]
                if buf.name in self.scratch:       # a transposed operand is read in the store's order
                    idx = idx[::-1]
                return tirx.BufferLoad(buf, idx)
            return None

        return transform(tirx.Evaluate(nest.store.value), post, ["tirx.BufferLoad"]).value, loaded

    def nest_operand(self, nest: _Nest, buf, indices, is_store: bool) -> tirx.Buffer:
        """The tile buffer the nest reads (or stores) for ``buf[indices]``: a tile buffer itself, a window of it,
        a transposed copy, or a CB staging a tensor's block."""
        what, dst_dims = nest.what, nest.dst_dims
        dims = self.split_indices(nest, buf, indices)
        if not is_store and dims[0][0] is not None and dims[1][0] is not None and \
                dims[0][0] is dst_dims[1][0] and dims[1][0] is dst_dims[0][0]:
            return self.transposed_operand(nest, buf, indices, dims)
        if not is_store and not is_global(buf) and self.crosswise_vector(nest, buf, dims):
            return self.transposed_vector(nest, buf)
        axis = None if is_store or is_global(buf) else self.crosswise_line(nest, buf, dims)
        if axis is not None:
            return self.staged_transpose(nest, self.staged_line(nest, buf, axis, dims[axis][1]))
        for k, (v, _) in enumerate(dims):
            if v is not None and not any(d is v for d, _ in dst_dims[k:k + 1]):
                raise TTUnsupportedError(
                    f"{buf.name}{list(indices)} is indexed transposed (or with a variable the store "
                    f"{nest.store.buffer.name} uses on another axis)", construct=what, source=self.src,
                    fix="transpose with T.copy into a tile buffer and T.gemm(transpose_B=True), or index "
                        "operands in the same order as the store")
        window = tuple(nest.extent[v] if v is not None else 1 for v, _ in dims)
        if not is_global(buf):
            buf = self.current(buf) if not is_store else buf
            bshape = static_shape(buf, self.src)
            if not is_store and self.tile_window(buf, dims, window, bshape):
                return self.load_window(nest, buf, dims, window)
            if is_store and self.tile_window(buf, dims, window, bshape):
                return self.store_window(nest, buf, dims, window)
            axis = self.line_axis(dims, window, bshape)
            if not is_store and axis is not None:
                return self.staged_line(nest, buf, axis, dims[axis][1])
            if not is_store and window == (1, 1) and bshape != (1, 1) and all(v is None for v, _ in dims):
                # one element at a constant place (GDN's G_shared[block_S - 1]): its row, then its column, picked out
                # into a 1x1 line, broadcast where it is used
                for axis in (0, 1):
                    if static_shape(self.current(buf), self.src)[axis] > 1:
                        buf = self.staged_line(nest, buf, axis, dims[axis][1])
                return buf
            for (v, off), n, w in zip(dims, bshape, window):
                if v is not None and self.analyzer.can_prove(off + w > n):
                    shape = [int(d) for d in buf.shape]
                    raise TTUnsupportedError(
                        f"{buf.name}{list(indices)} reaches index {off + w - 1} of an axis of {n} elements (the "
                        f"T.Parallel loop over {v.name} runs {w} times; {buf.name} is declared {shape}): out of "
                        f"bounds", construct=what, source=self.src,
                        fix=f"declare {buf.name} with the loop's extent ({w} along that axis)")
                if n != w or not self.analyzer.can_prove(off == 0):
                    raise TTUnsupportedError(f"tile buffer {buf.name} must be indexed over its whole shape "
                                             f"{list(bshape)} (an index i or j, or 0 for an extent of 1)",
                                             construct=what, source=self.src)
            if is_store:
                return self.target(buf)
            self.cb(buf).consumer.add("compute")
            return buf
        return self.stage_block(nest, buf, dims, window, is_store)

    def crosswise_vector(self, nest: _Nest, buf, dims) -> bool:
        """A row vector (``[1, n]``) read by the nest's row variable, or a column vector (``[n, 1]``) by its column
        variable, over the whole vector: ``scale[i]`` in ``o[i, j] *= scale[i]`` of a vector TilePadTT oriented as a
        row for its other uses."""
        shape = static_shape(self.current(buf), self.src)
        axis = 1 if shape[0] == 1 and shape[1] > 1 else 0 if shape[1] == 1 and shape[0] > 1 else None
        if axis is None or dims[1 - axis][0] is not None or not self.analyzer.can_prove(dims[1 - axis][1] == 0):
            return False
        var, off = dims[axis]
        return var is not None and var is nest.dst_dims[1 - axis][0] and nest.extent[var] == shape[axis] and \
            self.analyzer.can_prove(off == 0)

    def crosswise_line(self, nest: _Nest, buf, dims) -> int | None:
        """0 for row ``k`` of a tile buffer of at most 32 rows read whole by the nest's row variable (``a[k, i]`` in
        a nest storing ``x[i, j]``: row i gets ``a[k, i]``), 1 for a column read by the column variable; None
        otherwise. The line is picked out (``staged_line``) and transposed into the store's orientation."""
        shape = static_shape(self.current(buf), self.src)
        for axis in (0, 1):
            (at_var, _), (var, off) = dims[axis], dims[1 - axis]
            if at_var is None and var is not None and var is nest.dst_dims[axis][0] and 1 < shape[axis] <= TILE \
                    and nest.extent[var] == shape[1 - axis] and self.analyzer.can_prove(off == 0):
                return axis
        return None

    def transposed_vector(self, nest: _Nest, buf) -> tirx.Buffer:
        """``crosswise_vector``: the vector's tiles transposed on chip (``transpose_tile``: row 0 <-> column 0) into
        a compute scratch CB, read in the store's orientation."""
        source = self.current(buf)
        self.cb(source).consumer.add("compute")
        return self.staged_transpose(nest, source)

    def load_window(self, nest: _Nest, buf, dims, window) -> tirx.Buffer:
        """``x[i, j + D // 2]``: a tile-aligned window of tile buffer ``buf``, copied into a window-shaped
        compute CB before the nest (an eltwise copy of those tiles), which the body reads whole."""
        origin = [self.plain.simplify(off) for _, off in dims]
        key = f"W:{buf.name}:{origin}"
        if key not in nest.staged:
            win = self.staging_buffer(buf, window[0], window[1], "win", scope=SCOPE_FRAGMENT)
            self.cbs[win.name].producer.add("compute")
            self.cb(buf).consumer.add("compute")
            nest.before.append(call(TTOps.eltwise, self.cb_index_placeholder(win), tirx.BufferLoad(buf, origin),
                                    note=nest.note))
            nest.staged[key] = win
        self.cb(nest.staged[key]).consumer.add("compute")
        return nest.staged[key]

    def store_window(self, nest: _Nest, buf, dims, window) -> tirx.Buffer:
        """``acc[32 + i, j] = ...``: a store into a tile-aligned window of tile buffer ``buf`` computes a
        window-shaped compute CB, which ``insert_window`` then puts in place (``buf``'s other tiles pass
        through unchanged; a block the reader filled is rewritten into a fresh CB, as in-place updates are)."""
        origin = [self.plain.simplify(off) for _, off in dims]
        if not all(isinstance(o, tirx.IntImm) for o in origin):
            raise TTUnsupportedError(f"a store into a window of {buf.name} at {origin}, not a constant place",
                                     construct=nest.what, source=self.src,
                                     fix="store into windows at constant offsets (multiples of 32)")
        win = self.staging_buffer(buf, window[0], window[1], "part", scope=SCOPE_FRAGMENT)
        self.cbs[win.name].producer.add("compute")
        self.cbs[win.name].consumer.add("compute")
        nest.after.append(self.insert_into(buf, win, [int(o) // TILE for o in origin], nest.note))
        return win

    def transposed_operand(self, nest: _Nest, buf, indices, dims) -> tirx.Buffer:
        """``X[j, i]`` in a nest storing ``[i, j]``: the block is read as it lies, then transposed tile by
        tile (``transpose_tile``) into a compute scratch CB that the body reads in its own order."""
        what = nest.what
        window = (nest.extent[dims[0][0]], nest.extent[dims[1][0]])
        if window[0] % TILE or window[1] % TILE:
            raise TTUnsupportedError(f"{buf.name}{list(indices)} is indexed transposed over a block smaller "
                                     "than whole tiles", construct=what, source=self.src,
                                     fix="transpose blocks whose extents are multiples of 32")
        if is_global(buf):
            source = self.stage_block(nest, buf, dims, window, False)
        else:
            source = self.current(buf)
            if static_shape(source, self.src) != window or not all(self.analyzer.can_prove(o == 0)
                                                                   for _, o in dims):
                raise TTUnsupportedError(f"tile buffer {buf.name} must be indexed over its whole shape",
                                         construct=what, source=self.src)
            self.cb(source).consumer.add("compute")
        return self.staged_transpose(nest, source)

    def line_axis(self, dims, window, shape) -> int | None:
        """The axis of one row (0) or column (1), at an offset without loop variables, of a tile buffer of at most 32
        rows (columns) read whole along the other axis (``lse[k, i]`` of a ``[splits, n]`` fragment), else None."""
        for axis in (0, 1):
            if dims[axis][0] is None and window[axis] == 1 and 1 < shape[axis] <= TILE and \
                    window[1 - axis] == shape[1 - axis] and self.analyzer.can_prove(dims[1 - axis][1] == 0):
                return axis
        return None

    def staged_line(self, nest: _Nest, buf, axis: int, at) -> tirx.Buffer:
        """``line_axis``: the row (column) picked out into a vector before the nest (``picked_line``)."""
        key = f"L{axis}:{buf.name}:{at}"
        if key not in nest.staged:
            nest.staged[key], ops = self.picked_line(self.current(buf), axis, at, nest.note)
            nest.before.extend(ops)
        return nest.staged[key]

    def staged_transpose(self, nest: _Nest, source) -> tirx.Buffer:
        """The scratch CB holding ``source`` transposed, made once per nest, before it."""
        key = f"T:{source.name}"
        if key not in nest.staged:
            nest.staged[key], op = self.transposed_copy(source, nest.note)
            nest.before.append(op)
        return nest.staged[key]

    def stage_block(self, nest: _Nest, buf, dims, window, is_store: bool) -> tirx.Buffer:
        """The block of tensor ``buf`` the nest touches, through a CB the reader fills before the nest (or
        the writer drains after it)."""
        what, note = nest.what, nest.note
        key = f"{buf.name}:{dims[0][1]}:{dims[1][1]}:{is_store}"
        if key in nest.staged:
            return nest.staged[key]
        if isinstance(dims[0][1], GatherRows):
            nest.staged[key] = self.stage_gather(buf, dims, window, is_store, note, nest.before, what)
            return nest.staged[key]
        region = Region(buf, (dims[0][1], dims[1][1]), window, 2 if is_store else 1)
        if not is_store:
            region = self.index_loads(region, "reader", what)
            if self.offset_rows(region, column_window=True) or self.rows_at_data_offset(region):
                nest.staged[key] = self.stage_offset_rows(region, note, nest.before, what)
                return nest.staged[key]
        r, c0, rows, cols, win = self.tile_coords(region, what)
        tile = self.staging_buffer(buf, window[0], window[1], "out" if is_store else "tile")
        info = self.cbs[tile.name]
        self.placement(tile.name, win, what)
        args = (self.tensor_index(buf), r, c0, rows, cols, *win)
        if is_store:
            info.producer.add("compute")
            info.consumer.add("writer")
            if str(buf.dtype) in INT_OUTPUT_FORMATS:    # an int32 tensor: packed as Int32 (after a typecast)
                self.tensor_cb_format(buf, tile.name, "output", win, what)
            nest.after.append(call(TTOps.write_block, self.cb_index_placeholder(tile), *args, note=note))
        else:
            info.producer.add("reader")
            info.consumer.add("compute")
            self.tensor_cb_format(buf, tile.name, "input", win, what)   # int8 / block-float tensors: their format
            nest.before.append(call(TTOps.read_block, self.cb_index_placeholder(tile), *args, note=note))
        nest.staged[key] = tile
        return tile

    def tile_window(self, buf, dims, window, shape) -> bool:
        """Whether ``buf`` indexed by ``dims`` over ``window`` is a tile-aligned window of it other than the whole
        buffer: whole tiles per axis, at offsets that are multiples of 32, inside the buffer."""
        if tuple(window) == tuple(shape) and all(self.analyzer.can_prove(off == 0) for _, off in dims):
            return False
        return all(w % TILE == 0 and self.analyzer.can_prove(tirx.floormod(off, TILE) == 0)
                   and self.analyzer.can_prove(off >= 0) and self.analyzer.can_prove(off + w <= n)
                   for (_, off), w, n in zip(dims, window, shape))

    def index_values(self, value, dst_dims, vars_, what):
        """A loop variable used as a value (a causal mask's ``q_idx = bx * 64 + i``) reads a constant index tile
        (each element's row or column within its tile; the tile's own offset is added per tile). Indices of
        buffer accesses are left alone."""
        axis_of = [(v, k) for k, (v, _) in enumerate(dst_dims) if v is not None]
        used = [v for v in free_vars(transform(tirx.Evaluate(value), lambda n: tirx.const(0, n.dtype),
                                              ["tirx.BufferLoad"]).value) if any(v.same_as(lv) for lv in vars_)]
        if not used:
            return value
        subst = {}
        for var in used:
            axis = next((k for v, k in axis_of if v.same_as(var)), None)
            place = self.placements.get(self._store_target, (None, None))
            if axis is not None and place[axis] is None and self._store_target and \
                    static_shape(self.cbs[self._store_target].buffer)[axis] % TILE:
                # the index tile counts from the tile's first row (column): a block smaller than a tile computed
                # from it sits there, and a transfer of it elsewhere in the tile must move it (or is refused)
                self.placements[self._store_target] = tuple(tirx.IntImm("int32", 0) if k == axis else p
                                                            for k, p in enumerate(place))
                place = self.placements[self._store_target]
            if axis is None or place[axis] is not None and not self.analyzer.can_prove(place[axis] == 0):
                raise TTUnsupportedError(f"loop variable {var.name} used as a value in a block smaller than a tile"
                                         if axis is not None else f"loop variable {var.name} used as a value but "
                                         "not indexing the store", construct=what, source=self.src,
                                         fix="use blocks of whole tiles where loop variables are values")
            subst[var] = tirx.Cast(var.dtype, tirx.BufferLoad(self.index_tile(axis), [tirx.IntImm("int32", 0)] * 2))
        def pre(node):
            return node if isinstance(node, tirx.BufferLoad) else None     # keep access indices as they are

        def post(node):
            for var, repl in subst.items():
                if node.same_as(var):
                    return repl
            return None

        return tirx.stmt_functor.ir_transform(tirx.Evaluate(value), pre, post, ["tirx.Var", "tirx.BufferLoad"]).value

    def index_tile(self, axis: int) -> tirx.Buffer:
        """The constant index tile of ``axis`` (a CB the reader fills once)."""
        return self.constant_tile(INDEX_TILES[axis])

    def realign_broadcasts(self, nest: _Nest, value, loaded: list, dst: tirx.Buffer):
        """(value, loaded) with each one-row (one-column) operand broadcast over whole tiles of ``dst`` but sitting at
        a row (column) other than the first of its tiles (a 1-D vector read from row ``b * H + h`` of a ``[B * H, S]``
        view: FlashAttention's backward reading its log-sum-exps) moved to the first row (``picked_line``): TT
        broadcasts only a tile's first row (column)."""
        want = self.placements.get(dst.name, (None, None))
        moved = {}
        for name in loaded:
            current = self.cbs[name].buffer
            for axis in (0, 1):     # a 1x1 element inside its tile moves along both axes, one after the other
                have = self.placements.get(current.name, (None, None))
                if want[axis] is None and have[axis] is not None and static_shape(current)[axis] == 1 and \
                        not self.analyzer.can_prove(have[axis] == 0):
                    current, ops = self.picked_line(current, axis, tirx.IntImm("int32", 0), nest.note)
                    nest.before.extend(ops)
                    moved[name] = current
        if not moved:
            return value, loaded

        def post(node):
            if isinstance(node, tirx.BufferLoad) and node.buffer.name in moved:
                load = tirx.BufferLoad(moved[node.buffer.name], node.indices)
                if str(node.dtype) == "bool":       # a mask moved as the float32 0.0 / 1.0 it computes in
                    return tirx.NE(load, tirx.FloatImm(str(load.dtype), 0.0))
                return load if str(load.dtype) == str(node.dtype) else tirx.Cast(str(node.dtype), load)
            return None

        value = transform(tirx.Evaluate(value), post, ["tirx.BufferLoad"]).value
        return value, [moved[n].name if n in moved else n for n in loaded]

    def check_aligned(self, dst: str, loaded: list, what: str):
        """Element-wise operands that are smaller than a tile must sit where the destination sits in its tile
        (or be one row / column at the tile's start, which the FPU broadcasts; ``realign_broadcasts`` has moved
        every broadcast line there)."""
        want = self.placements.get(dst, (None, None))
        for name in loaded:
            have = self.placements.get(name, (None, None))
            extent = static_shape(self.cbs[name].buffer)
            for axis, (w, h) in enumerate(zip(want, have)):
                if w is None or h is None or self.analyzer.can_prove(w == h):
                    continue
                if extent[axis] == 1 and self.analyzer.can_prove(h == 0):
                    continue
                raise TTUnsupportedError(
                    f"{name} sits at {['row', 'column'][axis]} {h} of its tiles but {dst} at {w}: element-wise "
                    "operands smaller than a tile must share their place in the tile", construct=what,
                    source=self.src, fix="read the operands at offsets that agree modulo 32 (e.g. the same rows)")
