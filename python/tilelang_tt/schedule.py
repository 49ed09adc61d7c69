"""Static schedules: which blocks of the ``grid_y x grid_x`` launch grid each core visits, in which order.

Pure Python, shared by ``GridToPersistentTT`` (which emits the same mapping as TIR expressions) and the
plan. Meanings:

* ``contiguous``: core ``i`` gets one run ``[start_i, start_i + count_i)`` of block ids; counts differ by
  at most one (at most one granule when SDPAFusionTT asks for pairs).
* ``strided``: core ``i`` gets ids ``first + i + n*step`` (defaults ``first=0``, ``step`` = cores, i.e.
  round-robin).
* ``rect``: a lattice of ``H x W`` rectangles anchored at ``(by0, bx0)`` and clipped to the grid; core ``i``
  gets rectangle ``i`` (row-major over the lattice) and visits it row-major.

A block id is mapped to ``(by, bx)`` by the order: ``row_major`` (``by = id // grid_x``) or
``block_linear(k)`` (the grid is cut into ``k x k`` groups, visited row-major; blocks inside a group are
visited row-major; edge groups are clipped). Every schedule is checked to cover each block exactly once.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .errors import TTAnnotationError, TTScheduleError

POLICIES = ("contiguous", "strided", "rect")
_BLOCK_LINEAR = re.compile(r"^block_linear\((\d+)\)$")


@dataclass(frozen=True)
class ScheduleSpec:
    """A validated ``T.annotate_tt_schedule`` (or the defaults)."""

    policy: str = "contiguous"
    order: str = "row_major"
    rect: tuple[int, int, int, int] | None = None      # (by0, bx0, H, W)
    stride: tuple[int, int] | None = None              # (first, step)
    chunk_k_tiles: int | None = None
    qk_chunk_tiles: int | None = None
    multicast: bool | None = None      # TTMulticastReuse: None = automatic, True = required, False = off

    @property
    def block_linear_k(self) -> int | None:
        m = _BLOCK_LINEAR.match(self.order)
        return int(m.group(1)) if m else None

    def as_dict(self) -> dict:
        d = {"policy": self.policy, "order": self.order}
        for name in ("rect", "stride", "chunk_k_tiles", "qk_chunk_tiles", "multicast"):
            value = getattr(self, name)
            if value is not None:
                d[name] = list(value) if isinstance(value, tuple) else value
        return d


def _int_tuple(name: str, value, n: int, positive_from: int) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != n or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise TTAnnotationError(f"{name} must be a tuple of {n} integers, got {value!r}",
                                construct=f"T.annotate_tt_schedule({name}=...)")
    for i, v in enumerate(value):
        if v < 0 or (i >= positive_from and v <= 0):
            raise TTAnnotationError(f"{name}[{i}] must be {'positive' if i >= positive_from else 'non-negative'}, got {v}",
                                    construct=f"T.annotate_tt_schedule({name}=...)")
    return tuple(value)


def make_schedule_spec(policy="contiguous", order="row_major", rect=None, stride=None, chunk_k_tiles=None,
                       qk_chunk_tiles=None, multicast=None) -> ScheduleSpec:
    """Validate user arguments; every error names the argument and its allowed values. ``multicast=True``
    asks for the 2-D multicast of TTMulticastReuse, which needs the ``rect`` policy on a core lattice (the
    default policy becomes ``rect``)."""
    if policy not in POLICIES:
        raise TTAnnotationError(f"policy={policy!r} is not one of {list(POLICIES)}",
                                construct="T.annotate_tt_schedule(policy=...)",
                                fix='use policy="contiguous", "strided" or "rect"')
    if not isinstance(order, str) or not (order == "row_major" or _BLOCK_LINEAR.match(order)):
        raise TTAnnotationError(f"order={order!r} is not 'row_major' or 'block_linear(k)'",
                                construct="T.annotate_tt_schedule(order=...)",
                                fix='use order="row_major" or e.g. order="block_linear(4)"')
    m = _BLOCK_LINEAR.match(order)
    if m and int(m.group(1)) <= 0:
        raise TTAnnotationError("block_linear(k) needs k >= 1", construct="T.annotate_tt_schedule(order=...)")
    rect_t = _int_tuple("rect", rect, 4, 2)
    stride_t = _int_tuple("stride", stride, 2, 1)
    if rect_t is not None and policy != "rect":
        raise TTAnnotationError(f"rect= is only meaningful with policy='rect', got policy={policy!r}",
                                construct="T.annotate_tt_schedule(rect=...)", fix='add policy="rect"')
    if stride_t is not None and policy != "strided":
        raise TTAnnotationError(f"stride= is only meaningful with policy='strided', got policy={policy!r}",
                                construct="T.annotate_tt_schedule(stride=...)", fix='add policy="strided"')
    for name, value in (("chunk_k_tiles", chunk_k_tiles), ("qk_chunk_tiles", qk_chunk_tiles)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
            raise TTAnnotationError(f"{name} must be a positive integer or None, got {value!r}",
                                    construct=f"T.annotate_tt_schedule({name}=...)")
    if multicast is not None and not isinstance(multicast, bool):
        raise TTAnnotationError(f"multicast must be True, False or None, got {multicast!r}",
                                construct="T.annotate_tt_schedule(multicast=...)")
    if multicast:
        if policy == "contiguous":
            policy = "rect"
        if policy != "rect":
            raise TTAnnotationError(f"multicast=True needs policy='rect' (each core a rectangle of blocks on a core "
                                    f"lattice), got policy={policy!r}",
                                    construct="T.annotate_tt_schedule(multicast=True)", fix='use policy="rect"')
    return ScheduleSpec(policy, order, rect_t, stride_t, chunk_k_tiles, qk_chunk_tiles, multicast)


def lattice_rect(grid_y: int, grid_x: int, device_rows: int, device_cols: int, max_cores: int):
    """``H x W`` rectangles that tile the grid exactly (``H | grid_y``, ``W | grid_x``) on a lattice of at most
    ``device_rows x device_cols`` cores (and ``max_cores``): every core gets the same number of blocks, which
    multicast needs (all cores of a row / column walk their blocks in step). Smallest rectangle, then the most
    square; None if no lattice of two or more cores exists."""
    best = None
    for h in (d for d in range(1, grid_y + 1) if grid_y % d == 0):
        for w in (d for d in range(1, grid_x + 1) if grid_x % d == 0):
            rows, cols = grid_y // h, grid_x // w
            if rows > device_rows or cols > device_cols or rows * cols > max_cores or rows * cols < 2:
                continue
            key = (h * w, abs(h - w))
            if best is None or key < best[0]:
                best = (key, (h, w))
    return None if best is None else best[1]


def ragged_lattice(grid_y: int, grid_x: int, device_rows: int, device_cols: int, max_cores: int):
    """``(H, W)``: ``H x W`` rectangles on a lattice of ``ceil(grid_y / H) x ceil(grid_x / W)`` cores whose last
    row and column of rectangles may reach past the grid (TTNN's per-core blocks do the same: 43 tiles per core,
    the last core's block partly outside the matrix). The caller pads the grid to ``(rows * H, cols * W)`` blocks,
    which multicast needs (every core of a row / column walks the same number of blocks). Least blocks per core
    (the critical path), then least padding, then the most square, then the shortest; exact lattices (no padding) are among them.
    None if no lattice of two or more cores exists."""
    best = None
    for r in range(1, min(device_rows, grid_y) + 1):
        h = -(-grid_y // r)
        rows = -(-grid_y // h)
        for c in range(1, min(device_cols, grid_x) + 1):
            w = -(-grid_x // c)
            cols = -(-grid_x // w)
            if rows * cols > max_cores or rows * cols < 2:
                continue
            key = (h * w, rows * h * cols * w - grid_y * grid_x, abs(h - w), h)    # ties: as lattice_rect
            if best is None or key < best[0]:
                best = (key, (h, w))
    return None if best is None else best[1]


def order_to_coord(block_id: int, grid_y: int, grid_x: int, k: int | None) -> tuple[int, int]:
    """Map a block id to ``(by, bx)`` under ``row_major`` (k None) or ``block_linear(k)``."""
    if k is None:
        return block_id // grid_x, block_id % grid_x
    band = block_id // (k * grid_x)
    band_h = min(k, grid_y - band * k)
    r = block_id % (k * grid_x)
    group = r // (band_h * k)
    group_w = min(k, grid_x - group * k)
    q = r - group * band_h * k
    return band * k + q // group_w, group * k + q % group_w


@dataclass
class CoreWork:
    """One core's share: its logical core ``(y, x)`` and the blocks it visits, in order."""

    core: tuple[int, int]
    args: dict[str, int]                       # the per-core runtime args of this policy
    blocks: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class Schedule:
    spec: ScheduleSpec
    grid_y: int
    grid_x: int
    cores: list[CoreWork]
    runtime_arg_names: tuple[str, ...]
    common_args: dict[str, int]                # args equal on every core (compile-time in kernels)

    @property
    def num_blocks(self) -> int:
        return self.grid_y * self.grid_x

    def mapping_json(self) -> list[dict]:
        out = []
        for w in self.cores:
            entry = {"core": list(w.core), **w.args}
            out.append(entry)
        return out


def _core_coord(i: int, device_cols: int) -> tuple[int, int]:
    return i // device_cols, i % device_cols


def default_rect(grid_y: int, grid_x: int, max_cores: int) -> tuple[int, int]:
    """Near-square ``H x W`` rectangles whose lattice needs at most ``max_cores`` cores, minimising the
    largest rectangle (the critical path), then the squareness gap."""
    best = None
    for h in range(1, grid_y + 1):
        for w in range(1, grid_x + 1):
            n = math.ceil(grid_y / h) * math.ceil(grid_x / w)
            if n > max_cores:
                continue
            key = (h * w, abs(h - w), n)
            if best is None or key < best[0]:
                best = (key, (h, w))
    assert best is not None  # h=grid_y, w=grid_x always fits one core
    return best[1]


def contiguous_split(total: int, cores: int, granule: int = 1) -> list[tuple[int, int]]:
    """(start, count) per core of ``total`` block ids cut into runs of whole granules (``granule`` consecutive
    ids; the last may be short), as evenly as possible over at most ``cores`` cores: granule counts differ by at
    most one. SDPAFusionTT asks for granule 2 to keep zigzag pairs of Q chunks on one core."""
    units = -(-total // granule)
    n = min(cores, units)
    base, extra = divmod(units, n)
    out, unit = [], 0
    for i in range(n):
        size = base + (1 if i < extra else 0)
        start = unit * granule
        out.append((start, min(size * granule, total - start)))
        unit += size
    return out


def build_schedule(spec: ScheduleSpec, grid_y: int, grid_x: int, device_rows: int, device_cols: int,
                   max_cores: int, source: str | None = None, granule: int = 1) -> Schedule:
    """Assign every block of the grid to cores; raise TTScheduleError if any block is missed or doubled.
    ``granule`` (contiguous policy) keeps runs of that many consecutive block ids on one core."""
    if grid_y <= 0 or grid_x <= 0:
        raise TTScheduleError(f"grid {grid_y}x{grid_x} has a non-positive extent", construct="T.Kernel grid",
                              source=source, fix="launch at least one block in each dimension")
    k = spec.block_linear_k
    usable = min(max_cores, device_rows * device_cols)
    common: dict[str, int] = {}

    if spec.policy == "contiguous":
        cores = _contiguous_cores(grid_y, grid_x, k, usable, device_cols, granule)
        names = ("start_id", "count")
    elif spec.policy == "strided":
        cores, common["step"] = _strided_cores(spec, grid_y, grid_x, k, usable, device_cols, source)
        names = ("first_id", "count")
    else:  # rect
        cores = _rect_cores(spec, grid_y, grid_x, device_rows, device_cols, usable, source)
        names = ("rect_y", "rect_x", "rect_w", "count")

    sched = Schedule(spec, grid_y, grid_x, cores, names, common)
    check_coverage(sched, source)
    return sched


def _contiguous_cores(grid_y: int, grid_x: int, k: int | None, usable: int, device_cols: int,
                      granule: int) -> list[CoreWork]:
    """Policy ``contiguous``: core ``i`` runs the block ids ``[start_i, start_i + count_i)``."""
    cores: list[CoreWork] = []
    for i, (start, count) in enumerate(contiguous_split(grid_y * grid_x, usable, granule)):
        w = CoreWork(_core_coord(i, device_cols), {"start_id": start, "count": count})
        w.blocks = [order_to_coord(b, grid_y, grid_x, k) for b in range(start, start + count)]
        cores.append(w)
    return cores


def _strided_cores(spec: ScheduleSpec, grid_y: int, grid_x: int, k: int | None, usable: int, device_cols: int,
                   source: str | None) -> tuple[list[CoreWork], int]:
    """(cores, step) of policy ``strided``: core ``i`` runs the block ids ``first + i + n * step``."""
    total = grid_y * grid_x
    first, step = spec.stride if spec.stride is not None else (0, min(usable, total))
    n = min(usable, max(total - first, 0), step)
    if n <= 0:
        raise TTScheduleError(f"stride first={first} is past the last block id {total - 1}",
                              construct="T.annotate_tt_schedule(stride=...)", source=source,
                              fix="use stride=(0, step)")
    cores: list[CoreWork] = []
    for i in range(n):
        ids = list(range(first + i, total, step))
        w = CoreWork(_core_coord(i, device_cols), {"first_id": first + i, "count": len(ids)})
        w.blocks = [order_to_coord(b, grid_y, grid_x, k) for b in ids]
        cores.append(w)
    return cores, step


def _rect_lattice(spec: ScheduleSpec, grid_y: int, grid_x: int, device_rows: int, device_cols: int, usable: int,
                  source: str | None) -> tuple[int, int, int, int]:
    """(by0, bx0, h, w) of policy ``rect``'s lattice: the annotation's ``rect``, the multicast lattice, or the
    default rectangles."""
    if spec.rect is not None:
        by0, bx0, h, w_ = spec.rect
        if by0 >= grid_y or bx0 >= grid_x:
            raise TTScheduleError(f"rect origin ({by0}, {bx0}) lies outside the {grid_y}x{grid_x} block grid",
                                  construct="T.annotate_tt_schedule(rect=...)", source=source,
                                  fix="anchor the rectangles inside the grid, e.g. rect=(0, 0, H, W)")
        return by0, bx0, h, w_
    if spec.multicast:
        found = lattice_rect(grid_y, grid_x, device_rows, device_cols, usable)
        if found is None:
            raise TTScheduleError(f"multicast=True: the {grid_y}x{grid_x} block grid has no lattice of two or more "
                                  f"cores with equal rectangles on the {device_rows}x{device_cols} device",
                                  construct="T.annotate_tt_schedule(multicast=True)", source=source,
                                  fix="use multicast=False, or a grid with a divisor that fits the device")
        return (0, 0, *found)
    return (0, 0, *default_rect(grid_y, grid_x, usable))


def _rect_cores(spec: ScheduleSpec, grid_y: int, grid_x: int, device_rows: int, device_cols: int, usable: int,
                source: str | None) -> list[CoreWork]:
    """Policy ``rect``: core ``i`` runs rectangle ``i`` of the lattice (``_rect_lattice``) clipped to the grid,
    row-major; under multicast rectangle (r, c) runs on core (r, c)."""
    by0, bx0, h, w_ = _rect_lattice(spec, grid_y, grid_x, device_rows, device_cols, usable, source)
    # Lattice lines at by0 + i*h (and bx0 + j*w), extended both ways and clipped to the grid.
    row_cuts = sorted({0, grid_y} | {c for c in range(by0 % h, grid_y, h) if c > 0})
    col_cuts = sorted({0, grid_x} | {c for c in range(bx0 % w_, grid_x, w_) if c > 0})
    rects = [(r0, c0, r1 - r0, c1 - c0) for r0, r1 in zip(row_cuts, row_cuts[1:])
             for c0, c1 in zip(col_cuts, col_cuts[1:])]
    if len(rects) > usable:
        raise TTScheduleError(
            f"{len(rects)} rectangles of {h}x{w_} blocks are needed but only {usable} cores are usable",
            construct="T.annotate_tt_schedule(rect=...)", source=source,
            fix="use larger rectangles or omit rect= to let the backend choose")
    if spec.multicast and (by0 % h or bx0 % w_ or grid_y % h or grid_x % w_ or grid_y // h > device_rows
                           or grid_x // w_ > device_cols):
        raise TTScheduleError(f"multicast=True needs rectangles that tile the {grid_y}x{grid_x} grid exactly on "
                              f"at most {device_rows}x{device_cols} cores; rect {h}x{w_} at ({by0}, {bx0}) does not",
                              construct="T.annotate_tt_schedule(rect=...)", source=source,
                              fix="omit rect= to let the backend choose, or use divisors of the grid")
    lattice_cols = grid_x // w_ if spec.multicast else 0
    cores: list[CoreWork] = []
    for i, (r0, c0, rh, rw) in enumerate(rects):
        # multicast: rectangle (r, c) of the lattice runs on core (r, c), so a lattice row is a core row
        wk = CoreWork(divmod(i, lattice_cols) if lattice_cols else _core_coord(i, device_cols),
                      {"rect_y": r0, "rect_x": c0, "rect_h": rh, "rect_w": rw, "count": rh * rw})
        wk.blocks = [(r0 + q // rw, c0 + q % rw) for q in range(rh * rw)]
        cores.append(wk)
    return cores


def check_coverage(sched: Schedule, source: str | None = None) -> None:
    """Every block of the grid is visited by exactly one core, once."""
    seen: dict[tuple[int, int], tuple[int, int]] = {}
    for w in sched.cores:
        for b in w.blocks:
            if not (0 <= b[0] < sched.grid_y and 0 <= b[1] < sched.grid_x):
                raise TTScheduleError(f"core {w.core} is assigned block {b} outside the grid",
                                      construct=f"schedule policy {sched.spec.policy!r}", source=source)
            if b in seen:
                raise TTScheduleError(
                    f"block (by={b[0]}, bx={b[1]}) is assigned twice (cores {seen[b]} and {w.core})",
                    construct=f"schedule policy {sched.spec.policy!r}", source=source,
                    fix="for strided, use step equal to the number of cores (the default)")
            seen[b] = w.core
    missing = sched.num_blocks - len(seen)
    if missing:
        example = next((by, bx) for by in range(sched.grid_y) for bx in range(sched.grid_x) if (by, bx) not in seen)
        raise TTScheduleError(
            f"{missing} of {sched.num_blocks} blocks are never visited, e.g. (by={example[0]}, bx={example[1]})",
            construct=f"schedule policy {sched.spec.policy!r}", source=source,
            fix="strided: start at first=0 with step equal to the number of cores; rect: cover the whole grid")
