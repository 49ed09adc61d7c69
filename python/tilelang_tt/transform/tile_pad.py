"""TilePadTT: tensors of any shape, stored as whole 32x32 tiles with zero-filled, never-stored padding.

In:  a PrimFunc after TTShardToCoreMap.
Out: the same body; attribute written: ``tt.padding`` = ``{tensor: {"logical": shape, "padded": shape}}`` for
     every tensor parameter (the padded shape rounds the last two extents up to multiples of 32; tile buffers
     are whole tiles by construction). The device buffers hold the padded tile grid; host tensors keep their row-major logical shape
     (the runtime tilizes into and untilizes out of the padded grid). Readers zero-fill the part of an edge
     tile outside the logical shape as part of the read (and whole tiles outside the tensor), so a GEMM K tail
     contributes exact zeros; writers store only the logical elements of edge tiles and skip tiles outside the
     tensor, so nothing outside the valid region is touched.
Errors (TTShapeError): tile buffers (``T.alloc_shared`` / ``T.alloc_fragment``) whose extents are not whole
     tiles (blocks are tiles of the TT program: choose block sizes that are multiples of 32); tensors of rank
     other than 2.
"""

from __future__ import annotations

from tvm import tirx

from .. import attrs
from ..errors import TTShapeError
from .common import TILE, prim_func_pass, source_of, static_shape


def _padded(shape):
    """Round the last two extents up to whole tiles (symbolic extents stay expressions)."""
    def up(s):
        return -(-s // TILE) * TILE if isinstance(s, int) else tirx.floordiv(s + (TILE - 1), TILE) * TILE
    return tuple(shape[:-2]) + tuple(up(s) for s in shape[-2:])


def tile_pad(func: tirx.PrimFunc) -> tirx.PrimFunc:
    src = source_of(func)
    padding = {}
    for p in func.params:
        if p not in func.buffer_map:
            continue
        buf = func.buffer_map[p]
        shape = tuple(int(d) if isinstance(d, tirx.IntImm) else d for d in buf.shape)
        if len(shape) != 2:
            raise TTShapeError(f"tensor {buf.name} has rank {len(shape)} (shape {list(shape)})",
                               construct=f"tensor {buf.name}", source=src,
                               fix="pass 2-D tensors (reshape batches into rows)")
        padding[buf.name] = {"logical": list(shape), "padded": list(_padded(shape))}

    tile_buffers = []

    def visit(node):
        if isinstance(node, tirx.SBlock):
            tile_buffers.extend(node.alloc_buffers)

    tirx.stmt_functor.post_order_visit(func.body, visit)
    for buf in tile_buffers:
        shape = static_shape(buf, src)
        if len(shape) == 1:
            shape = (1,) + shape
        if _padded(shape) != shape:
            raise TTShapeError(
                f"tile buffer {buf.name} has shape {list(shape)}; TT blocks are made of whole 32x32 tiles",
                construct=f"buffer {buf.name}", source=src,
                fix=f"use block extents that are multiples of 32, e.g. {list(_padded(shape))} "
                    "(tensors themselves may have any shape)")
    return func.with_attr(attrs.PADDING, padding)


def TilePadTT():
    @prim_func_pass("tt.TilePadTT")
    def transform(func, mod, ctx):
        return tile_pad(func)

    return transform
