"""The performance model: modeled device time of a compiled TT kernel and what binds it.

A model, not a measurement: every result carries ``label`` saying so. Inputs:

* the artifact's ``tt.plan.json`` (device, mapping, CB and tensor page sizes, math fidelity) and
* per-core operation counts (``CoreWork``): tile ops by name, bytes unpacked and packed by the compute kernel,
  DRAM and NoC bytes. They come from one of two places:

  - **static** (compile time, no emulator): ``static_work`` walks the artifact's ``tt.program.txt`` (the
    explicit TT program the printers print), multiplying each call by the trip counts of the loops around it,
    with each core's runtime args from the plan's mapping. Loops are multiplied, not iterated, unless a trip
    count depends on an enclosing loop variable. Blocks are counted whole (edge tiles of tensors that the
    block does not divide are counted as full pages);
  - **counters** (after a run): the emulator's per-core counters (``dram_read_bytes``, ``noc_*_bytes``,
    ``matmul_tiles``, ``tile_ops``, ``packs``), measured on whatever the compiler generated, including
    protocol-only runs (``TILELANG_TT_PROTOCOL_ONLY=1``), which count without doing the math. The counters
    do not say which tile ops were SFPU ops nor how many bytes each unpacked, so the static breakdown is
    scaled to them when it exists.

  ``tests/tt/test_perf_model.py`` checks that the static counts equal the protocol-only counters for the
  reference kernels, so a codegen change that the static walk misreads fails a test instead of skewing the
  model silently.

Cost per core (rates from ``device.PERF``, each with its PERF_ANCHORS source):

* math thread: ``matmul_tiles`` x FPU cycles of the fidelity (LoFi 16 .. HiFi4 64) / FPU efficiency;
  FPU eltwise 8 cycles per tile (mul x fidelity phases); SFPU ops by their measured cycles per tile;
* unpack thread: bytes unpacked / 80 B per cycle; pack thread: bytes packed / 64 B per cycle, a pack with L1
  accumulation (``pack_reconfig_l1_acc(1)``) costing ``pack_l1_acc_cost`` (2) times a plain one;
* compute = max(unpack, math, pack): the three TRISC threads overlap through DST double buffering;
* NoC: reader ingress and writer egress bytes / per-core NoC bytes per cycle (the two use different NoCs);
* core time = max(compute, NoC) / clock; DRAM time = all DRAM bytes / interleaved DRAM bandwidth;
* kernel time = max(slowest core, DRAM). Launch/dispatch overhead is not modelled.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .device import FIDELITY_PHASES, FPU_CYCLES_PER_TILE_MATMUL, SFPU_CYCLES, TILE, get_perf
from .intrinsics import CALLS

LABEL = "performance model (modeled, not measured)"
TILE_MATMUL_FLOPS = 2 * TILE ** 3


@dataclass
class CoreWork:
    """What one core does in one kernel launch."""

    core: tuple[int, int]
    ops: Counter = field(default_factory=Counter)   # compute tile ops by call name (matmul_tiles, exp_tile, ...)
    unpack_bytes: int = 0
    matmul_unpack_bytes: int = 0                    # the part of unpack_bytes that feeds matmul_tiles
    pack_bytes: int = 0
    pack_l1_acc_bytes: int = 0                      # the part of pack_bytes packed with L1 accumulation
    dram_read_bytes: int = 0
    dram_write_bytes: int = 0
    noc_in_bytes: int = 0
    noc_out_bytes: int = 0

    @property
    def matmul_tiles(self) -> int:
        return self.ops.get("matmul_tiles", 0)

    @property
    def packs(self) -> int:
        return self.ops.get("pack_tile", 0)


# ---- cost ---------------------------------------------------------------------------------------------------
def core_cycles(work: CoreWork, arch: str, fidelity: str) -> dict[str, float]:
    """Cycles of each engine of one core: fpu, sfpu, unpack, pack, noc."""
    perf = get_perf(arch)
    fpu = sfpu = 0.0
    for op, n in work.ops.items():
        spec = CALLS.get(op)
        unit = spec.unit if spec is not None else None
        if op == "matmul_tiles":
            fpu += n * FPU_CYCLES_PER_TILE_MATMUL[fidelity] / perf.fpu_efficiency
        elif unit == "fpu":
            phases = FIDELITY_PHASES[fidelity] if op == "mul_tiles" else 1
            fpu += n * perf.eltwise_cycles_per_tile * phases
        elif unit == "sfpu":
            sfpu += n * SFPU_CYCLES.get(op, perf.sfpu_cycles_per_tile)
    pack = work.pack_bytes + (perf.pack_l1_acc_cost - 1.0) * work.pack_l1_acc_bytes
    return {"fpu": fpu, "sfpu": sfpu, "unpack": work.unpack_bytes / perf.unpack_bytes_per_cycle,
            "pack": pack / perf.pack_bytes_per_cycle,
            "noc": max(work.noc_in_bytes, work.noc_out_bytes) / perf.noc_bytes_per_cycle}


def evaluate(works: list[CoreWork], arch: str, fidelity: str, source: str) -> dict:
    """The model of one launch from per-core work: seconds, tflops, bound, and the terms behind them."""
    perf = get_perf(arch)
    if not works:
        raise ValueError("no per-core work to model")
    terms = {"fpu": 0.0, "sfpu": 0.0, "unpack": 0.0, "pack": 0.0, "noc": 0.0}
    critical, critical_s = None, -1.0
    for w in works:
        c = core_cycles(w, arch, fidelity)
        c_math = c["fpu"] + c["sfpu"]
        core_s = max(c_math, c["unpack"], c["pack"], c["noc"]) / perf.clock_hz
        for k in terms:
            terms[k] = max(terms[k], c[k] / perf.clock_hz)
        if core_s > critical_s:
            critical, critical_s = (w, c), core_s
    dram_bytes = sum(w.dram_read_bytes + w.dram_write_bytes for w in works)
    dram_s = dram_bytes / perf.dram_bw_interleaved
    w, c = critical
    candidates = {"noc": c["noc"], "unpack": c["unpack"], "pack": c["pack"],
                  "fpu" if c["fpu"] >= c["sfpu"] else "sfpu": c["fpu"] + c["sfpu"]}
    core_bound = max(candidates, key=candidates.get)
    seconds = max(critical_s, dram_s)
    bound = "dram" if dram_s > critical_s else core_bound
    matmuls = sum(x.matmul_tiles for x in works)
    model = {
        "label": LABEL, "arch": arch, "math_fidelity": fidelity, "counts_from": source,
        "seconds": seconds, "bound": bound,
        "tflops": matmuls * TILE_MATMUL_FLOPS / seconds / 1e12 if matmuls and seconds > 0 else None,
        "critical_core": list(w.core), "critical_core_seconds": critical_s,
        "terms_seconds": {**{k: v for k, v in terms.items()}, "dram": dram_s},
        "dram_bytes": dram_bytes, "dram_read_bytes": sum(x.dram_read_bytes for x in works),
        "dram_write_bytes": sum(x.dram_write_bytes for x in works),
        "matmul_tiles": matmuls, "cores": len(works),
        "rates": {"clock_hz": perf.clock_hz, "dram_bw": perf.dram_bw_interleaved,
                  "noc_bytes_per_cycle": perf.noc_bytes_per_cycle,
                  "fpu_cycles_per_tile_matmul": FPU_CYCLES_PER_TILE_MATMUL[fidelity],
                  "unpack_bytes_per_cycle": perf.unpack_bytes_per_cycle,
                  "pack_bytes_per_cycle": perf.pack_bytes_per_cycle,
                  "pack_l1_acc_cost": perf.pack_l1_acc_cost},
        "not_modelled": "launch/dispatch, NoC congestion between cores, DRAM bank hot spots, CB stalls",
    }
    return model


def summary(model: dict) -> str:
    """One line for humans (CLI, main job)."""
    if "error" in model:
        return f"{model['label']}: unavailable ({model['error']})"
    t = model["terms_seconds"]
    tf = f", {model['tflops']:.2f} TFLOPS" if model.get("tflops") else ""
    return (f"{model['label']} on {model['arch']} at {model['math_fidelity']}: {model['seconds'] * 1e6:.1f} us{tf}, "
            f"bound: {model['bound']} (fpu {t['fpu'] * 1e6:.1f}, unpack {t['unpack'] * 1e6:.1f}, "
            f"pack {t['pack'] * 1e6:.1f}, sfpu {t['sfpu'] * 1e6:.1f}, noc {t['noc'] * 1e6:.1f}, "
            f"dram {t['dram'] * 1e6:.1f} us; {model['dram_bytes'] / 1e6:.2f} MB DRAM; counts: {model['counts_from']})")


# ---- static per-core counts from tt.program.txt ------------------------------------------------------------
class StaticCountError(Exception):
    """The program text holds something the static walk cannot count (e.g. a symbolic trip count)."""


@dataclass
class _Node:
    text: str
    children: list = field(default_factory=list)


def _parse_program(text: str) -> dict[str, list[_Node]]:
    """``tt.program.txt`` -> {role: body} as a tree of lines by indentation."""
    kernels: dict[str, list[_Node]] = {}
    stack: list[tuple[int, list]] = []
    for raw in text.splitlines():
        if not raw.strip() or raw.startswith("#") or raw.startswith("cb "):
            continue
        m = re.match(r"^kernel (\w+):$", raw)
        if m:
            kernels[m.group(1)] = []
            stack = [(0, kernels[m.group(1)])]
            continue
        if not stack:
            raise StaticCountError(f"unexpected line outside a kernel: {raw!r}")
        indent = (len(raw) - len(raw.lstrip(" "))) // 2
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if not stack:
            raise StaticCountError(f"bad indentation: {raw!r}")
        node = _Node(raw.strip().split("  # ", 1)[0])
        stack[-1][1].append(node)
        stack.append((indent, node.children))
    return kernels


def _ternaries(text: str) -> str:
    """C++ ``(c ? a : b)`` (as cexpr prints it: each inside its own parentheses) as Python ``(a if c else b)``."""
    while "?" in text:
        q = text.index("?")
        depth, open_ = 0, q
        while open_ > 0:                       # the parenthesis that encloses the '?'
            open_ -= 1
            depth += {")": 1, "(": -1}.get(text[open_], 0)
            if depth < 0:
                break
        depth, colon, close = 0, None, q
        for close in range(q + 1, len(text)):  # the ':' at the '?''s depth, then the closing parenthesis
            ch = text[close]
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0 and ch == ":" and colon is None:
                colon = close
            if depth < 0:
                break
        if colon is None:
            raise StaticCountError(f"cannot read the conditional in `{text}`")
        cond, yes, no = text[open_ + 1:q], text[q + 1:colon], text[colon + 1:close]
        text = f"{text[:open_]}(({yes}) if ({cond}) else ({no})){text[close + 1:]}"
    return text


def _py_expr(text: str) -> str:
    text = re.sub(r"\b(\d+)u\b", r"\1", text)
    return _ternaries(re.sub(r"(?<![/])/(?![/])", "//", text))


@functools.lru_cache(maxsize=4096)
def _compiled(text: str) -> tuple:
    """An expression of tt.program.txt as Python code, and what _eval checks, in ast.walk order: a name it reads
    (str) or a node it cannot evaluate (None). Cached: every emulator run models its artifact again."""
    tree = ast.parse(_py_expr(text), mode="eval")
    checks = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in ("min", "max"):
            checks.append(node.id)
        if not isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Constant, ast.Load, ast.Call,
                                 ast.operator, ast.unaryop, ast.IfExp, ast.Compare, ast.cmpop)):
            checks.append(None)
    return compile(tree, "<tt.program>", "eval"), tuple(checks)


def _eval(text: str, env: dict) -> int:
    code, checks = _compiled(text)
    for name in checks:
        if name is None:
            raise StaticCountError(f"cannot evaluate `{text}`")
        if name not in env:
            raise StaticCountError(f"{name} is not known before the run (in `{text}`)")
    return int(eval(code, {"__builtins__": {}, "min": min, "max": max}, dict(env)))


def _split_args(argtext: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in argtext:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch in "(["
        depth -= ch in ")]"
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


_FOR = re.compile(r"^for (\w+) in \[(.+), (.+)\):")
_LET = re.compile(r"^let (\w+) = (.+)$")
_CALL = re.compile(r"^(\w+)\((.*)\)$")


def _names(text: str) -> set[str]:
    return set(re.findall(r"\b[A-Za-z_]\w*\b", text))


def _extent_names(body: list[_Node], lets: dict[str, str]) -> set[str]:
    """Names the trip counts inside ``body`` depend on (through lets, transitively)."""
    names: set[str] = set()
    for n in body:
        m = _FOR.match(n.text)
        if m:
            names |= _names(m.group(2)) | _names(m.group(3))
            names |= _extent_names(n.children, lets)
        lm = _LET.match(n.text)
        if lm:
            lets[lm.group(1)] = lm.group(2)
    changed = True
    while changed:
        changed = False
        for name in list(names):
            if name in lets and not _names(lets[name]) <= names:
                names |= _names(lets[name])
                changed = True
    return names


class _Counter:
    def __init__(self, cb_pages: dict[str, int], tensors: dict[str, dict]):
        self.cb_pages, self.tensors = cb_pages, tensors
        self.mcast_axis: dict[str, str] = {}   # multicast group -> "row" | "column" (plan "multicast")
        self.l1_acc = False                      # pack_reconfig_l1_acc state, in program order

    def count(self, body: list[_Node], env: dict, work: CoreWork, mult: int, lets: dict | None = None) -> None:
        lets = dict(lets or {})
        for n in body:
            m = _FOR.match(n.text)
            if m:
                var, lo, hi = m.groups()
                lo_v, hi_v = _eval(lo, env), _eval(hi, env)
                if hi_v <= lo_v:
                    continue
                if var in _extent_names(n.children, dict(lets)):
                    for v in range(lo_v, hi_v):
                        self.count(n.children, {**env, var: v}, work, mult, lets)
                else:
                    self.count(n.children, env, work, mult * (hi_v - lo_v), lets)
                continue
            lm = _LET.match(n.text)
            if lm:
                lets[lm.group(1)] = lm.group(2)
                try:
                    env = {**env, lm.group(1): _eval(lm.group(2), env)}
                except StaticCountError:
                    pass    # depends on a loop variable that no trip count needs
                continue
            cm = _CALL.match(n.text)
            if not cm:
                raise StaticCountError(f"unrecognised program line: {n.text!r}")
            self.call(cm.group(1), _split_args(cm.group(2)), env, work, mult)

    def call(self, op: str, args: list[str], env: dict, work: CoreWork, mult: int) -> None:
        if op in ("read_tiles", "write_tiles", "read_tiles_window", "write_tiles_window", "read_tiles_mcast"):
            tensor = self.tensors[args[1].removeprefix("tensor:")]
            nbytes = mult * _eval(args[4], env) * _eval(args[5], env) * tensor["page_size"]
            if op.endswith("_window"):     # only the window's elements move
                nbytes = nbytes * _eval(args[7], env) * _eval(args[9], env) // 1024
            dram = tensor["placement"] == "DRAM"
            if op == "read_tiles_mcast":   # only the group's sender (lattice column / row 0) reads from DRAM
                y, x = work.core
                sender = (x if self.mcast_axis[args[6]] == "row" else y) == 0
                if sender:      # it reads the block and writes it once into the NoC for the whole group
                    work.noc_in_bytes += nbytes
                    work.noc_out_bytes += nbytes
                    work.dram_read_bytes += nbytes if dram else 0
                return          # a receiver issues no transfer: the block lands in its L1
            if op.startswith("read_tiles"):
                work.noc_in_bytes += nbytes
                work.dram_read_bytes += nbytes if dram else 0
            else:
                work.noc_out_bytes += nbytes
                work.dram_write_bytes += nbytes if dram else 0
            return
        spec = CALLS.get(op)
        if op == "pack_reconfig_l1_acc":
            self.l1_acc = _eval(args[0], env) != 0
        elif op == "pack_tile":
            nbytes = mult * self.cb_pages[args[1].removeprefix("cb:")]
            work.ops[op] += mult
            work.pack_bytes += nbytes
            work.pack_l1_acc_bytes += nbytes if self.l1_acc else 0
        elif op == "matmul_block":    # rt x ct tile matmuls, unpacking rt in0 tiles and ct in1 tiles
            ct, rt = _eval(args[6], env), _eval(args[7], env)
            pages = [self.cb_pages[a.removeprefix("cb:")] for a in args[:2]]
            nbytes = mult * (rt * pages[0] + ct * pages[1])
            work.ops["matmul_tiles"] += mult * rt * ct
            work.unpack_bytes += nbytes
            work.matmul_unpack_bytes += nbytes
        elif spec is not None and spec.kind == "op":
            nbytes = mult * sum(self.cb_pages[a.removeprefix("cb:")] for a in args if a.startswith("cb:"))
            work.ops[op] += mult
            work.unpack_bytes += nbytes
            work.matmul_unpack_bytes += nbytes if op == "matmul_tiles" else 0


def _core_env(plan: dict, entry: dict) -> dict:
    env = {k: v for k, v in entry.items() if k != "core" and isinstance(v, int)}
    env.update({k: v for k, v in plan["schedule"].get("common_args", {}).items() if isinstance(v, int)})
    return env


def static_work(artifact_dir: Path, plan: dict | None = None) -> list[CoreWork]:
    """Per-core work of the artifact, counted from ``tt.program.txt`` and the plan's mapping (no emulator)."""
    artifact_dir = Path(artifact_dir)
    plan = plan or json.loads((artifact_dir / "tt.plan.json").read_text())
    path = artifact_dir / "tt.program.txt"
    if not path.is_file():
        raise StaticCountError(f"{path} does not exist")
    if plan["schedule"].get("dynamic") or not plan["mapping"]:
        raise StaticCountError("the schedule is computed at launch (symbolic shapes)")
    # every emulate() models its run from these counts: counted once per (program, plan), copied per caller
    works = _static_work(path.read_text(), json.dumps(plan, sort_keys=True))
    return [dataclasses.replace(w, ops=Counter(w.ops)) for w in works]


@functools.lru_cache(maxsize=16)
def _static_work(program: str, plan_text: str) -> tuple[CoreWork, ...]:
    plan = json.loads(plan_text)
    kernels = _parse_program(program)
    counter = _Counter({cb["name"]: cb["page_size"] for cb in plan["cbs"]},
                       {b["name"]: b for b in plan["buffers"]})
    counter.mcast_axis = {g["name"]: g["axis"] for g in plan.get("multicast", {}).get("groups", [])}
    cache: dict[tuple, CoreWork] = {}
    works = []
    names = set().union(*(_extent_names(body, {}) for body in kernels.values()))
    for entry in plan["mapping"]:
        env = _core_env(plan, entry)
        key = tuple((k, v) for k, v in sorted(env.items()) if k in names)   # cores alike in every trip count
        if counter.mcast_axis:   # and in their multicast roles
            key += (("mcast_senders", entry["core"][0] == 0, entry["core"][1] == 0),)
        if key not in cache:
            w = CoreWork(core=tuple(entry["core"]))
            for body in kernels.values():
                counter.count(body, env, w, 1)
            cache[key] = w
        proto = cache[key]
        works.append(dataclasses.replace(proto, core=tuple(entry["core"]), ops=Counter(proto.ops)))
    return tuple(works)


# ---- per-core counts from the emulator's counters -----------------------------------------------------------
def _scaled(counter: Counter, factor: float) -> Counter:
    return Counter({k: v * factor for k, v in counter.items()})


def counter_work(plan: dict, report: dict, static: list[CoreWork] | None = None) -> list[CoreWork]:
    """Per-core work from a run report's counters. The counters say how many matmul_tiles, other tile ops and
    packs ran, not which ops nor how many bytes each moved: that breakdown comes from the static counts of the
    same core scaled to the counters, or else from the plan's CB page sizes (other tile ops costed as copies)."""
    by_core = {tuple(w.core): w for w in static or []}
    in_page = max([cb["page_size"] for cb in plan["cbs"] if "reader" in cb["producer"]] or [2048])
    out_page = max([cb["page_size"] for cb in plan["cbs"] if "writer" in cb["consumer"]] or [2048])
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
            w.pack_bytes = s.pack_bytes * packs / s.packs if s.packs else packs * out_page
            w.pack_l1_acc_bytes = s.pack_l1_acc_bytes * packs / s.packs if s.packs else 0
        else:
            w.ops = Counter({"copy_tile": other}) if other else Counter()
            w.matmul_unpack_bytes = 2 * mm * in_page
            w.unpack_bytes = w.matmul_unpack_bytes + other * in_page
            w.pack_bytes = packs * out_page
        if mm:
            w.ops["matmul_tiles"] = mm
        if packs:
            w.ops["pack_tile"] = packs
        works.append(w)
    return works


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


def model_for_artifact(artifact_dir: Path, plan: dict | None = None) -> dict:
    """The compile-time model (static counts); never raises: an unmodelable kernel gets ``error``."""
    artifact_dir = Path(artifact_dir)
    plan = plan or json.loads((artifact_dir / "tt.plan.json").read_text())
    arch = plan["device"]["arch"]
    try:
        works = static_work(artifact_dir, plan)
    except (StaticCountError, KeyError, ValueError, SyntaxError) as err:
        return {"label": LABEL, "arch": arch, "error": f"static counts unavailable: {err}; run the kernel "
                                                      "(protocol_only=True is enough) for a counter-based model"}
    return _with_saving(evaluate(works, arch, plan_fidelity(plan), "static (tt.program.txt x plan mapping)"), plan)


def model_for_run(artifact_dir: Path, plan: dict, report: dict) -> dict:
    """The model of a run: DRAM/NoC bytes and tile-op counts from the emulator's per-core counters."""
    arch = plan["device"]["arch"]
    try:
        static = static_work(artifact_dir, plan)
    except (StaticCountError, KeyError, ValueError, SyntaxError):
        static = None
    try:
        works = counter_work(plan, report, static)
    except (KeyError, TypeError):     # a report without the emulator's per-core counters (e.g. a device run)
        works = []
    if not works:
        return model_for_artifact(artifact_dir, plan)
    return _with_saving(evaluate(works, arch, plan_fidelity(plan), "emulator counters" + (
        " (protocol-only run)" if report.get("protocol_only") else "")), plan)


def protocol_run(artifact_dir: Path, plan: dict | None = None) -> dict:
    """Run the artifact on tt-sim in protocol-only mode (zero inputs, no math) and model it from the counters."""
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
    result = emulator.run(artifact_dir, plan, tensors, protocol_only=True, backend="sim")
    return model_for_run(artifact_dir, plan, result.report) | {"run_report_total": result.report.get("total", {})}


# ---- the published reference kernel (for checking the model against PERF_ANCHORS) --------------------------
def mcast_2d_gemm_work(M: int, N: int, K: int, grid: tuple[int, int], tile_bytes: int = 2048,
                       subblock: tuple[int, int] = (4, 2)) -> list[CoreWork]:
    """Per-core work of tt-metal's 2-D multicast matmul (``matmul_multicore_reuse_mcast``) as PERF_ANCHORS
    sec. 7-8 describe it: each of gy x gx cores owns one (Mt/gy) x (Nt/gx) output block, A and B are read from
    DRAM once and multicast (R_A = R_B = 1), C is written once; ``matmul_block`` with an h x w output subblock
    unpacks h A tiles and w B tiles per h*w tile-MACs."""
    gy, gx = grid
    mt, nt, kt = -(-M // TILE), -(-N // TILE), -(-K // TILE)
    bm, bn = -(-mt // gy), -(-nt // gx)
    h, w = subblock
    macs = bm * bn * kt
    works = []
    for y in range(gy):
        for x in range(gx):
            works.append(CoreWork(
                (y, x), Counter({"matmul_tiles": macs, "pack_tile": bm * bn}),
                unpack_bytes=round(macs * tile_bytes * (h + w) / (h * w)),
                matmul_unpack_bytes=round(macs * tile_bytes * (h + w) / (h * w)), pack_bytes=bm * bn * tile_bytes,
                dram_read_bytes=(mt * kt + kt * nt) * tile_bytes // (gy * gx),
                dram_write_bytes=mt * nt * tile_bytes // (gy * gx),
                noc_in_bytes=(bm + bn) * kt * tile_bytes, noc_out_bytes=bm * bn * tile_bytes))
    return works
