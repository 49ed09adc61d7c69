"""SDPAFusionTT: recognise FlashAttention and schedule it the way tt-metal's SDPA op runs.

The kernel body itself is lowered by the general passes (MemorySpaceLowerTT, TensorizeTT): Q stays in L1 for
the whole K/V loop, K and V stream through double-buffered CBs one ``block_N`` chunk at a time, the scores,
statistics and output accumulator stay on chip. What this pass adds is what only the attention structure tells:

* **Balanced work split.** When the trip count of the K/V loop depends on the Q-chunk index (causal attention:
  chunk ``q`` visits ``q + 1`` K/V chunks), the Q chunks of each (batch, head) are visited in zigzag order
  (position ``p`` -> chunk ``p / 2`` for even ``p``, ``n - 1 - p / 2`` for odd ``p``, tt-metal's
  ``q_chunk_remapping``), so that consecutive blocks pair a short row with a long one; the contiguous split
  over cores then hands out pairs (granule 2) when that lowers the most loaded core's work. Both choices are
  made by evaluating the loop's trip count for every Q chunk, never assumed.
* **Mask only on the diagonal.** The mask written before ``QK^T`` (``T.if_then_else(q_idx >= k_idx, 0, -inf)``)
  is constant on every K/V chunk that lies entirely below the diagonal. The K/V loop is split at the first chunk
  the diagonal touches: the chunks before it initialise the scores with the mask's constant (a fill), only the
  diagonal chunks evaluate the mask. Chunks entirely above the diagonal are not visited: the kernel's own trip
  count (TileLang's causal examples bound the loop by the diagonal) stays as written.

In:  a TileLang PrimFunc after its frontend (``T.Kernel`` nest of blockIdx loops, ``tilelang_root`` block).
     Recognised structure, by Op identity: a serial loop whose body holds ``T.gemm(Q_s, K_s, S,
     transpose_B=True)``, ``T.reduce(S, m, "max", dim=-1)`` and a second ``T.gemm(P, V_s, O)`` where ``P`` is
     ``S`` or a ``T.copy`` of it; ``Q_s`` is filled from a global tensor at a row offset ``q * block_M`` of one
     blockIdx variable ``q`` (the Q-chunk axis).
Out: the same function; for causal-like kernels the Q-chunk variable is rebound in zigzag order at the top of
     the block body, and the K/V loop split in two (unmasked, diagonal). A kernel without the structure is
     returned unchanged.
* **K/V chunks of qk_chunk_tiles.** ``T.annotate_tt_schedule(qk_chunk_tiles=...)`` (a divisor of
  ``block_N / 32``) re-blocks the K/V loop (see ``_Rechunk``); without it the chunk is ``block_N``, halved until
  the circular buffers fit L1 when they would not (each candidate lowered through GridToPersistentTT ..
  TensorizeTT).

Attributes written: ``tt.sdpa`` = {q_chunk_tiles, k_chunk_tiles, k_chunk_from ("annotation" / "block_N" /
     "L1"), head_dim_tiles, q_axis, num_q_chunks, causal, zigzag, granule, mask ("diagonal" / "none" /
     "every chunk"), work (K/V chunks per Q chunk), core_loads}.
Errors (TTAnnotationError): a qk_chunk_tiles that does not divide the kernel's K/V block; re-blocking a kernel
     whose K/V loop variable appears other than as ``k * block_N``, or that masks scores but restarts its row
     maximum every block.
"""

from __future__ import annotations

import logging
import math

import tvm
from tvm import tirx

from .. import attrs, records
from ..device import TILE
from ..errors import TTAnnotationError, TTError
from .common import (TileOps, decode_region, is_call_to, is_global, op, renew_vars, source_of, static_grid,
                     tile_op_call, with_grid_extent, uses_var)
from .head_groups import group_heads, kv_group

logger = logging.getLogger(__name__)

_IF_THEN_ELSE = op("tirx.if_then_else")


# ---- finding the structure -------------------------------------------------------------------------------------
def _stmts(stmt) -> list:
    return list(stmt.seq) if isinstance(stmt, tirx.SeqStmt) else [stmt]


def _calls(stmt, op) -> list:
    out = []

    def visit(node):
        c = tile_op_call(node)
        if c is not None and c.op.same_as(op):
            out.append(c)

    tirx.stmt_functor.post_order_visit(stmt, visit)
    return out


class _Match:
    """The attention loop and the buffers that play each role."""

    def __init__(self, loop, qk, reduce_max, pv):
        self.loop, self.qk, self.reduce_max, self.pv = loop, qk, reduce_max, pv
        self.q_s = decode_region(qk.args[0]).buffer
        self.k_s = decode_region(qk.args[1]).buffer
        self.scores = decode_region(qk.args[2]).buffer


def _match_loop(loop) -> _Match | None:
    """The attention structure in the body of ``loop``, by Op identity and buffer roles."""
    if not isinstance(loop, tirx.For) or loop.kind != tirx.ForKind.SERIAL or loop.thread_binding is not None:
        return None
    gemms = _calls(loop.body, TileOps.gemm)
    reduces = _calls(loop.body, TileOps.reduce)
    copies = _calls(loop.body, TileOps.copy)
    for qk in gemms:
        if not bool(qk.args[4]) or bool(qk.args[3]):          # QK^T: B transposed, A not
            continue
        scores = decode_region(qk.args[2]).buffer
        maxes = [r for r in reduces if decode_region(r.args[0]).buffer.same_as(scores)
                 and str(r.args[2].value) == "max" and int(r.args[3]) in (-1, len(scores.shape) - 1)]
        if not maxes:
            continue
        probs = [scores] + [decode_region(c.args[1]).buffer for c in copies
                            if decode_region(c.args[0]).buffer.same_as(scores)]
        for pv in gemms:
            if pv is not qk and any(decode_region(pv.args[0]).buffer.same_as(p) for p in probs):
                return _Match(loop, qk, maxes[0], pv)
    return None


def _find(stmt):
    """(match, path) for the first attention loop under ``stmt``: ``path`` lists the SeqStmts' owners."""
    found = []

    def visit(node):
        if not found and isinstance(node, tirx.For):
            m = _match_loop(node)
            if m is not None:
                found.append(m)

    tirx.stmt_functor.post_order_visit(stmt, visit)
    return found[0] if found else None


def _q_axis(block_body, match: _Match, grid):
    """(tag, var, rows) of the blockIdx variable whose multiple is the row offset of the copy filling Q_s."""
    for c in _calls(block_body, TileOps.copy):
        src, dst = decode_region(c.args[0]), decode_region(c.args[1])
        if not (dst.buffer.same_as(match.q_s) and is_global(src.buffer)):
            continue
        rows = int(match.q_s.shape[0])
        # the sequence dimension of Q is the one whose extent is the Q block's rows
        for dim, (lo, ext) in enumerate(zip(src.mins, src.extents)):
            if ext != rows:
                continue
            for tag, (var, _) in grid.items():
                coeffs = tvm.arith.detect_linear_equation(lo, [var])
                if len(coeffs) == 2 and isinstance(coeffs[0], tirx.IntImm) and int(coeffs[0]) == rows:
                    return tag, var, rows
    return None


# ---- the work split --------------------------------------------------------------------------------------------
def _trip_counts(loop, lets, var, n: int) -> list[int] | None:
    """The K/V loop's trip count for every value of the Q-chunk variable, or None if it is not constant then."""
    ana = tvm.arith.Analyzer()
    extent = tirx.stmt_functor.substitute(loop.extent, lets) if lets else loop.extent
    out = []
    for q in range(n):
        value = ana.simplify(tirx.stmt_functor.substitute(extent, {var: tirx.IntImm("int32", q)}))
        if not isinstance(value, tirx.IntImm):
            return None
        out.append(int(value.value))
    return out


def zigzag(p: int, n: int) -> int:
    """tt-metal's q_chunk_remapping: in-head position ``p`` of ``n`` Q chunks -> the chunk visited there."""
    return p // 2 if p % 2 == 0 else n - 1 - p // 2


def core_loads(work: list[int], rows: int, cores: int, order, granule: int) -> list[int]:
    """Per-core sum of K/V chunks under the contiguous split of ``rows * len(work)`` blocks (row-major: the
    Q-chunk axis varies fastest) with the given in-row order and split granule (see schedule.contiguous_split)."""
    from ..schedule import contiguous_split

    n = len(work)
    loads = []
    for start, count in contiguous_split(rows * n, cores, granule):
        loads.append(sum(work[order(b % n, n)] for b in range(start, start + count)))
    return loads


def _choose_split(work: list[int], rows: int, cores: int) -> tuple[bool, int, list[int]]:
    """(zigzag, granule, loads) with the smallest most-loaded core (ties: plain order, granule 1)."""
    best = None
    for use_zigzag in (False, True):
        order = zigzag if use_zigzag else (lambda p, n: p)
        for granule in (1, 2):
            loads = core_loads(work, rows, cores, order, granule)
            key = (max(loads), use_zigzag, granule)
            if best is None or key < best[0]:
                best = (key, (use_zigzag, granule, loads))
    return best[1]


# ---- the diagonal split ----------------------------------------------------------------------------------------
def _parallel_store(stmt):
    """(loop vars, extents, lets, store) of a T.Parallel nest holding one store (and Binds), else None."""
    loops, extents = [], []
    while isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.PARALLEL:
        loops.append(stmt.loop_var)
        extents.append(stmt.extent)
        stmt = stmt.body
    if not loops:
        return None
    lets, store = {}, None
    for s in _stmts(stmt):
        if isinstance(s, tirx.Bind):
            lets[s.var] = tirx.stmt_functor.substitute(s.value, lets) if lets else s.value
        elif isinstance(s, tirx.BufferStore) and store is None:
            store = s
        else:
            return None
    if store is None or not all(isinstance(e, tirx.IntImm) for e in extents):
        return None
    return loops, [int(e.value) for e in extents], lets, store


def _affine_condition(cond, k, loops, extents):
    """``cond`` (a comparison) as ``d >= 0`` with ``d = ck * k + sum(c_i * loop_i) + base``: (ck, base, lo, hi), lo and
    hi the smallest and largest element term over the loops' extents; None if it is not affine or ``ck`` is 0."""
    kinds = {tirx.GE: (1, 0), tirx.GT: (1, 1), tirx.LE: (-1, 0), tirx.LT: (-1, 1)}
    for kind, (sign, strict) in kinds.items():
        if isinstance(cond, kind):
            break
    else:
        return None
    d = (cond.a - cond.b) * sign - strict
    coeffs = tvm.arith.detect_linear_equation(d, [k, *loops])
    if len(coeffs) != len(loops) + 2 or not all(isinstance(c, tirx.IntImm) for c in coeffs[:-1]):
        return None
    ck, per_elem, base = int(coeffs[0]), [int(c) for c in coeffs[1:-1]], coeffs[-1]
    if ck == 0:
        return None
    lo = sum(min(0, c * (e - 1)) for c, e in zip(per_elem, extents))
    hi = sum(max(0, c * (e - 1)) for c, e in zip(per_elem, extents))
    return ck, base, lo, hi


def _always_from(cond, k, loops, extents, ana):
    """(value, first_k_expr): ``cond`` has the constant truth ``value`` for every element of every chunk
    ``k < first_k_expr`` (and not for the chunk at ``first_k_expr``), or None when ``cond`` is not an affine
    comparison of the chunk and element indices. ``first_k_expr`` is a floor division whose numerator ``ana``
    proves non-negative (the kernels compute in unsigned arithmetic)."""
    found = _affine_condition(cond, k, loops, extents)
    if found is None:
        return None
    ck, base, lo, hi = found
    if ck < 0:   # true for small k: every element true while base + ck*k + lo >= 0
        value, numerator, divisor = True, ana.simplify(base + lo - ck), -ck
    else:        # false for small k: every element false while base + ck*k + hi < 0
        value, numerator, divisor = False, ana.simplify(-(base + hi) + ck - 1), ck
    if not ana.can_prove(numerator >= 0):
        return None
    return value, tirx.floordiv(numerator, divisor)


def _split_diagonal(match: _Match, ana):
    """(statements replacing the K/V loop, mask kind) — the loop split at the first chunk the mask's diagonal
    touches, the chunks before it without the mask."""
    loop = match.loop
    masks = []
    for s in _stmts(loop.body):
        p = _parallel_store(s)
        if p is not None and p[3].buffer.same_as(match.scores) and is_call_to(p[3].value, _IF_THEN_ELSE):
            masks.append((s, p))
    if len(masks) != 1:
        return None, "none"
    mask_stmt, (loops, extents, lets, store) = masks[0]
    cond = tirx.stmt_functor.substitute(store.value.args[0], lets) if lets else store.value.args[0]
    found = _always_from(cond, loop.loop_var, loops, extents, ana)
    if found is None:
        return None, "every chunk"
    value, first = found
    kept = store.value.args[1] if value else store.value.args[2]

    def unmask(node):
        if node.same_as(mask_stmt):
            filled = tirx.BufferStore(store.buffer, kept, store.indices)
            for v, e in zip(reversed(loops), reversed(extents)):
                filled = tirx.For(v, tirx.IntImm("int32", 0), tirx.IntImm("int32", e), tirx.ForKind.PARALLEL,
                                  filled)
            return filled
        return None

    end = loop.min + loop.extent
    split = tirx.Var("kv_diagonal_start", "int32")
    bound = tirx.Bind(split, tirx.max(loop.min, tirx.min(end, first)))
    k_full = tirx.Var(loop.loop_var.name, loop.loop_var.dtype)
    body_full = tirx.stmt_functor.ir_transform(loop.body, None, unmask, ["tirx.For"])
    body_full = renew_vars(body_full, {loop.loop_var: k_full})
    full = tirx.For(k_full, loop.min, split - loop.min, loop.kind, body_full, None, loop.annotations)
    k_diag = tirx.Var(loop.loop_var.name, loop.loop_var.dtype)
    diag = tirx.For(k_diag, split, end - split, loop.kind, renew_vars(loop.body, {loop.loop_var: k_diag}), None,
                    loop.annotations)
    return [bound, full, diag], "diagonal"


# ---- K/V chunks of qk_chunk_tiles ------------------------------------------------------------------------------
def _any_until(cond, k, loops, extents, ana):
    """The number of chunks ``k = 0, 1, ...`` for which ``cond`` holds for some element, when ``cond`` (an affine
    comparison, see ``_always_from``) holds for small ``k`` only; None otherwise."""
    found = _affine_condition(cond, k, loops, extents)
    if found is None or found[0] > 0:
        return None
    ck, base, _, hi = found
    numerator = ana.simplify(base + hi - ck)        # some element true while base + ck*k + hi >= 0
    if not ana.can_prove(numerator >= 0):
        return None
    return tirx.floordiv(numerator, -ck)


class _Rechunk:
    """The attention loop re-blocked to K/V chunks of ``rows`` rows (a divisor of the kernel's ``block_N``).

    The online softmax is exact under any chunking, so a K/V block of the kernel becomes ``block_N / rows``
    consecutive chunks: the K/V-position axis of ``K_s``, ``V_s``, the scores and the probabilities shrinks to
    ``rows``, every ``k * block_N`` becomes ``k' * rows``, the element loops over that axis and the copy/gemm
    extents shrink with it, and the trip count is multiplied (then cut where the mask leaves nothing visible)."""

    def __init__(self, match: _Match, rows: int, src):
        self.m, self.rows, self.src = match, rows, src
        self.block_n = int(match.k_s.shape[0])
        self.ratio = self.block_n // rows
        v_s = decode_region(match.pv.args[1]).buffer
        probs = {decode_region(match.pv.args[0]).buffer}
        axis = {match.k_s: 0, v_s: 0, match.scores: len(match.scores.shape) - 1}
        for p in probs:
            axis[p] = len(p.shape) - 1
        self.axis = {}
        self.new = {}
        for buf, ax in axis.items():
            shape = list(buf.shape)
            shape[ax] = rows
            nb = tirx.decl_buffer(shape, buf.dtype, buf.name, scope=str(buf.scope()))
            self.new[buf.data] = nb
            self.axis[buf.data] = self.axis[nb.data] = ax

    def fail(self, why: str):
        raise TTAnnotationError(f"cannot re-block the K/V loop into chunks of {self.rows} rows: {why}",
                                construct="T.annotate_tt_schedule(qk_chunk_tiles=...)", source=self.src,
                                fix=f"write the kernel with block_N = {self.rows} or omit qk_chunk_tiles")

    def run(self, loop):
        k = loop.loop_var
        k2 = self.k2 = tirx.Var(k.name, k.dtype)
        start = k2 * self.rows
        chunk_vars = set()

        def find_axis_vars(node):      # element loops indexing the chunk axis of a re-blocked buffer
            if isinstance(node, (tirx.BufferLoad, tirx.BufferStore)) and node.buffer.data in self.new:
                idx = node.indices[self.axis[node.buffer.data]]
                if isinstance(idx, tirx.Var):
                    chunk_vars.add(idx)

        tirx.stmt_functor.post_order_visit(loop.body, find_axis_vars)
        bn = self.block_n

        def post(node):
            if isinstance(node, tirx.Mul):
                for a, b in ((node.a, node.b), (node.b, node.a)):
                    if isinstance(a, tirx.Var) and a.same_as(k) and isinstance(b, tirx.IntImm) and int(b) % bn == 0:
                        return start * (int(b) // bn)
                return None
            if isinstance(node, tirx.For) and node.kind == tirx.ForKind.PARALLEL and node.loop_var in chunk_vars:
                if not (isinstance(node.extent, tirx.IntImm) and int(node.extent) == bn):
                    self.fail(f"the element loop over {node.loop_var.name} does not span the K/V block")
                return tirx.For(node.loop_var, node.min, tirx.IntImm("int32", self.rows), node.kind, node.body,
                                node.thread_binding, node.annotations)
            if isinstance(node, tirx.BufferLoad) and node.buffer.data in self.new:
                return tirx.BufferLoad(self.new[node.buffer.data], node.indices)
            if isinstance(node, tirx.BufferStore) and node.buffer.data in self.new:
                return tirx.BufferStore(self.new[node.buffer.data], node.value, node.indices)
            if isinstance(node, tirx.Call) and node.op.same_as(TileOps.region):
                return self.region(node)
            if isinstance(node, tirx.Call) and node.op.same_as(TileOps.gemm):
                return self.gemm(node)
            return None

        body = tirx.stmt_functor.ir_transform(loop.body, None, post,
                                              ["tirx.Mul", "tirx.For", "tirx.BufferLoad", "tirx.BufferStore",
                                               "tirx.Call"])
        left = []
        tirx.stmt_functor.post_order_visit(body, lambda n: left.append(n) if isinstance(n, tirx.Var)
                                           and n.same_as(k) else None)
        if left:
            self.fail(f"the loop variable {k.name} is used other than as {k.name} * {bn}")
        extent = loop.extent * self.ratio
        return tirx.For(k2, loop.min * self.ratio, extent, loop.kind, body, None, loop.annotations)

    def region(self, node):
        load = node.args[0]
        ext = list(node.args[2:])
        buf = load.buffer                      # already the re-blocked buffer (children are rewritten first)
        if buf.data in self.axis:
            ax = self.axis[buf.data] - (len(buf.shape) - len(ext))
            ext[ax] = tirx.IntImm("int32", self.rows)
        elif is_global(buf):   # the K/V rows of this chunk: the dimension whose start moved to the chunk
            lead = len(load.indices) - len(ext)
            for d, lo in enumerate(load.indices):
                if d >= lead and uses_var(lo, self.k2) and int(ext[d - lead]) == self.block_n:
                    ext[d - lead] = tirx.IntImm("int32", self.rows)
        return tirx.Call(node.dtype, node.op, [load, node.args[1], *ext])

    def gemm(self, node):
        args = list(node.args)
        a, b, c = (decode_region(x) for x in args[:3])
        m_, n_ = c.extents[-2], c.extents[-1]
        k_ = a.extents[-2] if bool(args[3]) else a.extents[-1]
        args[5], args[6], args[7] = (tirx.IntImm("int32", int(v)) for v in (m_, n_, k_))
        return tirx.Call(node.dtype, node.op, args)


# ---- the pass ----------------------------------------------------------------------------------------------------
def _root_block(func):
    found = []

    def visit(node):
        if isinstance(node, tirx.SBlock) and node.name_hint == "tilelang_root":
            found.append(node)

    tirx.stmt_functor.post_order_visit(func.body, visit)
    return found[0] if found else None


def _lets_before(body, loop) -> dict:
    """Values of the Binds that precede ``loop`` in its sequence (e.g. ``loop_range``)."""
    lets = {}
    for s in _stmts(body):
        if s.same_as(loop):
            break
        if isinstance(s, tirx.Bind):
            lets[s.var] = tirx.stmt_functor.substitute(s.value, lets) if lets else s.value
    return lets


def _schedule_annotation(block):
    return block.annotations.get(attrs.SCHEDULE_ANNOTATION) if block.annotations else None


def sdpa_fusion(func: tirx.PrimFunc, options, lower=None) -> tirx.PrimFunc:
    grid = static_grid(func)
    block = _root_block(func)
    if grid is None or block is None:
        return func
    match = _find(block.body)
    if match is None:
        return func
    ann = _schedule_annotation(block)
    k_rows = int(match.k_s.shape[0])
    group = kv_group(block.body, grid, match.k_s, decode_region(match.pv.args[1]).buffer)
    start = (int(ann["qk_chunk_tiles"]) * TILE, "annotation") if ann is not None and "qk_chunk_tiles" in ann \
        else (k_rows, "block_N")
    for heads in _heads_per_block(group, grid, options.core_limit(), _work(block.body, match, grid)):
        if lower is None:       # the pass on its own cannot lower a candidate to see that it fits
            break
        fused = _chunk_from_l1(func, options, grid, block, match, *start, lower, group, heads)
        if fused is not None:
            return fused
    if start[1] == "annotation" or _tile_bytes_estimate(block) <= options.device.l1_usable_bytes * 0.9:
        return _fuse(func, options, grid, block, match, *start)
    fused = _chunk_from_l1(func, options, grid, block, match, *start, lower) if lower is not None else None
    return fused if fused is not None else _fuse(func, options, grid, block, match, *start)


def _work(body, match, grid) -> list[int]:
    """K/V chunks visited per Q chunk (all 1 when the trip count is not a constant per chunk or there is no
    Q-chunk axis: then blocks count alike)."""
    axis = _q_axis(body, match, grid)
    if axis is None:
        return [1]
    tag, qvar, _ = axis
    n = grid[tag][1]
    work = _trip_counts(match.loop, _lets_before(_enclosing_seq(body, match.loop), match.loop), qvar, n)
    return work if work is not None else [1] * n


def _heads_per_block(group, grid, cores: int, work: list[int]) -> list[int]:
    """The numbers n > 1 of query heads of a K/V group one block may compute, largest first: n divides the group,
    and the busiest core's work (K/V chunks x query heads, under the best split SDPAFusionTT can choose) grows by
    at most 1.1x over one head per block. Fewer, larger blocks save K/V reads but balance worse, and the kernel's
    math is as often its bound as its DRAM traffic. On Llama-3.1-8B prefill (blackhole, 110 cores, modeled):
    128x128 causal, two heads per block would halve the K/V bytes but make the busiest core's math 1.19x longer
    (3.94 ms against 3.42 with one head); 64x64 non-causal, four heads cost 1.05x the math and save 3/4 of the
    K/V bytes (7.43 ms against 12.68)."""
    if group is None:
        return []
    rows = math.prod(ext for _, ext in grid.values()) // len(work)

    def busiest(n: int) -> int:
        return max(_choose_split(work, rows // n, cores)[2]) * n

    base = busiest(1)
    return [n for n in range(group[2], 1, -1) if group[2] % n == 0 and busiest(n) <= 1.1 * base]


def _tile_bytes_estimate(block) -> int:
    """An upper-bound guess of the kernel's CB bytes: every tile buffer double-buffered."""
    return sum(2 * math.prod(int(d) for d in b.shape) * tvm.DataType(b.dtype).bits // 8 for b in block.alloc_buffers
               if all(isinstance(d, tirx.IntImm) for d in b.shape))


def _chunk_from_l1(func, options, grid, block, match, rows: int, chosen_by: str, lower, group=None,
                   heads: int = 1):
    """The fused kernel (``heads`` query heads of a K/V group per block) at K/V chunk ``rows``, or, when its circular
    buffers do not fit L1, at the largest halving of it that does (an annotated chunk is not halved): ``lower``
    (the pipeline's ``lower_candidate``: GridToPersistentTT .. StreamBandsTT, handed in, never imported) raises
    TTResourceError for a candidate that does not fit. None when none fits, the lowering fails otherwise, or the
    grouping does not apply."""
    from ..errors import TTResourceError

    while True:
        try:
            fused = _fuse(func, options, grid, block, match, rows, chosen_by, group, heads)
            if fused is not None:
                lower(fused)
            return fused
        except TTResourceError:
            if chosen_by == "annotation" or rows % (2 * TILE):
                return None
            rows, chosen_by = rows // 2, "L1"
        except TTError:
            return None


def _fuse(func, options, grid, block, match, chunk_rows: int, chosen_by: str, group=None, heads: int = 1):
    """The fused kernel; with ``heads`` > 1, ``heads`` query heads of each K/V ``group`` per block (None when that
    rewrite does not apply)."""
    src = source_of(func)
    axis = _q_axis(block.body, match, grid)
    q_rows, k_rows = int(match.q_s.shape[0]), int(match.k_s.shape[0])
    head_dim = int(match.q_s.shape[-1])
    ann = _schedule_annotation(block)
    ana = tvm.arith.Analyzer()
    for var, extent in grid.values():
        ana.bind(var, tvm.ir.Range(0, extent))
    body, allocs = block.body, list(block.alloc_buffers)
    if chunk_rows != k_rows:
        if chunk_rows > k_rows or k_rows % chunk_rows:
            raise TTAnnotationError(
                f"qk_chunk_tiles={chunk_rows // TILE} asks for K/V chunks of {chunk_rows} rows, which do not divide "
                f"the kernel's K/V block of {k_rows} rows", construct="T.annotate_tt_schedule(qk_chunk_tiles=...)",
                source=src, fix=f"use a qk_chunk_tiles that divides {k_rows // TILE}")
        body, allocs, match = _apply_rechunk(body, allocs, match, chunk_rows, ana, src)
    info = {"q_chunk_tiles": -(-q_rows // TILE), "k_chunk_tiles": chunk_rows // TILE, "k_chunk_from": chosen_by,
            "head_dim_tiles": -(-head_dim // TILE), "causal": False, "zigzag": False, "granule": 1, "mask": "none"}
    new_loop, mask = _split_diagonal(match, ana)
    info["mask"] = mask
    if new_loop is not None:
        body = _replace_in_seq(body, match.loop, new_loop)
    if axis is not None:
        tag, qvar, _ = axis
        n = grid[tag][1]
        info.update(q_axis=tag, num_q_chunks=n)
        work = _trip_counts(match.loop, _lets_before(_enclosing_seq(body, match.loop), match.loop), qvar, n)
        if work is not None:
            info["work"] = work
            info["causal"] = len(set(work)) > 1
            rows = 1
            for t, (_, ext) in grid.items():
                rows *= ext if t != tag else 1
            rows //= heads
            manual = ann is not None and (str(ann.get("policy", "contiguous")) != "contiguous"
                                          or str(ann.get("order", "row_major")) != "row_major")
            if info["causal"] and not manual and tag == "blockIdx.x":
                use_zigzag, granule, loads = _choose_split(work, rows, options.core_limit())
                info.update(zigzag=use_zigzag, granule=granule, core_loads=[min(loads), max(loads)])
                if use_zigzag:
                    body = _rebind_zigzag(body, qvar, n)
    if heads > 1:
        head_tag, head, kv = group
        grouped = group_heads(body, allocs, head, kv, heads, match.k_s, decode_region(match.pv.args[1]).buffer)
        if grouped is None:
            return None
        body, allocs = grouped
        info.update(kv_group=kv, heads_per_block=heads)
    if not body.same_as(block.body):
        new_block = tirx.SBlock(block.iter_vars, block.reads, block.writes, block.name_hint, body, block.init,
                                allocs, block.match_buffers, block.annotations)
        func = func.with_body(_replace_block(func.body, block, new_block))
    if heads > 1:
        func = func.with_body(with_grid_extent(func.body, head_tag, grid[head_tag][1] // heads))
    logger.info("SDPAFusionTT: %s", info)
    return records.put_sdpa(func, records.Sdpa(**info))


def _has_mask(match: _Match) -> bool:
    return any(p is not None and p[3].buffer.same_as(match.scores) and is_call_to(p[3].value, _IF_THEN_ELSE)
               for p in (_parallel_store(x) for x in _stmts(match.loop.body)))


def _running_max(match: _Match) -> bool:
    """The row maximum carries over K/V blocks: it is not refilled in the loop, or it is combined with the
    previous one by ``T.max`` after the reduction."""
    m = decode_region(match.reduce_max.args[1]).buffer
    refilled = any(decode_region(c.args[0]).buffer.same_as(m) for c in _calls(match.loop.body, TileOps.fill))
    combined = []
    tirx.stmt_functor.post_order_visit(match.loop.body, lambda n: combined.append(n) if isinstance(n, tirx.BufferStore)
                                       and n.buffer.same_as(m) and isinstance(n.value, tirx.Max) else None)
    return not refilled or bool(combined)


def _apply_rechunk(body, allocs, match, rows, ana, src):
    """(body, alloc buffers, match) with the attention loop re-blocked to K/V chunks of ``rows`` rows; the trip
    count is cut where a causal mask leaves no element of a chunk visible."""
    rc = _Rechunk(match, rows, src)
    if _has_mask(match) and not _running_max(match):
        rc.fail("the kernel masks scores but resets its row maximum every K/V block (T.fill before "
                "T.reduce_max, no T.max with the previous maximum), so a chunk whose rows are all masked would "
                "give -inf maxima; keep a running maximum (scores_max[i] = T.max(scores_max[i], "
                "scores_max_prev[i]) after the reduction)")
    loop = rc.run(match.loop)
    masks = [p for p in (_parallel_store(x) for x in _stmts(loop.body))
             if p is not None and p[3].buffer.data in rc.axis and is_call_to(p[3].value, _IF_THEN_ELSE)]
    if len(masks) == 1:
        loops, extents, lets, store = masks[0]
        cond = tirx.stmt_functor.substitute(store.value.args[0], lets) if lets else store.value.args[0]
        visible = _any_until(cond, loop.loop_var, loops, extents, ana)
        if visible is not None and ana.can_prove(loop.min == 0):
            loop = tirx.For(loop.loop_var, loop.min, tirx.min(loop.extent, visible), loop.kind, loop.body, None,
                            loop.annotations)
    body = _replace_in_seq(body, match.loop, [loop])
    allocs = [rc.new.get(b.data, b) for b in allocs]
    new_match = _match_loop(loop)
    if new_match is None:
        rc.fail("the re-blocked loop lost the attention structure")
    return body, allocs, new_match


def _enclosing_seq(body, loop):
    found = [body]

    def visit(node):
        if isinstance(node, tirx.SeqStmt) and any(s.same_as(loop) for s in node.seq):
            found.append(node)

    tirx.stmt_functor.post_order_visit(body, visit)
    return found[-1]


def _replace_in_seq(body, loop, replacement: list):
    def post(node):
        if isinstance(node, tirx.SeqStmt) and any(s.same_as(loop) for s in node.seq):
            out = []
            for s in node.seq:
                out.extend(replacement if s.same_as(loop) else [s])
            return tirx.SeqStmt(out)
        return None

    if body.same_as(loop):
        return tirx.SeqStmt(replacement)
    return tirx.stmt_functor.ir_transform(body, None, post, ["tirx.SeqStmt"])


def _rebind_zigzag(body, qvar, n: int):
    """The block body with the Q-chunk variable replaced by its zigzag remap, bound once at the top."""
    chunk = tirx.Var("q_chunk", qvar.dtype)
    half = tirx.floordiv(qvar, 2)
    remap = tirx.Select(tirx.floormod(qvar, 2) == 0, half, tirx.IntImm(qvar.dtype, n - 1) - half)
    return tirx.SeqStmt([tirx.Bind(chunk, remap), tirx.stmt_functor.substitute(body, {qvar: chunk})])


def _replace_block(stmt, old, new):
    def post(node):
        if isinstance(node, tirx.SBlock) and node.same_as(old):
            return new
        return None

    return tirx.stmt_functor.ir_transform(stmt, None, post, ["tirx.SBlock"])


def SDPAFusionTT(options, lower=None):
    from .common import prim_func_pass

    @prim_func_pass("tt.SDPAFusionTT")
    def transform(func, mod, ctx):
        return sdpa_fusion(func, options, lower)

    return transform
