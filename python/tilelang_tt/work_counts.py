"""Per-core work of a TT program, counted statically (compile time, no emulator): the ``CoreWork`` record the
performance model (perf_model.py) costs, and the walk that fills it.

``program_work`` walks the TT program (``ttir`` nodes: ``For``, ``Let``, ``Call``) kernel by kernel, multiplying
each call by the trip counts of the loops around it, with each core's runtime args from the plan's mapping. An
artifact on disk holds its program as ``tt.program.json`` (``ttir_json``: the same nodes as data, expressions as
trees evaluated per core). Loops are multiplied, not iterated, unless a trip count depends on an enclosing loop
variable. Blocks are counted whole (edge tiles of tensors that the block does not divide are counted as full
pages). ``tests/tt/test_perf_model.py`` checks the counts equal tt-sim's protocol-only counters.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from . import ttir, ttir_json
from .device import FACE, TILE, TILE_ELEMS, get_device, matmul_block_unpack_tiles
from .intrinsics import CALLS


@dataclass
class CoreWork:
    """What one core does in one kernel launch."""

    core: tuple[int, int]
    ops: Counter = field(default_factory=Counter)   # compute tile ops by call name (matmul_tiles, exp_tile, ...)
    unpack_bytes: int = 0
    matmul_unpack_bytes: int = 0                    # the part of unpack_bytes that feeds matmul_tiles / matmul_block
    unpack_formats: Counter = field(default_factory=Counter)   # unpack_bytes by the data format of the CB read
    pack_bytes: int = 0
    pack_l1_acc_bytes: int = 0                      # the part of pack_bytes packed with L1 accumulation
    dram_read_bytes: int = 0
    dram_write_bytes: int = 0
    noc_in_bytes: int = 0
    noc_out_bytes: int = 0
    feed_bytes: Counter = field(default_factory=Counter)   # role -> bytes read or multicast by that kernel
    out_bytes: Counter = field(default_factory=Counter)    # role -> bytes written by that kernel
    waits: Counter = field(default_factory=Counter)        # "role:read" | "role:write" | "role:mcast" -> count

    @property
    def matmul_tiles(self) -> int:
        return self.ops.get("matmul_tiles", 0)

    @property
    def packs(self) -> int:
        return self.ops.get("pack_tile", 0)

    def copy(self, core=None) -> "CoreWork":
        return dataclasses.replace(self, core=self.core if core is None else core, ops=Counter(self.ops),
                                   unpack_formats=Counter(self.unpack_formats), feed_bytes=Counter(self.feed_bytes),
                                   out_bytes=Counter(self.out_bytes), waits=Counter(self.waits))

    def signature(self) -> tuple:
        """Everything but the core: cores alike in it cost alike."""
        return (tuple(sorted(self.ops.items())), self.unpack_bytes, self.pack_bytes, self.pack_l1_acc_bytes,
                self.dram_read_bytes, self.dram_write_bytes, self.noc_in_bytes, self.noc_out_bytes,
                tuple(sorted(self.unpack_formats.items())), tuple(sorted(self.feed_bytes.items())),
                tuple(sorted(self.out_bytes.items())),
                tuple(sorted(self.waits.items())))


# ---- the program's structure: ttir nodes, from a Program or from tt.program.json -----------------------------
class StaticCountError(Exception):
    """The program holds something the static walk cannot count (e.g. a symbolic trip count)."""


def _text(value) -> str:
    """An argument or bound as C++ text, for messages."""
    if isinstance(value, (bool, int)):
        return str(int(value))
    from .cexpr import cexpr

    return cexpr(value)


def _eval(value, env: dict) -> int:
    try:
        return ttir_json.evaluate(value, env)
    except LookupError as e:
        raise StaticCountError(f"{e.args[0]} is not known before the run (in `{_text(value)}`)") from None
    except ttir_json.ProgramFormatError as e:
        raise StaticCountError(str(e)) from None


_names = ttir_json.names


def _extent_names(body: list, lets: dict, valid: bool = False) -> set[str]:
    """Names the trip counts inside ``body`` depend on (through lets, transitively); ``valid``: and the valid flags
    of its row gathers and scatters (a row past a tensor or outside a sequence moves nothing)."""
    names: set[str] = set()
    for n in body:
        if isinstance(n, ttir.For):
            names |= _names(n.min) | _names(n.extent)
            names |= _extent_names(n.body, lets, valid)
        elif valid and isinstance(n, ttir.Call) and n.op in _VALID_ARG:
            names |= _names(n.args[_VALID_ARG[n.op]])
        elif isinstance(n, ttir.Let):
            lets[n.var.name] = n.value
    changed = True
    while changed:
        changed = False
        for name in list(names):
            if name in lets and not _names(lets[name]) <= names:
                names |= _names(lets[name])
                changed = True
    return names


_TRANSFERS = ("read_tiles", "read_tiles_transposed", "read_tiles_window", "write_tiles", "write_tiles_window")
# Element-granular transfers (templates/dataflow_helpers.h.j2): the aligned chunk each reads, per face-row segment
# for the row gathers; a row scatter writes its segments (16 elements each) as they are
_GATHER_CHUNK, _INDEX_CHUNK = 64, 64
_FACES_PER_ROW = TILE // FACE
_VALID_ARG = {"gather_row": 7, "scatter_row": 6}
# Loop iterations the walk spends on valid flags (beyond that, a row whose flag a loop variable decides counts as
# moved: an upper bound; an im2col convolution of 512k pixels has 19M gathered rows)
_VALID_BUDGET = 20_000
# The multicast handshake's waits (TTMulticastReuse): the sender's for its receivers, a receiver's for the block
_MCAST_WAITS = ("mcast_wait_ready", "mcast_wait_valid")


def _name(arg) -> str:
    """A CB, tensor or multicast-group argument's name."""
    if isinstance(arg, (ttir.CB, ttir.Tensor)):
        return arg.name
    return arg.text if isinstance(arg, ttir.Lit) else str(arg)


class _Counter:
    """Walks one core's kernels, adding what each call does, times the trip counts around it, to a CoreWork."""

    def __init__(self, cbs: list[dict], tensors: dict[str, dict], groups: list[dict], dram_alignment: int | None):
        self.dram_alignment = dram_alignment     # a gathered segment congruent modulo it is read straight
        self.cb_pages = {cb["name"]: cb["page_size"] for cb in cbs}
        self.cb_formats = {cb["name"]: cb.get("format", "") for cb in cbs}
        self.tensors = tensors
        # per multicast group, each core's role in mapping order (TTMulticastReuse's routes in the plan)
        self.senders = {g["name"]: [c["is_sender"] for c in g["cores"]] for g in groups}
        self.l1_acc = False                      # pack_reconfig_l1_acc state, in program order
        self.valid_budget = _VALID_BUDGET        # loop iterations left for exact valid flags
        self.pending: set[str] = set()           # "role:read" / "role:write": transfers issued, no barrier since

    def count(self, body: list, env: dict, work: CoreWork, mult: int, role: str, lets: dict | None = None) -> None:
        lets = dict(lets or {})
        for n in body:
            if isinstance(n, ttir.For):
                lo, hi = _eval(n.min, env), _eval(n.min, env) + _eval(n.extent, env)
                if hi <= lo:
                    continue
                exact_valid = (self.valid_budget >= hi - lo
                               and n.var.name in _extent_names(n.body, dict(lets), valid=True))
                if exact_valid:
                    self.valid_budget -= hi - lo
                if exact_valid or n.var.name in _extent_names(n.body, dict(lets)):
                    for v in range(lo, hi):
                        self.count(n.body, {**env, n.var.name: v}, work, mult, role, lets)
                else:
                    self.count(n.body, env, work, mult * (hi - lo), role, lets)
            elif isinstance(n, ttir.Let):
                lets[n.var.name] = n.value
                try:
                    env = {**env, n.var.name: _eval(n.value, env)}
                except StaticCountError:
                    pass    # depends on a loop variable that no trip count needs
            elif isinstance(n, ttir.Call):
                self.call(n.op, n.args, env, work, mult, role)
            else:
                raise StaticCountError(f"unknown program node {n!r}")

    def call(self, op: str, args: tuple, env: dict, work: CoreWork, mult: int, role: str) -> None:
        if op in _TRANSFERS:
            self.transfer(op, args, env, work, mult, role)
        elif op in ("gather_row", "scatter_row", "read_index", "read_half"):
            self.element_transfer(op, args, env, work, mult, role)
        elif op == "mcast_write_block":     # the sender writes the block once into the NoC for its group
            nbytes = mult * _eval(args[2], env) * self.cb_pages[_name(args[1])]
            work.noc_out_bytes += nbytes
            work.feed_bytes[role] += nbytes
        elif op in _MCAST_WAITS:           # sender and receivers alike wait for the handshake
            work.waits[f"{role}:mcast"] += mult
        elif op in ("noc_async_read_barrier", "noc_async_write_barrier"):
            kind = "read" if "read" in op else "write"
            if f"{role}:{kind}" in self.pending:      # a barrier with nothing in flight returns at once
                work.waits[f"{role}:{kind}"] += mult
                self.pending.discard(f"{role}:{kind}")
        else:
            self.compute(op, args, env, work, mult)

    def transfer(self, op: str, args: tuple, env: dict, work: CoreWork, mult: int, role: str) -> None:
        tensor = self.tensors[_name(args[1])]
        nbytes = mult * _eval(args[4], env) * _eval(args[5], env) * tensor["page_size"]
        if op.endswith("_window"):     # only the window's elements move
            nbytes = nbytes * _eval(args[7], env) * _eval(args[9], env) // TILE_ELEMS
        self.moved(work, role, nbytes, tensor, write=not op.startswith("read_tiles"))

    def moved(self, work: CoreWork, role: str, nbytes: int, tensor: dict, write: bool, dram_bytes=None) -> None:
        """``nbytes`` crossing the NoC between L1 and ``tensor`` (``dram_bytes`` of them to or from DRAM when not
        all: a gather's L1 moves), for ``role``; its next barrier waits."""
        dram = nbytes if dram_bytes is None else dram_bytes
        dram = dram if tensor["placement"] == "DRAM" else 0
        if write:
            work.noc_out_bytes += nbytes
            work.out_bytes[role] += nbytes
            work.dram_write_bytes += dram
        else:
            work.noc_in_bytes += nbytes
            work.feed_bytes[role] += nbytes
            work.dram_read_bytes += dram
        self.pending.add(f"{role}:{'write' if write else 'read'}")

    def element_transfer(self, op: str, args: tuple, env: dict, work: CoreWork, mult: int, role: str) -> None:
        """A row gather / scatter (per tile column, two face-row segments) or an element read (one 64-byte chunk).
        A gathered segment whose offsets in its tile page and in the block are congruent modulo the DRAM alignment
        is read straight (its bytes); any other, and a row of zeros, as a 64-byte chunk into the scratch and a move
        in L1; a row none of whose segments used the scratch writes it once from the zeros (64 bytes in L1). Where
        the source row is not known before the run, a segment that may be either counts as the chunk (an upper
        bound). A row whose valid flag is not known counts as moved (an upper bound too: the tensor rows a sequence
        does not reach move nothing)."""
        if op in ("read_index", "read_half"):
            self.moved(work, role, mult * _INDEX_CHUNK, self.tensors[_name(args[1])], write=False)
            return
        tensor = self.tensors[_name(args[2])]
        try:
            valid = _eval(args[_VALID_ARG[op]], env) != 0
        except StaticCountError:
            valid = True
        elem = tensor["page_size"] // TILE_ELEMS
        segment = FACE * elem
        cols = mult * _eval(args[5], env)
        if op != "gather_row":
            if valid:
                self.moved(work, role, cols * _FACES_PER_ROW * segment, tensor, write=True)
            return
        direct = [valid and self._congruent(args, env, face_col, elem) for face_col in range(_FACES_PER_ROW)]
        chunked = _FACES_PER_ROW - sum(direct)
        self.moved(work, role, cols * (sum(direct) * segment + chunked * (_GATHER_CHUNK + segment))
                   + (mult * _GATHER_CHUNK if not chunked else 0), tensor, write=False,
                   dram_bytes=cols * (sum(direct) * segment + chunked * _GATHER_CHUNK) if valid else 0)

    def _congruent(self, args: tuple, env: dict, face_col: int, elem: int) -> bool:
        """Whether segment ``face_col`` of a gathered row sits at congruent offsets (modulo the DRAM alignment) in
        its tile page and in the block (CB pages start at multiples of it), for every source row it may have."""
        def offset(row: int) -> int:     # dataflow_helpers.h's tile_elem_offset(row, face_col * kFaceDim), in bytes
            return (((row // FACE) * _FACES_PER_ROW + face_col) * FACE * FACE + (row % FACE) * FACE) * elem

        if self.dram_alignment is None:
            raise StaticCountError("a row gather in a plan that names no device (its DRAM alignment)")
        if (FACE * elem) % self.dram_alignment == 0:
            return True
        try:
            src, dst = _eval(args[3], env), _eval(args[1], env)
        except StaticCountError:
            return False
        return offset(src % TILE) % self.dram_alignment == offset(dst % TILE) % self.dram_alignment

    def compute(self, op: str, args: tuple, env: dict, work: CoreWork, mult: int) -> None:
        spec = CALLS.get(op)
        if op == "pack_reconfig_l1_acc":
            self.l1_acc = _eval(args[0], env) != 0
        elif op == "pack_tile":
            nbytes = mult * self.cb_pages[_name(args[1])]
            work.ops[op] += mult
            work.pack_bytes += nbytes
            work.pack_l1_acc_bytes += nbytes if self.l1_acc else 0
        elif op == "matmul_block":    # rt x ct tile matmuls of one K tile
            ct, rt = _eval(args[6], env), _eval(args[7], env)
            a, b = (_name(x) for x in args[:2])
            tiles_a, tiles_b = matmul_block_unpack_tiles(rt, ct)
            work.ops["matmul_tiles"] += mult * rt * ct
            self.unpacked(work, {a: tiles_a * mult, b: tiles_b * mult}, matmul=True)
        elif spec is not None and spec.kind == "op":
            work.ops[op] += mult
            cbs = Counter(a.name for a in args if isinstance(a, ttir.CB))
            self.unpacked(work, {cb: n * mult for cb, n in cbs.items()}, matmul=op == "matmul_tiles")

    def unpacked(self, work: CoreWork, tiles: dict[str, int], matmul: bool) -> None:
        """The unpackers read ``tiles[cb]`` tiles of each CB."""
        for cb, n in tiles.items():
            nbytes = n * self.cb_pages[cb]
            work.unpack_bytes += nbytes
            work.matmul_unpack_bytes += nbytes if matmul else 0
            work.unpack_formats[self.cb_formats[cb]] += nbytes


def _core_env(plan: dict, entry: dict) -> dict:
    env = {k: v for k, v in entry.items() if k != "core" and isinstance(v, int)}
    env.update({k: v for k, v in plan["schedule"].get("common_args", {}).items() if isinstance(v, int)})
    return env


def program_work(kernels: dict[str, list], plan: dict) -> list[CoreWork]:
    """Per-core work of a TT program ({role: body} of ``ttir`` nodes, or a ``ttir.Program``) under a plan
    (its CB and tensor page sizes, multicast groups and per-core mapping)."""
    if isinstance(kernels, ttir.Program):
        kernels = {role: k.body for role, k in kernels.kernels.items()}
    groups = plan.get("multicast", {}).get("groups", [])
    if any("cores" not in g for g in groups):
        raise StaticCountError("the plan's multicast groups have no per-core routes (a plan of an older version)")
    arch = plan.get("device", {}).get("arch")      # a hand-made plan may name none (then no row gathers)
    counter = _Counter(plan["cbs"], {b["name"]: b for b in plan["buffers"]}, groups,
                       get_device(arch).dram_alignment if arch else None)
    names = set().union(*(_extent_names(body, {}, valid=True) for body in kernels.values()))
    cache: dict[tuple, CoreWork] = {}
    works = []
    for index, entry in enumerate(plan["mapping"]):
        env = _core_env(plan, entry)
        env.update({f"{g}_is_sender": int(roles[index]) for g, roles in counter.senders.items()})
        key = tuple((k, v) for k, v in sorted(env.items()) if k in names)   # cores alike in every trip count
        key += tuple(roles[index] for roles in counter.senders.values())   # and in their multicast roles
        if key not in cache:
            w = CoreWork(core=tuple(entry["core"]))
            counter.l1_acc = False
            for role, body in kernels.items():
                counter.pending.clear()
                counter.count(body, env, w, 1, role)
            cache[key] = w
        works.append(cache[key].copy(core=tuple(entry["core"])))
    return works


def static_work(artifact_dir: Path, plan: dict | None = None) -> list[CoreWork]:
    """Per-core work of the artifact, counted from its program (``tt.program.json``) and the plan's mapping."""
    return [w.copy() for w in shared_static_work(artifact_dir, plan)]


def shared_static_work(artifact_dir: Path, plan: dict | None = None) -> tuple[CoreWork, ...]:
    """``static_work`` without the copies: the cached records themselves, which the caller reads and never
    modifies (the performance model of a run only reads them)."""
    artifact_dir = Path(artifact_dir)
    plan = plan or json.loads((artifact_dir / "tt.plan.json").read_text())
    path = artifact_dir / "tt.program.json"
    if not path.is_file():
        raise StaticCountError(f"{path} does not exist")
    if plan["schedule"].get("dynamic") or not plan["mapping"]:
        raise StaticCountError("the schedule is computed at launch (symbolic shapes)")
    # every emulate() models its run from these counts: counted once per (program, plan)
    return _static_work(path.read_text(), json.dumps(plan, sort_keys=True))


@functools.lru_cache(maxsize=16)
def _static_work(program: str, plan_text: str) -> tuple[CoreWork, ...]:
    return tuple(program_work(ttir_json.from_json(json.loads(program)), json.loads(plan_text)))
