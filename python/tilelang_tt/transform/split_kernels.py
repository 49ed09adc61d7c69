"""SplitKernelsTT: a function with several ``T.Kernel`` launches becomes one kernel function per launch, run in order.

TileLang lets one ``@T.prim_func`` launch several grids one after the other (a split-KV attention followed by the
kernel that combines its partial results; an MoE MLP's up and down projections), with the tensors they pass to one
another allocated by ``T.alloc_global`` or passed in by the caller. On a GPU they are kernels launched in order on
one stream; on Tenstorrent they are TT programs enqueued in order on one command queue, each a complete reader /
compute / writer program over its own grid (a program's writes are in DRAM when the next program starts).

In:  an IRModule straight from the frontend (after BindTarget; the pipeline's attributes set).
Out: every PrimFunc whose body (inside the root block) is a sequence of two or more ``T.Kernel`` grid nests is
     replaced by one PrimFunc per nest, named ``<kernel>_k<i>``. Each stage takes the function's own parameters,
     in their order, followed by one tensor parameter per ``T.alloc_global`` buffer of the root block (the
     intermediates, in allocation order); its body is its grid nest. Every later pass compiles each stage as a
     one-grid kernel (a parameter a stage does not touch is an unused tensor of its plan).
Attribute written: ``tt.sequence`` (``records.Sequence``) on each stage: the kernel's name, the stage's index and
     the number of stages, the number of the function's own parameters, and each intermediate's name, shape and
     dtype (the caller's runtime allocates them and passes them to the stages that read and write them).
Errors (TTUnsupportedError): a statement between or around the launches that is not a launch (host code: each
     statement must be inside a ``T.Kernel``), a buffer allocated at the top level that is not ``T.alloc_global``.
"""

from __future__ import annotations

from tvm import IRModule, ir, tirx

from .. import records
from ..errors import TTUnsupportedError
from .common import GRID_TAGS, buffer_scope, describe, source_of

STAGE_SUFFIX = "_k"   # stage i of kernel "f" is "f_k<i>"


def _is_launch(stmt) -> bool:
    return isinstance(stmt, tirx.For) and stmt.thread_binding is not None and \
        str(stmt.thread_binding.thread_tag) in GRID_TAGS


def _top_level(func: tirx.PrimFunc):
    """(statements of the body inside the frontend's root block, the root block's buffers)."""
    body, allocs = func.body, []
    if isinstance(body, tirx.SBlockRealize):
        allocs = list(body.block.alloc_buffers)
        body = body.block.body
    return (list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]), allocs


def launches(func: tirx.PrimFunc) -> int:
    """How many T.Kernel grid nests the function's top level holds in sequence."""
    stmts, _ = _top_level(func)
    return sum(1 for s in stmts if _is_launch(s))


def _stage(func: tirx.PrimFunc, index: int, count: int, launch, allocs: list, name: str) -> tirx.PrimFunc:
    params, bmap = list(func.params), dict(func.buffer_map)
    for buf in allocs:
        handle = tirx.Var(f"{buf.name}_handle", ir.PointerType(ir.PrimType(buf.dtype), "global"))
        params.append(handle)
        bmap[handle] = buf
    stage = tirx.PrimFunc(params, launch, func.ret_type, bmap, func.attrs)
    stage = stage.with_attr("global_symbol", f"{name}{STAGE_SUFFIX}{index}")
    record = records.Sequence(kernel=name, stage=index, stages=count, params=len(func.params),
                              intermediates=[{"name": b.name, "shape": [records.plain(d) for d in b.shape],
                                              "dtype": str(b.dtype)} for b in allocs])
    return records.put_sequence(stage, record)


def split_function(func: tirx.PrimFunc) -> list[tirx.PrimFunc]:
    """``[func]``, or its stages when it launches several grids."""
    stmts, allocs = _top_level(func)
    count = sum(1 for s in stmts if _is_launch(s))
    if count < 2:
        return [func]
    src = source_of(func)
    for s in stmts:
        if not _is_launch(s):
            raise TTUnsupportedError(
                f"a statement outside the {count} T.Kernel launches of one function: each runs as its own TT "
                "program, and code between them has no core to run on", construct=describe(s), source=src,
                fix="move the statement into the T.Kernel that needs it")
    for buf in allocs:
        if buffer_scope(buf) != "global":
            raise TTUnsupportedError(
                f"buffer {buf.name} ({buffer_scope(buf)}) is allocated outside the {count} T.Kernel launches: only "
                "T.alloc_global tensors pass between the launches of one function", construct=buf.name, source=src,
                fix=f"allocate {buf.name} inside the T.Kernel that uses it, or with T.alloc_global")
    name = str(func.attrs["global_symbol"]) if func.attrs and "global_symbol" in func.attrs else "kernel"
    stage_launches = [s for s in stmts if _is_launch(s)]
    return [_stage(func, i, count, launch, allocs, name) for i, launch in enumerate(stage_launches)]


def split_kernels(mod: IRModule) -> IRModule:
    """The module with each function of several launches replaced by its stages (module docstring)."""
    out = {}
    for gv, func in mod.functions.items():
        if not isinstance(func, tirx.PrimFunc):
            out[gv] = func
            continue
        stages = split_function(func)
        if len(stages) == 1:
            out[gv] = func
            continue
        for stage in stages:
            out[ir.GlobalVar(str(stage.attrs["global_symbol"]))] = stage
    return IRModule(out)
