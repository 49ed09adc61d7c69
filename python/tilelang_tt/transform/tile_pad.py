"""TilePadTT: check that every tiled extent is a whole number of 32x32 tiles.

In:  a PrimFunc after TTShardToCoreMap.
Out: the same function; attribute written: ``tt.padding`` = ``{buffer: {"logical": shape, "padded": shape}}``
     for every tensor parameter and tile buffer (today logical == padded).
Errors (TTShapeError): a tensor parameter or a shared/fragment buffer whose last two extents are not
     multiples of 32. Zero-filled edge tiles (reader tails, writer masks) are the next step; until then the
     error names the buffer, its shape and the padded shape to use.
"""

from __future__ import annotations

from tvm import tirx

from .. import attrs
from ..errors import TTShapeError
from .common import TILE, prim_func_pass, source_of, static_shape


def _padded(shape):
    return tuple(shape[:-2]) + tuple(-(-s // TILE) * TILE for s in shape[-2:])


def tile_pad(func: tirx.PrimFunc) -> tirx.PrimFunc:
    src = source_of(func)
    buffers = [func.buffer_map[p] for p in func.params if p in func.buffer_map]

    def visit(node):
        if isinstance(node, tirx.SBlock):
            buffers.extend(node.alloc_buffers)

    tirx.stmt_functor.post_order_visit(func.body, visit)
    padding = {}
    for buf in buffers:
        shape = static_shape(buf, src)
        if len(shape) == 1:
            shape = (1,) + shape
        padded = _padded(shape)
        if padded != shape or shape[-2] < 1:
            raise TTShapeError(
                f"{buf.name} has shape {list(shape)}; TT tiles are 32x32 and padding is not supported yet",
                construct=f"buffer {buf.name}", source=src,
                fix=f"pad {buf.name} to {list(padded)} (or choose block sizes that are multiples of 32)")
        padding[buf.name] = {"logical": list(shape), "padded": list(padded)}
    return func.with_attr(attrs.PADDING, padding)


def TilePadTT():
    @prim_func_pass("tt.TilePadTT")
    def transform(func, mod, ctx):
        return tile_pad(func)

    return transform
