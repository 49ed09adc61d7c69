"""TileLang's tools with target "tt": the profiler (assert_allclose on tt-sim, do_bench modeled), the autotuner
(cost = modeled time), get_host_source and export_library (profiler.py, runtime.py, package.py)."""

import pytest
import torch

import tilelang
import tilelang_tt
from examples import kernels
from tilelang_tt.errors import TTPackageError
from tilelang_tt.profiler import HOST_WALL, MODELED, Latency, TTProfiler, modeled_time

# bf16 operands at HiFi4 (no operand bits dropped): TileLang's rtol = atol = 1e-2 holds at K = 128
TARGET = {"kind": "tt", "math_fidelity": "HiFi4"}
M = N = K = 128


def gemm_func(M, N, K, block_M, block_N, block_K):
    """TileLang's example GEMM (examples/gemm/example_gemm_autotune.py: B transposed, C staged), in bf16."""
    return kernels.tilelang_example_gemm(M, N, K, block_M, block_N, block_K, dtype="bfloat16")


def ref_program(A, B):
    return (A.float() @ B.float().T).to(A.dtype)


@pytest.fixture(scope="module")
def kernel():
    return tilelang.compile(gemm_func(M, N, K, 64, 64, 32), out_idx=[-1], target=TARGET)


def test_get_profiler_is_tilelangs_profiler_checking_on_tt_sim(kernel):
    prof = kernel.get_profiler()
    assert isinstance(prof, TTProfiler) and isinstance(prof, tilelang.profiler.Profiler)
    prof.assert_allclose(ref_program)          # TileLang's inputs (uniform [-1, 1]), run on tt-sim


def test_assert_allclose_fails_for_a_wrong_reference(kernel):
    prof = kernel.get_profiler()
    with pytest.raises(AssertionError, match="mismatched elements"):
        prof.assert_allclose(lambda A, B: ref_program(A, B) * 1.1)


def test_do_bench_is_the_modeled_time(kernel, caplog):
    prof = kernel.get_profiler()
    with caplog.at_level("INFO", logger="tilelang_tt.profiler"):
        latency = prof.do_bench()
    model = kernel.report["model"]             # the model of the launch do_bench made
    assert isinstance(latency, Latency) and latency.source == MODELED and "modeled" in latency.label
    assert latency.model is model and float(latency) == model["seconds"] * 1e3 > 0
    assert prof.last_bench is latency
    assert any("modeled" in r.getMessage() for r in caplog.records)
    assert prof.do_bench(backend="cupti", n_repeat=5) == latency     # TileLang's arguments accepted


def test_do_bench_of_a_callable(kernel):
    a = torch.randn(M, K, dtype=torch.bfloat16)
    b = torch.randn(N, K, dtype=torch.bfloat16)
    two = modeled_time(lambda: (kernel(a, b), kernel(a, b)))
    assert two.source == MODELED and len(two.models) == 2
    assert float(two) == pytest.approx(2 * kernel.report["model"]["seconds"] * 1e3)
    ref = kernel.get_profiler().do_bench(ref_program)        # a torch program: the host's wall time
    assert ref.source == HOST_WALL and ref > 0


def test_autotune_picks_the_least_modeled_time(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                # TileLang's autotuner writes autotuner.log in the working directory
    monkeypatch.setenv("TILELANG_AUTO_TUNING_DISABLE_CACHE", "1")
    configs = [{"block_M": bm, "block_N": bn, "block_K": 32} for bm, bn in ((32, 32), (64, 64), (128, 128))]

    @tilelang.autotune(configs=configs, ref_prog=ref_program, warmup=1, rep=1)
    @tilelang.jit(out_idx=[-1], target=TARGET)
    def matmul(M, N, K, block_M=64, block_N=64, block_K=32):
        return gemm_func(M, N, K, block_M, block_N, block_K)

    best = matmul(M, N, K)
    modeled = {}
    for c in configs:
        k = tilelang.compile(gemm_func(M, N, K, c["block_M"], c["block_N"], c["block_K"]), out_idx=[-1],
                             target=TARGET)
        modeled[(c["block_M"], c["block_N"])] = float(k.get_profiler().do_bench())
    assert len(set(modeled.values())) == len(configs)
    want = min(modeled, key=modeled.get)
    assert (best.config["block_M"], best.config["block_N"]) == want
    assert best.latency.source == MODELED and float(best.latency) == pytest.approx(modeled[want])


def test_autotune_result_of_a_tt_kernel_is_not_written_to_disk(kernel, tmp_path):
    from tilelang.autotuner.param import AutotuneResult

    AutotuneResult(latency=1.0, config={}, kernel=kernel, func=kernel.prim_func).save_to_disk(tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_get_host_source_is_host_cpp(kernel):
    assert kernel.get_host_source() == (kernel.artifact_dir / "host.cpp").read_text()


def test_export_library_writes_the_package(kernel, tmp_path):
    path = kernel.export_library(tmp_path / "gemm.ttpkg")
    a = torch.randn(M, K, dtype=torch.bfloat16)
    b = torch.randn(N, K, dtype=torch.bfloat16)
    torch.testing.assert_close(tilelang_tt.load(path)(a, b), kernel(a, b), rtol=0, atol=0)
    with pytest.raises(TTPackageError, match=r"(?s)no shared library.*fix: export_library\('.*gemm\.ttpkg'\)"):
        kernel.export_library(str(tmp_path / "gemm.so"))
