"""RowStreamTT: a row block wider than L1 streams through it in column chunks, one sweep over DRAM per reduction.

Softmax, LayerNorm and RMSNorm in TileLang's examples load a block of whole rows into tile buffers ``[bm, N]``,
reduce along the rows and write the rows back. When those buffers do not fit L1 (a softmax over rows of 32768
float32 needs 20 MB of circular buffers), the block is computed in ``C``-column chunks instead: every value of the
row block is a function of its own columns and of row statistics, so each reduction becomes a sweep over the chunks
(the elementwise statements it needs recomputed per chunk from the tensor, its partial results combined into the
statistic, ``T.reduce(..., clear=False)`` after a fill with the reduction's identity), and the stores become a last
sweep. Softmax reads its rows three times (max, sum, normalise) and writes them once; RMSNorm twice and once.

In:  a PrimFunc after SuperBlockTT whose root block (inside the ``blockIdx`` loops) is a straight sequence of
     ``T.copy`` / ``T.fill`` / ``T.reduce`` calls and ``T.Parallel`` nests over *wide* tile buffers ``[bm, N]``
     (every 2-D tile buffer; one N, a multiple of 32) and *vectors* ``[bm]``: wide buffers are read from tensor
     windows ``[r, 0:N]`` and written to them, a 2-D ``T.Parallel(bm, N)`` stores a wide buffer at ``[i, j]`` and
     reads wide buffers only there, a reduction is along the rows of a wide buffer into a vector, a 1-D
     ``T.Parallel(bm)`` and fills touch vectors only. Nothing is done unless ``lower`` (the pipeline's
     ``lower_candidate``) refuses the kernel as written with TTResourceError (L1).
     A loop of one iteration in the root block (``T.Pipelined(T.ceildiv(N, BLOCK_N))`` with BLOCK_N = N, TileLang's
     online softmax) counts as its body.
Out: the root block as sweeps ``for c in T.serial(N // C)`` over chunk buffers ``[bm, C]`` (the wide buffers
     replaced; tensor windows at ``[r, c * C]``; ``j`` as a value is ``c * C + j``); vector statements between the
     sweeps in program order. ``C`` is the widest divisor of N (a multiple of 32) whose kernel ``lower`` accepts.
Attributes written: ``tt.row_stream`` = ``{"width": N, "chunk": C, "sweeps": n}``.
Errors: none; a kernel that does not match, whose recomputed statements would read a statistic another statement
     changed since (a vector written between a wide statement and the sweep that replays it), or that no chunk
     makes fit is left as written (StreamBandsTT then reports the L1 overflow).
"""

from __future__ import annotations

import tvm
from tvm import tirx

from .. import records
from ..errors import TTError, TTResourceError
from .common import (TILE, TileOps, decode_region, is_global, prim_func_pass, region_call, rewrap, static_shape,
                     strip_attrs, tile_op_call)

_GRID_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
_IDENTITY = {"sum": 0.0, "abssum": 0.0, "absmax": 0.0, "max": float("-inf"), "min": float("inf")}


class _NoMatch(Exception):
    pass


def _root(func):
    """(path of the grid loops' bodies, the root block's realize) or None."""
    body = func.body
    if isinstance(body, tirx.SBlockRealize) and not body.block.alloc_buffers:
        body = body.block.body
    grid = 0
    while isinstance(body, tirx.For) and body.thread_binding is not None and \
            str(body.thread_binding.thread_tag) in _GRID_TAGS:
        grid += 1
        body = body.body
    if not grid:
        return None
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    realize = stmts[-1]
    return realize if isinstance(realize, tirx.SBlockRealize) else None


def _replace_root(func, old: tirx.SBlockRealize, block: tirx.SBlock):
    new = tirx.SBlockRealize(old.iter_values, old.predicate, block)

    def post(node):
        return new if node.same_as(old) else None

    return func.with_body(tirx.stmt_functor.ir_transform(func.body, None, post, ["tirx.SBlockRealize"]))


def _simplify_indices(stmt):
    """``stmt`` with every buffer index simplified (``0 * 8192`` -> ``0``)."""
    analyzer = tvm.arith.Analyzer()

    def post(node):
        indices = [analyzer.simplify(i) for i in node.indices]
        if isinstance(node, tirx.BufferLoad):
            return tirx.BufferLoad(node.buffer, indices)
        return tirx.BufferStore(node.buffer, node.value, indices)

    return tirx.stmt_functor.ir_transform(stmt, None, post, ["tirx.BufferLoad", "tirx.BufferStore"])


def _unroll_single_trips(stmts: list) -> list:
    """The statements with every loop of one iteration (TileLang's online softmax sweeps ``T.Pipelined(
    T.ceildiv(N, BLOCK_N))`` with BLOCK_N = N) replaced by its body at the loop's first index."""
    out = []
    for s in stmts:
        if isinstance(s, tirx.For) and s.kind != tirx.ForKind.PARALLEL and isinstance(s.extent, tirx.IntImm) \
                and int(s.extent) == 1:
            body = _simplify_indices(tirx.stmt_functor.substitute(s.body, {s.loop_var: s.min}))
            out.extend(_unroll_single_trips(list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]))
        else:
            out.append(s)
    return out


class _Stmt:
    """One statement of the root block: its kind, the buffers it reads and writes."""

    def __init__(self, stmt, kind, reads=(), writes=(), call=None):
        self.stmt, self.kind, self.call = stmt, kind, call
        self.reads, self.writes = set(reads), set(writes)


class _Stream:
    def __init__(self, block: tirx.SBlock):
        self.block = block
        self.wrappers, stmts = strip_attrs(block.body)
        stmts = _unroll_single_trips(stmts)
        bufs = {b.name: b for b in block.alloc_buffers}
        blocks = {n: b for n, b in bufs.items() if len(b.shape) == 2}
        shapes = {tuple(static_shape(b)) for b in blocks.values()}
        if len(shapes) != 1:
            raise _NoMatch("no wide buffers, or wide buffers of different shapes")
        self.bm, self.width = next(iter(shapes))
        if self.width % TILE or self.bm == self.width:
            raise _NoMatch("a width not a multiple of 32, or as many rows as columns")
        # wide: the [bm, N] blocks and [N] row vectors (gamma, beta), both streamed; vectors: [bm] statistics
        self.wide = dict(blocks)
        self.wide.update({n: b for n, b in bufs.items() if tuple(static_shape(b)) == (self.width,)})
        self.vectors = {n: b for n, b in bufs.items() if tuple(static_shape(b)) == (self.bm,)}
        if len(self.wide) + len(self.vectors) != len(bufs):
            raise _NoMatch("tile buffers other than [bm, N], [N] and [bm]")
        self.stmts = [self._classify(s) for s in stmts]

    # ---- matching --------------------------------------------------------------------------------------------
    def _classify(self, s) -> _Stmt:
        call = tile_op_call(s)
        if call is not None and call.op.same_as(TileOps.copy):
            src, dst = decode_region(call.args[0]), decode_region(call.args[1])
            for r in (src, dst):
                if r.buffer.name in self.wide:
                    self._whole(r)
                elif r.buffer.name in self.vectors:
                    if r is src and is_global(dst.buffer):     # a statistic stored (LayerNorm's mean, 1/std)
                        return _Stmt(s, "vector", [src.buffer.name], [], call)
                    raise _NoMatch("a copy into a vector")
                elif not self._tensor_window(r):
                    raise _NoMatch("a copy of a tensor window that is not whole rows")
            if src.buffer.name not in self.wide and dst.buffer.name not in self.wide:
                raise _NoMatch("a copy between tensors")
            return _Stmt(s, "wide", [src.buffer.name], [dst.buffer.name], call)
        if call is not None and call.op.same_as(TileOps.fill):
            dst = decode_region(call.args[0])
            if dst.buffer.name in self.wide:
                self._whole(dst)
                return _Stmt(s, "wide", [], [dst.buffer.name], call)
            if dst.buffer.name in self.vectors:
                return _Stmt(s, "vector", [], [dst.buffer.name], call)
            raise _NoMatch("a fill of a tensor")
        if call is not None and call.op.same_as(TileOps.reduce):
            src, dst = decode_region(call.args[0]), decode_region(call.args[1])
            kind, dim = str(call.args[2].value), int(call.args[3])
            if src.buffer.name not in self.wide or dst.buffer.name not in self.vectors or dim not in (1, -1) or \
                    kind not in _IDENTITY or len(src.buffer.shape) != 2 or \
                    not str(dst.buffer.dtype).startswith(("float", "bfloat")):
                raise _NoMatch("a reduction that is not along the rows of a wide buffer into a vector")
            self._whole(src)
            return _Stmt(s, "reduce", [src.buffer.name] + ([] if bool(call.args[4]) else [dst.buffer.name]),
                         [dst.buffer.name], call)
        if isinstance(s, tirx.For) and s.kind == tirx.ForKind.PARALLEL:
            return self._parallel(s)
        if isinstance(s, tirx.Bind):        # a scalar (inv_D = 1 / D): in program order with the vector statements
            return _Stmt(s, "vector")
        raise _NoMatch(f"a {type(s).__name__} statement")

    def _shape(self, name: str) -> tuple:
        return tuple(static_shape(self.wide[name]))

    def _whole(self, region) -> None:
        if tuple(int(e) for e in region.extents) != self._shape(region.buffer.name) or \
                not all(isinstance(m, tirx.IntImm) and int(m) == 0 for m in region.mins):
            raise _NoMatch("part of a wide buffer")

    def _tensor_window(self, region) -> bool:
        """A window of whole rows: ``[.., r, 0]`` with extents ``[.., bm, N]`` (N the tensor's width), or a whole
        1-D tensor of N elements."""
        if not is_global(region.buffer):
            return False
        ext = [int(e) for e in region.extents]
        if len(ext) == 1:
            return ext == [self.width] and isinstance(region.mins[0], tirx.IntImm) and int(region.mins[0]) == 0
        return ext[-2:] == [self.bm, self.width] and all(e == 1 for e in ext[:-2]) and \
            isinstance(region.mins[-1], tirx.IntImm) and int(region.mins[-1]) == 0 and \
            isinstance(region.buffer.shape[-1], tirx.IntImm) and int(region.buffer.shape[-1]) == self.width

    def _parallel(self, s) -> _Stmt:
        loops, body = [], s
        while isinstance(body, tirx.For) and body.kind == tirx.ForKind.PARALLEL:
            loops.append(body)
            body = body.body
        extents = [int(lp.extent) if isinstance(lp.extent, tirx.IntImm) else None for lp in loops]
        reads, writes, bad = set(), set(), []
        i = loops[0].loop_var
        j = loops[1].loop_var if len(loops) == 2 else None

        def visit(n):
            if isinstance(n, (tirx.BufferLoad, tirx.BufferStore)):
                name = n.buffer.name
                (writes if isinstance(n, tirx.BufferStore) else reads).add(name)
                at = [i, j] if len(n.indices) == 2 else [j]
                if name in self.wide and not (j is not None and len(n.indices) == len(self._shape(name)) and
                                              all(x.same_as(y) for x, y in zip(n.indices, at))):
                    bad.append("a wide buffer read or written other than at [i, j] (a row vector at [j])")
                if name in self.vectors and not (len(n.indices) == 1 and n.indices[0].same_as(i)):
                    bad.append("a vector read other than at [i]")
                if is_global(n.buffer) and isinstance(n, tirx.BufferStore) and j is not None:
                    bad.append("a tensor written in a T.Parallel over [bm, N]")

        tirx.stmt_functor.post_order_visit(body, visit)
        if bad:
            raise _NoMatch(bad[0])
        bufs = set(self.wide) | set(self.vectors)
        reads = {r for r in reads if r in bufs}     # tensors are read in every chunk
        if len(loops) == 2 and extents == [self.bm, self.width] and writes <= set(self.wide) and \
                isinstance(loops[1].min, tirx.IntImm) and int(loops[1].min) == 0:
            return _Stmt(s, "wide", reads, writes)
        if len(loops) == 1 and extents == [self.bm] and (reads | {w for w in writes if w in bufs}) <= set(
                self.vectors):
            return _Stmt(s, "vector", reads, writes)
        raise _NoMatch("a T.Parallel that is neither over [bm, N] into wide buffers nor over [bm] vectors")

    # ---- sweeps ----------------------------------------------------------------------------------------------
    def sweeps(self) -> list:
        """[(first position, last position, statements in program order)]: the reductions and, last, the stores to
        tensors, each with the wide statements it needs replayed. Reductions share a sweep while nothing but wide
        statements lies between them and none needs a statistic another computes (LayerNorm's sum and sum of
        squares: one sweep)."""
        targets = [(k, st, self._needed(k, st.reads & set(self.wide))) for k, st in enumerate(self.stmts)
                   if st.kind == "reduce"]
        stores = [k for k, st in enumerate(self.stmts) if st.kind == "wide" and st.call is not None and
                  st.call.op.same_as(TileOps.copy) and is_global(decode_region(st.call.args[1]).buffer)]
        if not stores:
            raise _NoMatch("no tensor store")
        last = len(self.stmts)
        live = {decode_region(self.stmts[k].call.args[0]).buffer.name for k in stores}
        targets.append((last, None, self._needed(last, live)))
        groups = []
        for k, st, needed in targets:
            if groups:
                first, prev, members, written = groups[-1]
                between = self.stmts[prev + 1:min(k, last)]
                reads = set().union(*(x.reads for x in needed)) | (st.reads if st is not None else set())
                if all(x.kind != "vector" for x in between) and not (reads & written):
                    members.append((k, st, needed))
                    written |= st.writes if st is not None else set()
                    groups[-1] = (first, k, members, written)
                    continue
            groups.append((k, k, [(k, st, needed)], set(st.writes) if st is not None else set()))
        out = []
        for first, end, members, _ in groups:
            chosen = {id(x) for _, _, needed in members for x in needed}
            chosen |= {id(st) for _, st, _ in members if st is not None}
            chosen |= {id(self.stmts[k]) for k in stores} if members[-1][1] is None else set()
            out.append((first, end, [x for x in self.stmts if id(x) in chosen]))
        return out

    def _needed(self, position: int, live: set) -> list:
        """The wide statements before ``position`` that compute ``live``, in program order, checked to read the
        same vectors when replayed at ``position``."""
        live, needed = set(live), []
        for k in range(position - 1, -1, -1):
            st = self.stmts[k]
            if st.kind != "wide" or not (st.writes & live) or (
                    st.call is not None and st.call.op.same_as(TileOps.copy)
                    and is_global(decode_region(st.call.args[1]).buffer)):
                continue
            needed.append(st)
            live = (live - st.writes) | st.reads
            for v in st.reads & set(self.vectors):
                if any(v in later.writes for later in self.stmts[k + 1:position]):
                    raise _NoMatch(f"{v} changes between a statement and the sweep that recomputes it")
        if live & set(self.wide):
            raise _NoMatch("a wide buffer read before anything writes it")
        return needed[::-1]

    def rewrite(self, chunk: int) -> tuple[tirx.SBlock, int]:
        chunked = {n: tirx.decl_buffer((self.bm, chunk) if len(b.shape) == 2 else (chunk,), b.dtype, b.name,
                                       scope=b.scope()) for n, b in self.wide.items()}
        c = tirx.Var("c", "int32")
        out, done, sweeps = [], 0, self.sweeps()
        for first, end, items in sweeps:
            out += [st.stmt for st in self.stmts[done:first] if st.kind == "vector"]
            body = []
            for st in items:
                if st.kind == "reduce":
                    src, dst = decode_region(st.call.args[0]), decode_region(st.call.args[1])
                    if bool(st.call.args[4]):     # clear: the statistic starts at the reduction's identity
                        ident = tirx.FloatImm(dst.buffer.dtype, _IDENTITY[str(st.call.args[2].value)])
                        out.append(tirx.Evaluate(tirx.Call("handle", TileOps.fill, [
                            region_call(dst.buffer, dst.mins, dst.extents, 2), ident])))
                    args = [region_call(chunked[src.buffer.name], [0, 0], [self.bm, chunk], 1), st.call.args[1],
                            st.call.args[2], st.call.args[3], tirx.IntImm("bool", 0)]
                    body.append(tirx.Evaluate(tirx.Call(st.call.dtype, st.call.op, args)))
                else:
                    body.append(self._chunk(st, chunked, c, chunk))
            out.append(tirx.For(c, tirx.IntImm("int32", 0), tirx.IntImm("int32", self.width // chunk),
                                tirx.ForKind.SERIAL, tirx.SeqStmt(body) if len(body) > 1 else body[0]))
            done = end + 1
        b = self.block
        allocs = [chunked.get(x.name, x) for x in b.alloc_buffers]
        return tirx.SBlock(b.iter_vars, b.reads, b.writes, b.name_hint, rewrap(self.wrappers, out), b.init, allocs,
                           b.match_buffers, b.annotations), len(sweeps)

    def _chunk(self, st: _Stmt, chunked: dict, c, chunk: int):
        """A wide statement on chunk ``c``."""
        if st.call is not None:
            args = list(st.call.args)
            n = 2 if st.call.op.same_as(TileOps.copy) else 1
            for a in range(n):
                r = decode_region(args[a])
                if r.buffer.name in chunked:
                    shape = chunked[r.buffer.name].shape
                    args[a] = region_call(chunked[r.buffer.name], [0] * len(shape), shape, r.access)
                else:
                    args[a] = region_call(r.buffer, [*r.mins[:-1], c * chunk], [*r.extents[:-1], chunk], r.access)
            return tirx.Evaluate(tirx.Call(st.call.dtype, st.call.op, args))
        outer, inner = st.stmt, st.stmt.body
        jj = tirx.Var(inner.loop_var.name, inner.loop_var.dtype)

        def post(node):
            if isinstance(node, (tirx.BufferLoad, tirx.BufferStore)) and node.buffer.name in chunked:
                at = [node.indices[0], jj] if len(node.indices) == 2 else [jj]
                if isinstance(node, tirx.BufferLoad):
                    return tirx.BufferLoad(chunked[node.buffer.name], at)
                return tirx.BufferStore(chunked[node.buffer.name], node.value, at)
            return None

        body = tirx.stmt_functor.ir_transform(inner.body, None, post, ["tirx.BufferLoad", "tirx.BufferStore"])
        body = tirx.stmt_functor.substitute(body, {inner.loop_var: c * chunk + jj})
        loop = tirx.For(jj, tirx.IntImm("int32", 0), tirx.IntImm("int32", chunk), inner.kind, body, None,
                        inner.annotations)
        return tirx.For(outer.loop_var, outer.min, outer.extent, outer.kind, loop, None, outer.annotations)


def row_stream(func: tirx.PrimFunc, l1_bytes: int, lower=None) -> tirx.PrimFunc:
    if lower is None or records.sdpa(func) is not None or records.super_block(func) is not None:
        return func
    realize = _root(func)
    if realize is None:
        return func
    try:
        stream = _Stream(realize.block)
        stream.sweeps()
    except _NoMatch:
        return func
    rows = -(-stream.bm // TILE) * TILE       # a CB holds whole tiles: a one-row block takes 32 rows of L1
    wide_bytes = sum((rows if len(b.shape) == 2 else TILE) * stream.width * b.dtype.bits // 8
                     for b in stream.wide.values())
    if 2 * wide_bytes <= l1_bytes:
        return func          # fits as written (each wide CB at most double-buffered); StreamBandsTT checks
    try:
        lower(func)
        return func
    except TTResourceError:
        pass
    except TTError:
        return func          # another refusal: the pipeline reports it on the kernel as written
    tiles = stream.width // TILE
    for n in range(2, tiles + 1):
        if tiles % n:
            continue
        chunk = stream.width // n
        try:
            block, sweeps = stream.rewrite(chunk)
        except _NoMatch:
            return func
        candidate = _replace_root(func, realize, block)
        try:
            lower(candidate)
        except TTResourceError:
            continue
        except TTError:
            return func
        return records.put_row_stream(candidate, records.RowStream(width=stream.width, chunk=chunk, sweeps=sweeps))
    return func


def RowStreamTT(l1_bytes: int, lower=None):
    @prim_func_pass("tt.RowStreamTT")
    def transform(func, mod, ctx):
        return row_stream(func, l1_bytes, lower)

    return transform
