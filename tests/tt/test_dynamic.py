"""Symbolic shapes (T.dynamic): the dimension becomes a runtime argument and the per-core split is computed
at launch by the host program, so one compiled kernel serves every size."""

import json

import pytest
import tilelang
import torch

from examples import kernels as K
from .helpers import gemm_error_bound


@pytest.fixture(autouse=True)
def poison(monkeypatch):
    monkeypatch.setenv("TILELANG_TT_POISON_PADDING", "1")


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_one_kernel_many_sizes(arch):
    kernel = tilelang.compile(K.dynamic_scale_add(N=96), target={"kind": "tt", "arch": arch, "max_cores": 5})
    plan = json.loads((kernel.artifact_dir / "tt.plan.json").read_text())
    assert plan["shape_args"] == ["M"] and plan["schedule"]["dynamic"] is True and plan["mapping"] == []
    assert plan["buffers"][0]["shape"] == ["M", 96]
    for M in (1, 37, 100, 333):
        a, b = torch.randn(M, 96), torch.randn(M, 96)
        c = torch.empty(M, 96)
        kernel(a, b, c)
        assert torch.equal(c, a * 2 + b), M
    reader = (kernel.artifact_dir / "kernels" / "reader.cpp").read_text()
    assert "const uint32_t M = get_arg_val<uint32_t>(" in reader
    host = (kernel.artifact_dir / "host.cpp").read_text()
    assert 'const uint32_t M = read_shape(data_dir + "/shapes.txt", "M");' in host
    assert "split_blocks(" in host


def test_dynamic_gemm_splits_at_launch():
    kernel = tilelang.compile(K.dynamic_gemm(N=64, K=96), target="tt")
    torch.manual_seed(0)
    for M in (33, 200):
        a, b = torch.randn(M, 96, dtype=torch.bfloat16), torch.randn(96, 64, dtype=torch.bfloat16)
        c = torch.empty(M, 64, dtype=torch.bfloat16)
        kernel(a, b, c)
        assert ((c.float() - a.float() @ b.float()).abs() <= gemm_error_bound(a, b)).all(), M
        blocks = -(-M // 32) * 2
        assert sum(core["matmul_tiles"] for core in kernel.report["cores"]) == blocks * 3
        busy = [core for core in kernel.report["cores"] if core["matmul_tiles"]]
        assert len(busy) == min(blocks, 64)


def test_shapes_must_agree():
    from tilelang_tt.emulator import TTSimError

    kernel = tilelang.compile(K.dynamic_scale_add(), target="tt")
    with pytest.raises(TTSimError, match=r"B has M=10, another tensor has M=20"):
        kernel(torch.randn(20, 64), torch.randn(10, 64), torch.empty(20, 64))


def test_summary_of_a_dynamic_plan():
    """The plan summary prints a symbolic grid as the expressions it is, never a string multiplied by a number."""
    from tilelang_tt.summary import plan_summary

    kernel = tilelang.compile(K.dynamic_gemm(N=64, K=96), target="tt")
    line = plan_summary(kernel.plan).splitlines()[1]
    assert line == ("  block grid ((M + 32u - 1u) / 32u) x (2) blocks, decided at launch, policy contiguous, "
                    "order row_major, blocks split over the cores at launch"), line


def test_symbolic_batch_of_padded_matrices_runs():
    """[n, 4, H] with n a T.dynamic: each 4-row matrix pads to a tile, so the rows fold as n x 32 (once a raw
    TypeError, then refused as "an expression of symbolic shapes"; TileLang's deepseek_mhc example): the plan
    carries the fold as a C++ expression of num_tokens and the call binds it from the tensor."""
    import tilelang.language as T

    n = T.dynamic("num_tokens")

    @T.prim_func
    def k(b: T.Tensor((n, 4, 256), "bfloat16"), x: T.Tensor((n, 4, 256), "bfloat16")):
        with T.Kernel(n, threads=128) as i_n:
            b_s = T.alloc_shared((4, 128), "bfloat16")
            for h in T.serial(2):
                T.copy(b[i_n, 0, h * 128], b_s)
                T.copy(b_s, x[i_n, 0, h * 128])

    kernel = tilelang.compile(k, target="tt")
    pad = next(buf["row_pad"] for buf in kernel.plan["buffers"] if buf["name"] == "b")
    assert pad == {"outer": "num_tokens", "rows": 4, "padded_rows": 32}
    for tokens in (1, 3):
        b = torch.randn(tokens, 4, 256).bfloat16()
        x = torch.zeros(tokens, 4, 256, dtype=torch.bfloat16)
        kernel(b, x)
        assert torch.equal(x, b)


def test_out_idx_output_with_a_symbolic_shape_takes_it_from_the_inputs():
    """``out_idx`` with C: [M, N] and M a T.dynamic: the output is allocated with the M of the A given (TileLang's
    dynamic_shape example); an output dimension no input carries is refused naming it."""
    import tilelang.language as T

    from tilelang_tt.errors import TTError

    kernel = tilelang.compile(K.dynamic_gemm(N=64, K=96), out_idx=[-1], target="tt")
    torch.manual_seed(0)
    for M in (40, 97):
        a, b = torch.randn(M, 96, dtype=torch.bfloat16), torch.randn(96, 64, dtype=torch.bfloat16)
        c = kernel(a, b)
        assert c.shape == (M, 64) and c.dtype == torch.bfloat16
        assert ((c.float() - a.float() @ b.float()).abs() <= gemm_error_bound(a, b)).all(), M

    n = T.dynamic("n")

    @T.prim_func
    def fill(A: T.Tensor((64, 64), "float32"), C: T.Tensor((n, 64), "float32")):
        with T.Kernel(1, T.ceildiv(n, 32), threads=128) as (bx, by):
            for i, j in T.Parallel(32, 64):
                C[by * 32 + i, j] = A[i, j]

    only_out = tilelang.compile(fill, out_idx=[-1], target="tt")
    with pytest.raises(TTError, match=r"cannot allocate output 1 \(C\): its shape \[n, 64\] names n, which no input"):
        only_out(torch.randn(64, 64))


def test_a_dimension_named_like_the_persistent_loop_variable():
    """T.dynamic("n") sizes the grid: in C++ it is renamed (the persistent loop's counter is n), and the host
    program's block count uses the renamed name too (it used `n` and did not compile: TileLang's dynamic_shape
    example)."""
    import tilelang.language as T

    n = T.dynamic("n")

    @T.prim_func
    def scale(A: T.Tensor((n, 64), "float32"), C: T.Tensor((n, 64), "float32")):
        with T.Kernel(2, T.ceildiv(n, 32), threads=128) as (bx, by):
            for i, j in T.Parallel(32, 32):
                C[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j] * 3.0

    kernel = tilelang.compile(scale, out_idx=[-1], target="tt")
    a = torch.randn(70, 64)
    assert torch.equal(kernel(a), a * 3)
