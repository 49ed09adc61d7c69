"""Typed records of what the TIR passes decide, carried on the PrimFunc between passes and to codegen.

A PrimFunc attribute must be a TVM value, so each record is stored under its key in ``attrs`` as a plain
dict. Only this module knows those dicts: a pass writes a record with ``put_*`` and every later pass, the
codegen and the plan read it back with the reader below, as an object with named fields.

    record        written by              key                read by
    Padding       TilePadTT               tt.padding         MemorySpaceLowerTT, IrregularLowerTT, codegen
    Shard         TTShardToCoreMap        tt.shards          MemorySpaceLowerTT, codegen
    Schedule      GridToPersistentTT      tt.schedule        TTShardToCoreMap, TTMulticastReuse, codegen
    Sdpa          SDPAFusionTT            tt.sdpa            GridToPersistentTT, SuperBlockTT, RowStreamTT, codegen
    SuperBlock    SuperBlockTT            tt.super_block     TTMulticastReuse, RowStreamTT, codegen
    RowStream     RowStreamTT             tt.row_stream      codegen
    HostUnpack    UnpackWeightsTT         tt.host_unpack     codegen (the plan's buffers)
    Mesh          MeshSplitTT             tt.mesh            codegen (the plan's mesh and global buffers)
    Sequence      SplitKernelsTT          tt.sequence        codegen (a sequence artifact), the runtime
    Compute       the pipeline, then      tt.compute         SuperBlockTT, TensorizeTT, LowerToTTProgram, codegen
                  TensorizeTT (DST mode)
    CircularBuffer MemorySpaceLowerTT,    tt.cb              the TT passes after it, KernelContext (the program's
                  TensorizeTT, StreamBandsTT,                 CBInfo)
                  EliminateDeadValuesTT

``as_dict()`` gives the record as the plan's JSON has it.
"""

from __future__ import annotations

from tvm import ir, tirx

from . import attrs


def plain(value):
    """TVM containers and immediates -> plain Python / JSON values (PrimExprs that are not constants stay)."""
    if isinstance(value, (str, bool, float)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, (tirx.IntImm, tirx.FloatImm)):
        return value.value
    if isinstance(value, ir.PrimExpr):
        return value
    if hasattr(value, "items"):
        return {str(k): plain(v) for k, v in value.items()}
    if hasattr(value, "__iter__"):
        return [plain(v) for v in value]
    if hasattr(value, "value"):
        return plain(value.value)
    return value


class _Record:
    """Named fields (``_fields``, in the order the plan prints them), set from keywords; the optional ones
    (``_optional``) default to None and are left out of ``as_dict()`` when None. Compared by value."""

    _fields: tuple = ()
    _optional: tuple = ()
    __hash__ = None

    def __init__(self, **values):
        unknown = set(values) - set(self._fields)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field(s) {sorted(unknown)}")
        missing = [f for f in self._fields if f not in values and f not in self._optional]
        if missing:
            raise TypeError(f"{type(self).__name__} needs {missing}")
        for f in self._fields:
            setattr(self, f, values.get(f))

    @classmethod
    def from_attr(cls, value):
        return cls(**plain(value))

    def as_dict(self) -> dict:
        return {f: getattr(self, f) for f in self._fields if f not in self._optional or getattr(self, f) is not None}

    def replace(self, **changes):
        """A copy with ``changes`` (an optional field set to None is dropped)."""
        return type(self)(**{**{f: getattr(self, f) for f in self._fields}, **changes})

    def __eq__(self, other):
        return other.__class__ is self.__class__ and self.as_dict() == other.as_dict()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.as_dict().items())})"


class Padding(_Record):
    """How TilePadTT stores one tensor: its logical shape, the 2-D view it is tiled as, the view rounded up to
    whole tiles, and the optional row padding (``{outer, rows, padded_rows}``: each matrix padded to whole
    blocks) or broadcast-column padding (``{cols, padded_cols}``)."""
    _fields = ("logical", "view", "padded", "row_pad", "col_pad")
    _optional = ("row_pad", "col_pad")

    @property
    def is_whole_tiles(self) -> bool:
        """No padding: the view is whole tiles and no matrix is padded."""
        return self.row_pad is None and [str(d) for d in self.view] == [str(d) for d in self.padded]


class Shard(_Record):
    """One tensor's storage: the T.TTShard fields (axis, tiles, placement, order, faces, format) and layout."""
    _fields = ("axis", "tiles", "placement", "order", "faces", "format", "layout")
    _optional = ("format",)


class Schedule(_Record):
    """GridToPersistentTT's schedule: the spec (policy, order and the optional rect / stride / chunking /
    multicast), the cores it uses, its common runtime arguments and each core's mapping
    (``{"core": [y, x], <runtime arg>: value, ...}``); ``dynamic``: split at launch over every usable core."""
    _fields = ("policy", "order", "rect", "stride", "chunk_k_tiles", "qk_chunk_tiles", "multicast", "num_cores",
               "common_args", "mapping", "dynamic")
    _optional = ("rect", "stride", "chunk_k_tiles", "qk_chunk_tiles", "multicast")

    @property
    def cores(self) -> list[tuple[int, int]]:
        return [(int(m["core"][0]), int(m["core"][1])) for m in self.mapping]


class Sdpa(_Record):
    """SDPAFusionTT's attention structure: Q / K chunk and head-dim tiles, where the K chunk came from, the mask,
    the causal work per Q chunk and its split (zigzag, granule, busiest and idlest core), grouped K/V heads."""
    _fields = ("q_chunk_tiles", "k_chunk_tiles", "k_chunk_from", "head_dim_tiles", "causal", "zigzag", "granule",
               "mask", "q_axis", "num_q_chunks", "work", "core_loads", "kv_group", "heads_per_block")
    _optional = ("q_axis", "num_q_chunks", "work", "core_loads", "kv_group", "heads_per_block")


class SuperBlock(_Record):
    """SuperBlockTT's fusion: each core's ``factor`` = [h, w] user blocks fused, ``k_steps`` K steps per
    accumulation, the user block and grid, how multicast was chosen ("annotation" / "target" / "automatic")
    and the grid padded to the core lattice."""
    _fields = ("factor", "k_steps", "block", "grid", "multicast", "padded_grid")
    _optional = ("padded_grid",)


class RowStream(_Record):
    """RowStreamTT's sweep of a row block wider than L1: the row width, the column chunk and the sweeps (one per
    reduction the row needs)."""
    _fields = ("width", "chunk", "sweeps")


class HostUnpack(_Record):
    """A packed sub-byte weight tensor the host unpacks (UnpackWeightsTT): the packed tensor's shape and dtype,
    the axis its elements are packed along, how many per element, the unpack table per position, and the
    TileLang expression that unpacked it."""
    _fields = ("shape", "dtype", "axis", "factor", "table", "expr")


class Mesh(_Record):
    """MeshSplitTT's split of the grid over the chips: the mesh shape, the chip count, the split grid axis and its
    extent, the blocks per chip and each chip's [first, count], and each tensor's distribution (sharded: its
    parameter, dimension, global and shard shapes; replicated)."""
    _fields = ("shape", "chips", "axis", "grid_extent", "per_chip", "chip_blocks", "tensors")


class Sequence(_Record):
    """One stage of a function of several T.Kernel launches (SplitKernelsTT): the function's name, the stage's
    index and the number of stages, how many parameters the function itself has (the stage's first ones), and the
    intermediates (``T.alloc_global``: name, shape, dtype) passed as the stage's last parameters, in that order."""
    _fields = ("kernel", "stage", "stages", "params", "intermediates")


class Compute(_Record):
    """The compute kernel's configuration, resolved once from ``T.annotate_tt_compute`` > target option > ttnn's
    default (``compute_config.resolve``): math fidelity, fp32 DST accumulation (None until TensorizeTT decides it
    from the data), packer L1 accumulation, TF32 operands, and who chose the fidelity and TF32;
    ``allow_fp16_reduced``: T.gemm may multiply 10 of a float16 in1's 11 bits (else Float16OperandsTT splits it);
    ``fp16_in1_split``: the in1 buffers Float16OperandsTT split (absent when none); ``fp16_in1_unsplit``: why it
    left a kernel that needed the split unsplit (the split does not fit); ``float16_results``: the float16 tensors
    MemorySpaceLowerTT gave Float32 pages (results of an fp32 DST the host rounds to float16)."""
    _fields = ("math_fidelity", "fp32_dest_acc", "math_fidelity_source", "packer_l1_acc", "allow_tf32",
               "allow_tf32_source", "allow_fp16_reduced", "fp16_in1_split", "fp16_in1_unsplit", "float16_results")
    _optional = ("fp32_dest_acc", "fp16_in1_split", "fp16_in1_unsplit", "float16_results")


class CircularBuffer(_Record):
    """One tile buffer's circular buffer: its CB index and role ("input", "output", "intermediate", "scratch"),
    which kernels produce and consume it, the buffer's dtype, tile format and element shape, its block in tiles
    (``shape_tiles``, ``block_tiles``) and where a block smaller than a tile sits (``tile_offset``), the page size,
    depth in blocks, pages and bytes; ``constant``: an index tile the compute kernel generates. TensorizeTT adds
    ``residency`` ("dst" / "cb"), ``subblock`` and ``accumulate``; StreamBandsTT adds ``band`` (``{rows, pages,
    depth}``: an input streamed in bands of tile rows)."""
    _fields = ("index", "role", "producer", "consumer", "dtype", "format", "shape", "shape_tiles", "tile_offset",
               "page_size", "block_tiles", "depth_blocks", "num_pages", "bytes", "constant", "residency",
               "subblock", "accumulate", "band")
    _optional = ("constant", "residency", "subblock", "accumulate", "band")


def _get(func, key):
    return func.attrs[key] if func.attrs is not None and key in func.attrs else None


def put_padding(func, table: dict[str, Padding]):
    return attrs.put(func, {attrs.PADDING: {name: p.as_dict() for name, p in table.items()}})


def padding(func, tensor: str) -> Padding | None:
    """The padding record of ``tensor`` (None before TilePadTT or for a name that is not a tensor)."""
    table = _get(func, attrs.PADDING)
    return Padding.from_attr(table[tensor]) if table is not None and tensor in table else None


def put_shards(func, table: dict[str, Shard], core_ranges: list):
    return attrs.put(func, {attrs.SHARDS: {name: s.as_dict() for name, s in table.items()},
                            attrs.CORE_RANGES: core_ranges})


def shard(func, tensor: str) -> Shard | None:
    table = _get(func, attrs.SHARDS)
    return Shard.from_attr(table[tensor]) if table is not None and tensor in table else None


def put_schedule(func, schedule: Schedule, grid: list, runtime_args: list[str], shape_args: list[str]):
    return attrs.put(func, {attrs.SCHEDULE: schedule.as_dict(), attrs.GRID: grid,
                            attrs.RUNTIME_ARGS: runtime_args, attrs.SHAPE_ARGS: shape_args})


def schedule(func) -> Schedule | None:
    value = _get(func, attrs.SCHEDULE)
    return None if value is None else Schedule.from_attr(value)


def put_sdpa(func, record: Sdpa):
    return attrs.put(func, {attrs.SDPA: record.as_dict()})


def sdpa(func) -> Sdpa | None:
    value = _get(func, attrs.SDPA)
    return None if value is None else Sdpa.from_attr(value)


def put_super_block(func, record: SuperBlock):
    return attrs.put(func, {attrs.SUPER_BLOCK: record.as_dict()})


def super_block(func) -> SuperBlock | None:
    value = _get(func, attrs.SUPER_BLOCK)
    return None if value is None else SuperBlock.from_attr(value)


def put_compute(func, record: Compute):
    return attrs.put(func, {attrs.COMPUTE: record.as_dict()})


def compute(func) -> Compute | None:
    """The compute configuration (None for a function the TT pipeline did not start)."""
    value = _get(func, attrs.COMPUTE)
    return None if value is None else Compute.from_attr(value)


def put_row_stream(func, record: RowStream):
    return attrs.put(func, {attrs.ROW_STREAM: record.as_dict()})


def row_stream(func) -> RowStream | None:
    value = _get(func, attrs.ROW_STREAM)
    return None if value is None else RowStream.from_attr(value)


def put_host_unpack(func, table: dict[str, HostUnpack]):
    return attrs.put(func, {attrs.HOST_UNPACK: {name: r.as_dict() for name, r in table.items()}})


def host_unpack(func, tensor: str) -> HostUnpack | None:
    table = _get(func, attrs.HOST_UNPACK)
    return HostUnpack.from_attr(table[tensor]) if table is not None and tensor in table else None


def put_mesh(func, record: Mesh):
    return attrs.put(func, {attrs.MESH: record.as_dict()})


def mesh(func) -> Mesh | None:
    value = _get(func, attrs.MESH)
    return None if value is None else Mesh.from_attr(value)


def put_sequence(func, record: Sequence):
    return attrs.put(func, {attrs.SEQUENCE: record.as_dict()})


def sequence(func) -> Sequence | None:
    value = _get(func, attrs.SEQUENCE)
    return None if value is None else Sequence.from_attr(value)


def put_cbs(func, table: dict[str, CircularBuffer]):
    return attrs.put(func, {attrs.CB: {name: cb.as_dict() for name, cb in table.items()}})


def cbs(func) -> dict[str, CircularBuffer]:
    """The CB table (empty before MemorySpaceLowerTT), a fresh copy the caller may change."""
    table = _get(func, attrs.CB)
    return {} if table is None else {str(name): CircularBuffer.from_attr(e) for name, e in table.items()}
