"""Float16OperandsTT: T.gemm multiplies every bit of its float16 operands, as a GPU does.

**in1 is split.** Matmul puts in1 (T.gemm's B) in SrcA, whose multipliers take 5 bits per fidelity phase: at HiFi4
a float16's implicit one and its first 9 mantissa bits; its last bit is in no phase (TT_KERNEL_PATTERNS.md 5b;
SrcASrcB.md of the ISA documentation). A float16 GEMM on the FPU is therefore a 10-bit x 11-bit product, and
TileLang's float16 GEMM at ``rtol = atol = 1e-2`` misses on ~0.6% of the elements of a 1024^3 product. GPUs multiply
fp16 exactly, so a TileLang kernel's float16 T.gemm with a float32 accumulator is written to that contract::

    T.gemm(A_s, B_s, C_l)    ->   for i, j in T.Parallel(bk, bn):            # in the compute kernel, per block
                                      B_s_hi[i, j] = T.cast(B_s[i, j], "bfloat16")         # 8 bits (rounded)
                                  for i, j in T.Parallel(bk, bn):
                                      B_s_lo[i, j] = T.cast(T.cast(B_s[i, j], "float32")   # the other 3 (exact)
                                                            - T.cast(B_s_hi[i, j], "float32"), "bfloat16")
                                  T.gemm(A_s, B_s_hi, C_l)
                                  T.gemm(A_s, B_s_lo, C_l)

Both parts fit SrcA's 10 bits, A stays in SrcB (all 11 bits at HiFi4), the products accumulate in the fp32 DST:
each product is exact, except where the low part of an in1 below 2^-6 is below float16's normal range (SrcA holds
float16 data as FP16 when the kernel has a Float16 CB, which flushes it: an absolute error below 2^-14 |a| per
product, as the FPU flushes float16 denormals itself). The price is a second matmul and the two parts' CBs.

**A fragment updated in place is multiplied from a copy.** A float16 fragment that ``T.Parallel`` reads and
T.gemm multiplies (TileLang's Mamba chunk scan scales ``cb_local`` three times, then multiplies it) is held as
Float32 (MemorySpaceLowerTT), but a CB the FPU reads cannot unpack to DST, so every update's ``copy_tile`` would
narrow it to FP16 by truncation (a bias toward zero, once per update). The gemm reads ``<name>_mm``, a copy made
just before it: the fragment itself is only copied into DST (exact fp32 through its updates), the FPU narrows the
copy once.

In:  a PrimFunc after TilePadTT (tile buffers, ``tl.tileop.gemm`` calls on ``tl.region`` windows, ``tt.compute``).
Out: every T.gemm with a float32 accumulator reads a copy of each float16 fragment operand a ``T.Parallel``
     reads. Every such T.gemm whose in1 is float16, at math fidelity HiFi4 (a lower fidelity drops bits of both
     operands: the user chose it), unless ``allow_fp16_reduced`` (T.annotate_tt_compute or the target option)
     accepts 10 bits, is the split above. The parts are tile buffers of the kernel's block (in1's
     scope, ``<name>_hi`` / ``<name>_lo``), one pair per window shape: each split is consumed by its own two
     matmuls before the next one writes the pair. With ``try_lower`` (the pipeline's: the rest of the lowering, up
     to the verified TT program) the rewritten kernel is lowered first; when it does not fit (its CBs exceed L1 or
     the 32 CBs: TTResourceError), the copies alone (a CB each) are tried, then the split alone, then the kernel as
     written; a kernel left unsplit says why.
Attributes written: ``tt.compute`` (records.Compute) ``fp16_in1_split``: the names of the split in1 buffers, or
     ``fp16_in1_unsplit``: why a kernel that needed the split did not get it (its TTPrecisionWarning says so); the
     plan's ``precision.float16_in1`` is "split" or "unsplit".
Errors: none (a T.gemm it does not split is left as it was).
"""

from __future__ import annotations

from tvm import tirx

from .. import records
from ..errors import TTResourceError
from .common import (SCOPE_FRAGMENT, ParallelNestRewriter, TileOps, decode_region, prim_func_pass, read_in_parallel,
                     region_call, rewrite_kernel_blocks, tile_buffer_names, tile_op_call)

_A, _B, _C, _CLEAR = 0, 1, 2, 9     # T.gemm's slots: A, B, C, transpose_A, transpose_B, M, N, K, policy, clear_accum, ...


class _Operands(ParallelNestRewriter):
    """Rewrites each float32-accumulating T.gemm of a kernel block: copies of its updated float16 fragments
    (``updated``: the buffers a ``T.Parallel`` reads), then the split of a float16 in1 (``split_in1``).
    ``split``: the in1 buffers' names."""

    def __init__(self, taken: set, updated: set, split_in1: bool):
        super().__init__(taken)
        self.updated, self.split_in1, self.split = updated, split_in1, []
        self.parts: dict = {}      # (window shape, scope, role) -> the buffers the rewrites of that shape share

    def nest(self, loop):
        return loop

    def stmt(self, s):
        c = tile_op_call(s)
        if c is not None and c.op.same_as(TileOps.gemm):
            return self.gemm(s, c)
        return super().stmt(s)

    def _buffer(self, r, role: str, dtype: str):
        key = (tuple(int(e) for e in r.extents), r.buffer.scope(), role)
        if key not in self.parts:
            self.parts[key] = self.new_buffer(r.extents, dtype, f"{r.buffer.name}_{role}", key[1])
        return self.parts[key]

    @staticmethod
    def _nest(r, dest, value_of):
        """``for ... in T.Parallel(window): dest[...] = value_of(r's element)``."""
        names = ("i", "j") if len(r.extents) == 2 else [f"i{d}" for d in range(len(r.extents))]
        loop_vars = [tirx.Var(n, "int32") for n in names]
        body = tirx.BufferStore(dest, value_of(tirx.BufferLoad(r.buffer, [m + v for m, v in zip(r.mins, loop_vars)]),
                                               loop_vars), loop_vars)
        for var, ext in reversed(list(zip(loop_vars, r.extents))):
            body = tirx.For(var, tirx.const(0, "int32"), tirx.const(int(ext), "int32"), tirx.ForKind.PARALLEL, body)
        return body

    def _copied(self, r, before: list):
        """The window ``r`` of an updated float16 fragment, copied into ``<name>_mm``: the copy's region."""
        if str(r.buffer.dtype) != "float16" or r.scope != SCOPE_FRAGMENT or r.buffer.name not in self.updated:
            return None
        copy = self._buffer(r, "mm", "float16")
        before.append(self._nest(r, copy, lambda value, _: value))
        return decode_region(region_call(copy, [0] * len(r.extents), r.extents, 1))

    def gemm(self, s, c):
        acc = decode_region(c.args[_C])
        if str(acc.buffer.dtype) != "float32":
            return s
        args, before = list(c.args), []
        for slot in (_A, _B):
            copied = self._copied(decode_region(c.args[slot]), before)
            if copied is not None:
                args[slot] = region_call(copied.buffer, copied.mins, copied.extents, 1)
        b = decode_region(args[_B])
        if not self.split_in1 or str(b.buffer.dtype) != "float16":
            return tirx.SeqStmt(before + [tirx.Evaluate(tirx.Call(c.dtype, c.op, args, c.annotations))]) \
                if before else s
        hi, lo = self._buffer(b, "hi", "bfloat16"), self._buffer(b, "lo", "bfloat16")
        self.split.append(b.buffer.name)
        before.append(self._nest(b, hi, lambda value, _: tirx.Cast("bfloat16", value)))
        before.append(self._nest(b, lo, lambda value, ix: tirx.Cast("bfloat16", tirx.Sub(
            tirx.Cast("float32", value), tirx.Cast("float32", tirx.BufferLoad(hi, ix))))))
        zeros = [0] * len(b.extents)
        first = list(args)
        first[_B] = region_call(hi, zeros, b.extents, 1)
        second = list(first)
        second[_B] = region_call(lo, zeros, b.extents, 1)
        second[_C] = region_call(acc.buffer, acc.mins, acc.extents, 3)     # accumulates onto the first product
        second[_CLEAR] = tirx.const(False, "bool")
        return tirx.SeqStmt(before + [tirx.Evaluate(tirx.Call(c.dtype, c.op, first, c.annotations)),
                                      tirx.Evaluate(tirx.Call(c.dtype, c.op, second, c.annotations))])


def _with(func, config, **fields):
    return records.put_compute(func, records.Compute(**{**config.as_dict(), **fields}))


def _rewritten(func, config, taken: set, updated: set, split_in1: bool):
    """(the kernel with its T.gemm operands rewritten, the in1 buffers split)."""
    rewriters: list = []

    def make():
        rewriters.append(_Operands(taken, updated, split_in1))
        return rewriters[-1]

    out = rewrite_kernel_blocks(func, make)
    split = [name for r in rewriters for name in r.split]
    return (_with(out, config, fp16_in1_split=sorted(set(split))) if split else out), split


def float16_operands(func: tirx.PrimFunc, try_lower=None) -> tirx.PrimFunc:
    """The rewritten kernel (see the module docstring); ``try_lower(f)`` lowers a candidate the rest of the way and
    raises the TTResourceError of one that does not fit: then the copies alone, then the split alone are tried."""
    config = records.compute(func)
    if config is None:
        return func
    split_in1 = config.math_fidelity == "HiFi4" and not config.allow_fp16_reduced
    taken, updated = tile_buffer_names(func.body), read_in_parallel(func.body)
    stages = [(updated, split_in1), (updated, False), (set(), split_in1)]   # the copies cost one CB each
    stages = [st for i, st in enumerate(stages) if st not in stages[:i] and (st[0] or st[1])]
    failure, wanted_split = None, False
    for copies, split in stages:
        out, names = _rewritten(func, config, taken, copies, split)
        wanted_split = wanted_split or bool(names)
        if out is func:
            continue
        if try_lower is None:
            return out
        try:
            try_lower(out)
        except TTResourceError as err:      # the new CBs do not fit: try less
            failure = failure or str(err).splitlines()[0]
            continue
        if names or not wanted_split:
            return out
        return _with(out, config, fp16_in1_unsplit=failure)
    return _with(func, config, fp16_in1_unsplit=failure) if wanted_split and failure else func


def Float16OperandsTT():
    @prim_func_pass("tt.Float16OperandsTT")
    def transform(func, mod, ctx):
        return float16_operands(func)

    return transform
