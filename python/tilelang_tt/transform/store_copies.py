"""StoreCopiesTT: a tile buffer compute reads and a T.copy stores to a tensor is stored from a copy.

A circular buffer has one consuming RISC-V: compute pops what it reads, the writer what it stores. TileLang kernels
store a tile buffer and go on computing with it (GDN's ``chunk_delta_h`` stores ``V_new_shared`` to ``V_new`` and
multiplies it, stores the state ``b_h_shared`` to ``h`` and multiplies it). Such a buffer is copied by compute into
a second one the writer drains, as a TT kernel engineer writes it (compute packs the tiles twice)::

    T.copy(V_new_shared, V_new[...])        ->    T.copy(V_new_shared, V_new_shared_store)    # compute
    T.gemm(K_shared, V_new_shared, b_h)           T.copy(V_new_shared_store, V_new[...])      # writer
                                                  T.gemm(K_shared, V_new_shared, b_h)

In:  a PrimFunc after TilePadTT (T.copy / T.gemm / T.reduce / T.fill on ``tl.region`` windows).
Out: no tile buffer is both the source of a T.copy into a tensor and read by compute (a T.gemm or T.reduce operand,
     the source of a T.copy into a tile buffer, a load in a ``T.Parallel``); each such buffer's stores copy it into
     ``<name>_store`` (its shape, dtype and scope, one per buffer, in the kernel's block) and store that.
Attributes written: none.
Errors: none.
"""

from __future__ import annotations

from tvm import tirx

from .common import (ParallelNestRewriter, TileOps, decode_region, is_global, prim_func_pass, read_in_parallel,
                     region_call, rewrite_kernel_blocks, tile_buffer_names, tile_op_call)


class _Uses:
    """The tile buffers T.copy stores into a tensor (``stored``) and those compute reads (``read``), by name."""

    def __init__(self, body):
        self.read, self.stored = read_in_parallel(body), set()
        tirx.stmt_functor.post_order_visit(body, self._visit)

    def _visit(self, node):
        c = tile_op_call(node) if isinstance(node, tirx.Evaluate) else None
        if c is not None and c.op.same_as(TileOps.copy):
            src, dst = decode_region(c.args[0]), decode_region(c.args[1])
            if not is_global(src.buffer):
                (self.stored if is_global(dst.buffer) else self.read).add(src.buffer.name)
        elif c is not None and c.op.same_as(TileOps.gemm):
            self.read.update(decode_region(c.args[i]).buffer.name for i in (0, 1))
        elif c is not None and c.op.same_as(TileOps.reduce):
            self.read.add(decode_region(c.args[0]).buffer.name)


class _Stager(ParallelNestRewriter):
    """Stores each buffer in ``staged`` from its ``<name>_store`` copy."""

    def __init__(self, staged: set, taken: set):
        super().__init__(taken)
        self.staged, self.made = staged, {}

    def nest(self, loop):
        return loop

    def _copy_of(self, buf: tirx.Buffer, shape) -> tirx.Buffer:
        key = (buf.name, tuple(int(e) for e in shape))
        if key not in self.made:
            name = f"{buf.name}_store" if not self.made else f"{buf.name}_store{len(self.made) + 1}"
            self.made[key] = self.new_buffer(shape, buf.dtype, name, buf.scope())
        return self.made[key]

    def stmt(self, s):
        c = tile_op_call(s)
        if c is None or not c.op.same_as(TileOps.copy):
            return super().stmt(s)
        src, dst = decode_region(c.args[0]), decode_region(c.args[1])
        if not is_global(dst.buffer) or src.buffer.name not in self.staged:
            return s
        into, out_of = list(c.args), list(c.args)
        if [int(e) for e in src.extents] == [int(e) for e in src.buffer.shape]:
            copy = self._copy_of(src.buffer, src.buffer.shape)
            into[1] = region_call(copy, src.mins, src.extents, 2)
            out_of[0] = region_call(copy, src.mins, src.extents, 1)
        else:   # a window of the buffer (``acc[:valid_h, :]``): a copy of the window's shape
            copy = self._copy_of(src.buffer, src.extents)
            zeros = [tirx.IntImm("int32", 0)] * len(src.extents)
            into[1] = region_call(copy, zeros, src.extents, 2)
            out_of[0] = region_call(copy, zeros, src.extents, 1)
        return tirx.SeqStmt([tirx.Evaluate(tirx.Call(c.dtype, c.op, into, c.annotations)),
                             tirx.Evaluate(tirx.Call(c.dtype, c.op, out_of, c.annotations))])


def store_copies(func: tirx.PrimFunc) -> tirx.PrimFunc:
    uses = _Uses(func.body)
    staged = uses.stored & uses.read
    if not staged:
        return func
    taken = tile_buffer_names(func.body)
    return rewrite_kernel_blocks(func, lambda: _Stager(staged, taken))


def StoreCopiesTT():
    @prim_func_pass("tt.StoreCopiesTT")
    def transform(func, mod, ctx):
        return store_copies(func)

    return transform
