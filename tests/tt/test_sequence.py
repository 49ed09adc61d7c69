"""Several T.Kernel launches in one function (SplitKernelsTT, sequence.py): one TT program per launch, run in
order, the tensors they pass to one another in DRAM - a caller's tensor or a ``T.alloc_global`` intermediate."""

import json

import pytest
import tilelang
import tilelang.language as T
import torch

from tilelang_tt.errors import TTError, TTUnsupportedError
from tilelang_tt.runtime import TTKernelCache

ARCHS = ["wormhole_b0", "blackhole"]


def _mlp(M, N, K, bm=64, bn=64, bk=32, dtype="bfloat16"):
    """H = relu(A @ B) in one launch, O = H @ C in the next (TileLang's fused-MoE shared expert, in small)."""
    @T.prim_func
    def mlp(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((N, N), dtype),
            H: T.Tensor((M, N), dtype), O: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            a = T.alloc_shared((bm, bk), dtype)
            b = T.alloc_shared((bk, bn), dtype)
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], a)
                T.copy(B[k * bk, bx * bn], b)
                T.gemm(a, b, acc)
            for i, j in T.Parallel(bm, bn):
                acc[i, j] = T.max(acc[i, j], 0)
            T.copy(acc, H[by * bm, bx * bn])
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            h = T.alloc_shared((bm, bk), dtype)
            c = T.alloc_shared((bk, bn), dtype)
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(N, bk), num_stages=2):
                T.copy(H[by * bm, k * bk], h)
                T.copy(C[k * bk, bx * bn], c)
                T.gemm(h, c, acc)
            T.copy(acc, O[by * bm, bx * bn])

    return mlp


def _scale_then_add(M, N):
    """T = 2 * A in a T.alloc_global intermediate, then O = T + B (and A scaled in place by the second launch)."""
    @T.prim_func
    def scale_then_add(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32),
                       O: T.Tensor((M, N), T.float32)):
        tmp = T.alloc_global((M, N), "float32")
        with T.Kernel(N // 32, M // 32) as (bx, by):
            for i, j in T.Parallel(32, 32):
                tmp[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j] * 2.0
        with T.Kernel(N // 32, M // 32) as (bx, by):
            for i, j in T.Parallel(32, 32):
                O[by * 32 + i, bx * 32 + j] = tmp[by * 32 + i, bx * 32 + j] + B[by * 32 + i, bx * 32 + j]
            for i, j in T.Parallel(32, 32):
                A[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j] * 0.5

    return scale_then_add


@pytest.mark.parametrize("arch", ARCHS)
def test_two_gemms_through_a_callers_tensor(arch):
    M, N, K = 128, 128, 96
    kernel = tilelang.compile(_mlp(M, N, K), out_idx=[3, 4],
                              target=f"tt -arch={arch} -math_fidelity=HiFi4")
    a, b, c = (torch.randn(*s).bfloat16() for s in ((M, K), (K, N), (N, N)))
    h, o = kernel(a, b, c)
    # HiFi4 multiplies every bit of bf16 operands; the fp32 sums in DST differ from torch's only in order
    h_ref = torch.relu(a.float() @ b.float())
    assert (h.float() - h_ref).abs().max() <= h_ref.abs().max() * 2 ** -8 + 1e-3
    o_ref = h.float() @ c.float()       # the second launch reads what the first wrote (bf16 in DRAM)
    assert (o.float() - o_ref).abs().max() <= o_ref.abs().max() * 2 ** -8 + 1e-3
    stages = kernel.adapter.artifact.stage_plans
    assert [p["kernel"] for p in stages] == ["mlp_k0", "mlp_k1"]
    io = {b["name"]: b["io"] for b in kernel.plan["buffers"]}
    assert io == {"A": "input", "B": "input", "C": "input", "H": "output", "O": "output"}
    # each launch is its own TT program: H is the first one's output and the second one's input
    assert {b["name"]: b["io"] for b in stages[0]["buffers"]}["H"] == "output"
    assert {b["name"]: b["io"] for b in stages[1]["buffers"]}["H"] == "input"
    report = kernel.report
    assert len(report["stages"]) == 2
    assert report["model"]["seconds"] == pytest.approx(sum(m["seconds"] for m in report["model"]["stages"]))
    assert kernel.get_host_source().count("CreateProgram()") == 2


@pytest.mark.parametrize("arch", ARCHS)
def test_alloc_global_intermediate_and_an_inout_tensor(arch):
    M, N = 64, 96
    kernel = tilelang.compile(_scale_then_add(M, N), target={"kind": "tt", "arch": arch})
    a, b, o = torch.randn(M, N), torch.randn(M, N), torch.zeros(M, N)
    a_in = a.clone()
    kernel(a, b, o)
    assert torch.equal(o, a_in * 2.0 + b)     # one exact fp32 multiply and add per element
    assert torch.equal(a, a_in * 0.5)
    seq = json.loads((kernel.artifact_dir / "tt.sequence.json").read_text())
    assert seq["intermediates"] == [{"name": "tmp", "shape": [M, N], "dtype": "float32", "param_index": 3}]
    # A is read by the first launch and written by the second: the caller's data goes in
    assert {b["name"]: b["io"] for b in kernel.plan["buffers"]} == {"A": "inout", "B": "input", "O": "output"}
    assert [len(p["buffers"]) for p in kernel.adapter.artifact.stage_plans] == [4, 4]


def test_cache_hit_runs_the_sequence(tmp_path, monkeypatch, artifact_root):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "tlcache"))
    monkeypatch.setenv("TILELANG_TT_CACHE_DIR", str(tmp_path / "ttcache"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    from tilelang import env

    was_enabled = env.is_cache_enabled()      # restored after: later tests in this worker keep their setting
    tilelang.enable_cache()
    try:
        TTKernelCache()._memory_cache.clear()
        first = tilelang.compile(_scale_then_add(32, 64), target="tt")
        TTKernelCache()._memory_cache.clear()
        second = tilelang.compile(_scale_then_add(32, 64), target="tt")
    finally:
        TTKernelCache()._memory_cache.clear()
        if not was_enabled:
            tilelang.disable_cache()
    assert (first.compile_info["cache"], second.compile_info["cache"]) == ("miss", "hit")
    assert second.get_kernel_source() == first.get_kernel_source()
    a, b, o = torch.randn(32, 64), torch.randn(32, 64), torch.zeros(32, 64)
    a_in = a.clone()
    second(a, b, o)
    assert torch.equal(o, a_in * 2.0 + b)


def test_package_and_trace_of_a_sequence_are_refused(tmp_path):
    kernel = tilelang.compile(_scale_then_add(32, 32), target="tt")
    with pytest.raises(TTError, match="runs 2 T.Kernel launches in order; a package holds one TT program"):
        kernel.export(tmp_path / "k.ttpkg")
    assert not (tmp_path / "k.ttpkg").exists()
    with pytest.raises(TTError, match="one timeline per launch"):
        kernel.trace()


def test_code_between_launches_is_refused():
    @T.prim_func
    def between(A: T.Tensor((32, 32), T.float32), B: T.Tensor((32, 32), T.float32)):
        with T.Kernel(1) as bx:
            for i, j in T.Parallel(32, 32):
                B[i, j] = A[i, j] + bx
        A[0, 0] = 1.0
        with T.Kernel(1) as bx:
            for i, j in T.Parallel(32, 32):
                B[i, j] = B[i, j] * 2.0

    with pytest.raises(TTUnsupportedError, match="a statement outside the 2 T.Kernel launches") as err:
        tilelang.compile(between, target="tt")
    assert "move the statement into the T.Kernel that needs it" in str(err.value)


TWO_LAUNCHES = '''
import tilelang.language as T


@T.prim_func
def two(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
    with T.Kernel(2, 2, threads=128) as (bx, by):
        for i, j in T.Parallel(32, 32):
            B[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j] * 2.0
    with T.Kernel(2, 2, threads=128) as (bx, by):
        for i, j in T.Parallel(32, 32):
            C[by * 32 + i, bx * 32 + j] = B[by * 32 + i, bx * 32 + j] + 1.0
'''


def test_two_launches_run_in_order(tmp_path):
    """Once refused by name ("2 T.Kernel launches in one function"); the second launch reads what the first wrote."""
    import importlib.util

    (tmp_path / "two.py").write_text(TWO_LAUNCHES)     # TileLang's parser reads the function's source file
    spec = importlib.util.spec_from_file_location("two_launches", tmp_path / "two.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = tilelang.compile(module.two, target="tt")
    a, b, c = torch.randn(64, 64), torch.zeros(64, 64), torch.zeros(64, 64)
    kernel(a, b, c)
    assert torch.equal(b, a * 2.0) and torch.equal(c, a * 2.0 + 1.0)


def test_cli_compiles_a_function_of_two_launches(tmp_path, capsys):
    from tests.tt.test_files import _cli

    src = tmp_path / "two.py"
    src.write_text(TWO_LAUNCHES)
    rc, out, err = _cli(capsys, "compile", f"{src}:two", "--out", tmp_path / "out")
    assert rc == 0, err
    seq = json.loads((tmp_path / "out" / "tt.sequence.json").read_text())
    assert [s["dir"] for s in seq["stages"]] == ["two_k0", "two_k1"]
    assert out.count("performance model (modeled, not measured)") == 2     # one summary per launch
    assert all((tmp_path / "out" / d / "tt.plan.json").is_file() for d in ("two_k0", "two_k1"))
