"""SuperBlockTT: the blocks a core runs that share block rows or columns become one larger per-core block.

Under a multicast lattice schedule (``T.annotate_tt_schedule(multicast=True)``, the target's ``multicast=true``,
or the automatic choice below) core ``(r, c)`` runs the ``H x W`` rectangle of blocks at block row ``r * H`` and
block column ``c * W``. Run one block after the other, the core reads its A row panel once per block column of
the rectangle and its B column panel once per block row. This pass rewrites the kernel so the core runs
``h x w`` blocks (``h | H``, ``w | W``, as large as L1 allows, ``H x W`` when it fits) as one block: every A and
B tile of the fused block reaches the core once, and with TTMulticastReuse each reaches the chip once (the
shape of tt-metal's ``matmul_multicore_reuse_mcast``: per-core block ``per_core_M x per_core_N``, the accumulator
in an intermediate CB processed by DST subblocks, see TensorizeTT). The user's epilogue still runs per user
block, on that block's window of the fused accumulator, so its staging buffers keep the size the user wrote.

It runs before GridToPersistentTT because the fusion changes the grid the schedule splits and the block
shapes every later decision depends on (CB sizes, accumulator residency and subblocks, multicast groups).

In:  the frontend's ``T.Kernel`` nest (``blockIdx.x`` / ``blockIdx.y`` loops around the ``"tilelang_root"``
     block) with the options' and annotation's schedule. Fused only when the root block is the canonical GEMM:
     ``T.clear(C)``; one serial (or pipelined) K loop holding ``T.copy(global -> shared)`` of an A block whose
     tensor rows (or columns) are ``by * bm + ...`` and of a B block indexed ``bx * bn + ...`` (nothing else
     in it uses ``by`` / ``bx``, the loop bounds neither) and one ``T.gemm(A_s, B_s, C)``; then only ``T.copy``
     statements moving ``C`` (through shared buffers of ``C``'s shape) to a tensor window at ``[by * bm + ..,
     bx * bn + ..]``, or any other epilogue (a ``T.Parallel`` bias / activation / cast, in place or storing
     straight to a tensor) that stays off the K loop's operand buffers and variable and stores some tensor.
     The grid must be static and 2-D.
Out: the grid ``(gx / w, gy / h)``; ``A_s`` ``h`` times taller (``bm -> h * bm``, its copy at ``by * h``),
     ``B_s`` ``w`` times wider along N, ``C`` ``h * bm x w * bn``, the gemm's M/N, and the epilogue inside
     ``for sub_by in T.serial(h): for sub_bx in T.serial(w):`` with ``by -> by * h + sub_by``, ``bx -> bx * w +
     sub_bx`` and ``C`` read at its window ``C[sub_by * bm : .., sub_bx * bn : ..]`` (MemorySpaceLowerTT lowers
     such a window to an ``eltwise`` leaf at that origin). Any other epilogue runs unchanged in that nest (``by``,
     ``bx`` substituted) on ``C_block``, a buffer of the user's ``C`` shape and scope filled first by a
     ``T.copy`` of the window. The schedule annotation gets ``multicast=True``.
     ``(h, w, f)`` (``f`` below) is the candidate with the least modeled time at the performance model's rates
     (``_core_seconds``: max of a core's FPU, unpack and pack time, where a CB-resident accumulator is packed,
     with packer L1 accumulation, once per fused K step, and the DRAM time), then the least DRAM traffic under multicast (``A`` read ``W / w`` times, ``B`` ``H / h``
     times), then the largest, whose circular buffers fit the usable L1 and that compiles: ``lower`` (the pipeline's
     ``lower_candidate``, handed in: this pass never imports the pipeline or the codegen) runs the candidate through
     GridToPersistentTT .. StreamBandsTT (which streams A in bands where that makes the CBs fit) and the TT program
     passes up to VerifyTTProgram; without ``lower`` (the pass used on its own) the first candidate is taken. ``f`` K steps (a divisor of a static K loop from 0 up to
     ``K_STEPS_FUSED``) become one:
     ``A_s`` / ``B_s`` ``f`` times wider along K, the loop ``f`` times shorter, the gemm's K ``f * bk``, so the
     CB-resident accumulator is reloaded and re-packed once per ``f`` K tiles (tt-metal's ``in0_block_w``) and
     each multicast moves ``f`` times more per handshake; a ``T.Pipelined`` loop keeps ``max(2, ceil(stages /
     f))`` stages (as many K tiles in flight as the user's, double-buffered). Every output element sums the same
     products in the same K order; a CB-resident accumulator adds them to its fp32 partial sums ``f`` K tiles at a
     time, so a sum of more than two steps can round differently (an fp32 ulp) from the unfused kernel's.
     Automatic multicast: a kernel with no schedule choice (policy ``contiguous``, order ``row_major``, no
     ``multicast`` in the annotation or the target) that is the canonical GEMM gets ``multicast=True`` when the
     block grid has a core lattice and, with the fusion found for it, the roofline of PERF_ANCHORS section 8
     (rates from ``device.PERF``) models it faster than the contiguous split run block by block:
     ``max(busiest core's tile-MACs x max(FPU cycles / fpu_efficiency, bytes unpacked per tile-MAC / unpack rate)
     / clock, DRAM bytes / interleaved DRAM bandwidth)`` (the unpackers read fewer bytes per tile-MAC for the
     larger DST subblocks of a fused block: perf_model's count), DRAM bytes ``A x W / w + B x H / h + C`` on the lattice against every block reading its A and B
     panels. A lattice that leaves most cores idle loses when the kernel is compute-bound; ``multicast=False``
     keeps the schedule as written.
Attributes written: ``tt.super_block`` = ``{"factor": [h, w], "k_steps": f, "block": [bm, bn], "grid": [gy, gx]
     (the user's), "multicast": "annotation" | "target" | "automatic"}`` whenever the kernel runs on a multicast
     lattice; the root block's ``tt.schedule_annotation`` (``multicast=True``, policy ``rect``).
Errors: none; a kernel that does not match, or whose fused blocks never fit L1, is left as written.
"""

from __future__ import annotations

import math

import tvm
from tvm import tirx

from .. import attrs, compute_config, records
from ..errors import TTError
from ..device import FPU_CYCLES_PER_TILE_MATMUL, TILE, TILE_ELEMS, get_perf, matmul_block_unpack_tiles
from ..schedule import lattice_rect, make_schedule_spec, ragged_lattice
from ..target import TTOptions
from .tensorize import _subblock
from .common import (TileOps, decode_region, grid_loops, is_call_to, is_global, prim_func_pass, region_call, rewrap,
                     static_grid, static_shape, strip_attrs, tile_op_call, uses_var, with_buffers)


_GRID_TAGS = ("blockIdx.x", "blockIdx.y")
# K steps fused at most: each fused step reloads and re-packs the CB-resident accumulator once instead of f times;
# at 4 the reload is at most a fifth of what the unpacker moves per K tile (two operand tiles per matmul_tiles)
K_STEPS_FUSED = 4


def _subst(expr, mapping: dict):
    return tirx.stmt_functor.substitute(expr, mapping)


class _Gemm:
    """The canonical GEMM of the root block, or a reason it is not one (``why``)."""

    def __init__(self, block, by, bx):
        self.by, self.bx, self.why = by, bx, None
        self.analyzer = tvm.arith.Analyzer()
        try:
            self._match(block)
        except _NoMatch as e:
            self.why = str(e)

    def _match(self, block):
        """The root block as ``T.clear(C)``, the K loop (``_match_k_loop``) and an epilogue of copies of ``C``
        (``_match_copy_epilogue``) or anything else (``_match_general_epilogue``)."""
        self.wrappers, stmts = strip_attrs(block.body)
        if len(stmts) < 3:
            raise _NoMatch("not clear; K loop; copy-out")
        fill = tile_op_call(stmts[0])
        if fill is None or not fill.op.same_as(TileOps.fill):
            raise _NoMatch("the block does not start with T.clear")
        self.c = decode_region(fill.args[0]).buffer
        loop = stmts[1]
        if not isinstance(loop, tirx.For) or loop.kind != tirx.ForKind.SERIAL or loop.thread_binding is not None:
            raise _NoMatch("no serial K loop after T.clear")
        if any(uses_var(e, v) for e in (loop.min, loop.extent) for v in (self.by, self.bx)):
            raise _NoMatch("the K loop's bounds depend on the block")
        self.loop = loop
        self.a, self.b = self._match_k_loop(loop)
        self.bm, self.bn = (int(x) for x in static_shape(self.c))
        self.epilogue = stmts[2:]
        self.staged = any(tile_op_call(s) is None or not tile_op_call(s).op.same_as(TileOps.copy)
                          for s in self.epilogue)
        if self.staged:
            self._match_general_epilogue([self.a, self.b] + [buf for buf, _, _ in self.reads.values()])
            return
        self._match_copy_epilogue()

    def _match_k_loop(self, loop) -> tuple:
        """(A_s, B_s): the K loop as tile copies and one ``T.gemm(A_s, B_s, C)``, A read by block row along M and
        B by block column along N."""
        inner = list(loop.body.seq) if isinstance(loop.body, tirx.SeqStmt) else [loop.body]
        calls = [tile_op_call(s) for s in inner]
        if any(c is None for c in calls):
            raise _NoMatch("the K loop holds more than tile copies and a gemm")
        gemms = [c for c in calls if c.op.same_as(TileOps.gemm)]
        copies = [c for c in calls if c.op.same_as(TileOps.copy)]
        self.copy_options = list(copies[0].args[2:]) if copies else []   # a T.copy's arguments after its regions
        if len(gemms) != 1 or len(copies) + 1 != len(calls):
            raise _NoMatch("the K loop holds more than tile copies and one gemm")
        self.gemm = gemms[0]
        a, b, c = (decode_region(self.gemm.args[i]).buffer for i in range(3))
        if not c.same_as(self.c) or len(self.gemm.args) < 8:
            raise _NoMatch("the gemm does not accumulate into the cleared fragment")
        self.trans_a, self.trans_b = bool(self.gemm.args[3]), bool(self.gemm.args[4])
        self._match_reads(loop, copies)
        a_axis = 1 if self.trans_a else 0           # the M axis of A_s
        b_axis = 0 if self.trans_b else 1           # the N axis of B_s
        if self.reads.get(a.name, (None, None, None))[1:] != (a_axis, self.by) or \
                self.reads.get(b.name, (None, None, None))[1:] != (b_axis, self.bx):
            raise _NoMatch("A is not read by block row along M or B by block column along N")
        return a, b

    def _match_reads(self, loop, copies) -> None:
        """``reads``: each K-loop copy as a whole-buffer read of a tensor block stepping with one of by / bx; and
        ``k_steps``: whether every read also walks K by its block width, so K steps can be fused."""
        self.reads = {}         # shared buffer -> (axis scaled, block var)
        # K steps can be fused too when every read walks K by its block width from 0 in a static loop
        self.k_steps = isinstance(loop.extent, tirx.IntImm) and isinstance(loop.min, tirx.IntImm) and \
            int(loop.min) == 0
        for cp in copies:
            src, dst = decode_region(cp.args[0]), decode_region(cp.args[1])
            if not is_global(src.buffer) or is_global(dst.buffer) or len(src.mins) != 2:
                raise _NoMatch("a K-loop copy is not a 2-D read of a tensor block")
            if tuple(int(e) for e in src.extents) != tuple(static_shape(dst.buffer)):
                raise _NoMatch("a K-loop copy does not fill its whole tile buffer")
            found = [(axis, v) for axis in range(2) for v in (self.by, self.bx) if uses_var(src.mins[axis], v)]
            if len(found) != 1:
                raise _NoMatch("a K-loop read is not indexed by exactly one of by / bx")
            axis, v = found[0]
            if not self._stride_is(src.mins[axis], v, src.extents[axis]):
                raise _NoMatch("a K-loop read does not step by its block size")
            self.k_steps &= self._stride_is(src.mins[1 - axis], loop.loop_var, src.extents[1 - axis]) and \
                not any(uses_var(src.mins[1 - axis], b) for b in (self.by, self.bx))
            self.reads[dst.buffer.name] = (dst.buffer, axis, v)

    def _match_copy_epilogue(self) -> None:
        """An epilogue of ``T.copy`` statements moving the whole accumulator, through shared buffers of its shape,
        to a tensor window at ``[by * bm, bx * bn]``, never writing the accumulator."""
        staged = {self.c.name}
        for s in self.epilogue:
            cp = tile_op_call(s)
            if cp is None or not cp.op.same_as(TileOps.copy):
                raise _NoMatch("the epilogue is not T.copy statements")
            src, dst = decode_region(cp.args[0]), decode_region(cp.args[1])
            if src.buffer.name not in staged or is_global(src.buffer):
                raise _NoMatch("the epilogue moves something other than the accumulator")
            if tuple(int(e) for e in src.extents) != (self.bm, self.bn) or \
                    not all(self.analyzer.can_prove(m == 0) for m in src.mins):
                raise _NoMatch("the epilogue copies part of a buffer")
            if is_global(dst.buffer):
                if len(dst.mins) != 2 or not self._stride_is(dst.mins[0], self.by, self.bm) or \
                        not self._stride_is(dst.mins[1], self.bx, self.bn) or uses_var(dst.mins[0], self.bx) or \
                        uses_var(dst.mins[1], self.by):
                    raise _NoMatch("the epilogue does not store at [by * bm, bx * bn]")
            elif tuple(static_shape(dst.buffer)) != (self.bm, self.bn) or dst.buffer.name in staged:
                raise _NoMatch("the epilogue stages through a buffer of another shape")
            else:
                staged.add(dst.buffer.name)
        if self.c.name in {decode_region(tile_op_call(s).args[1]).buffer.name for s in self.epilogue}:
            raise _NoMatch("the epilogue writes the accumulator")

    def _match_general_epilogue(self, operands) -> None:
        """An epilogue with more than copies (a T.Parallel bias / activation, a cast): fused blocks run it unchanged
        per user block on a copy of that block's window of the accumulator (``_fuse``), so it only has to stay off
        the K loop's operand buffers (fusion resizes them) and write some global tensor."""
        touched, globals_written = [], []

        def visit(node):
            if isinstance(node, (tirx.BufferLoad, tirx.BufferStore)):
                touched.append(node.buffer)
                if isinstance(node, tirx.BufferStore) and is_global(node.buffer):
                    globals_written.append(node.buffer)
            elif isinstance(node, tirx.Var) and node.same_as(self.loop.loop_var):
                touched.append(node)

        for s in self.epilogue:
            tirx.stmt_functor.post_order_visit(s, visit)
            cp = tile_op_call(s)
            if cp is not None and cp.op.same_as(TileOps.copy) and is_global(decode_region(cp.args[1]).buffer):
                globals_written.append(decode_region(cp.args[1]).buffer)
        if any(t.same_as(o) for t in touched for o in [*operands, self.loop.loop_var]):
            raise _NoMatch("the epilogue reads the K loop's operand buffers or its variable")
        if not globals_written:
            raise _NoMatch("the epilogue stores no tensor")
        self.out_bits = max(b.dtype.bits for b in globals_written)

    def _stride_is(self, expr, var, step) -> bool:
        return self.analyzer.can_prove(_subst(expr, {var: var + 1}) - expr == step)


def _padding_writes_nothing(g: _Gemm, grid, padded) -> bool:
    """Blocks past the user's grid (``by >= gy`` or ``bx >= gx``, up to the padded grid) write no tensor element:
    every tensor store of the epilogue provably lands past the tensor's extent along some axis (readers zero-fill
    what lies outside a tensor and writers drop it, so such a block computes on zeros and stores nothing). Offsets
    read from tensors (indirect stores) are not padded."""
    (gy, gx), (GY, GX) = grid, padded
    writes, indirect, ranges = [], [], []

    def visit(node):
        if isinstance(node, tirx.BufferStore) and is_global(node.buffer):
            writes.append((node.buffer, list(node.indices)))
        elif isinstance(node, tirx.For):
            ranges.append((node.loop_var, node.min, node.extent))
        if isinstance(node, (tirx.BufferLoad, tirx.BufferStore)):
            for index in node.indices:
                tirx.stmt_functor.post_order_visit(tirx.Evaluate(index), lambda n: indirect.append(n) if (
                    isinstance(n, tirx.BufferLoad) and is_global(n.buffer)) else None)

    for st in g.epilogue:
        tirx.stmt_functor.post_order_visit(st, visit)
        cp = tile_op_call(st)
        if cp is not None and cp.op.same_as(TileOps.copy):
            dst = decode_region(cp.args[1])
            if is_global(dst.buffer):
                writes.append((dst.buffer, list(dst.mins)))
    if indirect:
        return False
    for var, extra, other, other_extent in ((g.by, GY - gy, g.bx, GX), (g.bx, GX - gx, g.by, GY)):
        if extra == 0:
            continue
        analyzer = tvm.arith.Analyzer()
        past = tirx.Var(f"{var.name}_past", "int32")
        analyzer.bind(past, tvm.ir.Range(0, extra))
        analyzer.bind(other, tvm.ir.Range(0, other_extent))
        for loop_var, lo, ext in ranges:
            if isinstance(lo, tirx.IntImm) and isinstance(ext, tirx.IntImm):
                analyzer.bind(loop_var, tvm.ir.Range.from_min_extent(lo, ext))
        first = gy if var.same_as(g.by) else gx
        for buf, indices in writes:
            shape = list(buf.shape)
            if not any(isinstance(n, tirx.IntImm) and analyzer.can_prove(
                    _subst(idx, {var: past + first}) >= int(n)) for idx, n in zip(indices, shape)):
                return False
    return True


class _NoMatch(Exception):
    pass


def _with_args(call, args):
    return tirx.Call(call.dtype, call.op, args, call.annotations if hasattr(call, "annotations") else None)


def _fused_buffers(root: tirx.SBlock, g: _Gemm, h: int, w: int, f: int) -> dict:
    """{name: resized buffer}: ``C`` ``h x w`` times larger (when blocks are fused), each K-loop operand ``h`` or
    ``w`` times along its block axis and ``f`` times along K."""
    new = {}
    for buf in root.alloc_buffers:
        if (buf.same_as(g.c) and h * w > 1) or buf.name in g.reads:
            shape = [int(x) for x in static_shape(buf)]
            if buf.same_as(g.c):
                shape = [shape[0] * h, shape[1] * w]
            else:
                _, axis, v = g.reads[buf.name]
                shape[axis] *= h if v.same_as(g.by) else w
                shape[1 - axis] *= f
            new[buf.name] = tirx.decl_buffer(shape, buf.dtype, buf.name, scope=buf.scope())
    return new


def _fused_region(expr, new: dict, mapping, scale=None):
    """The region ``expr`` on the resized buffers ``new``, its mins with ``mapping`` substituted; a tensor read's
    extents scaled by ``scale`` = (axis, factor, f): ``factor`` along ``axis``, ``f`` along K; a resized buffer's
    region the whole buffer."""
    r = decode_region(expr)
    buf = new.get(r.buffer.name, r.buffer) if not is_global(r.buffer) else r.buffer
    mins = [tvm.arith.Analyzer().simplify(_subst(m, mapping)) for m in r.mins]
    extents = list(r.extents)
    if scale is not None:
        axis, factor, f = scale
        extents[axis] *= factor
        extents[1 - axis] *= f
    elif r.buffer.name in new:
        extents = [int(x) for x in static_shape(buf)]
    return region_call(buf, mins, extents, r.access)


def _fused_k_loop(g: _Gemm, new: dict, h: int, w: int, f: int) -> tirx.For:
    """The K loop over the fused operands: reads ``h`` / ``w`` blocks and ``f`` K steps at once, the gemm's M / N /
    K scaled to match, ``f`` times fewer iterations."""
    by, bx = g.by, g.bx
    fused_k = {by: by * h, bx: bx * w, g.loop.loop_var: g.loop.loop_var * f}
    body_k = []
    for s in (list(g.loop.body.seq) if isinstance(g.loop.body, tirx.SeqStmt) else [g.loop.body]):
        c = tile_op_call(s)
        if c.op.same_as(TileOps.copy):
            _, axis, v = g.reads[decode_region(c.args[1]).buffer.name]
            factor = h if v.same_as(by) else w
            args = [_fused_region(c.args[0], new, fused_k, (axis, factor, f)),
                    _fused_region(c.args[1], new, {})] + list(c.args[2:])
        else:
            args = [_fused_region(c.args[i], new, {}) for i in range(3)] + list(c.args[3:5]) + [
                tirx.IntImm("int32", g.bm * h), tirx.IntImm("int32", g.bn * w),
                tirx.IntImm("int32", int(c.args[7]) * f)] + list(c.args[8:])
        body_k.append(tirx.Evaluate(_with_args(c, args)))
    extent = g.loop.extent if f == 1 else tirx.IntImm(g.loop.extent.dtype, int(g.loop.extent) // f)
    annotations = dict(g.loop.annotations)
    if f > 1 and "num_stages" in annotations:
        # the CB depth in blocks: as many K tiles in flight as the user's stages held, and double-buffered
        annotations["num_stages"] = tirx.IntImm("int32", max(2, math.ceil(int(annotations["num_stages"]) / f)))
    return tirx.For(g.loop.loop_var, g.loop.min, extent, g.loop.kind,
                    body_k[0] if len(body_k) == 1 else tirx.SeqStmt(body_k), None, annotations)


def _fused_epilogue(g: _Gemm, new: dict, h: int, w: int):
    """The user's epilogue, once per user block of the ``h x w`` fused block (``sub_by``, ``sub_bx``) on its
    window of the fused accumulator: copies read the window, any other epilogue a copy of it (``C_block``)."""
    if h * w == 1:      # only K steps fused: the epilogue is the user's, on the user's accumulator
        return g.epilogue[0] if len(g.epilogue) == 1 else tirx.SeqStmt(g.epilogue)
    sub_by, sub_bx = tirx.Var("sub_by", "int32"), tirx.Var("sub_bx", "int32")
    per_block = {g.by: g.by * h + sub_by, g.bx: g.bx * w + sub_bx}
    epilogue = []
    if g.staged:
        # The user's epilogue, per user block, on ``C_block``: a copy of that block's window of the fused
        # accumulator, in the accumulator's scope and of the user's shape.
        block_c = tirx.decl_buffer([g.bm, g.bn], g.c.dtype, f"{g.c.name}_block", scope=g.c.scope())
        new[block_c.name] = block_c
        window = region_call(new[g.c.name], [sub_by * g.bm, sub_bx * g.bn], [g.bm, g.bn], 1)
        epilogue.append(tirx.Evaluate(tirx.Call("handle", TileOps.copy,
                                                [window, region_call(block_c, [0, 0], [g.bm, g.bn], 2)] + g.copy_options)))
        epilogue += [with_buffers(_subst(s, per_block), {g.c: block_c}) for s in g.epilogue]
    for s in (g.epilogue if not g.staged else []):
        c = tile_op_call(s)
        src = decode_region(c.args[0])
        if src.buffer.same_as(g.c):     # the user block's window of the fused accumulator
            src_arg = region_call(new[g.c.name], [sub_by * g.bm, sub_bx * g.bn], [g.bm, g.bn], src.access)
        else:
            src_arg = c.args[0]
        dst_arg = _fused_region(c.args[1], new, per_block) if is_global(decode_region(c.args[1]).buffer) \
            else c.args[1]
        epilogue.append(tirx.Evaluate(_with_args(c, [src_arg, dst_arg] + list(c.args[2:]))))
    tail = epilogue[0] if len(epilogue) == 1 else tirx.SeqStmt(epilogue)
    return tirx.For(sub_by, tirx.IntImm("int32", 0), tirx.IntImm("int32", h), tirx.ForKind.SERIAL,
                    tirx.For(sub_bx, tirx.IntImm("int32", 0), tirx.IntImm("int32", w), tirx.ForKind.SERIAL, tail))


def _fuse(root: tirx.SBlock, g: _Gemm, h: int, w: int, f: int = 1) -> tirx.SBlock:
    """The root block with ``h x w`` user blocks fused into one and ``f`` K steps into one (module docstring)."""
    new = _fused_buffers(root, g, h, w, f)
    loop = _fused_k_loop(g, new, h, w, f)
    _, stmts = strip_attrs(root.body)
    fill = tile_op_call(stmts[0])
    clear = tirx.Evaluate(_with_args(fill, [_fused_region(fill.args[0], new, {})] + list(fill.args[1:])))
    tail = _fused_epilogue(g, new, h, w)
    allocs = [new.get(b.name, b) for b in root.alloc_buffers]
    allocs += [b for name, b in new.items() if name not in {a.name for a in root.alloc_buffers}]
    body = rewrap(g.wrappers, [clear, loop, tail])
    return tirx.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, body, root.init, allocs,
                       root.match_buffers, root.annotations)


def _with_schedule(root: tirx.SBlock, spec_dict: dict) -> tirx.SBlock:
    ann = dict(root.annotations)
    ann[attrs.SCHEDULE_ANNOTATION] = spec_dict
    return tirx.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, root.body, root.init,
                       root.alloc_buffers, root.match_buffers, ann)


def _rebuild(func, loops, pre, realize, root, extents=None):
    """The function with the root block replaced and the grid loops given new extents."""
    inner = tirx.SBlockRealize(realize.iter_values, realize.predicate, root)
    body = inner if not pre else tirx.SeqStmt(pre + [inner])
    for loop in reversed(loops):
        tag = str(loop.thread_binding.thread_tag)
        ext = tirx.IntImm("int32", extents[tag]) if extents else loop.extent
        iv = tirx.IterVar(tvm.ir.Range(0, ext), loop.loop_var, loop.thread_binding.iter_type, tag)
        body = tirx.For(loop.loop_var, loop.min, ext, loop.kind, body, iv, loop.annotations)
    if isinstance(func.body, tirx.SBlockRealize) and not func.body.block.alloc_buffers:
        outer = func.body.block
        body = tirx.SBlockRealize(func.body.iter_values, func.body.predicate,
                                  tirx.SBlock(outer.iter_vars, outer.reads, outer.writes, outer.name_hint, body,
                                              outer.init, outer.alloc_buffers, outer.match_buffers,
                                              outer.annotations))
    return tirx.PrimFunc(func.params, body, func.ret_type, func.buffer_map, func.attrs, func.span)


def _fits(func, lower) -> bool:
    """The candidate compiles: ``lower`` raises no TTError (StreamBandsTT refuses CBs that do not fit L1, the program
    passes and VerifyTTProgram the rest), so a fused kernel never fails to compile where the user's kernel compiles."""
    if lower is None:
        return True
    try:
        lower(func)
    except TTError:
        return False
    return True


def _grid_nest(func):
    """(grid loops, {tag: (var, extent)}, the launch binds, the root block's realize) of a static 2-D ``T.Kernel``
    nest, or None."""
    loops, body = grid_loops(func)
    grid = static_grid(func, _GRID_TAGS)
    if grid is None or set(grid) != set(_GRID_TAGS):
        return None
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    pre, realize = stmts[:-1], stmts[-1]
    if not isinstance(realize, tirx.SBlockRealize) or not all(
            isinstance(s, tirx.Bind) and is_call_to(s.value, TileOps.launch_thread_idx) for s in pre):
        return None
    return loops, grid, pre, realize


def _candidates(func, gemm, options: TTOptions, grid, rect) -> list:
    """The (h, w, f) fusions of the ``H x W`` rectangle, best first: least modeled time, then least DRAM traffic
    under multicast, then the largest, the squarest, the most K steps fused."""
    (gy, gx), (H, W) = grid, rect
    m_rows = int(static_shape(gemm.c)[0]) * gy       # M and N of the blocked problem, K per block row
    n_cols = int(static_shape(gemm.c)[1]) * gx
    steps = int(gemm.loop.extent) if gemm.k_steps else 1
    k_factors = [f for f in range(min(K_STEPS_FUSED, steps), 0, -1) if steps % f == 0]
    dram = {(h, w): (W // w) * m_rows + (H // h) * n_cols for h in range(1, H + 1) if H % h == 0
            for w in range(1, W + 1) if W % w == 0}
    return sorted(((h, w, f) for (h, w) in dram for f in k_factors if (h, w, f) != (1, 1, 1)),
                  key=lambda c: (_core_seconds(func, gemm, options, (gy, gx), (H, W), c, steps), dram[c[:2]],
                                 -c[0] * c[1], abs(c[0] - c[1]), -c[2]))


def super_block(func: tirx.PrimFunc, options: TTOptions, lower=None) -> tirx.PrimFunc:
    from .grid_to_persistent import _find_schedule_annotation

    nest = None if records.sdpa(func) is not None else _grid_nest(func)
    if nest is None:
        return func
    loops, grid, pre, realize = nest
    root = realize.block
    spec = _find_schedule_annotation(realize)
    source = "annotation" if spec.multicast is not None else None
    if spec.multicast is None and options.multicast is not None:
        spec = make_schedule_spec(spec.policy, spec.order, spec.rect, spec.stride, spec.chunk_k_tiles,
                                  spec.qk_chunk_tiles, options.multicast)
        source = "target"
    (by, gy), (bx, gx) = grid["blockIdx.y"], grid["blockIdx.x"]
    gemm = _Gemm(root, by, bx)
    if gemm.why is not None:
        return func
    dev = options.device
    usable = min(options.core_limit(), dev.grid_x * dev.grid_y)
    lattice = ragged_lattice(gy, gx, dev.grid_y, dev.grid_x, usable)
    if lattice is not None:     # the grid padded to whole rectangles: their blocks past the grid store nothing
        padded = (-(-gy // lattice[0]) * lattice[0], -(-gx // lattice[1]) * lattice[1])
        if padded != (gy, gx) and not _padding_writes_nothing(gemm, (gy, gx), padded):
            lattice = lattice_rect(gy, gx, dev.grid_y, dev.grid_x, usable)
            padded = (gy, gx)
    if spec.multicast is None:
        # automatic: only a kernel that chose nothing; decided by the roofline once the fusion is known
        if (spec.policy, spec.order, spec.rect, spec.stride) != ("contiguous", "row_major", None, None) or \
                lattice is None:
            return func
        spec = make_schedule_spec("rect", spec.order, None, None, spec.chunk_k_tiles, spec.qk_chunk_tiles, True)
        source = "automatic"
    if not spec.multicast or spec.rect is not None or lattice is None:
        return func
    H, W = lattice
    GY, GX = padded

    def schedule(h, w):     # a padded grid pins its lattice: the rectangles the padding was made for
        return spec.as_dict() if padded == (gy, gx) else {**spec.as_dict(), "rect": [0, 0, H // h, W // w]}

    chosen = None
    for h, w, f in _candidates(func, gemm, options, padded, (H, W)):
        fused_root = _with_schedule(_fuse(root, gemm, h, w, f), schedule(h, w))
        fused = _rebuild(func, loops, pre, realize, fused_root, {"blockIdx.y": GY // h, "blockIdx.x": GX // w})
        if _fits(fused, lower):
            chosen = (fused, h, w, f)
            break
    if chosen is None:
        chosen = (_rebuild(func, loops, pre, realize, _with_schedule(root, schedule(1, 1)),
                           {"blockIdx.y": GY, "blockIdx.x": GX}), 1, 1, 1)
    out, h, w, f = chosen
    if source == "automatic" and not _lattice_pays(func, gemm, options, (gy, gx), padded, (H, W), (h, w), usable):
        return func
    record = records.SuperBlock(factor=[h, w], k_steps=f, block=[gemm.bm, gemm.bn], grid=[gy, gx], multicast=source,
                                padded_grid=[GY, GX] if padded != (gy, gx) else None)
    return records.put_super_block(out, record)


def _core_seconds(func, g: _Gemm, options: TTOptions, grid, rect, candidate, steps: int) -> float:
    """The roofline of the lattice with its ``H x W`` rectangles fused as ``candidate`` = (h, w, f), at the
    performance model's rates (``device.PERF``): max of a core's FPU, unpack and pack time and the DRAM time.
    An ``h x w`` DST subblock unpacks ``h + w`` tiles per K tile (matmul_block, B transposed or not); a fused
    accumulator too large for DST is packed once per fused K step (``steps / f`` per block) with packer L1
    accumulation (``pack_l1_acc_cost``) or, with ``packer_l1_acc`` off, reloaded (unpacked) and packed; A is read
    ``W / w`` times, B ``H / h`` times."""
    (H, W), (h, w, f) = rect, candidate
    perf, dev = get_perf(options.arch), options.device
    resolved = records.compute(func) or records.Compute(**compute_config.resolve(func, options))
    fidelity, l1_acc = resolved.math_fidelity, resolved.packer_l1_acc
    (gy, gx), mt, nt = grid, math.ceil(g.bm / TILE), math.ceil(g.bn / TILE)
    kb = math.ceil(int(static_shape(g.a)[0 if g.trans_a else 1]) / TILE)
    macs = H * W * mt * nt * steps * kb
    fpu = macs * FPU_CYCLES_PER_TILE_MATMUL[fidelity] / perf.fpu_efficiency
    fp32 = str(g.c.dtype) == "float32"
    # matmul_block over each DST subblock, per sh * sw tile-MACs: the LLK's unpacks (perf_model); a transposed B
    # the reader fills arrives in transposed tile order, so it runs matmul_block too (LowerToTTProgram)
    sh, sw = _subblock(h * mt, w * nt, dev.dst_capacity(fp32))
    tiles_a, tiles_b = matmul_block_unpack_tiles(sh, sw)
    unpack = macs * (tiles_a * g.a.dtype.bits + tiles_b * g.b.dtype.bits) * 128 // (sh * sw)
    dram = steps * kb * 128 * (gy * mt * g.a.dtype.bits * (W // w) + gx * nt * g.b.dtype.bits * (H // h))
    pack = 0.0
    if h * w * mt * nt > dev.dst_capacity(fp32):    # CB resident: every fused K step re-packs the whole block
        partials = H * W * mt * nt * (steps // f) * TILE_ELEMS * g.c.dtype.bits // 8
        if l1_acc and str(g.c.dtype) in ("float32", "bfloat16"):
            pack = partials * perf.pack_l1_acc_cost
        else:
            pack, unpack = partials, unpack + partials
    core = max(fpu, unpack / perf.unpack_bytes_per_cycle, pack / perf.pack_bytes_per_cycle) / perf.clock_hz
    return max(core, dram / perf.dram_bw_interleaved)


def _lattice_pays(func, g: _Gemm, options: TTOptions, grid, padded, rect, factor, usable: int) -> bool:
    """The roofline (PERF_ANCHORS section 8) of the lattice with ``factor`` fused against the contiguous split: the
    busiest core's FPU or unpacker time (a fused block feeds larger DST subblocks) against the DRAM time. Blocks of the
    ``padded`` grid past the user's read nothing (readers zero-fill past a tensor's edge) but take their core's
    time: ``H x W`` blocks per core either way."""
    (gy, gx), (H, W), (h, w) = grid, rect, factor
    perf = get_perf(options.arch)
    fidelity = (records.compute(func) or records.Compute(**compute_config.resolve(func, options))).math_fidelity
    a_axis_k = 0 if g.trans_a else 1
    kt = int(g.loop.extent) * math.ceil(int(static_shape(g.a)[a_axis_k]) / TILE)
    mt, nt = math.ceil(g.bm / TILE), math.ceil(g.bn / TILE)
    a_tile, b_tile = (g.a.dtype.bits // 8) * TILE_ELEMS, (g.b.dtype.bits // 8) * TILE_ELEMS
    a_total, b_total = gy * mt * kt * a_tile, gx * nt * kt * b_tile
    out_bits = g.out_bits if g.staged else max(decode_region(tile_op_call(s).args[1]).buffer.dtype.bits
                                                for s in g.epilogue)
    c_total = gy * gx * mt * nt * TILE_ELEMS * out_bits // 8

    def unpacked_per_mac(rows: int, cols: int) -> float:
        """Bytes unpacked per tile-MAC: matmul_block's (B transposed or not) LLK count for the DST subblock of a
        rows x cols block (perf_model)."""
        sh, sw = _subblock(rows, cols, options.device.dst_capacity(str(g.c.dtype) == "float32"))
        tiles_a, tiles_b = matmul_block_unpack_tiles(sh, sw)
        return (tiles_a * a_tile + tiles_b * b_tile) / (sh * sw)

    def seconds(blocks_per_core: int, dram_bytes: int, unpacked: float) -> float:
        macs = blocks_per_core * mt * nt * kt
        cycles = max(macs * FPU_CYCLES_PER_TILE_MATMUL[fidelity] / perf.fpu_efficiency,
                     macs * unpacked / perf.unpack_bytes_per_cycle)
        return max(cycles / perf.clock_hz, dram_bytes / perf.dram_bw_interleaved)

    contiguous = seconds(math.ceil(gy * gx / usable), gy * gx * (mt * kt * a_tile + nt * kt * b_tile) + c_total,
                         unpacked_per_mac(mt, nt))
    lattice = seconds(H * W, a_total * (W // w) + b_total * (H // h) + c_total, unpacked_per_mac(h * mt, w * nt))
    return lattice < contiguous


def SuperBlockTT(options: TTOptions, lower=None):
    @prim_func_pass("tt.SuperBlockTT")
    def transform(func, mod, ctx):
        return super_block(func, options, lower)

    return transform
