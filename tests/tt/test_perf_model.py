"""The performance model (perf_model.py): small programs whose modeled time is computed here by hand from the rates
in device.PERF, the calibration on TT's published points (benchmarks/calibration.py, the bound docs/perf_model.md
states), the static counts against the emulator's counters, the report keys, and the math fidelity / fp32
accumulation choice reaching the plan and host.cpp."""

import importlib.util
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import tilelang
import tilelang.language as T
import torch
from tvm import tirx

import tilelang_tt  # noqa: F401
from examples import kernels as K
from tilelang_tt import perf_model as pm
from tilelang_tt import ttir, ttir_json
from tilelang_tt.device import FPU_CYCLES_PER_TILE_MATMUL, PERF
from tilelang_tt.transform.multicast_reuse import multicast_read

ROOT = Path(__file__).resolve().parents[2]
WH = PERF["wormhole_b0"]
TILE_BYTES = 2048


def compiled(func, target="tt"):
    return tilelang.compile(func, target=target)


def zeros(kernel):
    dt = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
    return [torch.zeros(*b["shape"], dtype=dt[b["dtype"]]) for b in kernel.plan["buffers"]]


# ---- small programs, modeled by hand ------------------------------------------------------------------------
def loop(n, *body):
    return ttir.For(tirx.Var("i", "int32"), 0, n, list(body))


def call(op, *args):
    return ttir.Call(op, args)


def plan(cores=((0, 0),), groups=(), cbs=(("a", TILE_BYTES, "Float16_b"), ("b", TILE_BYTES, "Float16_b")),
         placement="DRAM"):
    return {"cbs": [{"name": n, "page_size": p, "format": f} for n, p, f in cbs],
            "buffers": [{"name": n, "page_size": TILE_BYTES, "placement": placement} for n in ("A", "B", "C")],
            # each core's route as TTMulticastReuse writes it: the sender is the row's (column's) first core
            "multicast": {"groups": [{"name": n, "axis": a, "cores": [
                {"is_sender": (c[1] if a == "row" else c[0]) == 0} for c in cores]} for n, a in groups]},
            "mapping": [{"core": list(c)} for c in cores], "schedule": {"common_args": {}}}


def modeled(kernels, the_plan=None, fidelity="HiFi2"):
    works = pm.program_work(kernels, the_plan or plan())
    return works, pm.evaluate(works, "wormhole_b0", fidelity, "test")


def seconds(cycles):
    return WH.launch_seconds + cycles / WH.clock_hz


def test_matmul_tiles_program_by_hand():
    """100 matmul_tiles on bf16 tiles: each unpacks its two tiles; 100 packs. The unpackers bind on wormhole."""
    kernels = {"compute": [loop(100, call("matmul_tiles", ttir.CB("a"), ttir.CB("b"), 0, 0, ttir.Dst(0)),
                                call("pack_tile", ttir.Dst(0), ttir.CB("a")))]}
    works, model = modeled(kernels)
    fpu = 100 * 32 / WH.fpu_eff("HiFi2")
    unpack = 100 * 2 * TILE_BYTES / WH.unpack_rate("Float16_b")
    pack = 100 * TILE_BYTES / WH.pack_bytes_per_cycle
    assert unpack > fpu > pack
    assert model["seconds"] == pytest.approx(seconds(unpack), rel=1e-12)
    assert model["bound"] == "unpack" and works[0].matmul_tiles == 100


@pytest.mark.parametrize("rt,ct,tiles_a,tiles_b", [(1, 8, 1, 8), (8, 1, 8, 1), (4, 2, 8, 2), (2, 4, 2, 8),
                                                   (2, 2, 2, 4), (1, 1, 1, 1)])
def test_matmul_block_unpack_counts_by_hand(rt, ct, tiles_a, tiles_b):
    """matmul_block over an rt x ct output unpacks, for each tile of its smaller dimension, that operand's tile and
    all of the other's: rt=4, ct=2 reads B's 2 tiles and A's 4 tiles twice. A is bf16, B Bfp8_b (1088 B)."""
    cbs = (("a", TILE_BYTES, "Float16_b"), ("b", 1088, "Bfp8_b"))
    kernels = {"compute": [loop(3, call("matmul_block", ttir.CB("a"), ttir.CB("b"), 0, 0, 0, 0, ct, rt, 1))]}
    works, model = modeled(kernels, plan(cbs=cbs), "HiFi4")
    w = works[0]
    assert w.matmul_tiles == 3 * rt * ct
    assert dict(w.unpack_formats) == {"Float16_b": 3 * tiles_a * TILE_BYTES, "Bfp8_b": 3 * tiles_b * 1088}
    fpu = 3 * rt * ct * 64 / WH.fpu_eff("HiFi4")
    unpack = 3 * (tiles_a * TILE_BYTES / WH.unpack_rate("Float16_b") + tiles_b * 1088 / WH.unpack_rate("Bfp8_b"))
    assert model["seconds"] == pytest.approx(seconds(max(fpu, unpack)), rel=1e-12)


def test_reader_and_writer_latency_by_hand():
    """16 one-tile reads, each waited for, and 16 one-tile writes, each waited for: every barrier costs a NoC round
    trip, the bytes cross at the per-core NoC rate; compute starts after the first read and the last write follows
    it. The compute kernel copies 16 tiles (cheap)."""
    kernels = {"reader": [loop(16, call("cb_reserve_back", ttir.CB("a"), 1),
                               call("read_tiles", ttir.CB("a"), ttir.Tensor("A"), 0, 0, 1, 1),
                               call("noc_async_read_barrier"), call("cb_push_back", ttir.CB("a"), 1))],
               "compute": [loop(16, call("copy_tile", ttir.CB("a"), 0, ttir.Dst(0)),
                                call("pack_tile", ttir.Dst(0), ttir.CB("b")))],
               "writer": [loop(16, call("write_tiles", ttir.CB("b"), ttir.Tensor("C"), 0, 0, 1, 1),
                               call("noc_async_write_barrier"))]}
    works, model = modeled(kernels)
    step = TILE_BYTES / WH.noc_bytes_per_cycle + WH.noc_round_trip_cycles
    assert dict(works[0].waits) == {"reader:read": 16, "writer:write": 16}
    assert model["seconds"] == pytest.approx(seconds(step + 16 * step + step), rel=1e-12)   # fill, steady, drain
    assert model["bound"] == "noc"
    assert model["dram_bytes"] == 32 * TILE_BYTES


def test_a_barrier_with_nothing_in_flight_is_free():
    kernels = {"reader": [call("read_tiles", ttir.CB("a"), ttir.Tensor("A"), 0, 0, 2, 1),
                          call("noc_async_read_barrier"), call("noc_async_read_barrier"),
                          loop(5, call("noc_async_read_barrier"))]}
    works, model = modeled(kernels)
    assert works[0].waits == {"reader:read": 1}
    one = 2 * TILE_BYTES / WH.noc_bytes_per_cycle + WH.noc_round_trip_cycles
    assert model["seconds"] == pytest.approx(seconds(2 * one), rel=1e-12)     # the fill and the read itself


def test_multicast_by_hand():
    """A row of 4 cores multicasts 6 blocks of 2 tiles: the row's first core reads each block (a round trip),
    multicasts it (its bytes leave once) and every core waits for a handshake per block."""
    read = call("read_tiles", ttir.CB("a"), ttir.Tensor("A"), 0, 0, 1, 2)
    kernels = {"reader": [loop(6, *multicast_read(read, "g", flush=False))]}
    the_plan = plan(cores=[(0, x) for x in range(4)], groups=[("g", "row")])
    works, model = modeled(kernels, the_plan)
    sender, receiver = works[0], works[1]
    assert sender.waits == {"reader:read": 6, "reader:mcast": 6} and receiver.waits == {"reader:mcast": 6}
    assert (sender.dram_read_bytes, receiver.dram_read_bytes) == (6 * 2 * TILE_BYTES, 0)
    assert (sender.noc_out_bytes, receiver.noc_in_bytes) == (6 * 2 * TILE_BYTES, 0)
    step = 2 * 2 * TILE_BYTES / WH.noc_bytes_per_cycle + WH.noc_round_trip_cycles + WH.mcast_handshake_cycles
    assert model["critical_core"] == [0, 0]
    assert model["seconds"] == pytest.approx(seconds(step + 6 * step), rel=1e-12)


def test_dram_bound_by_hand():
    """64 cores each read 256 tiles in one batch: the chip's interleaved DRAM bandwidth binds."""
    kernels = {"reader": [call("read_tiles", ttir.CB("a"), ttir.Tensor("A"), 0, 0, 16, 16),
                          call("noc_async_read_barrier")]}
    works, model = modeled(kernels, plan(cores=[(y, x) for y in range(8) for x in range(8)]))
    dram = 64 * 256 * TILE_BYTES
    assert model["bound"] == "dram" and model["dram_bytes"] == dram
    assert model["seconds"] == pytest.approx(WH.launch_seconds + dram / WH.dram_bw_interleaved, rel=1e-12)


def test_the_stored_program_counts_like_its_nodes():
    """tt.program.json (ttir_json) read back gives the work the nodes give."""
    read = call("read_tiles", ttir.CB("a"), ttir.Tensor("A"), tirx.Var("i", "int32") * 2, 0, 1, 2)
    body = [loop(3, call("cb_reserve_back", ttir.CB("a"), 2), *multicast_read(read, "g", flush=False))]
    compute = [loop(4, call("matmul_block", ttir.CB("a"), ttir.CB("b"), 0, 0, 0, 0, 2, 4, 1),
                    call("pack_reconfig_l1_acc", 1), call("pack_tile", ttir.Dst(0), ttir.CB("b")))]
    writer = [call("write_tiles", ttir.CB("b"), ttir.Tensor("C"), 0, 0, 2, 2), call("noc_async_write_barrier")]
    kernels = {"reader": body, "compute": compute, "writer": writer}
    program = ttir.Program("p", {r: ttir.Kernel(r, b) for r, b in kernels.items()}, {}, 8)
    the_plan = plan(cores=[(0, 0), (0, 1)], groups=[("g", "row")])
    from_text = pm.program_work(ttir_json.from_json(json.loads(ttir_json.dumps(program))), the_plan)
    assert [w.signature() for w in from_text] == [w.signature() for w in pm.program_work(program, the_plan)]
    assert from_text[0].pack_l1_acc_bytes == 4 * TILE_BYTES
    assert from_text[1].waits == {"reader:mcast": 3, "writer:write": 1}


# ---- calibration on TT's published points -------------------------------------------------------------------
def _calibration():
    spec = importlib.util.spec_from_file_location("calibration", ROOT / "benchmarks" / "calibration.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("calibration", module)      # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_calibration_error_within_the_target():
    """The model of TTNN's program for every published point (GEMM_FLOPS N150 rows, P150 best results, S16 single
    core) within the stated bound: median |err| <= 10%, worst <= 25% (docs/perf_model.md)."""
    cal = _calibration()
    points, errs = cal.run()
    assert len(points) == 35 + 17 + 3
    assert {(p.config.fmt, p.config.fidelity) for p in points if p.arch == "wormhole_b0"} == {
        ("Float16_b", "HiFi4"), ("Float16_b", "HiFi2"), ("Bfp8_b", "HiFi2"), ("Bfp8_b", "LoFi"), ("Bfp4_b", "LoFi")}
    a = [abs(e) for e in errs]
    assert statistics.median(a) <= 0.10 and max(a) <= 0.25, cal.summary_line(errs)


def test_calibration_configs_are_the_benchmarks():
    """The published rows' program configs as tt-metal's benchmark derives them (spot checks against the report:
    storage, blocks and the subblock its SUBBLOCK_HW_CHOICES picks)."""
    cal = _calibration()
    by_label = {p.label: p.config for p in cal.points()}
    c = by_label["n150 8x8 bf16 HiFi2 4096^3 DRAM"]
    assert (c.in0_block_w, c.per_core_M, c.out_block_h, c.out_block_w, c.subblock) == (16, 16, 8, 8, (4, 2))
    c = by_label["n150 8x8 bf16 HiFi4 3072^3 L1"]
    assert (c.in0_block_w, c.per_core_M, c.subblock, c.in0_l1, c.out_l1) == (3, 12, (1, 6), True, True)
    c = by_label["n150 8x8 bfp4 LoFi 16384^3 DRAM"]
    assert (c.fmt, c.out_block_h, c.out_block_w) == ("Bfp4_b", 16, 16)
    c = by_label["p150 11x10 bfp8 LoFi 3840x4224x5632 L1"]
    assert (c.per_core_M, c.per_core_N, c.in0_block_w, c.subblock) == (12, 16, 6, (1, 8))


# ---- static counts are the emulator's counts ----------------------------------------------------------------
def _rows_at_odd_offset(M=96, N=64, K_=64, offset=16):
    """Row blocks at row offset by * 32 + offset (offset_rows: gather_row per row) written at row by * 32 + 8
    (write_rows: scatter_row per row), the last of them clipped at M."""
    @T.prim_func
    def rows(A: T.Tensor((M, K_), "bfloat16"), C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(1, M // 32, threads=128) as (bx, by):
            a = T.alloc_shared((32, K_), "bfloat16")
            c = T.alloc_fragment((32, N), "float32")
            T.copy(A[by * 32 + offset, 0], a)
            for i, j in T.Parallel(32, N):
                c[i, j] = a[i, j] * 2.0
            for i, j in T.Parallel(32, N):
                C[by * 32 + 8 + i, j] = c[i, j]

    return rows


STATIC_CASES = {
    "rows_at_odd_offsets": _rows_at_odd_offset,
    # on Blackhole (64-byte DRAM alignment) a bfloat16 face-row segment of an odd source row against an even block
    # row is read through the scratch, the others straight into the block
    "rows_at_offset_17_blackhole": (lambda: _rows_at_odd_offset(offset=17), {"kind": "tt", "arch": "blackhole"}),
    "convolution_im2col": lambda: K.convolution(1, 32, 16, 16, 32, 3, 2, 1, 1, block_M=32, block_N=32, block_K=32),
    "tilelang_gemm_128x128x32": lambda: K.tilelang_example_gemm(256, 256, 256, dtype="bfloat16", accum_dtype="float32"),
    "design_gemm_32": lambda: K.design_gemm(128, 96, 160),
    "eltwise_add": lambda: K.elementwise_add(256, 128, "bfloat16"),
    "fused_chain_sfpu": lambda: K.fused_chain(128, 128),
}


@pytest.mark.parametrize("name", sorted(STATIC_CASES))
def test_static_counts_equal_protocol_only_counters(name):
    case = STATIC_CASES[name]
    factory, target = case if isinstance(case, tuple) else (case, "tt")
    kernel = compiled(factory(), target)
    static = pm.static_work(kernel.artifact_dir, kernel.plan)
    kernel.emulate(*zeros(kernel), protocol_only=True)
    cores = kernel.report["cores"]
    assert len(static) == len(cores)
    for c, w in zip(cores, static):
        assert tuple(c["core"]) == w.core
        other = sum(v for op, v in w.ops.items() if op not in ("matmul_tiles", "pack_tile"))
        assert (w.dram_read_bytes, w.dram_write_bytes, w.noc_in_bytes, w.noc_out_bytes, w.matmul_tiles, other,
                w.packs) == (c["dram_read_bytes"], c["dram_write_bytes"], c["noc_read_bytes"], c["noc_write_bytes"],
                             c["matmul_tiles"], c["tile_ops"], c["packs"]), f"core {c['core']}"
    run_model = kernel.report["model"]
    assert run_model["counts_from"].startswith("emulator counters")
    static_model = pm.model_for_artifact(kernel.artifact_dir, kernel.plan)
    assert run_model["seconds"] == pytest.approx(static_model["seconds"], rel=1e-9)


# ---- report and CLI -----------------------------------------------------------------------------------------
def test_report_has_the_model_before_and_after_a_run():
    # a target no other test uses: TileLang's in-process cache would hand back a kernel another test already ran
    kernel = compiled(K.design_gemm(128, 128, 128), target="tt -max_cores=7")
    model = kernel.report["model"]
    for key in ("seconds", "tflops", "bound", "label", "terms_seconds", "dram_bytes", "math_fidelity", "rates"):
        assert key in model, key
    assert "model" in model["label"] and "not measured" in model["label"]
    assert model["seconds"] > model["terms_seconds"]["launch"] > 0 and model["tflops"] > 0
    assert model["bound"] in ("fpu", "sfpu", "unpack", "pack", "noc", "dram", "latency", "launch")
    assert model["counts_from"].startswith("static")
    kernel(*zeros(kernel))
    assert kernel.report["total"]["matmul_tiles"] == 4 * 4 * 4
    assert kernel.report["model"]["counts_from"] == "emulator counters"


def test_eltwise_without_matmul_has_no_tflops():
    model = compiled(K.elementwise_add(64, 64)).report["model"]
    assert model["tflops"] is None and model["matmul_tiles"] == 0


def test_cli_compile_and_model(tmp_path):
    src = tmp_path / "k.py"
    src.write_text(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nfrom examples import kernels as K\n"
                   "def g():\n    return K.design_gemm(64, 64, 64)\n")
    out = tmp_path / "art"
    exe = [sys.executable, "-m", "tilelang_tt.cli"]
    r = subprocess.run(exe + ["compile", f"{src}:g", "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "performance model (modeled, not measured)" in r.stdout and "bound:" in r.stdout
    r = subprocess.run(exe + ["model", str(out), "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    model = json.loads(r.stdout)
    assert model["math_fidelity"] == "HiFi2" and model["matmul_tiles"] == 2 * 2 * 2
    r = subprocess.run(exe + ["model", str(tmp_path / "nothing")], capture_output=True, text=True)
    assert r.returncode == 2


# ---- compiled kernels: terms follow the program ------------------------------------------------------------
def _terms(func, target="tt"):
    kernel = compiled(func, target)
    return pm.model_for_artifact(kernel.artifact_dir, kernel.plan)


def test_doubling_k_doubles_fpu_time():
    a = _terms(K.design_gemm(128, 128, 256))
    b = _terms(K.design_gemm(128, 128, 512))
    assert b["terms_seconds"]["fpu"] == pytest.approx(2 * a["terms_seconds"]["fpu"], rel=1e-9)
    assert b["matmul_tiles"] == 2 * a["matmul_tiles"]


def test_fpu_time_follows_the_fidelity_table():
    func = K.design_gemm(128, 128, 256)
    fpu = {f: _terms(func, f"tt -math_fidelity={f}")["terms_seconds"]["fpu"] for f in ("LoFi", "HiFi2", "HiFi4")}
    for f in ("LoFi", "HiFi4"):
        expected = (FPU_CYCLES_PER_TILE_MATMUL[f] / WH.fpu_eff(f)) / (32 / WH.fpu_eff("HiFi2"))
        assert fpu[f] / fpu["HiFi2"] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_elementwise_kernels_are_dram_bound(arch):
    for func in (K.elementwise_add(1024, 1024, "bfloat16"), K.fused_chain(512, 512)):
        model = _terms(func, f"tt -arch={arch}")
        assert model["bound"] == "dram", model
        perf = PERF[arch]
        assert model["seconds"] == pytest.approx(perf.launch_seconds + model["dram_bytes"] / perf.dram_bw_interleaved,
                                                 rel=1e-9)


# ---- math fidelity and fp32 accumulation --------------------------------------------------------------------
def _compute_config(kernel):
    host = (kernel.artifact_dir / "host.cpp").read_text()
    fid = host.split("ComputeConfig{.math_fidelity = MathFidelity::", 1)[1].split(",", 1)[0]
    acc = host.split(".fp32_dest_acc_en = ", 1)[1].split(",", 1)[0]
    return (kernel.plan["math_fidelity"], kernel.plan["kernels"]["compute"]["math_fidelity"],
            kernel.plan["kernels"]["compute"]["fp32_dest_acc_en"], fid, acc)


# float16: HiFi4, not ttnn's bf16 HiFi2 (fp16's 10 mantissa bits need every fidelity phase; compute_config.py)
@pytest.mark.parametrize("dtype,fidelity,acc", [("bfloat16", "HiFi2", False), ("float16", "HiFi4", False),
                                                ("float32", "HiFi4", True)])
def test_defaults_follow_ttnn_matmul(dtype, fidelity, acc):
    kernel = compiled(K.design_gemm(64, 64, 64, dtype=dtype))
    assert _compute_config(kernel) == (fidelity, fidelity, acc, fidelity, str(acc).lower())


def test_target_options_reach_plan_and_host():
    kernel = compiled(K.design_gemm(64, 64, 64), "tt -math_fidelity=LoFi -fp32_dest_acc=true")
    assert _compute_config(kernel) == ("LoFi", "LoFi", True, "LoFi", "true")
    assert kernel.plan["device"]["dst_tiles"] == 4      # fp32 accumulation halves DST


def _annotated_gemm(**choice):
    @T.prim_func
    def gemm(A: T.Tensor((64, 64), "bfloat16"), B: T.Tensor((64, 64), "bfloat16"), C: T.Tensor((64, 64), "bfloat16")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((32, 32), "bfloat16")
            B_s = T.alloc_shared((32, 32), "bfloat16")
            C_l = T.alloc_fragment((32, 32), "bfloat16")
            T.annotate_tt_compute(**choice)
            T.clear(C_l)
            for k in T.serial(2):
                T.copy(A[by * 32, k * 32], A_s)
                T.copy(B[k * 32, bx * 32], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 32, bx * 32])

    return gemm


def test_annotation_reaches_plan_and_host_and_beats_the_target_option():
    kernel = compiled(_annotated_gemm(math_fidelity="HiFi3", fp32_dest_acc=True), "tt -math_fidelity=LoFi")
    assert _compute_config(kernel) == ("HiFi3", "HiFi3", True, "HiFi3", "true")
    assert kernel.report["model"]["math_fidelity"] == "HiFi3"
    a, b = torch.randn(64, 64, dtype=torch.bfloat16), torch.randn(64, 64, dtype=torch.bfloat16)
    c = torch.empty(64, 64, dtype=torch.bfloat16)
    kernel(a, b, c)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2, atol=5e-2)


def test_annotation_partial_choice_keeps_the_default_for_the_rest():
    kernel = compiled(_annotated_gemm(fp32_dest_acc=True))
    assert _compute_config(kernel) == ("HiFi2", "HiFi2", True, "HiFi2", "true")


def test_bad_annotation_is_refused():
    with pytest.raises(tilelang_tt.TTAnnotationError, match="math_fidelity='HiFi5'"):
        compiled(_annotated_gemm(math_fidelity="HiFi5"))
