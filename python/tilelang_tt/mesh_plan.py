"""The plan of a kernel split over a mesh of chips (``tt.mesh``, written by MeshSplitTT).

The kernels and the per-core plan are the per-chip ones (every chip runs the same program over its share of the
split axis' blocks). What the host sees is global: each buffer of the plan gets back its global shape and size
and a ``distribution``:

- ``{"kind": "replicated"}``: every chip holds the whole tensor (``distributed::ReplicatedBufferConfig``);
- ``{"kind": "sharded", "dim", "chips", "shard_bytes", "buffer_shape", "shard_shape"}``: chip k (row-major over the
  mesh) holds the k-th of ``chips`` equal parts along ``dim`` (``distributed::ShardedBufferConfig``). The tensor's
  32x32 tiles, row-major over its tile grid, are viewed as a ``buffer_shape`` = [height, width] matrix of pages
  (height: the tile rows above the sharded dimension); chip k's shard is the [height, width / chips] block at
  column k * width / chips, which is exactly its part of the tensor in the same tile order (TT-Metalium's
  ``write_sharded_buffer`` copies shards in this order, a datum being one page).

``plan["mesh"]`` records the mesh shape, the split axis and each chip's coordinate and blocks.
"""

from __future__ import annotations

import math

from .errors import TTUnsupportedError


def mesh_entry(mesh: dict) -> dict:
    rows, cols = (int(v) for v in mesh["shape"])
    first_count = [[int(a), int(b)] for a, b in mesh["chip_blocks"]]
    return {"shape": [rows, cols], "chips": int(mesh["chips"]), "axis": str(mesh["axis"]),
            "grid_extent": int(mesh["grid_extent"]), "per_chip": int(mesh["per_chip"]),
            "chip_schedule": [{"chip": [k // cols, k % cols], "blocks": fc} for k, fc in enumerate(first_count)]}


def _distribution(buf: dict, info: dict, chips: int, source: str) -> dict:
    if str(info["distribution"]) == "replicated":
        return {"kind": "replicated"}
    for key in ("row_pad", "col_pad", "host_unpack"):
        if key in buf:
            raise TTUnsupportedError(f"{buf['name']} is sharded across the chips but its tiles are laid out with "
                                     f"{key}", construct=f"tensor {buf['name']}", source=source,
                                     fix="shard tensors whose last two dimensions are multiples of 32")
    dim = int(info["dim"])
    shape = [int(s) for s in info["global_shape"]]
    rows, cols = (int(v) for v in buf["view"])
    if list(buf["padded_shape"]) != [rows, cols] or cols != shape[-1]:
        raise TTUnsupportedError(f"{buf['name']} is sharded across the chips but is tiled as a padded or reshaped "
                                 f"{rows}x{cols} view", construct=f"tensor {buf['name']}", source=source,
                                 fix="shard tensors whose last two dimensions are multiples of 32")
    last = dim == len(shape) - 1
    view = [rows, cols * chips] if last else [rows * chips, cols]
    pages = buf["num_pages"] * chips
    height = view[0] // 32 if last else math.prod(shape[:dim])
    width = pages // height
    return {"kind": "sharded", "dim": dim, "chips": chips, "shard_bytes": buf["bytes"], "view": view,
            "buffer_shape": [height, width], "shard_shape": [height, width // chips]}


def globalize_buffers(buffers: list, mesh: dict, source: str) -> list:
    """The plan's per-chip buffers as the host sees them: global shapes and sizes, each with its distribution."""
    chips = int(mesh["chips"])
    by_param = {int(v["param_index"]): v for v in mesh["tensors"].values()}
    out = []
    for buf in buffers:
        info = by_param[buf["param_index"]]
        dist = _distribution(buf, info, chips, source)
        entry = dict(buf)
        if dist["kind"] == "sharded":
            view = dist.pop("view")
            shape = [int(s) for s in info["global_shape"]]
            entry.update(shape=shape, view=view, padded_shape=view, num_pages=buf["num_pages"] * chips,
                         bytes=buf["bytes"] * chips)
        entry["distribution"] = dist
        out.append(entry)
    return out
