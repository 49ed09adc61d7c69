"""TT schedule and sharding annotations (``T.annotate_tt_schedule``, ``T.annotate_tt_sharding``, ``T.TTShard``).

Use either ``import tilelang.language as T`` (after ``import tilelang_tt``, which adds these names to it)
or ``from tilelang_tt import language as T``, which re-exports all of ``tilelang.language`` plus::

    T.annotate_tt_schedule(policy="contiguous", order="row_major", rect=None, stride=None,
                           chunk_k_tiles=None, qk_chunk_tiles=None)
    T.annotate_tt_sharding({A: T.TTShard(axis=0, tiles=("rows", 32), placement="DRAM")})
    T.annotate_tt_compute(math_fidelity="HiFi2", fp32_dest_acc=True, packer_l1_acc=None, allow_tf32=None,
                          allow_fp16_reduced=None)
    T.annotate_tt_mesh(axis="y")      # with target "tt -mesh=RxC": the grid axis split across the chips

Both are called inside the ``T.Kernel`` body and attach block attributes that the TT passes read; other
targets ignore them.
"""

from __future__ import annotations

from dataclasses import dataclass

import tilelang.language as _tl
from tvm.tirx.script.builder.ir import sblock_attr as _sblock_attr

from . import attrs
from .device import BLOCK_FLOAT_STORAGE
from .errors import TTAnnotationError
from .schedule import make_schedule_spec

PLACEMENTS = ("DRAM", "L1")
STORAGE_FORMATS = tuple(sorted({f for fmts in BLOCK_FLOAT_STORAGE.values() for f in fmts}))
SHARD_ORDERS = ("row_major", "col_major")
FACES = ("16x16",)


@dataclass(frozen=True)
class TTShard:
    """How one tensor is tilized, sharded and placed.

    axis: the dimension(s) sharded across cores, an int or a tuple of ints.
    tiles: tile description, e.g. ``("rows", 32)`` or ``("rows", "cols", 32)``; the tile edge must be 32.
    placement: "DRAM" (interleaved over the DRAM banks) or "L1" (interleaved over the cores' L1).
    order: tile order inside the tensor, "row_major" (the only one the readers emit today) or "col_major".
    faces: face layout inside a tile, "16x16".
    format: the tile format the tensor is stored in, a tt::DataFormat name: None (the dtype's format), "Bfp8_b" or
        "Bfp4_b" (block-float weights, as ttnn's bfloat8_b / bfloat4_b; docs/usage.md "Data formats").
    """

    axis: int | tuple[int, ...] = 0
    tiles: tuple = ("rows", "cols", 32)
    placement: str = "DRAM"
    order: str = "row_major"
    faces: str = "16x16"
    format: str | None = None

    def __post_init__(self):
        axes = self.axis if isinstance(self.axis, tuple) else (self.axis,)
        if not axes or not all(isinstance(a, int) and not isinstance(a, bool) and a >= 0 for a in axes):
            raise TTAnnotationError(f"axis={self.axis!r} must be a non-negative int or tuple of them",
                                    construct="T.TTShard(axis=...)")
        if not isinstance(self.tiles, tuple) or not self.tiles or self.tiles[-1] != 32 or not all(
                t in ("rows", "cols") for t in self.tiles[:-1]):
            raise TTAnnotationError(f"tiles={self.tiles!r} must look like ('rows', 32), ('cols', 32) or "
                                    "('rows', 'cols', 32)", construct="T.TTShard(tiles=...)",
                                    fix="TT tiles are 32x32")
        if self.placement not in PLACEMENTS:
            raise TTAnnotationError(f"placement={self.placement!r} is not one of {list(PLACEMENTS)}",
                                    construct="T.TTShard(placement=...)")
        if self.order not in SHARD_ORDERS:
            raise TTAnnotationError(f"order={self.order!r} is not one of {list(SHARD_ORDERS)}",
                                    construct="T.TTShard(order=...)")
        if self.faces not in FACES:
            raise TTAnnotationError(f"faces={self.faces!r} is not one of {list(FACES)}",
                                    construct="T.TTShard(faces=...)")
        if self.format is not None and self.format not in STORAGE_FORMATS:
            raise TTAnnotationError(f"format={self.format!r} is not one of {list(STORAGE_FORMATS)}",
                                    construct="T.TTShard(format=...)",
                                    fix="leave it out for the dtype's own format, store weights as Bfp8_b / Bfp4_b, or int8 weights as Int8")

    def as_dict(self) -> dict:
        axes = self.axis if isinstance(self.axis, tuple) else (self.axis,)
        out = {"axis": list(axes), "tiles": [str(t) for t in self.tiles], "placement": self.placement,
               "order": self.order, "faces": self.faces}
        if self.format is not None:
            out["format"] = self.format
        return out


def annotate_tt_schedule(policy="contiguous", order="row_major", rect=None, stride=None, chunk_k_tiles=None,
                         qk_chunk_tiles=None, multicast=None):
    """Choose the static schedule of the grid's blocks over the cores (see ``tilelang_tt.schedule``).
    ``multicast``: True asks for TTMulticastReuse's 2-D multicast of GEMM operands (A along core rows, B along
    core columns; implies ``policy="rect"``), False forbids it, None lets the backend choose."""
    spec = make_schedule_spec(policy, order, rect, stride, chunk_k_tiles, qk_chunk_tiles, multicast)
    return _sblock_attr({attrs.SCHEDULE_ANNOTATION: spec.as_dict()})


def annotate_tt_sharding(shards: dict):
    """Describe tensor tilization, sharding and placement: ``{buffer: T.TTShard(...)}``."""
    if not isinstance(shards, dict):
        raise TTAnnotationError(f"expected a dict {{buffer: T.TTShard(...)}}, got {type(shards).__name__}",
                                construct="T.annotate_tt_sharding")
    table = {}
    for buf, shard in shards.items():
        if not hasattr(buf, "data") or not hasattr(buf, "shape"):
            raise TTAnnotationError(f"key {buf!r} is not a buffer", construct="T.annotate_tt_sharding",
                                    fix="key the dict by the kernel's tensor parameters")
        if not isinstance(shard, TTShard):
            raise TTAnnotationError(f"value for {buf.name} is {type(shard).__name__}, not T.TTShard",
                                    construct="T.annotate_tt_sharding")
        table[buf.data] = shard.as_dict()
    return _sblock_attr({attrs.SHARDING_ANNOTATION: table})


def annotate_tt_compute(math_fidelity: str | None = None, fp32_dest_acc: bool | None = None,
                        packer_l1_acc: bool | None = None, allow_tf32: bool | None = None,
                        allow_fp16_reduced: bool | None = None):
    """Choose the compute kernel's math fidelity ("LoFi", "HiFi2", "HiFi3", "HiFi4"), whether DST accumulates
    in fp32, whether an accumulator kept in its CB accumulates in the packer (``packer_l1_acc``, default on;
    False reloads it into DST every K step) and whether float32 reductions and elementwise ops may run on the FPU
    with TF32 operands (``allow_tf32``, default off: they take the exact fp32 SFPU path; docs/usage.md
    "Precision") and whether T.gemm may multiply 10 of a float16 in1's 11 significant bits (``allow_fp16_reduced``,
    default off: Float16OperandsTT splits in1 into two bfloat16 parts, two matmuls). None keeps the target option,
    else the default (``tilelang_tt.compute_config``)."""
    from .compute_config import check_choice

    check_choice(math_fidelity, fp32_dest_acc, "T.annotate_tt_compute", packer_l1_acc, allow_tf32, allow_fp16_reduced)
    spec = {k: v for k, v in (("math_fidelity", math_fidelity), ("fp32_dest_acc", fp32_dest_acc),
                              ("packer_l1_acc", packer_l1_acc), ("allow_tf32", allow_tf32),
                              ("allow_fp16_reduced", allow_fp16_reduced)) if v is not None}
    return _sblock_attr({attrs.COMPUTE_ANNOTATION: spec})


MESH_AXES = ("x", "y", "z")     # blockIdx.x / .y / .z: the names T.Kernel binds first, second, third


def annotate_tt_mesh(axis):
    """With a mesh target (``"tt -mesh=2x4"``): split the grid axis ``axis`` across the chips, each chip running
    the same per-chip program over its share of that axis' blocks. ``axis`` is ``"x"``, ``"y"`` or ``"z"`` (or
    0, 1, 2): the first, second or third variable of ``T.Kernel(...) as (bx, by, bz)``. Without the annotation
    MeshSplitTT splits the outermost axis (of extent > 1) whose blocks write disjoint parts of every output."""
    if isinstance(axis, int) and not isinstance(axis, bool) and 0 <= axis < len(MESH_AXES):
        axis = MESH_AXES[axis]
    if axis not in MESH_AXES:
        raise TTAnnotationError(f"axis={axis!r} is not a grid axis", construct="T.annotate_tt_mesh(axis=...)",
                                fix='use "x", "y" or "z" (0, 1, 2): the position of the variable in T.Kernel(...) as '
                                    '(bx, by, bz)')
    return _sblock_attr({attrs.MESH_ANNOTATION: {"axis": axis}})


TT_NAMES = ("annotate_tt_schedule", "annotate_tt_sharding", "annotate_tt_compute", "annotate_tt_mesh", "TTShard")


def install_into_tilelang_language() -> None:
    """Make ``T.annotate_tt_schedule`` etc. available on ``tilelang.language``."""
    for name in TT_NAMES:
        setattr(_tl, name, globals()[name])
