"""The performance model: modeled device time of a compiled TT kernel and what binds it.

A model, not a measurement: every result carries ``label`` saying so. It is calibrated: its rates are fitted to, or
taken from, published measurements (``device.PERF``; ``benchmarks/calibration.py`` models TTNN's own GEMM program
for each published point and prints the error). Inputs:

* the artifact's ``tt.plan.json`` (device, mapping, CB and tensor page sizes, math fidelity) and
* per-core operation counts (``CoreWork``): tile ops by name, bytes unpacked and packed by the compute kernel,
  DRAM and NoC bytes, and for each data-movement kernel the bytes it moves and the waits it makes (read and write
  barriers, multicast handshakes). They come from one of two places:

  - **static** (compile time, no emulator): ``work_counts.program_work`` walks the TT program kernel by kernel
    with each core's runtime args from the plan's mapping;
  - **counters** (after a run): the emulator's per-core counters (``dram_read_bytes``, ``noc_*_bytes``,
    ``matmul_tiles``, ``tile_ops``, ``packs``), including protocol-only runs. The counters do not say which tile
    ops were SFPU ops, how many bytes each unpacked nor which kernel waited where, so the static breakdown is
    scaled to them when it exists.

  ``tests/tt/test_perf_model.py`` checks that the static counts equal the protocol-only counters for the
  reference kernels, so a codegen change that the static walk misreads fails a test instead of skewing the
  model silently.

Cost per core, in cycles (rates from ``device.PERF``, each with its source):

* math thread: ``matmul_tiles`` x FPU cycles of the fidelity (LoFi 16 .. HiFi4 64) / FPU efficiency of that
  fidelity; FPU eltwise 8 cycles per tile (mul x fidelity phases); SFPU ops by their measured cycles per tile;
* unpack thread: bytes unpacked / the operand-feed rate. ``matmul_tiles`` unpacks its two tiles;
  ``matmul_block`` with an ``rt x ct`` output unpacks, for each of the ``min(rt, ct)`` tiles of the reused
  operand, that tile and the ``max(rt, ct)`` tiles of the other (tt-llk ``_llk_unpack_AB_matmul_``);
* pack thread: bytes packed / 64 B per cycle, a pack with L1 accumulation costing ``pack_l1_acc_cost`` times more;
* compute = max(unpack, math, pack): the three TRISC threads overlap through DST double buffering;
* each data-movement kernel (reader, writer): its bytes / the per-core NoC rate, plus a round trip per barrier
  that waits on issued transfers, plus a handshake per multicast transfer (sender and receivers alike);
* core = fill + max(compute, reader, writer) + drain, where fill is one step of the slowest feeding kernel (the
  first block arrives before compute starts) and drain one output batch and its barrier (after compute ends);
* kernel = launch + max(slowest core, all DRAM bytes / interleaved DRAM bandwidth).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

from . import mesh_model
from .device import FIDELITY_PHASES, FPU_CYCLES_PER_TILE_MATMUL, SFPU_CYCLES, TILE_FORMATS, TILE_MATMUL_FLOPS, get_perf
from .intrinsics import CALLS
from .work_counts import CoreWork, StaticCountError, program_work, shared_static_work, static_work

__all__ = ["CoreWork", "StaticCountError", "program_work", "static_work", "evaluate", "model_for_artifact",
           "model_for_run", "model_of", "protocol_report", "summary"]

LABEL = "performance model (modeled, not measured)"
ROLES = ("reader", "writer")


# ---- cost ---------------------------------------------------------------------------------------------------
def _math_cycles(work: CoreWork, perf, fidelity: str) -> tuple[float, float]:
    fpu = sfpu = 0.0
    for op, n in work.ops.items():
        spec = CALLS.get(op)
        unit = spec.unit if spec is not None else None
        if op == "matmul_tiles":
            fpu += n * FPU_CYCLES_PER_TILE_MATMUL[fidelity] / perf.fpu_eff(fidelity)
        elif unit == "fpu":
            phases = FIDELITY_PHASES[fidelity] if op == "mul_tiles" else 1
            fpu += n * perf.eltwise_cycles_per_tile * phases
        elif unit == "sfpu":
            sfpu += n * SFPU_CYCLES.get(op, perf.sfpu_cycles_per_tile)
    return fpu, sfpu


def role_cycles(work: CoreWork, perf) -> dict[str, dict[str, float]]:
    """Cycles of each data-movement kernel (reader, writer), split into what it spends: ``feed`` (bytes it reads
    or multicasts / the NoC rate), ``out`` (bytes it writes / the NoC rate), ``read_waits`` and ``write_waits`` (a
    NoC round trip per barrier that waits on issued transfers), ``mcast_waits`` (a handshake per multicast
    transfer), with their counts (``reads``, ``writes``, ``mcasts``) and ``total``."""
    roles = {}
    for role in ROLES:
        reads, writes, mcasts = (work.waits[f"{role}:{k}"] for k in ("read", "write", "mcast"))
        r = {"feed": work.feed_bytes[role] / perf.noc_bytes_per_cycle, "read_waits": reads * perf.noc_round_trip_cycles,
             "mcast_waits": mcasts * perf.mcast_handshake_cycles,
             "out": work.out_bytes[role] / perf.noc_bytes_per_cycle,
             "write_waits": writes * perf.noc_round_trip_cycles, "reads": reads, "writes": writes, "mcasts": mcasts}
        r["total"] = (r["feed"] + r["read_waits"] + r["mcast_waits"]) + (r["out"] + r["write_waits"])
        roles[role] = r
    return roles


def _movement_cycles(work: CoreWork, perf) -> tuple[float, float, float]:
    """(busiest data-movement kernel, fill, drain) in cycles."""
    busiest = fill = drain = 0.0
    for role, r in role_cycles(work, perf).items():
        feed = r["feed"] + r["read_waits"] + r["mcast_waits"]
        out = r["out"] + r["write_waits"]
        busiest = max(busiest, r["total"])
        if work.feed_bytes[role] or r["mcasts"]:     # a step: one barrier or one handshake (a sender makes both)
            fill = max(fill, feed / max(1, r["reads"], r["mcasts"]))
        if work.out_bytes[role]:
            drain = max(drain, out / max(1, r["writes"]))
    return busiest, fill, drain


def core_cycles(work: CoreWork, arch: str, fidelity: str, perf=None) -> dict[str, float]:
    """Cycles of each engine of one core: fpu, sfpu, unpack, pack, noc (the busiest data-movement kernel), and the
    fill before and the drain after the steady state."""
    perf = perf or get_perf(arch)
    fpu, sfpu = _math_cycles(work, perf, fidelity)
    pack = work.pack_bytes + (perf.pack_l1_acc_cost - 1.0) * work.pack_l1_acc_bytes
    noc, fill, drain = _movement_cycles(work, perf)
    unpack = sum(n / perf.unpack_rate(fmt) for fmt, n in work.unpack_formats.items())
    unpack += (work.unpack_bytes - sum(work.unpack_formats.values())) / perf.unpack_bytes_per_cycle
    return {"fpu": fpu, "sfpu": sfpu, "unpack": unpack,
            "pack": pack / perf.pack_bytes_per_cycle, "noc": noc, "fill": fill, "drain": drain}


def steady_cycles(c: dict) -> float:
    """The steady state of a core (``core_cycles``): its slowest engine, compute threads and data movement."""
    return max(c["fpu"] + c["sfpu"], c["unpack"], c["pack"], c["noc"])


def core_seconds(c: dict, perf) -> float:
    """A core's modeled time from its ``core_cycles``: fill + steady state + drain."""
    return (c["fill"] + steady_cycles(c) + c["drain"]) / perf.clock_hz


def _bound(c: dict, dram_s: float, perf) -> str:
    """What binds the launch: the largest of the critical core's terms, the DRAM time, fill + drain, launch."""
    f = perf.clock_hz
    terms = {"fpu" if c["fpu"] >= c["sfpu"] else "sfpu": (c["fpu"] + c["sfpu"]) / f, "unpack": c["unpack"] / f,
             "pack": c["pack"] / f, "noc": c["noc"] / f, "dram": dram_s, "latency": (c["fill"] + c["drain"]) / f,
             "launch": perf.launch_seconds}
    return max(terms, key=terms.get)


def group_works(works: list[CoreWork]) -> list[tuple[CoreWork, int]]:
    """Cores alike in everything but their coordinates, counted once: (a representative, how many)."""
    groups: dict[tuple, list] = {}
    for w in works:
        groups.setdefault(w.signature(), [w, 0])[1] += 1
    return [(w, n) for w, n in groups.values()]


def evaluate(works: list[CoreWork], arch: str, fidelity: str, source: str, perf=None) -> dict:
    """The model of one launch from per-core work: seconds, tflops, bound, and the terms behind them."""
    if not works:
        raise ValueError("no per-core work to model")
    return evaluate_groups(group_works(works), arch, fidelity, source, perf)


def evaluate_groups(groups: list[tuple[CoreWork, int]], arch: str, fidelity: str, source: str, perf=None) -> dict:
    """``evaluate`` of grouped cores (``group_works``); ``perf`` overrides the arch's rates (calibration)."""
    perf = perf or get_perf(arch)
    terms = dict.fromkeys(("fpu", "sfpu", "unpack", "pack", "noc", "fill", "drain"), 0.0)
    critical, critical_s = None, -1.0
    for w, _ in groups:
        c = core_cycles(w, arch, fidelity, perf)
        for k in terms:
            terms[k] = max(terms[k], c[k] / perf.clock_hz)
        core_s = core_seconds(c, perf)
        if core_s > critical_s:
            critical, critical_s = (w, c), core_s
    dram_read = sum(w.dram_read_bytes * n for w, n in groups)
    dram_write = sum(w.dram_write_bytes * n for w, n in groups)
    dram_s = (dram_read + dram_write) / perf.dram_bw_interleaved
    seconds = perf.launch_seconds + max(critical_s, dram_s)
    matmuls = sum(w.matmul_tiles * n for w, n in groups)
    w, c = critical
    return {
        "label": LABEL, "arch": arch, "math_fidelity": fidelity, "counts_from": source,
        "seconds": seconds, "bound": _bound(c, dram_s, perf),
        "tflops": matmuls * TILE_MATMUL_FLOPS / seconds / 1e12 if matmuls and seconds > 0 else None,
        "critical_core": list(w.core), "critical_core_seconds": critical_s,
        "terms_seconds": {**terms, "dram": dram_s, "launch": perf.launch_seconds},
        "dram_bytes": dram_read + dram_write, "dram_read_bytes": dram_read, "dram_write_bytes": dram_write,
        "matmul_tiles": matmuls, "cores": sum(n for _, n in groups), "rates": _rates(perf, fidelity),
        "not_modelled": "NoC congestion between cores, DRAM bank hot spots, CB back-pressure beyond double "
                        "buffering, clock throttling",
    }


def _rates(perf, fidelity: str) -> dict:
    return {"clock_hz": perf.clock_hz, "dram_bw": perf.dram_bw_interleaved,
            "noc_bytes_per_cycle": perf.noc_bytes_per_cycle,
            "fpu_cycles_per_tile_matmul": FPU_CYCLES_PER_TILE_MATMUL[fidelity],
            "fpu_efficiency": perf.fpu_eff(fidelity), "unpack_bytes_per_cycle": perf.unpack_bytes_per_cycle,
            "pack_bytes_per_cycle": perf.pack_bytes_per_cycle, "pack_l1_acc_cost": perf.pack_l1_acc_cost,
            "noc_round_trip_cycles": perf.noc_round_trip_cycles,
            "mcast_handshake_cycles": perf.mcast_handshake_cycles, "launch_seconds": perf.launch_seconds}


def summary(model: dict) -> str:
    """One line for humans (CLI, main job)."""
    if "error" in model:
        return f"{model['label']}: unavailable ({model['error']})"
    t = model["terms_seconds"]
    tf = f", {model['tflops']:.2f} TFLOPS" if model.get("tflops") else ""
    return (f"{model['label']} on {model['arch']} at {model['math_fidelity']}: {model['seconds'] * 1e6:.1f} us{tf}, "
            f"bound: {model['bound']} (fpu {t['fpu'] * 1e6:.1f}, unpack {t['unpack'] * 1e6:.1f}, "
            f"pack {t['pack'] * 1e6:.1f}, sfpu {t['sfpu'] * 1e6:.1f}, noc {t['noc'] * 1e6:.1f}, "
            f"fill+drain {(t['fill'] + t['drain']) * 1e6:.1f}, dram {t['dram'] * 1e6:.1f}, "
            f"launch {t['launch'] * 1e6:.1f} us; {model['dram_bytes'] / 1e6:.2f} MB DRAM; "
            f"counts: {model['counts_from']})")


# ---- per-core counts from the emulator's counters -----------------------------------------------------------
def _scaled(counter: Counter, factor: float) -> Counter:
    return Counter({k: v * factor for k, v in counter.items()})


def _movement_from(w: CoreWork, s: CoreWork | None) -> None:
    """The data-movement kernels' bytes and waits: the static split scaled to the counters' NoC bytes, or (without
    static counts) reads on the reader and writes on the writer, waits unknown."""
    if s is None:
        w.feed_bytes = Counter({"reader": w.noc_in_bytes})
        w.out_bytes = Counter({"writer": w.noc_out_bytes})
        return
    s_in, s_out = sum(s.feed_bytes.values()), sum(s.out_bytes.values())
    moved = w.noc_in_bytes + w.noc_out_bytes
    f = moved / (s.noc_in_bytes + s.noc_out_bytes) if s.noc_in_bytes + s.noc_out_bytes else 0.0
    w.feed_bytes = _scaled(s.feed_bytes, f) if s_in else Counter()
    w.out_bytes = _scaled(s.out_bytes, f) if s_out else Counter()
    w.waits = Counter(s.waits)


def counter_work(plan: dict, report: dict, static: list[CoreWork] | None = None) -> list[CoreWork]:
    """Per-core work from a run report's counters. The counters say how many matmul_tiles, other tile ops and
    packs ran, not which ops nor how many bytes each moved: that breakdown comes from the static counts of the
    same core scaled to the counters, or else from the plan's CB page sizes (other tile ops costed as copies)."""
    by_core = {tuple(w.core): w for w in static or []}
    bf16_tile = TILE_FORMATS["Float16_b"].tile_bytes     # a plan without such CBs: costed as bf16 tiles
    in_page = max([cb["page_size"] for cb in plan["cbs"] if "reader" in cb["producer"]] or [bf16_tile])
    out_page = max([cb["page_size"] for cb in plan["cbs"] if "writer" in cb["consumer"]] or [bf16_tile])
    works = []
    for c in report.get("cores", []):
        core = tuple(c["core"])
        w = CoreWork(core, dram_read_bytes=c["dram_read_bytes"], dram_write_bytes=c["dram_write_bytes"],
                     noc_in_bytes=c["noc_read_bytes"], noc_out_bytes=c["noc_write_bytes"])
        mm, other, packs = c["matmul_tiles"], c["tile_ops"], c["packs"]
        s = by_core.get(core)
        if s is not None:
            s_other = Counter({k: v for k, v in s.ops.items() if k not in ("matmul_tiles", "pack_tile")})
            n_other = sum(s_other.values())
            f_other = other / n_other if n_other else 0.0
            f_mm = mm / s.matmul_tiles if s.matmul_tiles else 0.0
            w.ops = _scaled(s_other, f_other)
            w.unpack_bytes = s.matmul_unpack_bytes * f_mm + (s.unpack_bytes - s.matmul_unpack_bytes) * f_other
            w.matmul_unpack_bytes = s.matmul_unpack_bytes * f_mm
            w.unpack_formats = _scaled(s.unpack_formats, w.unpack_bytes / s.unpack_bytes if s.unpack_bytes else 0)
            w.pack_bytes = s.pack_bytes * packs / s.packs if s.packs else packs * out_page
            w.pack_l1_acc_bytes = s.pack_l1_acc_bytes * packs / s.packs if s.packs else 0
        else:
            w.ops = Counter({"copy_tile": other}) if other else Counter()
            w.matmul_unpack_bytes = 2 * mm * in_page
            w.unpack_bytes = w.matmul_unpack_bytes + other * in_page
            w.pack_bytes = packs * out_page
        _movement_from(w, s)
        if mm:
            w.ops["matmul_tiles"] = mm
        if packs:
            w.ops["pack_tile"] = packs
        works.append(w)
    return works


_COUNTERS = ("dram_read_bytes", "dram_write_bytes", "noc_read_bytes", "noc_write_bytes", "matmul_tiles", "tile_ops",
             "packs")   # what counter_work reads of a core's counters


def counter_groups(plan: dict, report: dict, static=None) -> list[tuple[CoreWork, int]]:
    """``group_works(counter_work(plan, report, static))``, with each distinct core's work built once: a core's
    work depends only on its counters (``_COUNTERS``) and its static work, so cores equal in both share it (a
    64-core GEMM has a handful of distinct cores)."""
    by_core = {tuple(w.core): w for w in static or []}
    firsts: dict[tuple, list] = {}    # (counters, static work) -> [first core's counters, cores]
    for c in report.get("cores", []):
        s = by_core.get(tuple(c["core"]))
        key = (tuple(c[k] for k in _COUNTERS),
               None if s is None else (s.signature(), s.matmul_unpack_bytes))   # all of s but its core
        firsts.setdefault(key, [c, 0])[1] += 1
    reps = list(firsts.values())
    works = counter_work(plan, {"cores": [c for c, _ in reps]}, static)
    groups: dict[tuple, list] = {}    # as group_works: by signature, in the order of each one's first core
    for w, (_, n) in zip(works, reps):
        groups.setdefault(w.signature(), [w, 0])[1] += n
    return [(w, n) for w, n in groups.values()]


# ---- entry points -------------------------------------------------------------------------------------------
def plan_fidelity(plan: dict) -> str:
    return plan["kernels"]["compute"].get("math_fidelity", plan.get("math_fidelity", "HiFi4"))


def block_float_saving(plan: dict) -> dict:
    """DRAM bytes of the block-float tensors (Bfp8_b / Bfp4_b weights, int8 stored as Bfp8_b) against the same
    tensors in bf16, per tensor and in total (tile bytes from device.TILE_FORMATS: 1088 / 576 vs 2048). The
    reads of those tensors shrink in the same ratio (the counts above are bytes of the pages actually read)."""
    from .device import TILE_FORMATS

    bf16 = TILE_FORMATS["Float16_b"].tile_bytes
    rows = []
    for b in plan["buffers"]:
        f = TILE_FORMATS.get(b["format"])
        if f is None or f.kind != "bfp" or not isinstance(b["num_pages"], int):
            continue
        rows.append({"tensor": b["name"], "format": f.name, "bytes": b["num_pages"] * f.tile_bytes,
                     "bytes_as_bf16": b["num_pages"] * bf16, "ratio": f.tile_bytes / bf16})
        if "host_unpack" in b:   # packed int4 the host unpacks: DRAM holds the unpacked Bfp8_b tiles, not these
            rows[-1]["packed_host_bytes"] = math.prod(b["host_unpack"]["shape"])
    total = sum(r["bytes"] for r in rows)
    as_bf16 = sum(r["bytes_as_bf16"] for r in rows)
    return {"tensors": rows, "bytes": total, "bytes_as_bf16": as_bf16, "saved_bytes": as_bf16 - total}


def _with_saving(model: dict, plan: dict) -> dict:
    saving = block_float_saving(plan)
    if saving["tensors"]:
        model["block_float_dram"] = saving
    return model


STATIC_SOURCE = "static (tt.program.json x plan mapping)"


def _static_unavailable(arch: str, err: Exception) -> dict:
    return {"label": LABEL, "arch": arch, "error": f"static counts unavailable: {err}; run the kernel "
                                                  "(protocol_only=True is enough) for a counter-based model"}


def modeled_work(artifact_dir: Path, plan: dict, report: dict | None = None) -> tuple[list[CoreWork], str]:
    """The per-core work the model of the artifact (``report`` None) or of a run prices, and where its counts come
    from: the run's counters when the report has them, else the static walk (which raises ``StaticCountError``,
    ``KeyError``, ``ValueError`` or ``SyntaxError`` when it cannot count)."""
    return _modeled(artifact_dir, plan, report, counter_work, lambda works: works)


def _modeled(artifact_dir: Path, plan: dict, report: dict | None, from_counters, from_static):
    """``modeled_work``, its per-core works made by ``from_counters(plan, report, static)`` or, from the static
    walk, ``from_static(works)`` (``counter_groups`` and ``group_works`` for the grouped cores ``model_of``
    prices)."""
    try:
        static = shared_static_work(artifact_dir, plan)
    except (StaticCountError, KeyError, ValueError, SyntaxError):
        if report is None:
            raise
        static = None
    works = []
    if report is not None:
        try:
            works = from_counters(plan, report, static)
        except (KeyError, TypeError):     # a report without the emulator's per-core counters (e.g. a device run)
            works = []
    if works:
        return works, "emulator counters" + (" (protocol-only run)" if report.get("protocol_only") else "")
    if static is None:
        return _modeled(artifact_dir, plan, None, from_counters, from_static)
    return from_static([w.copy() for w in static]), STATIC_SOURCE


def model_for_artifact(artifact_dir: Path, plan: dict | None = None) -> dict:
    """The compile-time model (static counts); never raises: an unmodelable kernel gets ``error``."""
    plan = plan or json.loads((Path(artifact_dir) / "tt.plan.json").read_text())
    if "mesh" in plan:     # every chip runs the same per-chip program (static counts)
        return mesh_model.for_artifact(plan, lambda one_chip: model_of(artifact_dir, one_chip))
    return model_of(artifact_dir, plan)


def model_for_run(artifact_dir: Path, plan: dict, report: dict) -> dict:
    """The model of a run: DRAM/NoC bytes and tile-op counts from the emulator's per-core counters."""
    if "mesh" in plan and report.get("chips"):
        return mesh_model.for_run(plan, report, lambda one_chip, chip_report: model_of(artifact_dir, one_chip,
                                                                                        chip_report))
    return model_of(artifact_dir, plan, report)


def model_of(artifact_dir: Path, plan: dict | None = None, report: dict | None = None) -> dict:
    """``model_for_run`` with a report, else ``model_for_artifact``; never raises."""
    artifact_dir = Path(artifact_dir)
    plan = plan or json.loads((artifact_dir / "tt.plan.json").read_text())
    arch = plan["device"]["arch"]
    try:
        groups, source = _modeled(artifact_dir, plan, report, counter_groups, group_works)
    except (StaticCountError, KeyError, ValueError, SyntaxError) as err:
        return _static_unavailable(arch, err)
    if not groups:
        raise ValueError("no per-core work to model")   # as evaluate()
    return _with_saving(evaluate_groups(groups, arch, plan_fidelity(plan), source), plan)


def protocol_report(artifact_dir: Path, plan: dict | None = None) -> dict:
    """The run report of the artifact on tt-sim in protocol-only mode (zero inputs, no math)."""
    import numpy as np

    from . import emulator

    artifact_dir = Path(artifact_dir)
    plan = plan or json.loads((artifact_dir / "tt.plan.json").read_text())
    dtypes = {"Float32": np.float32, "Float16": np.float16, "Float16_b": np.float32}
    tensors = {}
    for buf in plan["buffers"]:
        if not all(isinstance(d, int) for d in buf["shape"]):
            raise StaticCountError(f"{buf['name']} has a symbolic shape; run the kernel with real tensors")
        tensors[buf["param_index"]] = np.zeros(buf["shape"], dtype=dtypes.get(buf["format"], np.float32))
    return emulator.run(artifact_dir, plan, tensors, protocol_only=True, backend="sim").report
