"""The TT lowering pipeline: the whole pass order, in one place.

TIR passes (``lower_module``):

    BindTarget -> AtomicPartialsTT -> SplitKernelsTT -> ForwardScalarsTT -> InlineIndexLetsTT -> CopiedElementsTT -> CopyWindowsTT -> GlobalOrderTT -> TileIntRangeTT
               -> [MeshSplitTT]
               -> MergeBranchesTT
               -> PredicateParallelTT -> ParallelFissionTT -> ColumnReadsTT -> InterleavedColumnsTT -> UnpackWeightsTT -> SDPAFusionTT -> SuperBlockTT -> RowStreamTT
               -> GridToPersistentTT -> TTShardToCoreMap -> TilePadTT -> StoreCopiesTT -> Float16OperandsTT
               -> MemorySpaceLowerTT
               -> TensorizeTT (unless the target says tensorize=false) -> EliminateDeadValuesTT -> StreamBandsTT
               -> mark as device kernel

AtomicPartialsTT runs first, on the module: an atomic add into a tensor becomes a store into the block's slice of a
partial tensor and a launch that adds the slices to the tensor (TT cores share no atomic memory); not for a mesh
target, where MeshSplitTT refuses a reduction across chips. SplitKernelsTT runs
next, on the module: a function of several ``T.Kernel`` launches becomes one function per launch
(its stages, run in order by the runtime), and every pass after it compiles one grid.
ForwardScalarsTT runs next: a scalar local (``T.alloc_var``) becomes the expression it holds, which every kernel
that needs it then computes. InlineIndexLetsTT runs after it: every analysis after it sees index expressions, never a let-bound variable that
hides the loop index it depends on. MeshSplitTT runs only for a mesh target (``-mesh=RxC``): it turns the kernel into
the per-chip kernel (the split axis' share of blocks, each sharded tensor its chip's shard) that every later pass
compiles as a one-chip kernel. UnpackWeightsTT runs next: packed sub-byte weights become an int8 tensor the host unpacks (a table in the
plan), so every later pass sees ordinary int8 weights.

SDPAFusionTT (the design's phase-1 attention pass) runs early because what it decides for FlashAttention is the
work split (the order of Q chunks, pairs per core) that GridToPersistentTT turns into the persistent loop, and
the split of the K/V loop at the diagonal, which the general lowering then carries out.

SuperBlockTT runs after SDPAFusionTT and before GridToPersistentTT: it chooses multicast for a GEMM that chose no
schedule and fuses each core's rectangle of GEMM blocks into one per-core block, which changes the grid
GridToPersistentTT splits and every block shape after it.

RowStreamTT runs after them: a row block (softmax, norms) whose tile buffers do not fit L1 is swept in column
chunks, one sweep per reduction (it too lowers candidates, and only when the kernel as written does not fit).
StreamBandsTT runs last, once TensorizeTT has placed every accumulator (DST or a CB): it checks the CBs fit L1 and,
where they do not, streams a matmul's A block in row bands.

SDPAFusionTT and SuperBlockTT choose among candidates (a K/V chunk, a fusion factor) by whether each compiles and
fits L1: the pipeline hands them ``lower_candidate``, which runs a candidate through the passes from
GridToPersistentTT on (and, for SuperBlockTT, the TT program passes up to VerifyTTProgram). They never import the
pipeline or the codegen.

TT program passes (``build_program``, run by codegen on the tile program):

    LowerToTTProgram -> TTMulticastReuse -> PlaceCBPops -> AllocateDST -> HoistInits -> PruneProgram
                     -> VerifyTTProgram

Set ``TILELANG_TT_DUMP_IR=<dir>`` to write the IR after every pass to ``<dir>/<kernel>/NN_<pass>.py``
(``TILELANG_TT_DUMP_IR=1`` logs it at INFO level instead).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from tvm import IRModule, tirx
from tvm.target import Target

from . import attrs, compute_config, program_interface, records
from .kernel_context import KernelContext
from .target import TTOptions, options_from_target
from .transform.common import source_of
from .transform.dead_values import eliminate_dead_values
from .transform.forward_scalars import forward_scalars
from .transform.grid_to_persistent import grid_to_persistent
from .transform.copied_elements import copied_elements
from .transform.inline_index_lets import inline_index_lets
from .transform.interleaved_columns import interleaved_columns
from .transform.memory_space_lower import memory_space_lower
from .transform.mesh_split import mesh_split
from .transform.atomic_partials import atomic_partials
from .transform.column_reads import column_reads
from .transform.copy_windows import copy_windows
from .transform.global_order import global_order
from .transform.tile_int_range import tile_int_range
from .transform.predicate_parallel import predicate_parallel
from .transform.parallel_fission import parallel_fission
from .transform.merge_branches import merge_branches
from .transform.row_stream import row_stream
from .transform.sdpa_fusion import sdpa_fusion
from .transform.shard_to_core_map import shard_to_core_map
from .transform.float16_operands import float16_operands
from .transform.split_kernels import split_kernels
from .transform.store_copies import store_copies
from .transform.stream_bands import stream_bands
from .transform.super_block import super_block
from .transform.tensorize import tensorize
from .transform.tile_pad import tile_pad
from .transform.unpack_weights import unpack_weights

logger = logging.getLogger(__name__)

DUMP_ENV = "TILELANG_TT_DUMP_IR"
DEVICE_KERNEL_LAUNCH = 2   # tvm CallingConv.DEVICE_KERNEL_LAUNCH: routes the function to device codegen
CANDIDATE_FROM = "GridToPersistentTT"   # lower_candidate runs the passes from this one on


def passes(options: TTOptions, candidate: bool = False):
    """(name, PrimFunc -> PrimFunc) in pipeline order (``candidate``: for ``lower_candidate``, whose caller
    judges whether the candidate fits: Float16OperandsTT splits without lowering a trial of its own).

    The pipeline calls the pass functions directly rather than through TVM's pass manager, so that a
    TTError raised inside a pass reaches the user as itself (TVM's FFI would turn it into RuntimeError).
    The same passes are available as TVM passes from ``tilelang_tt.transform``."""
    dev = options.device
    seq = [("ForwardScalarsTT", forward_scalars), ("InlineIndexLetsTT", inline_index_lets),
           ("CopiedElementsTT", copied_elements), ("CopyWindowsTT", copy_windows),
           ("GlobalOrderTT", global_order), ("TileIntRangeTT", tile_int_range)]
    if options.mesh is not None:     # one chip: the pass list (and the IR dump's numbering) as before
        seq.append(("MeshSplitTT", lambda f: mesh_split(f, options)))
    seq += [
        ("MergeBranchesTT", merge_branches),
        ("PredicateParallelTT", predicate_parallel),
        ("ParallelFissionTT", parallel_fission),
        ("ColumnReadsTT", column_reads),
        ("InterleavedColumnsTT", interleaved_columns),
        ("UnpackWeightsTT", unpack_weights),
        ("SDPAFusionTT", lambda f: sdpa_fusion(f, options, lambda g: lower_candidate(g, options))),
        ("SuperBlockTT", lambda f: super_block(f, options, lambda g: lower_candidate(g, options, program=True))),
        ("RowStreamTT", lambda f: row_stream(f, dev.l1_usable_bytes, lambda g: lower_candidate(g, options))),
        ("GridToPersistentTT", lambda f: grid_to_persistent(f, options)),
        ("TTShardToCoreMap", lambda f: shard_to_core_map(f, dev.grid_x, dev.l1_usable_bytes)),
        ("TilePadTT", tile_pad),
        ("StoreCopiesTT", store_copies),
        ("Float16OperandsTT", float16_operands if candidate else
         lambda f: float16_operands(f, lambda g: lower_candidate(g, options, program=True, start="MemorySpaceLowerTT"))),
        ("MemorySpaceLowerTT", lambda f: memory_space_lower(f, dev)),
    ]
    if options.tensorize:
        seq.append(("TensorizeTT", lambda f: tensorize(f, dev)))
        seq.append(("EliminateDeadValuesTT", eliminate_dead_values))
    seq.append(("StreamBandsTT", lambda f: stream_bands(f, dev)))
    return seq


def lower_candidate(func, options: TTOptions, program: bool = False, start: str = CANDIDATE_FROM):
    """One candidate of a pass that chooses among several (SDPAFusionTT's K/V chunk, SuperBlockTT's fusion factor),
    lowered through the passes from ``start`` (CANDIDATE_FROM) on and, with ``program``, built into its verified TT program: it
    raises the TTError the lowering raises (StreamBandsTT's TTResourceError when the CBs do not fit L1). The pipeline
    hands it to those passes, which never import the pipeline or the codegen; the result is thrown away (the chosen
    candidate is lowered again as the kernel, with its own names)."""
    seq = passes(options, candidate=True)
    first = next(i for i, (name, _) in enumerate(seq) if name == start)
    for _, fn in seq[first:]:
        func = fn(func)
    if program and records.compute(func) is not None and options.tensorize:
        build_program(func, KernelContext(func, options), options)
    return func


def _dump(mod: IRModule, step: int, name: str) -> None:
    if not os.environ.get(DUMP_ENV):
        return
    for gv, func in mod.functions.items():
        _dump_text(gv.name_hint, f"{step:02d}_{name}.py",
                   lambda f=func: f.script() if hasattr(f, "script") else str(f))


def _dump_text(kernel: str, file: str, make_text) -> None:
    """Write ``make_text()`` (called only when TILELANG_TT_DUMP_IR is set: printing is most of a small compile)."""
    where = os.environ.get(DUMP_ENV)
    if not where:
        return
    text = make_text()
    if where in ("1", "log"):
        logger.info("IR after %s (%s):\n%s", file, kernel, text)
        return
    from .artifact import safe_name

    out = Path(where) / safe_name(kernel)
    out.mkdir(parents=True, exist_ok=True)
    (out / file).write_text(text)


def program_passes(ctx):
    """(name, Program -> Program) after LowerToTTProgram, in order."""
    from .transform.allocate_dst import allocate_dst
    from .transform.hoist_inits import hoist_inits
    from .transform.multicast_reuse import multicast_reuse
    from .transform.place_cb_pops import place_cb_pops
    from .transform.prune_program import prune_program
    from .transform.verify_program import verify_program

    dev = ctx.dev
    return [("TTMulticastReuse", lambda p: multicast_reuse(p, ctx.func, ctx.names, dev.mcast_flush_before_flag)),
            ("PlaceCBPops", place_cb_pops), ("AllocateDST", allocate_dst), ("HoistInits", hoist_inits),
            ("PruneProgram", prune_program),
            ("VerifyTTProgram",
             lambda p: verify_program(p, dev.l1_usable_bytes, dev.num_cbs, dev.mcast_flush_before_flag))]


def build_program(func, ctx, options: TTOptions):
    """The explicit TT program of a lowered PrimFunc (codegen's input), through every program pass."""
    from .transform.lower_to_program import LowerToProgram
    from .ttir import dump

    program = LowerToProgram(func, ctx.name, ctx.cbs, ctx.tensor_names, ctx.names,
                             ctx.dev.dst_capacity(ctx.fp32_acc), ctx.fp32_acc, ctx.src).run()
    program.cbs = ctx.program_cbs()
    base = len(passes(options)) + 1
    _dump_text(ctx.name, f"{base:02d}_LowerToTTProgram.txt", lambda: dump(program))
    for step, (name, fn) in enumerate(program_passes(ctx), start=base + 1):
        program = fn(program)
        _dump_text(ctx.name, f"{step:02d}_{name}.txt", lambda p=program: dump(p))
    program.interface = program_interface.describe(ctx, program)
    return program


def lower_module(mod: IRModule, options: TTOptions, target: Target | None = None) -> IRModule:
    if target is not None:
        mod = tirx.transform.BindTarget(target)(mod)
    _dump(mod, 0, "Input")
    mod = IRModule({gv: attrs.put(f, {attrs.COMPUTE: records.Compute(**compute_config.resolve(f, options)).as_dict(),
                                      attrs.DEVICE: options.arch, attrs.SOURCE: source_of(f)})
                    for gv, f in mod.functions.items()})
    if options.mesh is None:     # on a mesh, MeshSplitTT refuses a reduction across chips by name
        mod = atomic_partials(mod)   # AtomicPartialsTT: atomic adds -> partial tensors and a launch that sums them
    mod = split_kernels(mod)     # SplitKernelsTT: one function per T.Kernel launch (a module pass: it adds functions)
    for step, (name, fn) in enumerate(passes(options), start=1):
        mod = IRModule({gv: fn(f) if isinstance(f, tirx.PrimFunc) else f for gv, f in mod.functions.items()})
        _dump(mod, step, name)
    # TileLang runs generic device passes (LowerIntrin, Simplify) before codegen; they would inline the
    # (by, bx) binds the kernels name. Codegen reads the function exactly as the TT passes left it.
    return IRModule({gv: attrs.put(f, {attrs.LOWERED: f, "calling_conv": DEVICE_KERNEL_LAUNCH})
                     for gv, f in mod.functions.items()})


def TTPassPipelineBody(mod: IRModule, target: Target) -> IRModule:
    """The PassPipeline body TileLang calls for a tt target."""
    return lower_module(mod, options_from_target(target), target)
