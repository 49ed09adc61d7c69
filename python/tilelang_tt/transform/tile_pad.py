"""TilePadTT: every tensor and tile buffer becomes a 2-D matrix of 32x32 tiles, padded, never stored past its edge.

In:  a PrimFunc after TTShardToCoreMap (tensors and tile buffers of any rank, the frontend's tile operators).
Out: every buffer is 2-D, and every access to it (``T.copy`` / ``T.reduce`` regions, ``T.Parallel`` loads and
     stores) is rewritten onto that 2-D view:

     * A 1-D buffer is a row vector ``(1, n)`` (element ``k`` in row 0 of tile ``k // 32``, column ``k % 32``)
       or a column vector ``(n, 1)`` (column 0, row ``k % 32``), whichever its uses ask for: indexed by the
       column variable of a 2-D ``T.Parallel`` or produced by ``T.reduce_*(dim=0)`` -> row; by the row variable
       or ``T.reduce_*(dim=1)`` -> column; buffers used together in a 1-D ``T.Parallel`` or copied into one
       another share their orientation; unconstrained vectors are rows. A 1-D tile buffer that a 2-D nest only
       reads takes the orientation of its other uses (stores, reductions, 1-D nests): read by the other loop
       variable, the nest transposes it on chip (``scale[i]`` of a vector computed as a row). This is where tt-metal's reductions
       leave their results (REDUCE_ROW: column 0, REDUCE_COL: row 0), so statistics broadcast without moves.
     * A tensor of rank >= 3 is the matrix ``(prod(shape[:p]), prod(shape[p:]))`` for the split ``p`` under
       which every block the kernel moves is a rectangle of the block's own shape: ``[B, H, S, D]`` read as
       ``[1, 1, bm, D]`` blocks is ``(B*H*S, D)``; ``[B, S, H, D]`` read as ``[1, bm, 1, D]`` is ``(B*S, H*D)``.
       Leading dimensions are page offsets; blocks must not straddle a tile (the usual alignment checks).
       When several dimensions fold into rows and the blocks moved along the last of them do not divide it
       (a decode step: 4 query rows in a 64-row block), each matrix is padded to whole blocks (``row_pad``:
       ``[B, H, 4, D]`` -> ``(B*H*64, D)``), as ttnn pads every matrix of a tiled tensor; the runtime pads and
       unpads the host tensor.
     * A 2-D tensor read only in 2-D ``T.Parallel`` nests as one row broadcast over the nest's rows (whole tiles
       of them), at a row not provably a multiple of 32 (a per-group scale ``Scale[k * block_K // group, n]``;
       the row index is simplified with the nest's ranges, so ``(k * block_K + i) // group`` qualifies when
       block_K divides group), stores each row as row 0 of its own tiles (``row_pad`` rows 1 -> 32): TT
       broadcasts a tile's first row. Columns likewise (``Scale[n, k * block_K // group]``: ``col_pad``, each
       column at column 0 of its own tiles; the view is ``[N, G * 32]``).
Attribute written: ``tt.padding`` = ``{tensor: records.Padding}``: logical shape, view [rows, cols], padded
     [rows, cols] rounded up to whole tiles, row_pad? {outer, rows, padded_rows}, col_pad? {cols, padded_cols}. Host tensors keep their row-major
     logical shape; the runtime reshapes them
     to the view and tilizes into the padded grid. Readers zero-fill what lies outside the tensor; writers
     store only the logical elements.
Errors (TTShapeError / TTUnsupportedError): a 1-D buffer used both as a row and as a column vector; a tensor
     no split of which makes every access a rectangle of its block's shape; a tile buffer extent above 32 that
     is not a multiple of 32 (such blocks straddle tiles: the fix names the nearest legal sizes); tile buffers
     of rank 3 or more; a broadcast row / column that changes inside a block (``(k * block_K + i) // group``
     with group < block_K or < 32).
"""

from __future__ import annotations

import tvm
from tvm import tirx
from tvm.ir import Op

from .. import records
from ..errors import TTShapeError, TTUnsupportedError
from .common import (TILE, TileOps, decode_region, describe, is_global, prim_func_pass, source_of,
                     tile_op_call, transform, uses_var)

ROW, COL = "row", "col"



class _Vector:
    """The block a 1-D tile buffer holds: n values, a row or a column of a tensor's 2-D view."""

    def __init__(self, n):
        self.n = n

def _padded(shape):
    """Round the last two extents up to whole tiles (symbolic extents stay expressions)."""
    def up(s):
        return -(-s // TILE) * TILE if isinstance(s, int) else tirx.floordiv(s + (TILE - 1), TILE) * TILE
    return tuple(shape[:-2]) + tuple(up(s) for s in shape[-2:])


def _dims(buf):
    return tuple(int(d) if isinstance(d, tirx.IntImm) else d for d in buf.shape)


def _prod(values):
    out = 1
    for v in values:
        out = out * v
    return out


def _group_rows(index, var):
    """g when ``index`` divides an expression of ``var`` by a constant g (a per-group row / column), else None."""
    found = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(index), lambda n: found.append(int(n.b.value)) if isinstance(
        n, tirx.FloorDiv) and isinstance(n.b, tirx.IntImm) and uses_var(n.a, var) else None)
    return found[0] if found else None


class _Orientation:
    """Union-find over 1-D buffers (by data var) with at most one orientation per set."""

    def __init__(self, src):
        self.parent, self.value, self.names, self.src = {}, {}, {}, src

    def find(self, key):
        while self.parent.get(key, key) is not key:
            key = self.parent[key]
        return key

    def add(self, buf):
        key = buf.data
        if key not in self.parent:
            self.parent[key] = key
            self.names[key] = buf.name
        return self.find(key)

    def union(self, a, b):
        ra, rb = self.add(a), self.add(b)
        if ra is rb:
            return
        va, vb = self.value.get(ra), self.value.get(rb)
        if va and vb and va != vb:
            self._conflict(a, b)
        self.parent[rb] = ra
        if vb and not va:
            self.value[ra] = vb

    def set(self, buf, orientation, why):
        root = self.add(buf)
        have = self.value.get(root)
        if have and have != orientation:
            raise TTUnsupportedError(
                f"1-D buffer {buf.name} is used both as a per-row vector and as a per-column vector ({why})",
                construct=buf.name, source=self.src,
                fix="use two 1-D buffers, one per orientation (a TT tile keeps a vector in one row or one column)")
        self.value[root] = orientation

    def _conflict(self, a, b):
        raise TTUnsupportedError(f"1-D buffers {a.name} and {b.name} are combined elementwise but one is a row "
                                 "vector and the other a column vector", construct=f"{a.name}, {b.name}",
                                 source=self.src, fix="combine vectors of the same orientation")

    def of(self, buf) -> str:
        return self.value.get(self.find(buf.data), ROW) if buf.data in self.parent else ROW


class _Views:
    def __init__(self, func: tirx.PrimFunc):
        self.func, self.src = func, source_of(func)
        self.orient = _Orientation(self.src)
        self.windows: dict = {}        # tensor data var -> [(extents, (rows, cols) expected)]
        self.row_pads: dict = {}       # tensor name -> {outer, rows, padded_rows} (see _row_group)
        self.tile_buffers: list = []
        self.new: dict = {}            # data var -> (new 2-D buffer, split p)
        self.bcast: dict = {}          # tensor data var -> (every access reads one broadcast row, ... column)
        self.spread: dict = {}         # tensor data var -> 0: [G, N] stored as [G, 1 -> 32, N] (row g at 32 g);
        #                                1: [N, G] as [N, G, 1 -> 32] (column g at 32 g)
        self.col_pads: dict = {}       # tensor name -> {cols, padded_cols}
        from tvm import arith

        self.ana = arith.Analyzer()    # knows every T.Parallel variable's range (they are distinct Vars)
        self._extent: dict = {}        # T.Parallel variable -> extent
        self.read_as: list = []        # (1-D tile buffer, orientation a 2-D T.Parallel nest reads it in)

    # -- analysis --------------------------------------------------------------------------------------
    def analyse(self):
        self._walk(self.func.body)
        for buf, want in self.read_as:      # only read in 2-D nests (or read there first): oriented as read
            root = self.orient.add(buf)
            self.orient.value.setdefault(root, want)

    def _walk(self, s):
        if isinstance(s, tirx.For) and s.kind == tirx.ForKind.PARALLEL:
            self._parallel(s)
        elif isinstance(s, tirx.Evaluate):
            c = tile_op_call(s)
            if c is not None:
                self._tile_op(s, c)
        elif isinstance(s, tirx.SBlockRealize):
            self._walk(s.block)
        elif isinstance(s, tirx.SBlock):
            self.tile_buffers.extend(s.alloc_buffers)
            self._walk(s.body)
        elif isinstance(s, tirx.SeqStmt):
            for x in s.seq:
                self._walk(x)
        elif isinstance(s, tirx.IfThenElse):
            self._walk(s.then_case)
            if s.else_case is not None:
                self._walk(s.else_case)
        elif hasattr(s, "body") and isinstance(s.body, tirx.Stmt):
            self._walk(s.body)

    def _parallel(self, loop):
        loops, body = [], loop
        while isinstance(body, tirx.For) and body.kind == tirx.ForKind.PARALLEL:
            loops.append(body)
            body = body.body
        vars_ = [l.loop_var for l in loops]
        extents = [l.extent for l in loops]
        for l in loops:
            self._extent[l.loop_var] = l.extent
            self.ana.bind(l.loop_var, tvm.ir.Range.from_min_extent(l.min, l.extent))
        accesses = []
        tirx.stmt_functor.post_order_visit(body, lambda n: accesses.append(n)
                                           if isinstance(n, (tirx.BufferLoad, tirx.BufferStore)) else None)
        vectors = [a.buffer for a in accesses if len(a.indices) == 1]
        in_index = set()     # loads inside another access's index (a gather's row numbers, read by the reader)
        for a in accesses:
            for ix in a.indices:
                tirx.stmt_functor.post_order_visit(ix, lambda n: in_index.add(n) if isinstance(n, tirx.BufferLoad)
                                                   else None)
        for a in accesses:
            if len(a.indices) == 1 and len(vars_) == 2:
                for pos, v in enumerate(vars_):
                    if uses_var(a.indices[0], v):
                        want = COL if pos == 0 else ROW
                        if isinstance(a, tirx.BufferLoad) and not is_global(a.buffer):
                            # a tile buffer read in a 2-D nest: the nest transposes it on chip if its other uses
                            # orient it the other way (MemorySpaceLowerTT, transposed vector operands)
                            self.read_as.append((a.buffer, want))
                        else:
                            self.orient.set(a.buffer, want, f"indexed by the {'row' if pos == 0 else 'column'} "
                                            f"variable {v.name} of a T.Parallel nest")
        if len(vars_) == 1:
            for b in vectors[1:]:
                self.orient.union(vectors[0], b)
        for a in accesses:
            if is_global(a.buffer) and len(a.indices) == 2:
                seen = self.bcast.get(a.buffer.data, (True, True))
                self.bcast[a.buffer.data] = tuple(seen[k] and self._bcast(a, vars_, k) for k in (0, 1))
            if is_global(a.buffer) and len(a.indices) >= 3:
                ext = tuple(next((e for v, e in zip(vars_, extents) if uses_var(ix, v)), 1) for ix in a.indices)
                # the block the access moves: the nest's extents along the variables it uses (an element read with
                # none of them, a scalar of the whole nest, is a 1 x 1 block)
                rows = extents[0] if len(vars_) == 2 and any(uses_var(ix, vars_[0]) for ix in a.indices) else 1
                cols = extents[-1] if any(uses_var(ix, vars_[-1]) for ix in a.indices) else 1
                # row numbers of a gather are read one by one: a row or a column of the index tensor serves
                want = _Vector(max(rows, cols)) if a in in_index and min(rows, cols) == 1 else (rows, cols)
                self.windows.setdefault(a.buffer.data, []).append((ext, want, describe(loop)))

    def _bcast(self, access, vars_, axis: int) -> bool:
        """A read of one row (``axis`` 0) or column (1) of a 2-D tensor broadcast over the rows (columns) of a 2-D
        T.Parallel, at a row (column) not provably a multiple of 32: a per-group scale ``Scale[k * block_K //
        group, n]`` (``Scale[n, k * block_K // group]`` for transposed weights)."""
        fixed, moving = access.indices[axis], access.indices[1 - axis]
        what = ("row", "column")[axis]
        fixed = self.ana.simplify(fixed)   # (k * block_K + i) // group -> k * block_K // group when block_K | group
        if not (isinstance(access, tirx.BufferLoad) and len(vars_) == 2):
            return False
        span = self.ana.simplify(self._extent[vars_[axis]])
        if not (uses_var(moving, vars_[1 - axis]) and not uses_var(moving, vars_[axis])
                and isinstance(span, tirx.IntImm) and int(span) % TILE == 0):
            return False     # only broadcasts over whole tiles (a 1-row block keeps its row where it is)
        g = _group_rows(access.indices[axis], vars_[axis])
        if uses_var(fixed, vars_[axis]) and g is not None:
            raise TTUnsupportedError(
                f"{access.buffer.name}{list(access.indices)} changes every {g} values of the T.Parallel's {what} "
                f"variable {vars_[axis].name}: a per-group {what} is broadcast over a whole block, and TT "
                f"broadcasts one {what} per 32x32 tile (groups of {g} within one block would need a different "
                f"{what} per tile" + (" and within one tile)" if g < TILE else ")"),
                construct=describe(access), source=self.src,
                fix=f"use block_K <= group_size with group_size a multiple of block_K and of {TILE}" +
                    (f"; for groups below {TILE} expand the scales on the host to one per weight and multiply "
                     "element-wise" if g < TILE else ""))
        return (not uses_var(fixed, vars_[0]) and not uses_var(fixed, vars_[1])
                and not self.ana.can_prove(tirx.floormod(fixed, TILE) == 0))

    def _tile_op(self, stmt, c):
        if c.op.same_as(TileOps.reduce):
            src, dst = decode_region(c.args[0], self.src), decode_region(c.args[1], self.src)
            dim = int(c.args[3])
            if len(dst.buffer.shape) == 1 and len(src.buffer.shape) == 2:
                dim = dim % 2
                self.orient.set(dst.buffer, COL if dim == 1 else ROW, f"T.reduce_*(dim={dim}) output")
            elif len(dst.buffer.shape) == 1 and len(src.buffer.shape) == 1:
                # a vector reduced to one value: the value sits where the vector's reduction leaves it
                self.orient.union(src.buffer, dst.buffer)
            return
        if c.op.same_as(TileOps.copy):
            src, dst = decode_region(c.args[0], self.src), decode_region(c.args[1], self.src)
            for g, t in ((src, dst), (dst, src)):
                if is_global(g.buffer) and not is_global(t.buffer) and len(g.buffer.shape) >= 3:
                    # the block is what the local side holds: a window of rows of a larger buffer (a GQA
                    # group's query heads stacked in one block) or the whole buffer
                    # (a 1-D buffer is a row or a column of the view: a column vector stored as a tensor row is
                    # transposed on the way, MemorySpaceLowerTT)
                    want = tuple(t.extents[-2:]) if len(t.buffer.shape) >= 2 else _Vector(_dims(t.buffer)[0])
                    self.windows.setdefault(g.buffer.data, []).append((g.extents, want, describe(stmt)))
                elif is_global(g.buffer) and is_global(t.buffer) and len(g.buffer.shape) >= 3:
                    # a global-to-global copy moves its window through a tile buffer of the window's 2-D shape
                    moving = [int(e) for e in g.extents if int(e) != 1]
                    if len(moving) <= 2:
                        want = tuple([1] * (2 - len(moving)) + moving)
                        self.windows.setdefault(g.buffer.data, []).append((g.extents, want, describe(stmt)))
            if len(src.buffer.shape) == 1 and len(dst.buffer.shape) == 1:
                self.orient.union(src.buffer, dst.buffer)
            for r in (src, dst):
                self.bcast[r.buffer.data] = (False, False)

    def _shape2d(self, buf):
        shape = _dims(buf)
        if len(shape) == 1:
            return (shape[0], 1) if self.orient.of(buf) == COL else (1, shape[0])
        return shape[-2], shape[-1]

    def split(self, buf) -> int:
        """The split p of a tensor of rank >= 3 (see the module docstring)."""
        shape = _dims(buf)
        n = len(shape)
        wins = self.windows.get(buf.data, [])
        for p in range(n - 1, 0, -1):
            if all(self._rect(shape, ext, p) in ((want.n, 1), (1, want.n)) if isinstance(want, _Vector)
                   else self._rect(shape, ext, p) == tuple(want) for ext, want, _ in wins):
                return p
        what = wins[0][2] if wins else f"tensor {buf.name}"
        raise TTUnsupportedError(
            f"tensor {buf.name} of shape {list(shape)} is accessed in blocks that are not rectangles of one "
            f"2-D view ({[list(e) for e, _, _ in wins]})", construct=what, source=self.src,
            fix="move blocks that span the last dimension(s) and one sequence dimension, e.g. X[b, h, s0:s0+bm, :]")

    @staticmethod
    def _rect(shape, ext, p):
        ext = (1,) * (len(shape) - len(ext)) + tuple(int(e) if isinstance(e, (int, tirx.IntImm)) else e for e in ext)

        def contiguous(dims, exts):
            # dims before the first non-unit extent are 1; dims after it are whole
            k = next((i for i, e in enumerate(exts) if e != 1), None)
            if k is None:
                return True
            return all(isinstance(d, int) and e == d for d, e in zip(dims[k + 1:], exts[k + 1:]))

        if not contiguous(shape[:p], ext[:p]) or not contiguous(shape[p:], ext[p:]):
            return None
        return _prod(ext[:p]), _prod(ext[p:])

    # -- rewrite ---------------------------------------------------------------------------------------
    def plan(self):
        for p in self.func.params:
            if p in self.func.buffer_map:
                buf = self.func.buffer_map[p]
                rank = len(buf.shape)
                axis = next((k for k, b in enumerate(self.bcast.get(buf.data, ())) if b), None)
                if rank == 2 and axis is not None and all(isinstance(d, int) for d in _dims(buf)):
                    self._spread(buf, axis)
                    continue
                if rank == 2:
                    continue
                split = (1 if self.orient.of(buf) == COL else 0) if rank == 1 else self.split(buf)
                self._declare(buf, split)
        for buf in self.tile_buffers:
            shape = _dims(buf)
            if len(shape) > 2:
                raise TTUnsupportedError(f"tile buffer {buf.name} has rank {len(shape)}", construct=buf.name,
                                         source=self.src, fix="allocate 2-D (or 1-D) shared/fragment buffers")
            if len(shape) == 1:
                self._declare(buf, 1 if self.orient.of(buf) == COL else 0)

    def _spread(self, buf, axis: int):
        """Each row (``axis`` 0) or column (1) of a broadcast 2-D tensor at row / column 0 of its own tiles."""
        rows, cols = _dims(buf)
        self.spread[buf.data] = axis
        if axis == 0:
            self._declare(buf, 2, (rows, 1, cols))
        else:
            new = tirx.decl_buffer((rows, cols * TILE), buf.dtype, buf.name, data=buf.data, scope=str(buf.scope()))
            self.new[buf.data] = (new, 1, (rows, cols, TILE))
            self.col_pads[buf.name] = {"cols": 1, "padded_cols": TILE}

    def _declare(self, buf, p, shape=None):
        """``shape``: the tensor seen with more dimensions (a broadcast-row tensor ``[G, N]`` as ``[G, 1, N]``)."""
        if shape is not None:
            folded = (shape[0], TILE, shape[2])
        else:
            shape = _dims(buf)
            folded = self._row_group(buf, shape, p)
        view = (_prod(folded[:p]), _prod(shape[p:]))
        new = tirx.decl_buffer(view, buf.dtype, buf.name, data=buf.data, scope=str(buf.scope()))
        self.new[buf.data] = (new, p, folded)
        if folded != shape:
            outer = _prod(shape[:p - 1])    # symbolic with a T.dynamic batch (the plan prints it as C++)
            self.row_pads[buf.name] = {"outer": outer if isinstance(outer, tirx.PrimExpr) else int(outer),
                                       "rows": int(shape[p - 1]),
                                       "padded_rows": int(folded[p - 1])}

    def _row_group(self, buf, shape, p):
        """``shape`` with the last row dimension padded, when several dimensions fold into rows and the blocks moved
        along that dimension do not divide it: each matrix (e.g. one head's ``[S, D]``) is then padded to whole
        blocks, as ttnn pads every matrix of a tiled tensor, so that a block never reaches into the next one."""
        if p < 2 or not isinstance(shape[p - 1], int):
            return shape
        longest = 1
        for ext, _, _ in self.windows.get(buf.data, []):
            ext = (1,) * (len(shape) - len(ext)) + tuple(ext)
            if isinstance(ext[p - 1], (int, tirx.IntImm)):
                longest = max(longest, int(ext[p - 1]))
        block = -(-longest // TILE) * TILE
        if longest == 1 or shape[p - 1] % block == 0:    # blocks do not run along it, or divide it
            return shape
        return tuple(shape[:p - 1]) + (-(-shape[p - 1] // block) * block,) + tuple(shape[p:])

    def flat(self, buf_data, indices):
        new, p, shape = self.new[buf_data]

        def fold(idx, dims):
            out = tirx.IntImm("int32", 0)
            for i, d in zip(idx, dims):
                out = out * d + i
            return out

        idx = list(indices)
        if buf_data in self.spread:     # the fixed index, simplified as _bcast checked it; 0 inside its tile
            axis = self.spread[buf_data]
            idx[axis] = self.ana.simplify(idx[axis])
            idx.insert(2 if axis else 1, tirx.IntImm("int32", 0))
        idx = [tirx.IntImm("int32", 0)] * (len(shape) - len(idx)) + idx
        return new, [fold(idx[:p], shape[:p]), fold(idx[p:], shape[p:])]

    def vector_reduce_dims(self, body):
        """``body`` with every ``T.reduce_*`` of a 1-D buffer (``dim=0``, its only axis) reducing along that axis
        of its 2-D view: the columns of a row vector (``dim=1``), the rows of a column vector (``dim=0``)."""
        def post(node):
            if isinstance(node.op, Op) and node.op.same_as(TileOps.reduce):
                src = decode_region(node.args[0], self.src).buffer
                if len(src.shape) == 1:
                    dim = tirx.IntImm("int32", 1 if self.orient.of(src) == ROW else 0)
                    return tirx.Call(node.dtype, node.op, [*node.args[:3], dim, *node.args[4:]])
            return None

        return transform(body, post, ["tirx.Call"])

    def rewrite(self) -> tirx.PrimFunc:
        if not self.new:
            return self.func
        from tvm import arith

        ana = arith.Analyzer()

        def post(node):
            if isinstance(node, tirx.BufferLoad) and node.buffer.data in self.new:
                new, idx = self.flat(node.buffer.data, node.indices)
                return tirx.BufferLoad(new, [ana.simplify(i) for i in idx])
            if isinstance(node, tirx.BufferStore) and node.buffer.data in self.new:
                new, idx = self.flat(node.buffer.data, node.indices)
                return tirx.BufferStore(new, node.value, [ana.simplify(i) for i in idx])
            if isinstance(node, tirx.Call) and isinstance(node.op, Op) and node.op.same_as(TileOps.region):
                load = node.args[0]
                if isinstance(load, tirx.BufferLoad) and load.buffer.data in self.new:
                    _, p, shape = self.new[load.buffer.data]
                    ext = [int(e) for e in node.args[2:]]
                    ext = [1] * (len(shape) - len(ext)) + ext
                    rect = self._rect(shape, ext, p)
                    if rect is None:
                        raise TTUnsupportedError(f"a window {ext} of {load.buffer.name} is not a rectangle of its "
                                                 "2-D view", construct=load.buffer.name, source=self.src)
                    return tirx.Call(node.dtype, node.op, [load, node.args[1], tirx.IntImm("int32", int(rect[0])),
                                                           tirx.IntImm("int32", int(rect[1]))])
            if isinstance(node, tirx.SBlock) and any(b.data in self.new for b in node.alloc_buffers):
                allocs = [self.new[b.data][0] if b.data in self.new else b for b in node.alloc_buffers]
                return tirx.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint, node.body, node.init,
                                   allocs, node.match_buffers, node.annotations)
            return None

        body = transform(self.vector_reduce_dims(self.func.body), post,
                         ["tirx.BufferLoad", "tirx.BufferStore", "tirx.Call", "tirx.SBlock"])
        bmap = {p: (self.new[b.data][0] if b.data in self.new else b) for p, b in self.func.buffer_map.items()}
        return tirx.PrimFunc(self.func.params, body, self.func.ret_type, bmap, self.func.attrs)


def tile_pad(func: tirx.PrimFunc) -> tirx.PrimFunc:
    src = source_of(func)
    views = _Views(func)
    views.analyse()
    views.plan()
    logical = {func.buffer_map[p].name: list(_dims(func.buffer_map[p])) for p in func.params if p in func.buffer_map}
    func = views.rewrite()
    padding = {}
    for p in func.params:
        if p not in func.buffer_map:
            continue
        buf = func.buffer_map[p]
        view = _dims(buf)
        padding[buf.name] = records.Padding(logical=logical[buf.name], view=list(view), padded=list(_padded(view)),
                                            row_pad=views.row_pads.get(buf.name), col_pad=views.col_pads.get(buf.name))

    allocs = []
    tirx.stmt_functor.post_order_visit(func.body, lambda n: allocs.extend(n.alloc_buffers)
                                       if isinstance(n, tirx.SBlock) else None)
    for buf in allocs:
                for extent in _dims(buf):
                    if isinstance(extent, int) and extent > TILE and extent % TILE:
                        lo, hi = extent // TILE * TILE, -(-extent // TILE) * TILE
                        raise TTShapeError(
                            f"tile buffer {buf.name} has shape {list(_dims(buf))}: an extent above 32 that is not a "
                            "multiple of 32 makes blocks straddle 32x32 tiles", construct=f"buffer {buf.name}",
                            source=src, fix=f"use {lo} or {hi} (or an extent that divides 32)")
    return records.put_padding(func, padding)


def TilePadTT():
    @prim_func_pass("tt.TilePadTT")
    def transform(func, mod, ctx):
        return tile_pad(func)

    return transform
