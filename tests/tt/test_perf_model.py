"""The performance model (perf_model.py): invariants, static counts against the emulator's counters, the error
against PERF_ANCHORS' published points (the numbers docs/perf_model.md states), the report keys, and the math
fidelity / fp32 accumulation choice reaching the plan and host.cpp."""

import dataclasses
import json
import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import tilelang
import tilelang.language as T
import torch

import tilelang_tt  # noqa: F401
from examples import kernels as K
from tilelang_tt import perf_model as pm

ROOT = Path(__file__).resolve().parents[2]


def compiled(func, target="tt"):
    return tilelang.compile(func, target=target)


def zeros(kernel):
    dt = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
    return [torch.zeros(*b["shape"], dtype=dt[b["dtype"]]) for b in kernel.plan["buffers"]]


# ---- static counts are the emulator's counts ----------------------------------------------------------------
STATIC_CASES = {
    "tilelang_gemm_128x128x32": lambda: K.tilelang_example_gemm(256, 256, 256, dtype="bfloat16", accum_dtype="float32"),
    "design_gemm_32": lambda: K.design_gemm(128, 96, 160),
    "eltwise_add": lambda: K.elementwise_add(256, 128, "bfloat16"),
    "fused_chain_sfpu": lambda: K.fused_chain(128, 128),
}


@pytest.mark.parametrize("name", sorted(STATIC_CASES))
def test_static_counts_equal_protocol_only_counters(name):
    kernel = compiled(STATIC_CASES[name]())
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
    for key in ("seconds", "tflops", "bound", "label", "terms_seconds", "dram_bytes", "math_fidelity"):
        assert key in model, key
    assert "model" in model["label"] and "not measured" in model["label"]
    assert model["seconds"] > 0 and model["tflops"] > 0
    assert model["bound"] in ("fpu", "sfpu", "unpack", "pack", "noc", "dram")
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


# ---- invariants ---------------------------------------------------------------------------------------------
def _terms(func, target="tt"):
    kernel = compiled(func, target)
    return pm.model_for_artifact(kernel.artifact_dir, kernel.plan)


def test_doubling_k_doubles_fpu_time():
    a = _terms(K.design_gemm(128, 128, 256))
    b = _terms(K.design_gemm(128, 128, 512))
    assert b["terms_seconds"]["fpu"] == pytest.approx(2 * a["terms_seconds"]["fpu"], rel=1e-9)
    assert b["matmul_tiles"] == 2 * a["matmul_tiles"]


def test_lofi_is_half_of_hifi2_fpu_time_and_hifi4_double():
    func = K.design_gemm(128, 128, 256)
    lofi = _terms(func, "tt -math_fidelity=LoFi")["terms_seconds"]["fpu"]
    hifi2 = _terms(func, "tt -math_fidelity=HiFi2")["terms_seconds"]["fpu"]
    hifi4 = _terms(func, "tt -math_fidelity=HiFi4")["terms_seconds"]["fpu"]
    assert lofi == pytest.approx(hifi2 / 2, rel=1e-9) and hifi4 == pytest.approx(2 * hifi2, rel=1e-9)


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_elementwise_kernels_are_dram_bound(arch):
    for func in (K.elementwise_add(1024, 1024, "bfloat16"), K.fused_chain(512, 512)):
        model = _terms(func, f"tt -arch={arch}")
        assert model["bound"] == "dram", model
        perf = pm.get_perf(arch)
        assert model["seconds"] == pytest.approx(model["dram_bytes"] / perf.dram_bw_interleaved, rel=1e-9)


def test_a_compute_heavy_kernel_is_not_dram_bound():
    # 128x128 blocks, long K: 8 output blocks of 16 tiles each reuse every A/B tile 4 times per block.
    model = _terms(K.tilelang_example_gemm(256, 512, 4096, dtype="bfloat16", accum_dtype="float32"))
    assert model["bound"] in ("fpu", "unpack"), model


# ---- error against PERF_ANCHORS (the numbers docs/perf_model.md states) -------------------------------------
def _tile_matmul_cycles(unpack_bytes_per_mac, fidelity="HiFi2", arch="blackhole"):
    w = pm.CoreWork((0, 0), Counter({"matmul_tiles": 1000}), unpack_bytes=1000 * unpack_bytes_per_mac)
    c = pm.core_cycles(w, arch, fidelity)
    return max(c["fpu"], c["unpack"]) / 1000


@pytest.mark.parametrize("subblock,measured,stated_error", [
    ((1, 1), 54.8, -0.066),   # PERF_ANCHORS sec. 2, S16: 1x1 output subblock, 54.8 cycles per tile-MAC
    ((1, 8), 37.5, -0.072),   # 1x8 subblock
    ((2, 2), 39.1, -0.110),   # 2x2 subblock
])
def test_single_core_cycles_per_tile_matmul(subblock, measured, stated_error):
    h, w = subblock
    modeled = _tile_matmul_cycles(2048 * (h + w) / (h * w))
    assert modeled / measured - 1 == pytest.approx(stated_error, abs=0.005)


ANCHORS = [   # (arch, grid, M, N, K, fidelity, measured TFLOPS [P] S1, stated model/measured)
    ("wormhole_b0", (8, 8), 4096, 4096, 4096, "HiFi2", 68.45, 1.762),
    ("wormhole_b0", (8, 8), 4096, 4096, 4096, "HiFi4", 50.69, 1.190),
    ("wormhole_b0", (8, 8), 16384, 16384, 16384, "HiFi4", 54.26, 1.111),
    ("blackhole", (10, 11), 5120, 5632, 5632, "HiFi2", 253.00, 1.106),
]


@pytest.mark.parametrize("arch,grid,M,N,K,fidelity,measured,stated", ANCHORS)
def test_published_gemm_anchors_within_stated_error(arch, grid, M, N, K, fidelity, measured, stated):
    model = pm.evaluate(pm.mcast_2d_gemm_work(M, N, K, grid), arch, fidelity, "reference 2-D mcast kernel")
    assert model["bound"] == "fpu"
    assert model["tflops"] / measured == pytest.approx(stated, abs=0.01)


def test_4096_anchor_traffic_is_the_minimum():
    works = pm.mcast_2d_gemm_work(4096, 4096, 4096, (8, 8))
    assert sum(w.dram_read_bytes + w.dram_write_bytes for w in works) == 3 * 4096 * 4096 * 2


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
