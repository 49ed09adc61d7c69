"""The modeled per-core schedule as a Chrome/Perfetto trace (trace.py, issue 26 item 5): a valid trace-event file,
one thread per kernel role per core of the mapping, each core's slices spanning the model's time of that core, the
last event ending at the model's kernel time; `tilelang-tt model --trace` and `kernel.trace(path)` write it, never
over a user's file."""

import dataclasses
import json
from collections import defaultdict

import pytest
import tilelang
import torch

import tilelang_tt  # noqa: F401
from examples import kernels as K
from tilelang_tt import cli, trace
from tilelang_tt import perf_model as pm
from tilelang_tt.artifact import TTFileError
from tilelang_tt.device import get_perf
from tilelang_tt.runtime import TTKernelCache

PHASES = ("read", "write")
TOL_US = 2e-3        # the trace's times are rounded to 0.1 ns; sums of a few of them stay within this


def _compile(func, **target):
    kernel = tilelang.compile(func, target={"kind": "tt", **target})
    TTKernelCache()._memory_cache.clear()
    return kernel


@pytest.fixture(scope="module")
def gemm():
    """TileLang's example GEMM (B transposed, multicast lattice: senders and receivers cost differently)."""
    return _compile(K.tilelang_example_gemm(256, 256, 256, block_M=64, block_N=64, block_K=32))


@pytest.fixture(scope="module")
def add():
    """An eltwise add with 32 blocks on each of 2 cores: more blocks than trace.MAX_SLOTS."""
    return _compile(K.elementwise_add(256, 256, "float32"), max_cores=2)


def _parts(tr):
    """(thread names by tid, slices by tid) of a trace."""
    names = {e["tid"]: e["args"]["name"] for e in tr["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    slices = defaultdict(list)
    for e in tr["traceEvents"]:
        if e["ph"] == "X":
            slices[e["tid"]].append(e)
    return names, slices


def _end(events):
    return max(e["ts"] + e["dur"] for e in events)


def _top_level(events):
    """The slices of one thread that no other slice of it contains."""
    return [e for e in events if not any(o is not e and _inside(e, o) for o in events)]


def _inside(e, o, slack=1e-6):
    """Slice ``e`` nested in slice ``o`` (times are rounded: sums of them are compared with some slack; a phase
    with a single part holds a slice as long as itself)."""
    longer = o["dur"] > e["dur"] or (o["name"] in PHASES and e["name"] not in PHASES)
    return o["ts"] <= e["ts"] + slack and e["ts"] + e["dur"] <= o["ts"] + o["dur"] + slack and longer


def _model_of(kernel):
    works, source = pm.modeled_work(kernel.artifact_dir, kernel.plan)
    arch = kernel.plan["device"]["arch"]
    return works, pm.evaluate(works, arch, pm.plan_fidelity(kernel.plan), source)


@pytest.mark.parametrize("which", ["gemm", "add"])
def test_trace_lays_out_the_model(which, request):
    kernel = request.getfixturevalue(which)
    plan, arch = kernel.plan, kernel.plan["device"]["arch"]
    perf = get_perf(arch)
    tr = json.loads(trace.dumps(kernel.trace()))          # valid JSON, as written
    assert isinstance(tr["traceEvents"], list) and tr["otherData"]["label"] == pm.LABEL
    for e in tr["traceEvents"]:
        assert e["ph"] in ("M", "X", "C") and e["pid"] == 0 and isinstance(e["tid"], int) and "name" in e
        if e["ph"] == "X":
            assert e["ts"] >= 0 and e["dur"] > 0 and isinstance(e["name"], str)
    names, slices = _parts(tr)
    roles = ("reader", "compute", "writer")
    expected = {f"({m['core'][0]},{m['core'][1]}) {r}" for m in plan["mapping"] for r in roles}
    assert sorted(names.values()) == sorted(expected | {"kernel"})
    by_name = {n: t for t, n in names.items()}

    works, model = _model_of(kernel)
    launch_us = perf.launch_seconds * 1e6
    blocks = {tuple(m["core"]): m["count"] for m in plan["mapping"]}
    fidelity = pm.plan_fidelity(plan)
    for w in works:
        y, x = w.core
        tids = [by_name[f"({y},{x}) {r}"] for r in roles]
        c = pm.core_cycles(w, arch, fidelity, perf)
        core_us = pm.core_seconds(c, perf) * 1e6
        # the core's span: from 0 (its launch) to launch + the model's time of this core
        assert min(e["ts"] for t in tids for e in slices[t]) == 0.0
        assert _end([e for t in tids for e in slices[t]]) == pytest.approx(launch_us + core_us, abs=TOL_US)
        # the compute thread's phases sum to the compute kernel's modeled time; one phase per block (or slot)
        phases = [e for e in slices[tids[1]] if e["name"] == "compute"]
        assert len(phases) == min(blocks[w.core], trace.MAX_SLOTS)
        compute_us = max(c["fpu"] + c["sfpu"], c["unpack"], c["pack"]) / perf.clock_hz * 1e6
        assert sum(e["dur"] for e in phases) == pytest.approx(compute_us, abs=TOL_US)
        # each data-movement thread: its phases sum to its kernel's time, and their nested NoC transfers and waits
        # fill each phase exactly
        for role, tid in (("reader", tids[0]), ("writer", tids[2])):
            total_us = pm.role_cycles(w, perf)[role]["total"] / perf.clock_hz * 1e6
            moves = [e for e in slices[tid] if e["name"] in PHASES]
            assert sum(e["dur"] for e in moves) == pytest.approx(total_us, abs=TOL_US)
            for phase in moves:
                inner = [e for e in slices[tid] if e is not phase and _inside(e, phase)]
                assert sum(e["dur"] for e in inner) == pytest.approx(phase["dur"], abs=TOL_US)
            # a thread's top-level slices do not overlap
            top = sorted(_top_level(slices[tid]), key=lambda e: e["ts"])
            assert all(a["ts"] + a["dur"] <= b["ts"] + 1e-6 for a, b in zip(top, top[1:]))
        waits = {e["name"] for t in tids for e in slices[t]}
        if w.waits["reader:mcast"]:
            assert "multicast handshake" in waits
        if w.waits["reader:read"]:
            assert "read barrier" in waits
    # the last event ends at the kernel's modeled time
    every = [e for es in slices.values() for e in es]
    assert _end(every) == pytest.approx(model["seconds"] * 1e6, abs=TOL_US)
    assert tr["otherData"]["kernel_us"] == pytest.approx(model["seconds"] * 1e6, abs=TOL_US)


def test_a_dram_bound_launch_ends_with_its_dram_traffic(gemm):
    """With DRAM slower than every core, the launch ends when the DRAM traffic does: the kernel thread's DRAM slice
    is the last event, at the model's kernel time; the bandwidth counter reports bytes over that time."""
    works, _ = _model_of(gemm)
    arch = gemm.plan["device"]["arch"]
    slow = dataclasses.replace(get_perf(arch), dram_bw_interleaved=get_perf(arch).dram_bw_interleaved / 50)
    model = pm.evaluate(works, arch, pm.plan_fidelity(gemm.plan), "static", slow)
    assert model["bound"] == "dram"
    tr = trace.build(works, gemm.plan, arch, pm.plan_fidelity(gemm.plan), "static", slow)
    names, slices = _parts(tr)
    every = [e for es in slices.values() for e in es]
    last = max(every, key=lambda e: e["ts"] + e["dur"])
    assert last["name"] == "DRAM" and names[last["tid"]] == "kernel"
    assert _end(every) == pytest.approx(model["seconds"] * 1e6, abs=TOL_US)
    used = [e["args"]["used"] for e in tr["traceEvents"] if e["ph"] == "C"]
    assert max(used) == pytest.approx(slow.dram_bw_interleaved / 1e9, rel=1e-3)


def test_trace_is_deterministic_and_sorted(add):
    a, b = trace.dumps(add.trace()), trace.dumps(add.trace())
    assert a == b
    events = json.loads(a)["traceEvents"]
    timed = [(e["tid"], e["ts"]) for e in events if e["ph"] == "X"]
    assert timed == sorted(timed)


def test_kernel_trace_follows_the_report(add, tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_TT_CACHE_DIR", str(tmp_path / "ttcache"))
    assert add.trace()["otherData"]["counts_from"].startswith("static")
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    add(a, b, torch.empty(256, 256))
    path = tmp_path / "add.json"
    tr = add.trace(path)
    assert tr["otherData"]["counts_from"] == add.report["model"]["counts_from"] == "emulator counters"
    assert json.loads(path.read_text()) == json.loads(trace.dumps(tr))
    assert tr["otherData"]["kernel_us"] == pytest.approx(add.report["model"]["seconds"] * 1e6, abs=TOL_US)
    add.trace(path)                                          # ours: replaced
    path.write_text("mine")
    with pytest.raises(TTFileError, match="changed after tilelang-tt wrote it"):
        add.trace(path)
    assert path.read_text() == "mine"


# ---- the CLI ----------------------------------------------------------------------------------------------------
def _cli(capsys, *argv):
    try:
        rc = cli.main([str(a) for a in argv])
    except SystemExit as stop:
        rc = stop.code
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def _one_line_error(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_cli_model_writes_the_trace(gemm, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TILELANG_TT_CACHE_DIR", str(tmp_path / "ttcache"))
    out, svg = tmp_path / "gemm.json", tmp_path / "gemm.svg"
    rc, stdout, err = _cli(capsys, "model", gemm.artifact_dir, "--trace", out, "--svg", svg)
    assert rc == cli.EXIT_OK and f"wrote {out}" in stdout and f"wrote {svg}" in stdout, err
    tr = json.loads(out.read_text())
    assert tr["otherData"]["kernel_us"] == pytest.approx(gemm.report["model"]["seconds"] * 1e6, abs=TOL_US)
    assert svg.read_text().startswith("<svg") and svg.read_text().count("<rect") > len(gemm.plan["mapping"])
    assert _cli(capsys, "model", gemm.artifact_dir, "--trace", out)[0] == cli.EXIT_OK     # ours: replaced


def test_cli_trace_never_replaces_a_user_file(gemm, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TILELANG_TT_CACHE_DIR", str(tmp_path / "ttcache"))
    mine = tmp_path / "mine.json"
    mine.write_text('{"keep": true}')
    rc, stdout, err = _cli(capsys, "model", gemm.artifact_dir, "--trace", mine)
    assert rc == cli.EXIT_INPUT and "is a file that tilelang-tt did not write" in _one_line_error(err)
    assert mine.read_text() == '{"keep": true}' and stdout == ""
    (tmp_path / "d").mkdir()
    rc, _, err = _cli(capsys, "model", gemm.artifact_dir, "--trace", tmp_path / "d")
    assert rc == cli.EXIT_INPUT and "is a directory" in _one_line_error(err)
    rc, _, err = _cli(capsys, "model", gemm.artifact_dir, "--trace", tmp_path / "missing" / "t.json")
    assert rc == cli.EXIT_INPUT and "cannot write" in _one_line_error(err) and "No such file or directory" in err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "ttcache") == ["d", "mine.json"]
