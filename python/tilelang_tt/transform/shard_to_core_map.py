"""TTShardToCoreMap: turn TTShard annotations and the defaults into core ranges and shard metadata.

In:  a PrimFunc after GridToPersistentTT (``tt.schedule`` holds the per-core mapping) and optional
     ``T.annotate_tt_sharding`` block attributes keyed by tensor data vars.
Out: the same body; attributes written:
     ``tt.core_ranges`` = the cores the schedule uses, as inclusive rectangles ``[[y0, x0], [y1, x1]]``
     (a CoreRangeSet: full rows of the device grid, then the partial last row);
     ``tt.shards`` = ``{tensor name: records.Shard}`` (axis, tiles, placement, order, faces, layout, format?)
     for every tensor parameter (default: interleaved DRAM, 32x32 tiles, row-major tiles, 16x16 faces).
Errors (TTAnnotationError): a sharding key that is not a tensor parameter of the kernel; an axis beyond the
     tensor's rank; placements that disagree for one tensor; an L1-placed tensor larger than half the L1 of
     the cores the schedule uses (inconsistent with the schedule); a "col_major" tile order (readers emit
     row-major page ids only).
"""

from __future__ import annotations

from tvm import tirx

from .. import attrs, records
from ..errors import TTAnnotationError, TTUnsupportedError
from .common import prim_func_pass, source_of

DEFAULT_SHARD = {"axis": [0, 1], "tiles": ["rows", "cols", "32"], "placement": "DRAM", "order": "row_major",
                 "faces": "16x16", "layout": "interleaved"}


def core_ranges(cores: list[list[int]], device_cols: int) -> list[list[list[int]]]:
    """Cover the cores (assigned row-major from (0, 0), or a multicast lattice: every core of a rectangle
    anchored at (0, 0)) with inclusive rectangles."""
    n = len(cores)
    rows, cols = max(c[0] for c in cores) + 1, max(c[1] for c in cores) + 1
    if cols < device_cols and rows > 1 and rows * cols == n and len({tuple(c) for c in cores}) == n:
        return [[[0, 0], [rows - 1, cols - 1]]]
    full_rows, rem = divmod(n, device_cols)
    ranges = []
    if full_rows:
        ranges.append([[0, 0], [full_rows - 1, device_cols - 1]])
    if rem:
        ranges.append([[full_rows, 0], [full_rows, rem - 1]])
    covered = sorted((y, x) for (y0, x0), (y1, x1) in ranges for y in range(y0, y1 + 1) for x in range(x0, x1 + 1))
    assert covered == sorted(tuple(c) for c in cores), "schedule cores are not assigned row-major"
    return ranges


def _sharding_annotations(body) -> list:
    """The ``T.annotate_tt_sharding`` tables of the blocks of ``body`` ({tensor data var: TTShard fields})."""
    annotations = []

    def visit(node):
        if isinstance(node, tirx.SBlock) and attrs.SHARDING_ANNOTATION in node.annotations:
            annotations.append(node.annotations[attrs.SHARDING_ANNOTATION])

    tirx.stmt_functor.post_order_visit(body, visit)
    return annotations


def _shard_entry(buf, shard, seen: dict, src) -> dict:
    """The checked shard fields of tensor ``buf`` (``seen``: the placements given so far, by tensor name)."""
    entry = {k: (list(map(str, v)) if k == "tiles" else [int(a) for a in v] if k == "axis" else str(v))
             for k, v in shard.items()}
    rank = len(buf.shape)
    if any(a >= rank for a in entry["axis"]):
        raise TTAnnotationError(f"axis {entry['axis']} is out of range for {buf.name} of rank {rank}",
                                construct=f"T.TTShard for {buf.name}", source=src)
    if buf.name in seen and seen[buf.name] != entry["placement"]:
        raise TTAnnotationError(
            f"{buf.name} is placed in {seen[buf.name]} and in {entry['placement']}",
            construct=f"T.annotate_tt_sharding({buf.name})", source=src,
            fix="give each tensor one placement")
    if entry["order"] != "row_major":
        raise TTUnsupportedError(f"tile order {entry['order']!r} for {buf.name}",
                                 construct=f"T.TTShard(order=...) for {buf.name}", source=src,
                                 fix='use order="row_major"')
    return entry


def _check_fits_l1(func, buf, l1_bytes: int, src) -> None:
    """An L1-placed tensor must have a static shape and fit half the L1 of the cores the schedule uses."""
    from ..formats import data_format

    n = 1
    for d in buf.shape:
        if not isinstance(d, tirx.IntImm):
            raise TTAnnotationError(f"{buf.name} has a symbolic shape and cannot be placed in L1",
                                    construct=f"T.TTShard(placement='L1') for {buf.name}", source=src,
                                    fix='use placement="DRAM"')
        n *= int(d)
    nbytes = n * data_format(buf.dtype, f"tensor {buf.name}", src).datum_bits // 8
    num_cores = records.schedule(func).num_cores
    budget = num_cores * l1_bytes // 2
    if nbytes > budget:
        raise TTAnnotationError(
            f"{buf.name} ({nbytes} bytes) placed in L1 does not fit half the L1 of the "
            f"{num_cores} cores the schedule uses ({budget} bytes)",
            construct=f"T.TTShard(placement='L1') for {buf.name}", source=src,
            fix='place it in DRAM (placement="DRAM") or use more cores')


def shard_to_core_map(func: tirx.PrimFunc, device_cols: int, l1_bytes: int) -> tirx.PrimFunc:
    """``func`` with the core ranges its schedule uses and every tensor's shard metadata (module docstring)."""
    src = source_of(func)
    tensors = {func.buffer_map[p].data: func.buffer_map[p] for p in func.params if p in func.buffer_map}
    shards = {buf.name: records.Shard(**DEFAULT_SHARD) for buf in tensors.values()}
    seen: dict[str, str] = {}
    for table in _sharding_annotations(func.body):
        for data_var, shard in table.items():
            buf = next((b for v, b in tensors.items() if v.same_as(data_var)), None)
            if buf is None:
                raise TTAnnotationError(f"{data_var} is not a tensor parameter of the kernel",
                                        construct="T.annotate_tt_sharding", source=src,
                                        fix="shard only the kernel's T.Tensor parameters")
            entry = _shard_entry(buf, shard, seen, src)
            seen[buf.name] = entry["placement"]
            if entry["placement"] == "L1":
                _check_fits_l1(func, buf, l1_bytes, src)
            shards[buf.name] = records.Shard(**entry, layout="interleaved")

    sched = records.schedule(func)
    if sched.dynamic:   # split at launch over every usable core
        cores = [[i // device_cols, i % device_cols] for i in range(sched.num_cores)]
    else:
        cores = [list(c) for c in sched.cores]
    return records.put_shards(func, shards, core_ranges(cores, device_cols))


def TTShardToCoreMap(device_cols: int, l1_bytes: int):
    @prim_func_pass("tt.TTShardToCoreMap")
    def transform(func, mod, ctx):
        return shard_to_core_map(func, device_cols, l1_bytes)

    return transform
