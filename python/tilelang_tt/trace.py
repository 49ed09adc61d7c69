"""The performance model's per-core schedule as a timeline: a Chrome trace (the trace-event JSON that Perfetto,
https://ui.perfetto.dev, and chrome://tracing open) and an SVG picture of it.

Modeled, not measured: the trace lays out the terms ``perf_model`` prices, nothing else. One process is the chip;
each core of the plan's mapping has three threads, ``(y,x) reader``, ``(y,x) compute`` and ``(y,x) writer``
(the data-movement kernels and the compute kernel), and thread 0, ``kernel``, holds the launch and the DRAM
traffic of the whole launch. Per core, in the model's order:

* ``launch`` on each of its threads (``PerfProfile.launch_seconds``);
* ``fill``: the first step of the slowest feeding kernel (one barrier or one handshake's share of its time), on
  that kernel's thread; compute starts after it;
* the steady state (``perf_model.steady_cycles``: the slowest of compute and the two data-movement kernels), in
  one slot per block of the core's mapping entry (``count``; more than ``MAX_SLOTS`` blocks are shown in
  ``MAX_SLOTS`` slots of consecutive blocks). The model charges each engine its total, not block by block, so a
  slot gets each engine's total times its share of the blocks and lasts as long as the slowest share: the reader
  and compute start at the slot's start (double-buffered CBs: the read of a block overlaps the compute of the one
  before, which ``fill`` accounts for), the writer ends at its end. ``compute`` carries the unpack, math and pack
  threads' times as args (they overlap: compute is their maximum); a data-movement phase holds, as nested slices,
  its NoC transfers and its waits: read and write barriers (a NoC round trip each) and multicast handshakes;
* ``drain``: the last output batch and its barrier, on the writer's thread.

A core's threads end at launch + its modeled time; the ``kernel`` thread's ``DRAM`` slice ends at launch + all
DRAM bytes / the interleaved bandwidth, and a counter track shows the modeled DRAM bandwidth in use. The last
event ends at the model's kernel time (``launch + max(slowest core, DRAM)``). Output is deterministic: events
sorted, times in microseconds rounded to 0.1 ns.
"""

from __future__ import annotations

import json
from pathlib import Path
from xml.sax.saxutils import escape

from . import perf_model
from .device import get_perf

MAX_SLOTS = 16          # block slots drawn per core (consecutive blocks share a slot beyond this)
ROLES = ("reader", "compute", "writer")
_DIGITS = 4             # microseconds rounded to 0.1 ns


def _us(seconds: float) -> float:
    return round(seconds * 1e6, _DIGITS)


class _Events:
    def __init__(self):
        self.events: list[dict] = []

    def slice(self, tid: int, name: str, cat: str, start_s: float, end_s: float, args: dict | None = None,
              depth: int = 0) -> None:
        """A complete event; ``depth`` 1 for a slice nested in another (sorted after its parent)."""
        ts, end = _us(start_s), _us(end_s)
        if end <= ts:
            return
        event = {"ph": "X", "pid": 0, "tid": tid, "name": name, "cat": cat, "ts": ts, "dur": round(end - ts, _DIGITS),
                 "_depth": depth}
        if args:
            event["args"] = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in args.items()}
        self.events.append(event)

    def meta(self, tid: int, name: str, value) -> None:
        key = "sort_index" if name.endswith("sort_index") else "name"
        self.events.append({"ph": "M", "pid": 0, "tid": tid, "name": name, "args": {key: value}})


def _blocks(plan: dict) -> dict[tuple, int]:
    return {tuple(m["core"]): int(m.get("count", 1)) for m in plan.get("mapping", [])}


def _slots(blocks: int) -> list[tuple[int, int]]:
    """(first block, blocks) of each slot."""
    n = max(1, min(blocks, MAX_SLOTS))
    bounds = [k * blocks // n for k in range(n + 1)]
    return [(bounds[k], bounds[k + 1] - bounds[k]) for k in range(n)]


def _fill_drain_roles(roles: dict, c: dict) -> tuple[str | None, str | None]:
    """The data-movement kernel whose first step is the fill, and the one whose last batch is the drain."""
    fill = drain = None
    for role, r in roles.items():
        step = (r["feed"] + r["read_waits"] + r["mcast_waits"]) / max(1, r["reads"], r["mcasts"])
        if fill is None and c["fill"] and step == c["fill"]:
            fill = role
        if drain is None and c["drain"] and (r["out"] + r["write_waits"]) / max(1, r["writes"]) == c["drain"]:
            drain = role
    return fill, drain


_PARTS = (("feed", "NoC read", "noc"), ("read_waits", "read barrier", "wait"),
          ("mcast_waits", "multicast handshake", "mcast"), ("out", "NoC write", "noc"),
          ("write_waits", "write barrier", "wait"))


def _movement(ev: _Events, tid: int, role: str, r: dict, work, start_s: float, frac: float, hz: float,
              blocks: str) -> None:
    """A data-movement kernel's share of a slot, from ``start_s``: its NoC transfers and waits, nested."""
    total = r["total"] * frac / hz
    feed_bytes, out_bytes = work.feed_bytes[role] * frac, work.out_bytes[role] * frac
    ev.slice(tid, "read" if role == "reader" else "write", "phase", start_s, start_s + total,
             {"blocks": blocks, "bytes_in": feed_bytes, "bytes_out": out_bytes,
              "read_barriers": r["reads"] * frac, "write_barriers": r["writes"] * frac,
              "mcast_handshakes": r["mcasts"] * frac})
    parts = [(name, cat, r[key] * frac / hz) for key, name, cat in _PARTS if r[key]]
    t = start_s
    for k, (name, cat, d) in enumerate(parts):     # the last part ends where the phase does (no rounding gap)
        end = start_s + total if k == len(parts) - 1 else t + d
        ev.slice(tid, name, cat, t, end, depth=1)
        t = end


def _core(ev: _Events, base: int, work, blocks: int, c: dict, roles: dict, perf, launch_s: float) -> None:
    hz = perf.clock_hz
    tids = {role: base + i for i, role in enumerate(ROLES)}
    for tid in tids.values():
        ev.slice(tid, "launch", "launch", 0.0, launch_s)
    fill_role, drain_role = _fill_drain_roles(roles, c)
    t0 = launch_s
    if fill_role:
        ev.slice(tids[fill_role], "fill", "fill", t0, t0 + c["fill"] / hz, {"what": "first step before compute"})
    start = t0 + c["fill"] / hz
    steady = perf_model.steady_cycles(c)
    math_c = c["fpu"] + c["sfpu"]
    compute = max(math_c, c["unpack"], c["pack"])
    engine = max((("math", math_c), ("unpack", c["unpack"]), ("pack", c["pack"])), key=lambda kv: kv[1])[0]
    for first, n in _slots(blocks):
        frac = n / blocks
        s0 = start + steady * first / blocks / hz
        s1 = start + steady * (first + n) / blocks / hz
        label = str(first) if n == 1 else f"{first}..{first + n - 1}"
        ev.slice(tids["compute"], "compute", "phase", s0, s0 + compute * frac / hz,
                 {"blocks": label, "unpack_us": c["unpack"] * frac / hz * 1e6, "math_us": math_c * frac / hz * 1e6,
                  "pack_us": c["pack"] * frac / hz * 1e6, "slowest": engine,
                  "tile_ops": {k: v * frac for k, v in sorted(work.ops.items())}})
        _movement(ev, tids["reader"], "reader", roles["reader"], work, s0, frac, hz, label)
        _movement(ev, tids["writer"], "writer", roles["writer"], work, s1 - roles["writer"]["total"] * frac / hz,
                  frac, hz, label)
    end = start + steady / hz
    if drain_role:
        ev.slice(tids[drain_role], "drain", "drain", end, end + c["drain"] / hz, {"what": "last output batch"})


def build(works: list, plan: dict, arch: str, fidelity: str, source: str, perf=None) -> dict:
    """The trace (``{"traceEvents": [...], "otherData": {...}}``) of the model of ``works`` (``perf_model.CoreWork``
    per core) under ``plan``; ``otherData.model`` is ``perf_model.evaluate`` of the same works."""
    perf = perf or get_perf(arch)
    model = perf_model.evaluate(works, arch, fidelity, source, perf)
    blocks = _blocks(plan)
    ev = _Events()
    ev.meta(0, "process_name", f"{plan.get('kernel', 'kernel')} on {arch} (modeled, not measured)")
    ev.meta(0, "thread_name", "kernel")
    ev.meta(0, "thread_sort_index", 0)
    launch_s = perf.launch_seconds
    ev.slice(0, "launch", "launch", 0.0, launch_s, {"launch_s": launch_s})
    dram_s = model["terms_seconds"]["dram"]
    ev.slice(0, "DRAM", "dram", launch_s, launch_s + dram_s,
             {"bytes": model["dram_bytes"], "GB_per_s": perf.dram_bw_interleaved / 1e9})
    busy_s = model["seconds"] - launch_s
    ev.events.append({"ph": "C", "pid": 0, "tid": 0, "name": "DRAM GB/s", "ts": 0.0, "args": {"used": 0.0}})
    ev.events.append({"ph": "C", "pid": 0, "tid": 0, "name": "DRAM GB/s", "ts": _us(launch_s),
                      "args": {"used": round(model["dram_bytes"] / busy_s / 1e9, 3) if busy_s > 0 else 0.0}})
    ev.events.append({"ph": "C", "pid": 0, "tid": 0, "name": "DRAM GB/s", "ts": _us(model["seconds"]),
                      "args": {"used": 0.0}})
    costed: dict[tuple, tuple] = {}
    cores = sorted(works, key=lambda w: tuple(w.core))
    for i, w in enumerate(cores):
        key = w.signature()
        if key not in costed:
            costed[key] = (perf_model.core_cycles(w, arch, fidelity, perf), perf_model.role_cycles(w, perf))
        c, roles = costed[key]
        base = 1 + len(ROLES) * i
        y, x = w.core
        for j, role in enumerate(ROLES):
            ev.meta(base + j, "thread_name", f"({y},{x}) {role}")
            ev.meta(base + j, "thread_sort_index", base + j)
        _core(ev, base, w, max(1, blocks.get(tuple(w.core), 1)), c, roles, perf, launch_s)
    ev.events.sort(key=lambda e: (e["ph"] != "M", e["tid"], e.get("ts", 0.0), -e.get("dur", 0.0), e.get("_depth", 0),
                                  e["name"]))
    for e in ev.events:
        e.pop("_depth", None)
    other = {"label": perf_model.LABEL, "kernel": plan.get("kernel"), "arch": arch, "math_fidelity": fidelity,
             "counts_from": source, "kernel_us": _us(model["seconds"]), "bound": model["bound"],
             "critical_core": model["critical_core"], "layout": "see tilelang_tt/trace.py"}
    return {"traceEvents": ev.events, "displayTimeUnit": "ns", "otherData": other}


def trace_for_artifact(artifact_dir, plan: dict | None = None, report: dict | None = None) -> dict:
    """The trace of an artifact's model: of its run when ``report`` (an emulator run report) has per-core
    counters, else of its program (static counts; raises ``perf_model.StaticCountError`` and the like when the
    program cannot be counted, as ``perf_model.modeled_work``)."""
    artifact_dir = Path(artifact_dir)
    plan = plan or json.loads((artifact_dir / "tt.plan.json").read_text())
    works, source = perf_model.modeled_work(artifact_dir, plan, report)
    return build(works, plan, plan["device"]["arch"], perf_model.plan_fidelity(plan), source)


def dumps(trace: dict) -> str:
    return json.dumps(trace, sort_keys=True, separators=(",", ":")) + "\n"


def write(trace: dict, path, what: str = "--trace") -> Path:
    """Write the trace as JSON at ``path``: a new file, or one tilelang-tt wrote there (``artifact.write_output_file``:
    never a user's file)."""
    from .artifact import write_output_file

    return write_output_file(Path(path), dumps(trace), what)


# ---- a picture ------------------------------------------------------------------------------------------------
COLORS = {"launch": "#b0b0b0", "fill": "#f2c14e", "drain": "#f2994e", "compute": "#4e79a7", "read": "#d9e6d3",
          "write": "#e6efe1", "NoC read": "#59a14f",
          "NoC write": "#8cd17d", "read barrier": "#e15759", "write barrier": "#ff9d9a",
          "multicast handshake": "#b07aa1", "DRAM": "#76b7b2"}


def render_svg(trace: dict, max_cores: int = 64, width: int = 960) -> str:
    """The trace drawn as SVG: a row per core (its reader, compute and writer lanes), the kernel's DRAM row on top,
    a time axis in microseconds and a legend. Only the first ``max_cores`` cores are drawn."""
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    end = max(e["ts"] + e["dur"] for e in events)
    left, lane, gap, top = 120, 4, 3, 40
    tids = sorted(t for t in names if t)[:max_cores * len(ROLES)]
    rows = {0: top}
    for k, tid in enumerate(tids):
        rows[tid] = top + 2 * lane + gap + (k // len(ROLES)) * (len(ROLES) * lane + gap) + (k % len(ROLES)) * lane
    height = (max(rows.values()) if tids else top) + lane + 60
    scale = (width - left - 20) / end
    out = []
    for e in events:
        if e["tid"] not in rows or e["name"] not in COLORS:
            continue
        h = 2 * lane if e["tid"] == 0 else lane
        out.append(f'<rect x="{left + e["ts"] * scale:.2f}" y="{rows[e["tid"]]}" '
                   f'width="{max(e["dur"] * scale, 0.3):.2f}" height="{h}" fill="{COLORS[e["name"]]}"/>')
    for k in range(0, len(tids), len(ROLES)):
        label = names[tids[k]].rsplit(" ", 1)[0]
        if (k // len(ROLES)) % 8 == 0:
            out.append(f'<text x="{left - 6}" y="{rows[tids[k]] + 2 * lane}" text-anchor="end" font-size="9">'
                       f'core {escape(label)}</text>')
    out.append(f'<text x="{left - 6}" y="{top + 2 * lane - 1}" text-anchor="end" font-size="9">DRAM</text>')
    axis = height - 48
    step = _tick(end)
    t = 0.0
    while t <= end + 1e-9:
        x = left + t * scale
        out.append(f'<line x1="{x:.2f}" y1="{top - 4}" x2="{x:.2f}" y2="{axis}" stroke="#ddd" stroke-width="0.5"/>')
        out.append(f'<text x="{x:.2f}" y="{axis + 12}" text-anchor="middle" font-size="9">{t:g}</text>')
        t += step
    out.append(f'<text x="{left + (width - left - 20) / 2}" y="{axis + 26}" text-anchor="middle" font-size="10">'
               'microseconds (modeled)</text>')
    x = 20
    for name, color in COLORS.items():
        out.append(f'<rect x="{x}" y="{height - 14}" width="9" height="9" fill="{color}"/>'
                   f'<text x="{x + 12}" y="{height - 6}" font-size="9">{escape(name)}</text>')
        x += 12 + 5 * len(name) + 12
    other = trace.get("otherData", {})
    title = (f"{other.get('kernel')} on {other.get('arch')} at {other.get('math_fidelity')}: "
             f"{other.get('kernel_us', end):g} us modeled, bound {other.get('bound')}; lanes per core: reader, "
             "compute, writer")
    out.append(f'<text x="{left}" y="20" font-size="11">{escape(title)}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{int(height)}" '
            f'font-family="sans-serif">\n<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(out)
            + "\n</svg>\n")


def _tick(end: float) -> float:
    """A round axis step giving 5 to 10 ticks over ``end``."""
    step = 10 ** len(str(int(end))) / 10 if end >= 1 else 0.1
    while end / step < 5:
        step /= 2
    return step
